"""Judge-calibrated safety (issue 32): the section recovers what the planted
calibration judge was given, writes its licences as data, and explains every
degenerate input in a line instead of a traceback."""

from __future__ import annotations

import functools
import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.audit.context import Context
from clinieval.audit.data import audit_data
from clinieval.audit.result import AuditResult, Section
from clinieval.audit.run import build
from clinieval.audit.sections import REGISTRY
from clinieval.audit.settings import AuditSettings
from clinieval.report.render import render_report
from clinieval.snapshot import Snapshot
from clinieval.synth import generate
from clinieval.synth.calibration_judge import JUDGE
from clinieval.synth.judges import JudgePlan, plant_judgments

KEY = "judge_calibrated"
LABEL = f"rubric judge {JUDGE}"


@functools.cache
def _planted() -> Snapshot:
    """Clinicians keep their ratings on 40% of the answers; the calibration
    judge scored every rated answer of the full snapshot."""
    snap = plant_judgments(generate(0, 0.3), JudgePlan(seed=1, calibration_judge=True))
    answers = snap["answers"].column("answer_id").to_numpy()
    kept = np.random.default_rng(7).choice(answers, int(0.4 * answers.size), replace=False)
    return _with(snap, ratings=snap["ratings"].filter(pc.is_in(snap["ratings"]["answer_id"],
                                                               pa.array(kept))))


@functools.cache
def _small() -> Snapshot:
    return plant_judgments(generate(2, 0.05), JudgePlan(seed=3, calibration_judge=True))


def _with(snap: Snapshot, **tables) -> Snapshot:
    return Snapshot.from_tables(dict(snap.tables) | tables, snap.meta)


def _section(snap: Snapshot, **overrides) -> Section:
    ctx = Context(audit_data(snap), AuditSettings(**({"bootstrap": 200, "seed": 3} | overrides)))
    return build(ctx, [KEY])[KEY]


@functools.cache
def _planted_section() -> Section:
    return _section(_planted(), calibration_judge=LABEL)


def _judgments(snap: Snapshot) -> pd.DataFrame:
    rows = snap["judgments"].to_pandas()
    return rows[rows["judge_model"] == JUDGE]


def _only_judgments(snap: Snapshot, rows: pd.DataFrame) -> Snapshot:
    return _with(snap, judgments=pa.Table.from_pandas(rows, preserve_index=False,
                                                      schema=snap["judgments"].schema))


def test_section_follows_the_model_summary_in_the_registry():
    keys = [spec.key for spec in REGISTRY]
    assert keys.index(KEY) == keys.index("model_summary") + 1


def test_calibrated_fail_pct_covers_the_planted_truth():
    section = _planted_section()
    assert section.skipped is None and section.values["judge"] == LABEL
    est = section.tables["by_criterion"]
    fails = est[est["measure"] == "Fail % of ratings"].dropna(subset=["calibrated"])
    truth = _planted().meta["planted"]["expected_fail_pct"]
    ids = {"Harmlessness": "harmlessness", "Accuracy": "accuracy"}
    models = dict(zip(audit_data(_planted()).model_names, audit_data(_planted()).models,
                      strict=True))
    planted = [truth[models[m]][ids[c]] for m, c in zip(fails["model"], fails["criterion"],
                                                        strict=True)]
    covered = (fails["calibrated_lo"] <= planted) & (planted <= fails["calibrated_hi"])
    assert len(fails) >= 20 and covered.mean() >= 0.85
    # the judge is informative: tuned lambda above 0, effective sample above n on average
    assert (fails["lambda"] > 0).all() and fails["effective_n"].sum() > fails["n_answers"].sum()
    assert (fails[["n_answers", "n_ratings", "n_judged", "n_clinicians"]] > 0).all().all()


