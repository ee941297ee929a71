"""Docs that cannot drift: commands, settings and report sections are
registries in code, and README must mention each of them."""

from pathlib import Path

import pytest

from clinieval.audit import SECTIONS, AuditSettings
from clinieval.cli import app
from clinieval.cli.database import db_app
from clinieval.cli.web import study_app
from clinieval.settings import Settings

README = (Path(__file__).parents[1] / "README.md").read_text()


def _commands():
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    return names + [f"{group} {c.name or c.callback.__name__}"
                    for group, sub in (("db", db_app), ("study", study_app))
                    for c in sub.registered_commands]


@pytest.mark.parametrize("command", _commands())
def test_every_command_is_documented(command):
    assert f"`{command}`" in README


@pytest.mark.parametrize("field", list(AuditSettings.model_fields))
def test_every_audit_setting_is_documented(field):
    assert f"`--{field.replace('_', '-')}`" in README or f"`{field}`" in README


@pytest.fixture(scope="module")
def demo_result():
    from clinieval.audit import audit

    return audit("demo", bootstrap=50)


@pytest.mark.parametrize("key", [key for key, _ in SECTIONS])
def test_every_report_section_is_explained(demo_result, key):
    title = demo_result[key].title
    assert f"**{title}**" in README or f"**{title.replace('-', '–')}**" in README, title


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_environment_setting_is_documented(field):
    name = "DATABASE_URL" if field == "database_url" else f"CLINIEVAL_{field.upper()}"
    assert f"`{name}`" in README
