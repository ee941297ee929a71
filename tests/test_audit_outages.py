"""The judge sections on outages and edge data: every section either
computes or says in words why it has nothing to show, never a traceback, and
no figure rests on what cannot support it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from clinieval.audit import audit
from clinieval.snapshot import Snapshot
from clinieval.synth import generate
from clinieval.synth.judges import JudgePlan, plant_judgments

JUDGE_SECTIONS = ("automated_judges", "gates", "rubric_scores", "judges_vs_clinicians",
                  "self_preference")


@pytest.fixture(scope="module")
def planted() -> Snapshot:
    return plant_judgments(generate(0, 0.02), JudgePlan(
        seed=1, jury_answers=100, pairs=100, rubric_answers=100, gate_cases=30,
        rubric_rule_answers=60))


def _with_judgments(snap: Snapshot, edit) -> Snapshot:
    frame = snap["judgments"].to_pandas()
    edit(frame)
    table = pa.Table.from_pandas(frame, schema=snap["judgments"].schema, preserve_index=False)
    return Snapshot.from_tables({**snap.tables, "judgments": table}, snap.meta)


def _unparse(frame, mask=slice(None)):
    frame.loc[mask, "parse_status"] = "unparsed"
    frame.loc[mask, "score"] = np.nan


def _audit(snap):
    result = audit(snap, bootstrap=50, comparison_bootstrap=50)
    for key in JUDGE_SECTIONS:
        assert result[key].skipped or result[key].summary, key
    return result


def test_every_rule_judgment_unparsed_is_said_in_gates_and_rubric_scores(planted):
    result = _audit(_with_judgments(planted, lambda f: _unparse(f, f["judge_kind"] == "rule")))
    assert "unparsed" in result["gates"].skipped
    assert "unparsed" in result["rubric_scores"].skipped
    assert not result["automated_judges"].skipped


def test_a_whole_judge_outage_writes_a_report(planted):
    result = _audit(_with_judgments(planted, _unparse))
    for key in ("gates", "rubric_scores", "judges_vs_clinicians", "self_preference"):
        assert "unparsed" in result[key].skipped, key


def test_rubric_cases_without_positive_points_are_named(planted):
    def no_positive(frame):
        rule = frame["judge_kind"] == "rule"
        frame.loc[rule & (frame["points"] > 0), "points"] = -1.0
    result = _audit(_with_judgments(planted, no_positive))
    assert "no positive points" in result["rubric_scores"].skipped


def test_no_highest_rubric_score_below_min_n(planted):
    result = audit(planted, bootstrap=50, comparison_bootstrap=50, min_n=1)
    table = result["rubric_scores"].tables["rubric_scores"]
    most = int(table["n"].max())
    assert result["rubric_scores"].summary.startswith("Highest rubric score")
    result = audit(planted, bootstrap=50, comparison_bootstrap=50, min_n=most + 1)
    section = result["rubric_scores"]
    assert section.values["best"] is None and not any("Highest rubric" in h
                                                      for h in result.headlines)
    assert f"at least {most + 1} answers" in section.summary
    assert f"most: {most}" in section.summary


def test_a_jury_without_variation_is_not_read_as_self_preferring(planted):
    def constant(frame):
        scored = frame["judge_kind"].isin(["jury", "rubric"]) & frame["score"].notna()
        frame.loc[scored, "score"] = 3.0
    section = _audit(_with_judgments(planted, constant))["self_preference"]
    assert section.values.get("self_preferring", []) == []
    words = section.skipped or section.summary
    assert "no variation" in words and "Self-preference:" not in words


def test_clinician_pairs_sharing_fewer_answers_than_the_setting_are_left_out_and_counted(
        planted):
    rows = {}
    for shared in (2, 3):
        section = audit(planted, bootstrap=50, comparison_bootstrap=50,
                        icc_min_shared=shared)["judges_vs_clinicians"]
        table = section.tables["agreement"].set_index("measure")
        rows[shared] = table.loc["clinician vs clinician (mean ICC3k-z over pairs)"]
        left_out = section.values["clinician_pairs_left_out"]
        assert left_out["min_shared"] == shared
        assert f"fewer than {shared} answers" in section.summary
    assert rows[3]["n"] < rows[2]["n"]
    assert rows[3]["value"] != rows[2]["value"]