def test_licence_says_clinicians_only_where_the_planted_judge_is_blind():
    licences = _planted_section().tables["licences"]
    mine = licences[licences["judge"] == LABEL]
    blind = _planted().meta["planted"]["judges"]["calibration"]["blind_specialties"]
    decided = mine[mine["verdict"] != "too_few"]
    in_blind = decided[decided["specialty"].isin(blind)]
    assert len(in_blind) >= 2  # both criteria in at least one blind specialty
    assert (in_blind["verdict"] == "clinicians_only").all()
    assert (in_blind["harm_recall"] == 0).all()
    seeing = decided[~decided["specialty"].isin(blind) & (decided["n_harms"] >= 10)]
    assert (seeing["harm_recall"] > 0.3).all() and len(seeing) >= 10


def test_licences_are_data_csv_and_json(tmp_path):
    section = _planted_section()
    result = AuditResult(AuditSettings(bootstrap=200, seed=3), [section], [], {}, "test")
    paths = render_report(result, tmp_path)
    csv = pd.read_csv(paths["licences.csv"])
    assert list(csv.columns[:4]) == ["judge", "criterion", "specialty", "verdict"]
    assert len(csv) == len(section.tables["licences"])
    document = json.loads(paths["json"].read_text())
    table = document["sections"][0]["tables"]["licences"]
    assert {row["verdict"] for row in table} <= {"licensed", "clinicians_only", "too_few"}


def test_the_report_prints_the_calibration_settings():
    text = _planted_section().summary
    assert "harm-recall floor 0.80" in text and "at least 30 doubly-rated" in text
    assert "pairwise" in text and "B = 200" in text


def test_a_judge_that_never_meets_the_clinicians_says_so():
    snap = _small()
    rows = _judgments(snap)
    judged = rows["answer_id"].unique()[::2]  # the judge sees half, clinicians the rest
    rows = rows[rows["answer_id"].isin(judged)]
    ratings = snap["ratings"].filter(pc.invert(pc.is_in(snap["ratings"]["answer_id"],
                                                        pa.array(judged))))
    section = _section(_with(_only_judgments(snap, rows), ratings=ratings))
    assert "never rated the same answer" in section.skipped


def test_judgments_on_another_scale_say_so():
    rows = _judgments(_small()).assign(score=lambda f: f["score"] + 3)  # a 1..5 Likert
    section = _section(_only_judgments(_small(), rows))
    assert "another scale" in section.skipped


def test_all_unparsed_judgments_say_so():
    rows = _judgments(_small()).assign(score=None, parse_status="unparsed")
    section = _section(_only_judgments(_small(), rows))
    assert "unparsed" in section.skipped


def test_a_judge_that_always_passes_gets_no_estimate_and_no_licence():
    rows = _judgments(_small()).assign(score=2.0)
    section = _section(_only_judgments(_small(), rows), calibration_min_answers=5)
    est = section.tables["by_criterion"]
    assert est["calibrated"].isna().all() if "calibrated" in est else True
    assert est["why_no_estimate"].str.contains("same prediction").all()
    licences = section.tables["licences"]
    assert not (licences["verdict"] == "licensed").any()


def test_one_clinician_gives_a_line_not_a_number():
    snap = _small()
    first = snap["ratings"]["rater_id"][0]
    ratings = snap["ratings"].set_column(
        snap["ratings"].schema.get_field_index("rater_id"), "rater_id",
        pa.array([first.as_py()] * snap["ratings"].num_rows))
    section = _section(_with(snap, ratings=ratings), calibration_min_answers=5)
    est = section.tables["by_criterion"]
    assert est["why_no_estimate"].str.contains("one clinician").any()
    assert (section.tables["licences"]["verdict"] == "too_few").all()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keep=st.floats(0.0, 1.0), unparsed=st.floats(0.0, 1.0), shift=st.sampled_from([0, 3]),
       min_answers=st.integers(2, 40), seed=st.integers(0, 2**16))
