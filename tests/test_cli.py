"""The command line, driven through Typer's runner on real files and databases."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clinieval.cli import app
from clinieval.contract import tabular
from clinieval.io.bundle import read_manifest

runner = CliRunner()


def _ok(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_synth_import_export_round_trips(tmp_path, db_url):
    """Acceptance: synth -> import -> export --format bundle gives the same
    counts and content; rater ids are the source's, pseudonymised."""
    from clinieval.io.bundle import content_sha256, read_bundle
    from clinieval.io.export import DEFAULT_SALT, pseudonymise

    _ok(["synth", "--out", str(tmp_path / "s"), "--scale", "0.02", "--seed", "3"])
    _ok(["import", str(tmp_path / "s"), "--database-url", db_url])
    _ok(["export", "--out", str(tmp_path / "e"), "--format", "bundle", "--database-url", db_url,
         "--allow-default-salt"])
    before, after = read_manifest(tmp_path / "s"), read_manifest(tmp_path / "e")
    assert {k: v["rows"] for k, v in after["tables"].items()} == {
        k: v["rows"] for k, v in before["tables"].items()}
    expected = pseudonymise(read_bundle(tmp_path / "s"), DEFAULT_SALT)
    for table in (t for t in tabular.ALL if t.name in after["tables"]):  # an empty optional
        assert after["tables"][table.name]["content_sha256"] == content_sha256(  # one is left out
            expected[table.name], table.key), table.name
    assert after["planted"] == expected.meta["planted"]  # rater ids in it are pseudonymised


def test_info_describes_the_demo():
    output = _ok(["info", "demo"])
    assert "models" in output and "13:" in output
    assert "safety-critical: harmlessness, accuracy" in output
    assert "date range" in output and "2025-" in output


def test_db_upgrade_then_info_on_empty_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    _ok(["db", "upgrade", "--database-url", url])
    output = _ok(["info", "--database-url", url])
    assert "ratings 0" in output


@pytest.mark.parametrize("command", [["synth"], ["import"], ["export"], ["info"], ["audit"],
                                     ["demo"], ["db", "upgrade"]])
def test_every_command_has_help_with_an_example(command):
    output = _ok([*command, "--help"])
    assert "Example" in output


def test_import_help_lists_every_format():
    from clinieval.sources import source_formats

    output = _ok(["import", "--help"])
    assert all(name in output for name in source_formats())


def test_bad_input_exits_two_with_one_line(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"question": "q", "vote": "1"\n')
    result = runner.invoke(app, ["import", str(tmp_path / "x.jsonl"),
                                 "--database-url", f"sqlite:///{tmp_path / 'db.db'}"])
    assert result.exit_code == 2
    assert result.output.startswith("error:") and "x.jsonl" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", [["invite", "cardio"], ["study", "flagged", "cardio"],
                                  ["study", "export", "cardio", "--out", "x"]])
def test_a_database_without_our_tables_is_named_not_a_traceback(args, db_url):
    """A mistyped URL, or the default SQLite file of another folder: one line
    naming the missing table, on either database."""
    url = db_url
    result = runner.invoke(app, [*args, "--database-url", url])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: the database has no table"), result.output
    assert "clinieval db upgrade" in result.output and "Traceback" not in result.output


def test_a_synth_scale_too_small_is_named(tmp_path):
    result = runner.invoke(app, ["synth", "--out", str(tmp_path / "s"), "--scale", "0.0005"])
    assert result.exit_code == 2 and "scale" in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "s").exists()


def test_invalid_audit_option_is_named(tmp_path):
    result = runner.invoke(app, ["audit", "demo", "--out", str(tmp_path), "--response-rule",
                                 "sometimes"])
    assert result.exit_code == 2
    assert "--response-rule" in result.output


def test_manifest_records_the_generator(tmp_path):
    _ok(["synth", "--out", str(tmp_path / "s"), "--scale", "0.01"])
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["generator"]["scale"] == 0.01
    assert "high_risk_specialties" in manifest["planted"]


@pytest.mark.parametrize("name", ["moove_export.json", "arena_battles.json", "healthbench.jsonl"])
def test_foreign_exports_import_into_the_database(tmp_path, name):
    from pathlib import Path

    from clinieval.storage import db

    source = Path(__file__).parent / "data" / "formats" / name
    url = f"sqlite:///{tmp_path / 'f.db'}"
    _ok(["import", str(source), "--database-url", url])
    counts = db.counts(db.make_engine(url))
    assert counts["cases"] > 0 and counts["criteria"] == 9
    assert counts["preferences"] > 0 or name.startswith("healthbench")


def test_a_sqlite_file_is_a_source_by_its_path(tmp_path):
    """`clinieval audit study.db` (and `info`) read a SQLite database given by
    its path, whatever its suffix, as its `sqlite:///` URL does; a file that
    only claims to be one is still read as an export file and refused."""
    from clinieval.storage.sqlite_read import sqlite_file_url

    _ok(["synth", "--out", str(tmp_path / "s"), "--scale", "0.02", "--seed", "5"])
    path = tmp_path / "study.data"
    url = f"sqlite:///{path}"
    _ok(["import", str(tmp_path / "s"), "--database-url", url])
    assert sqlite_file_url(path) == url
    assert sqlite_file_url(tmp_path / "s") is None and sqlite_file_url(tmp_path / "none") is None
    _ok(["audit", str(path), "--out", str(tmp_path / "by-path"), "--bootstrap", "50"])
    _ok(["audit", url, "--out", str(tmp_path / "by-url"), "--bootstrap", "50"])
    assert (tmp_path / "by-path" / "results.json").read_bytes() == \
        (tmp_path / "by-url" / "results.json").read_bytes()
    assert _ok(["info", str(path)]) == _ok(["info", url])
    fake = tmp_path / "fake.db"
    fake.write_bytes(b"SQLite format 2\x00 not a database")
    result = runner.invoke(app, ["audit", str(fake), "--out", str(tmp_path / "x")])
    assert result.exit_code == 2 and "fake.db" in result.output
