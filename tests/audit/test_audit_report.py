"""The audit command end to end: files, determinism, self-containment."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from clinieval.audit import SECTIONS, audit
from clinieval.audit.run import JUDGE_SECTIONS, OPTIONAL_SECTIONS
from clinieval.cli import app
from clinieval.demo import demo_snapshot
from clinieval.report import render_report

runner = CliRunner()


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    result = runner.invoke(app, ["audit", "demo", "--out", str(out), "--bootstrap", "200"])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_audit_writes_every_artefact(demo_report):
    out, output = demo_report
    for name in ("report.html", "report.md", "results.json"):
        assert (out / name).stat().st_size > 1000, name
    pngs, svgs = list((out / "figures").glob("*.png")), list((out / "figures").glob("*.svg"))
    assert len(pngs) >= 10 and {p.stem for p in pngs} == {s.stem for s in svgs}
    assert "report:" in output and "Summary" in output


def test_html_is_self_contained_and_has_every_section(demo_report):
    html = (demo_report[0] / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<svg" in html
    for key, _ in SECTIONS:
        # the demo has no automated judgments nor benchmark scores, so their
        # sections are left out
        shown = key not in JUDGE_SECTIONS + OPTIONAL_SECTIONS
        assert (f'id="{key}"' in html or f"id='{key}'" in html) == shown, key
    assert "Settings used" in html and "20260301" in html


def test_results_json_carries_provenance(demo_report):
    results = json.loads((demo_report[0] / "results.json").read_text())
    text = json.dumps(results)
    snapshot = results["snapshot"]
    assert len(snapshot["sha256"]) == 64
    assert results["settings"]["bootstrap"] == 200 and results["settings"]["seed"] == 20260301
    assert "version" in results and "NaN" not in text


def test_same_seed_gives_byte_identical_results_json(tmp_path):
    snap = demo_snapshot()
    render_report(audit(snap, bootstrap=100, seed=11), tmp_path / "a")
    render_report(audit(snap, bootstrap=100, seed=11), tmp_path / "b")
    render_report(audit(snap, bootstrap=100, seed=12), tmp_path / "c")
    first = (tmp_path / "a" / "results.json").read_bytes()
    assert first == (tmp_path / "b" / "results.json").read_bytes()
    assert first != (tmp_path / "c" / "results.json").read_bytes()


def test_report_carries_no_rater_ids(demo_report):
    rater_ids = demo_snapshot()["raters"].column("rater_id").to_pylist()
    for name in ("report.html", "report.md", "results.json"):
        text = (demo_report[0] / name).read_text()
        assert not [r for r in rater_ids if r in text], name


def test_demo_command_loads_sqlite_and_writes_the_report(tmp_path):
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = runner.invoke(app, ["demo", "--out", str(tmp_path / "out"), "--database-url", url,
                                 "--bootstrap", "100"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "report.html").exists()
    assert "loaded the demo snapshot" in result.output
