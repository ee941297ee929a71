"""Adjudications leaving the platform: the study export carries them
(pseudonymous), its gates and its decision log; ``clinieval import`` and
the audit accept such bundles and the older ones without them; the audit
reports them and, under the response rule ``adjudicated``, uses them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from clinieval.audit.context import Context
from clinieval.audit.data import from_bundle
from clinieval.audit.sections import adjudications as section
from clinieval.audit.settings import AuditSettings
from clinieval.contract import tabular
from clinieval.io.bundle import MANIFEST, read_bundle, snapshot_checksum
from clinieval.io.export import pseudonym
from clinieval.platform import adjudication
from clinieval.platform.study_export import export_study
from clinieval.storage import db
from clinieval.web.testing import make_studies
from tests.platform.test_adjudication import GOOD, KEY, _rater, _ref, _user
from tests.web.support import plant_dispute

SALT = "a salt of this test"
CLI = str(Path(sys.executable).with_name("clinieval"))


@pytest.fixture
def exported(engine, tmp_path):
    """Study x with a dispute ruled twice (accuracy fail, harmlessness pass;
    then harmlessness fail, accuracy pass), exported as a bundle."""
    make_studies(engine)
    answer = plant_dispute(engine)
    judge = _user(engine, "adjudicator")
    first = adjudication.submit(engine, KEY, "x", judge, _ref(answer), GOOD)
    adjudication.submit(engine, KEY, "x", judge, _ref(answer), {
        "verdict.harmlessness": "fail", "verdict.accuracy": "pass", "reason": "On review.",
        "supersedes": str(max(first.ids))})
    export_study(engine, "x", tmp_path / "bundle", salt=SALT)
    return tmp_path / "bundle", _rater(engine, judge), answer


def test_the_export_carries_gates_adjudications_and_the_decision_log(exported):
    folder, judge, answer = exported
    manifest = json.loads((folder / MANIFEST).read_text())
    assert [g["criterion"] for g in manifest["gates"]] == ["harmlessness", "accuracy"]
    assert [e["kind"] for e in manifest["decision_log"]] == ["adjudicated", "adjudicated"]
    back = read_bundle(folder)
    rows = back["adjudications"].to_pylist()
    assert len(rows) == 4
    assert {r["rater_id"] for r in rows} == {pseudonym(judge, SALT)}  # not the stored id
    assert judge not in (folder / "adjudications.parquet").read_bytes().decode("latin-1")
    assert pseudonym(judge, SALT) in back["raters"]["rater_id"].to_pylist()
    by_id = {r["adjudication_id"]: r for r in rows}
    later = [r for r in rows if r["supersedes"] is not None]
    assert [by_id[r["supersedes"]]["criterion_id"] for r in later] == \
        [r["criterion_id"] for r in later]


def _audit_json(source: str, out: Path, *options: str) -> dict:
    done = subprocess.run([CLI, "audit", source, "--out", str(out), "--bootstrap", "50",
                           *options], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "results.json").read_text())


def _section(results: dict, key: str) -> dict | None:
    sections = results["sections"]
    found = [s for s in (sections.values() if isinstance(sections, dict) else sections)
             if s.get("key", key) == key]
    return found[0] if found else None


def test_import_and_audit_report_the_adjudications(exported, tmp_path):
    folder, _, _ = exported
    url = f"sqlite:///{tmp_path / 'imported.db'}"
    done = subprocess.run([CLI, "import", str(folder), "--database-url", url],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert db.read_snapshot(db.make_engine(url))["adjudications"].num_rows == 4
    results = _audit_json(url, tmp_path / "report")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Adjudications" in report
    # Standing: harmlessness fail (upheld), accuracy pass (overruled): 1 of 2 sided with the
    # alarm; the Wilson bounds are statsmodels', the flip is accuracy (a rater scored -1).
    lo, hi = proportion_confint(1, 2, alpha=0.05, method="wilson")
    assert f"sided with the alarm 50.0% [{100 * lo:.1f}, {100 * hi:.1f}]" in report
    assert "2 earlier verdicts superseded" in report and "1 verdicts differ" in report
    assert "--response-rule adjudicated makes" in report
    assert json.dumps(results).count("adjudications") >= 1


def test_the_adjudicated_rule_makes_the_standing_verdict_the_answers(exported):
    folder, _, answer = exported
    data = from_bundle(folder)
    code, acc, harm = (data.answer_ids.index(answer), data.criteria.index("accuracy"),
                       data.criteria.index("harmlessness"))
    by_raters = Context(data, AuditSettings(bootstrap=50)).answer_fail
    ruled = Context(data, AuditSettings(bootstrap=50, response_rule="adjudicated")).answer_fail
    assert (by_raters[code, acc], by_raters[code, harm]) == (1.0, 1.0)
    assert (ruled[code, acc], ruled[code, harm]) == (0.0, 1.0)
    others = np.ones(by_raters.shape, dtype=bool)
    others[code] = False
    np.testing.assert_array_equal(by_raters[others], ruled[others])
    found = section.present(section.compute(Context(data, AuditSettings(
        bootstrap=50, response_rule="adjudicated"))))
    assert "use them (response rule adjudicated)" in found.summary


def test_a_bundle_from_before_adjudications_imports_and_audits(exported, tmp_path):
    folder, _, _ = exported
    manifest = json.loads((folder / MANIFEST).read_text())
    del manifest["tables"]["adjudications"]
    manifest.pop("decision_log")
    manifest["snapshot_sha256"] = snapshot_checksum(
        {k: v["content_sha256"] for k, v in manifest["tables"].items()})
    (folder / "adjudications.parquet").unlink()
    (folder / MANIFEST).write_text(json.dumps(manifest))
    assert read_bundle(folder)["adjudications"].num_rows == 0
    assert "adjudications" in {t.name for t in tabular.ALL}
    url = f"sqlite:///{tmp_path / 'old.db'}"
    done = subprocess.run([CLI, "import", str(folder), "--database-url", url],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    _audit_json(str(folder), tmp_path / "report")
    assert "Adjudications" not in (tmp_path / "report" / "report.md").read_text()
