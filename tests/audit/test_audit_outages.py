"""The judge sections on outages and edge data: every section either
computes or says in words why it has nothing to show, never a traceback, and
no figure rests on what cannot support it."""

from __future__ import annotations

import numpy as np
import pandas as pd
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


def test_inter_clinician_f1_is_the_mean_over_pairs_by_default_and_pooled_on_request(planted):
    # CSEDB §3.10: the inter-doctor F1 is the mean Macro-F1 over doctor pairs
    rows = {}
    for mode in ("mean_of_pairs", "pooled"):
        section = audit(planted, bootstrap=50, comparison_bootstrap=50,
                        inter_clinician_f1=mode)["judges_vs_clinicians"]
        table = section.tables["agreement"]
        rows[mode] = table[table["measure"].str.startswith("clinician vs clinician (Macro-F1")]
    pairs, pooled = rows["mean_of_pairs"].iloc[0], rows["pooled"].iloc[0]
    assert pairs["unit"] == "clinician pairs" and "mean over pairs" in pairs["measure"]
    assert pooled["unit"] == "verdict pairs"
    assert pairs["value"] != pooled["value"]
    assert pairs["value_lo"] <= pairs["value"] <= pairs["value_hi"]


def _rare_failures(snap: Snapshot) -> Snapshot:
    """Every clinician and the rubric judge pass everything except two
    answers' accuracy, which all of them fail."""
    judgments = snap["judgments"].to_pandas()
    rubric = judgments["judge_kind"].eq("rubric") & judgments["score"].notna()
    failing = list(pd.unique(judgments.loc[rubric & judgments["criterion_id"].eq("accuracy"),
                                           "answer_id"])[:2])
    judgments.loc[rubric, "score"] = 2.0
    judgments.loc[rubric & judgments["answer_id"].isin(failing)
                  & judgments["criterion_id"].eq("accuracy"), "score"] = -2.0
    ratings = snap["ratings"].to_pandas()
    ratings["score"] = np.where(ratings["answer_id"].isin(failing)
                                & ratings["criterion_id"].eq("accuracy"), -2, 2)
    tables = {**snap.tables, "judgments": pa.Table.from_pandas(
        judgments, schema=snap["judgments"].schema, preserve_index=False),
        "ratings": pa.Table.from_pandas(ratings, schema=snap["ratings"].schema,
                                        preserve_index=False)}
    return Snapshot.from_tables(tables, snap.meta)


def test_macro_f1_interval_rests_on_the_defined_replicates_and_says_how_many(planted):
    # Resampling ~100 judged answers, about (1 - 2/100)^100 = 13% of the
    # replicates draw neither failing answer: their fail-class F1 is 0/0.
    section = audit(_rare_failures(planted), bootstrap=200,
                    comparison_bootstrap=50)["judges_vs_clinicians"]
    table = section.tables["agreement"].set_index("measure")
    row = table.loc["rubric judge vs clinicians (Macro-F1, fail/pass)"]
    assert np.isfinite(row["value_lo"]) and row["value_lo"] <= row["value"] <= row["value_hi"]
    defined = section.values["macro_f1_defined_replicates"][
        "rubric judge vs clinicians (Macro-F1, fail/pass)"]
    assert 100 < defined < 200
    assert f"over the {defined} of 200 resamples that drew a failure" in section.summary