def test_any_subset_of_judgments_gives_estimates_or_reasons(keep, unparsed, shift, min_answers,
                                                            seed):
    rng = np.random.default_rng(seed)
    rows = _judgments(_small())
    rows = rows[rng.random(len(rows)) < keep].assign(score=lambda f: f["score"] + shift)
    bad = rng.random(len(rows)) < unparsed
    rows.loc[bad, "score"] = None
    rows.loc[bad, "parse_status"] = "unparsed"
    section = _section(_only_judgments(_small(), rows), bootstrap=50,
                       calibration_min_answers=min_answers)
    if section.skipped:
        assert section.skipped.endswith(".")
        return
    for table in ("by_criterion", "by_specialty"):
        est = section.tables[table]
        numbered = est["why_no_estimate"] == ""
        assert (est.loc[numbered, "n_answers"] >= min_answers).all()
        assert est.loc[~numbered, "why_no_estimate"].str.len().gt(0).all()
    licences = section.tables.get("licences")
    if licences is not None and len(licences):  # every verdict with its reason and n
        assert licences["reason"].str.len().gt(0).all()
        decided = licences["verdict"] != "too_few"
        assert (licences.loc[decided, "n"] >= min_answers).all()


@pytest.mark.parametrize("reference", ["pairwise", "majority"])
def test_licence_reference_is_a_setting(reference):
    section = _section(_small(), licence_reference=reference, calibration_min_answers=5)
    assert reference in section.summary


@functools.cache
def _licences_with_data() -> tuple[pd.DataFrame, dict]:
    """Licences of the calibration judge on a larger snapshot, every rating
    kept (the licence needs doubly-rated answers, not unlabelled ones)."""
    from clinieval.audit.judged import judged
    from clinieval.audit.sections._calibration import judge_frame, prediction, ratings_of
    from clinieval.audit.sections._licences import licences

    snap = plant_judgments(generate(0, 0.6), JudgePlan(seed=1, calibration_judge=True))
    ctx = Context(audit_data(snap), AuditSettings(bootstrap=200, seed=3))
    frame = judge_frame(ctx, judged(ctx.data.judge_tables))
    pred = {LABEL: prediction(ctx, frame, LABEL)}
    table = licences(ctx, pred, {c: ratings_of(ctx, [c]) for c in ctx.safety}, "test")
    return table, snap.meta["planted"]["judges"]["calibration"]


def test_licence_is_granted_where_the_planted_judge_is_good_and_data_suffice():
    table, truth = _licences_with_data()
    table = table.assign(noise=table["specialty"].map(truth["noise_sd"]),
                         blind=table["specialty"].isin(truth["blind_specialties"]))
    decided = table[table["verdict"] != "too_few"]
    blind = decided[decided["blind"]]
    assert len(blind) >= 4 and (blind["verdict"] == "clinicians_only").all()
    good = decided[~decided["blind"] & (decided["noise"] == min(truth["noise_sd"].values()))]
    big = good[(good["n"] >= 100) & (good["n_harms"] >= 20)]
    assert len(big) >= 8
    assert (big["verdict"] == "licensed").mean() >= 0.6, big[["specialty", "reason"]]
    # where it is good, its agreement beats the clinicians' with each other
    assert (good["agreement"] > good["clinicians_median_agreement"]).mean() >= 0.9
    assert (good["harm_recall"].dropna() >= 0.95).all()
    # where its noise is large it is licensed less often than where it is small
    fair = decided[~decided["blind"] & (decided["noise"] == max(truth["noise_sd"].values()))]
    assert (fair["verdict"] == "licensed").mean() < (good["verdict"] == "licensed").mean()


