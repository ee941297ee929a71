"""Judge-powered decisions (issue 33 §1): a cell's sequence is the
prediction-powered one exactly where the study's judge is licensed for its
strata and judged every answer of it, never in the specialties where the
planted judge is blind to harms; elsewhere, and in a study without
judgments, the clinicians' own, as before."""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest

from clinieval.audit.context import Context
from clinieval.audit.data import from_snapshot
from clinieval.audit.sections._decision_judges import decision_judge
from clinieval.audit.settings import AuditSettings
from clinieval.platform import decisions
from clinieval.platform.config import Gate, default_gates
from clinieval.stats.pp_sequences import pp_betting_cs
from clinieval.stats.sequences import betting_cs, decide, rater_margin
from clinieval.synth import generate
from clinieval.synth.calibration_judge import JUDGE
from clinieval.synth.judges import JudgePlan, plant_judgments


@functools.cache
def _study():
    snap = plant_judgments(generate(4, 0.08), JudgePlan(seed=5, calibration_judge=True))
    ctx = Context(from_snapshot(snap), AuditSettings())
    gates = default_gates(c for c, s in zip(ctx.data.criteria, ctx.data.safety_critical,
                                            strict=True) if s)
    gates += (Gate(criterion="dangerous", threshold=0.3, scope="model"),)
    judge = decision_judge(ctx)
    return snap, ctx, gates, judge, decisions.decision_rows(ctx, gates, certify=False,
                                                            judge=judge)


def _licensed_names(ctx, judge) -> set[tuple[str, str]]:
    return {(ctx.data.criteria[c], ctx.data.specialties[s]) for c, s in judge.licensed}


def test_the_judge_powers_exactly_the_licensed_fully_judged_cells():
    snap, ctx, _, judge, rows = _study()
    assert judge is not None and judge.label.endswith(JUDGE) and not judge.why_not
    licensed = _licensed_names(ctx, judge)
    blind = set(snap.meta["planted"]["judges"]["calibration"]["blind_specialties"])
    assert licensed and not {s for _, s in licensed} & blind
    frame = pd.DataFrame(rows)
    powered = frame[frame["judge_lambda"].notna()]
    assert len(powered) > 0
    assert set(powered["method"]) == {f"judge-powered: {judge.label} (licensed)"}
    assert {(r.criterion, r.specialty) for r in powered.itertuples()} <= licensed
    assert not set(powered["specialty"]) & blind  # the judge blind to harms never stands in
    plain = frame[frame["judge_lambda"].isna()]
    for r in plain.itertuples():
        if r.scope == "model_specialty" and (r.criterion, r.specialty) in licensed:
            assert r.method.endswith("did not judge every answer"), r
        else:
            assert r.method.endswith("not licensed here"), r
    # A per-model cell spans every specialty, most of them never licensed.
    assert set(frame.loc[frame["scope"] == "model", "method"]) == {
        f"clinicians only: {judge.label} not licensed here"}


def test_a_judge_powered_cell_reads_the_planted_judges_own_calls():
    snap, ctx, gates, judge, _ = _study()
    calls = snap["judgments"].to_pandas()
    calls = calls[(calls["judge_model"] == JUDGE) & (calls["parse_status"] == "ok")]
    answers = snap["answers"].to_pandas().merge(snap["cases"].to_pandas()[
        ["case_id", "specialty"]], on="case_id", how="left")
    checked = 0
    for gate in gates[:2]:
        for stream in decisions.cell_streams(ctx, gate, judge):
            if stream.judge is None:
                continue
            mine = answers[(answers["model_id"] == stream.model)
                           & (answers["specialty"] == stream.specialty)]
            fails = calls[calls["criterion_id"] == gate.criterion].assign(
                fail=lambda c: (c["score"] <= -1).astype(float))
            share = fails.groupby("answer_id")["fail"].mean()
            expected = share.reindex(mine["answer_id"]).fillna(0.0).to_numpy()
            np.testing.assert_allclose(stream.judge.judged, expected)
            assert stream.judge.f.size == stream.x.size
            assert np.all(np.isin(stream.judge.f, expected))
            checked += 1
    assert checked > 0


