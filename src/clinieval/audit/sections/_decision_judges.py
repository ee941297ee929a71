"""The study's judge as the decisions read it (issue 33 §1): the judge the
judge-calibrated section calibrates (the same choice, predictions and
licences, so the report's licence table and the decisions' ``method``
column agree), packed for :mod:`clinieval.platform.cell_decisions`."""

from __future__ import annotations

from clinieval.audit.context import Context
from clinieval.audit.judged import judged
from clinieval.audit.sections import judge_calibrated
from clinieval.audit.sections._calibration import (
    any_safety,
    choose_judge,
    judge_frame,
    prediction,
    ratings_of,
)
from clinieval.audit.sections._licences import licences
from clinieval.platform.cell_decisions import DecisionJudge

LICENCE_PURPOSE = f"{judge_calibrated.KEY}:licence"
"""The licences' random streams: the judge-calibrated section's, so both
compute the same verdicts."""


def decision_judge(ctx: Context) -> DecisionJudge | None:
    """The judge whose licensed strata may power the decisions' sequences, or
    None when the study has no judge to calibrate on a safety-critical
    criterion (its decisions are then the clinicians' alone, as before)."""
    data = judged(ctx.data.judge_tables)
    if data is None or not ctx.safety:
        return None
    frame = judge_frame(ctx, data)
    label = None if frame.empty else choose_judge(frame, ctx.settings.calibration_judge)
    if label is None:
        return None
    pred = prediction(ctx, frame, label)
    worst, _ = any_safety(ctx, pred)
    called_all = pred.called[:, ctx.safety].all(axis=1)
    table = licences(ctx, {label: pred}, {c: ratings_of(ctx, [c]) for c in ctx.safety},
                     LICENCE_PURPOSE)
    return DecisionJudge(label, pred.fail, pred.called, worst, called_all,
                         _licensed(ctx, table))


def _licensed(ctx: Context, table) -> frozenset[tuple[int, int]]:
    """The (criterion code, specialty code) strata the licence table grants."""
    if table.empty:
        return frozenset()
    names = {ctx.name(c): c for c in ctx.safety}
    specialty = {s: i for i, s in enumerate(ctx.data.specialties)}
    granted = table[table["verdict"] == "licensed"]
    return frozenset((names[c], specialty[s]) for c, s in
                     zip(granted["criterion"], granted["specialty"], strict=True)
                     if c in names and s in specialty)