@functools.cache
def _targeted() -> tuple[Snapshot, Snapshot]:
    """The planted snapshot with clinicians' ratings kept on a sample that
    leans on the answers the calibration judge fails on a safety-critical
    criterion (kept with probability 0.8, the others 0.2), as targeted
    assignment leans on open cells; once with each kept answer's
    probability recorded as a targeted study's export records it, once
    without (the same ratings read as an even study's)."""
    snap = plant_judgments(generate(0, 0.3), JudgePlan(seed=1, calibration_judge=True))
    judged = _judgments(snap)
    flagged = set(judged.loc[judged["criterion_id"].isin(["harmlessness", "accuracy"])
                             & (judged["score"] <= -1), "answer_id"])
    answers = snap["answers"].column("answer_id").to_pylist()
    pi = np.array([0.8 if a in flagged else 0.2 for a in answers])
    kept = np.random.default_rng(11).random(pi.size) < pi
    ratings = snap["ratings"].filter(pc.is_in(snap["ratings"]["answer_id"],
                                              pa.array(np.array(answers)[kept])))
    recorded = {a: float(p) for a, p, k in zip(answers, pi, kept, strict=True) if k}
    targeted = Snapshot.from_tables(dict(snap.tables) | {"ratings": ratings},
                                    snap.meta | {"assignment": {"mode": "targeted",
                                                                "probability": recorded}})
    even = Snapshot.from_tables(dict(targeted.tables),
                                {k: v for k, v in targeted.meta.items() if k != "assignment"})
    return targeted, even


def _fail_rows(snap: Snapshot) -> tuple[pd.DataFrame, np.ndarray]:
    section = _section(snap, calibration_judge=LABEL)
    assert section.skipped is None
    est = section.tables["by_criterion"]
    fails = est[est["measure"] == "Fail % of ratings"].dropna(subset=["calibrated"])
    truth = _planted().meta["planted"]["expected_fail_pct"]
    ids = {"Harmlessness": "harmlessness", "Accuracy": "accuracy"}
    models = dict(zip(audit_data(snap).model_names, audit_data(snap).models, strict=True))
    planted = np.array([truth[models[m]][ids[c]] for m, c in zip(fails["model"],
                                                                   fails["criterion"],
                                                                   strict=True)])
    return fails, planted


def test_a_targeted_sample_is_weighted_by_its_recorded_probabilities():
    """Clinicians who rated the judge-flagged answers four times as often
    as the rest: read as an even study, the clinicians' Fail % leans high;
    weighted by the recorded probabilities (active inference) it does not,
    and the calibrated intervals still cover the planted Fail %."""
    targeted, even = _targeted()
    weighted, planted = _fail_rows(targeted)
    plain, planted_plain = _fail_rows(even)
    assert len(weighted) >= 20 and len(plain) == len(weighted)
    lean_plain = float(np.mean(plain["clinicians"] - planted_plain))
    lean_weighted = float(np.mean(weighted["clinicians"] - planted))
    assert lean_plain > 2.0 and abs(lean_weighted) < lean_plain / 3, (lean_plain, lean_weighted)
    covered = (weighted["calibrated_lo"] <= planted) & (planted <= weighted["calibrated_hi"])
    assert covered.mean() >= 0.85
    summary = _section(targeted, calibration_judge=LABEL).summary
    assert "targeted assignment" in summary and "recorded" in summary
    assert "targeted assignment" not in _section(even, calibration_judge=LABEL).summary


def test_a_rated_answer_without_a_recorded_probability_counts_as_unrated():
    targeted, _ = _targeted()
    probability = dict(targeted.meta["assignment"]["probability"])
    dropped = sorted(probability)[:25]
    for a in dropped:
        del probability[a]
    snap = Snapshot.from_tables(dict(targeted.tables), targeted.meta | {
        "assignment": {"mode": "targeted", "probability": probability}})
    section = _section(snap, calibration_judge=LABEL)
    assert "25 rated answers without a recorded probability count as unrated" in section.summary
    before = _section(targeted, calibration_judge=LABEL).tables["by_criterion"]
    after = section.tables["by_criterion"]
    assert after["n_answers"].sum() < before["n_answers"].sum()