def test_a_judge_powered_row_is_the_prediction_powered_sequence_widened_by_the_margin():
    _, ctx, gates, judge, _ = _study()
    gate, stream = next((g, s) for g in gates[:2] for s in decisions.cell_streams(ctx, g, judge)
                        if s.judge is not None and s.x.size >= 4)
    row = decisions.cell_decision(stream, gate, "any")
    pp = pp_betting_cs(stream.x, stream.judge.f, stream.judge.judged, gate.alpha / 2)
    margin = rater_margin(stream.position, stream.rater, stream.x, gate.alpha / 2)[-1]
    assert row["lower"] == pytest.approx(max(0, pp.lower[-1] - margin))
    assert row["upper"] == pytest.approx(min(1, pp.upper[-1] + margin))
    assert row["verdict"] == decide(row["lower"], row["upper"], gate.threshold)
    assert row["judge_lambda"] == pytest.approx(pp.lam[-1])
    assert row["raters_to_unsettle"] is None  # certificates: the clinicians' sequence only


def test_a_cell_with_a_judge_on_a_uniform_stream_uses_the_judges_sequence():
    # Hand-built: 300 answers each rated by 2 of 6 raters, a judge that
    # predicts the value well on 30,000 judged answers (the judge's mean
    # must be known far better than the rated answers know the rate).
    rng = np.random.default_rng(3)
    p = rng.beta(0.05, 0.45, 30_000)  # near 0 or 1: the judge nearly knows each value
    x = (rng.random(300) < p[:300]).astype(float)
    position = np.repeat(np.arange(300), 2)
    rater = np.arange(600) % 6
    stream = decisions.CellStream("m", "Cardiology", position, rater, x[position], x,
                                  decisions.CellJudge("rubric judge j", p[:300], p),
                                  "judge-powered: rubric judge j (licensed)")
    gate = Gate(criterion="harmlessness", threshold=0.3)
    row = decisions.cell_decision(stream, gate, "any")
    clinicians = decisions.cell_decision(
        decisions.CellStream("m", "Cardiology", position, rater, x[position], x), gate, "any")
    assert clinicians["method"] == "clinicians only" and clinicians["judge_lambda"] is None
    assert row["method"].startswith("judge-powered") and 0 < row["judge_lambda"] <= 1
    assert clinicians["lower"] == pytest.approx(
        max(0, betting_cs(x, 0.025).lower[-1] - clinicians["rater_margin"]))
    assert row["rater_margin"] == clinicians["rater_margin"]  # the same panel margin
    assert row["upper"] - row["lower"] < clinicians["upper"] - clinicians["lower"]


def test_a_study_without_judgments_decides_as_before():
    snap = generate(4, 0.08)
    ctx = Context(from_snapshot(snap), AuditSettings())
    assert decision_judge(ctx) is None
    gates = default_gates(["harmlessness"])
    rows = decisions.decision_rows(ctx, gates, certify=False, judge=None)
    assert {r["method"] for r in rows} == {"clinicians only"}
    assert all(r["judge_lambda"] is None for r in rows)
    for stream, row in zip(decisions.cell_streams(ctx, gates[0]), rows, strict=True):
        cs = betting_cs(stream.x, 0.025)
        margin = rater_margin(stream.position, stream.rater, stream.x, 0.025)[-1]
        assert row["upper"] == pytest.approx(min(1, cs.upper[-1] + margin))


def test_the_audit_section_says_which_cells_the_judge_powered():
    from clinieval.audit.sections import decisions as section

    snap, ctx, _, judge, rows = _study()
    ctx = Context(ctx.data, AuditSettings(gates="default"))
    result = section.section(ctx)
    table = result.tables["decisions"]
    powered = int(table["judge_lambda"].notna().sum())
    assert powered == sum(r["judge_lambda"] is not None and r["scope"] == "model_specialty"
                          for r in rows)
    assert result.values["methods"][f"judge-powered: {judge.label} (licensed)"] == powered
    assert f"In {powered} of {len(table)} cells the study's judge is licensed" in result.summary


def test_a_targeted_study_uses_the_licensed_judge_as_an_even_one_does():
    """Targeted assignment spreads each pick evenly within a cell, so its
    rated answers are a uniform sample of the cell and the judge powers the
    same cells (on the same ratings, the same rows) as in an even study."""
    from clinieval.snapshot import Snapshot

    snap, _, gates, judge, rows = _study()
    rated = sorted(set(snap["ratings"].column("answer_id").to_pylist()))
    targeted = Snapshot.from_tables(dict(snap.tables), snap.meta | {
        "assignment": {"mode": "targeted", "probability": {a: 0.01 for a in rated}}})
    ctx = Context(from_snapshot(targeted), AuditSettings())
    assert ctx.data.assignment == "targeted"
    again = decision_judge(ctx)
    assert again is not None and not again.why_not and again.licensed == judge.licensed
    assert decisions.decision_rows(ctx, gates, certify=False, judge=again) == rows
