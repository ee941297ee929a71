"""Audit settings: one model gives the defaults, the environment's seed and
the command's options."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from clinieval.audit import AuditSettings
from clinieval.cli import app
from clinieval.settings import get_settings

runner = CliRunner()


@pytest.fixture
def seed_7(monkeypatch):
    monkeypatch.setenv("CLINIEVAL_SEED", "7")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def test_the_environment_seed_is_the_audit_default(seed_7):
    assert AuditSettings().seed == 7
    assert AuditSettings(seed=3).seed == 3


@pytest.mark.parametrize("command", ["audit", "demo"])
def test_every_setting_is_an_option_of_the_command(command):
    click_command = typer.main.get_command(app).commands[command]
    options = {name for p in click_command.params for name in p.opts if name.startswith("--")}
    expected = {f"--{field.replace('_', '-')}" for field in AuditSettings.model_fields}
    assert expected <= options
    helps = {p.opts[0]: p.help for p in click_command.params}
    for field, info in AuditSettings.model_fields.items():
        assert helps[f"--{field.replace('_', '-')}"].startswith(info.description), field


def test_options_reach_the_settings_and_the_seed_comes_from_the_environment(seed_7, tmp_path):
    result = runner.invoke(app, ["audit", "demo", "--out", str(tmp_path), "--bootstrap", "50",
                                 "--level", "0.9", "--criteria", "accuracy, harmlessness"])
    assert result.exit_code == 0, result.output
    settings = json.loads((tmp_path / "results.json").read_text())["settings"]
    assert settings["seed"] == 7 and settings["level"] == 0.9 and settings["bootstrap"] == 50
    assert settings["criteria"] == ["accuracy", "harmlessness"]


FILE_OPTIONS = {"indicators": "bundled", "benchmark_scores": "none",
                "benchmarks": "bundled example", "criteria": "all rated"}


def test_a_none_default_is_said_in_words_in_the_settings_registry_and_the_report():
    from clinieval.audit.settings import default_words
    from clinieval.report.render import settings_view

    assert {name: default_words(name) for name in FILE_OPTIONS} == FILE_OPTIONS
    assert default_words("bootstrap") == "1000"
    rows = {row[0].text: row for row in settings_view(AuditSettings()).rows}
    for name, words in FILE_OPTIONS.items():
        assert rows[name][1].text == words and rows[name][2].text == words, name


def test_help_shows_what_a_none_default_stands_for_not_all():
    result = runner.invoke(app, ["audit", "--help"], env={"COLUMNS": "400"},
                           terminal_width=400)
    text = result.output
    for name, words in FILE_OPTIONS.items():
        option = f"--{name.replace('_', '-')}"
        after = text[text.index(option):]
        shown = after[after.index("[default: "):].split("]")[0]
        assert shown in (f"[default: {words}", f"[default: ({words})"), (option, shown)
