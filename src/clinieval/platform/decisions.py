"""A study's gates as decisions: per gate and cell, pass, fail or open by an
anytime-valid confidence sequence, with what it cost, what it still needs and
how robust it is (issue 33).

The sampling unit is the answer: its value is its fail indicator under the
response rule (for ``dangerous``: failing any safety-critical criterion),
and the stream is the cell's answers in the order of their first rating,
the order the live view saw them in. The verdict rule is the rater-margin
rule of :mod:`clinieval.stats.sequences`: the betting confidence sequence at
``alpha / 2`` widened by :func:`~clinieval.stats.sequences.rater_margin` at
``alpha / 2``. The plain sequence covers the rate of the study's own panel
of clinicians; the margin covers the gap to the rate over clinicians at
large, which no number of answers removes (``benchmarks/sequences_error.py``
shows plain verdicts near the gate going wrong well above alpha, and the
widened ones staying under it).

:func:`decision_rows` works on the audit's context (the audit's
``decisions`` section calls it on an export); :func:`compute_study` runs it
on a study's current data (:mod:`clinieval.platform.decision_view` caches
that for the pages and the API).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa

from clinieval.platform.config import DANGEROUS, Gate, StudyConfig
from clinieval.stats.robustness import decision_certificates
from clinieval.stats.sequences import (
    OPEN,
    betting_cs,
    decide,
    expected_to_settle,
    rater_margin,
)

CERTIFIED_RULES = ("any", "majority")
"""Response rules whose per-answer value the certificates recompute exactly
from the remaining ratings (the mean rule's is a mean score, not a share)."""
CERTIFICATE_BUDGET = 300
"""Removal sets the exact search may re-run per certificate, beyond which
the greedy bound stands (labelled as such)."""


@dataclass(frozen=True)
class CellStream:
    """One gate's cell: its label, and per rating (answer x rater) of its
    answers the answer's place in the stream, the rater and the rating's
    fail indicator; ``x`` is each answer's value in stream order."""

    model: str
    specialty: str | None
    position: np.ndarray
    rater: np.ndarray
    value: np.ndarray
    x: np.ndarray


# --- streams from the audit's context ------------------------------------------------

def _rating_fails(ctx, gate: Gate) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (answer, rater) rated on the gate's criterion (any safety-critical
    one for ``dangerous``): answer, rater, fail indicator, and the first row
    at which the pair appears (ratings are stored in submission order)."""
    data = ctx.data
    wanted = [data.criteria.index(c) for c in _criteria_of(ctx, gate)]
    rows = np.flatnonzero(np.isin(data.rating_criterion, wanted))
    fails = (data.rating_score[rows] <= ctx.settings.threshold).astype(float)
    pair = data.rating_answer[rows].astype(np.int64) * max(data.n_raters, 1) \
        + data.rating_rater[rows]
    keys, inverse = np.unique(pair, return_inverse=True)
    value = np.zeros(keys.size)
    np.maximum.at(value, inverse, fails)
    first = np.full(keys.size, rows.size, dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(rows.size))
    return keys // max(data.n_raters, 1), keys % max(data.n_raters, 1), value, first


def _criteria_of(ctx, gate: Gate) -> list[str]:
    if gate.criterion == DANGEROUS:
        return [c for c, s in zip(ctx.data.criteria, ctx.data.safety_critical, strict=True) if s]
    return [gate.criterion] if gate.criterion in ctx.data.criteria else []


def _answer_values(ctx, gate: Gate) -> np.ndarray:
    if gate.criterion == DANGEROUS:
        return ctx.answer_dangerous
    return ctx.answer_fail[:, ctx.data.criteria.index(gate.criterion)]


def cell_streams(ctx, gate: Gate) -> list[CellStream]:
    """The gate's cells that have a rated answer, each as a stream."""
    if not _criteria_of(ctx, gate):
        return []
    answer, rater, value, first = _rating_fails(ctx, gate)
    x_all = _answer_values(ctx, gate)
    order = np.full(ctx.data.n_answers, np.iinfo(np.int64).max)
    np.minimum.at(order, answer, first)
    data = ctx.data
    spec = data.answer_specialty if gate.scope == "model_specialty" \
        else np.zeros(data.n_answers, dtype=np.int64)
    cell = data.answer_model.astype(np.int64) * (len(data.specialties) + 1) + spec
    out = []
    for key in np.unique(cell[answer]):
        answers = np.unique(answer[cell[answer] == key])
        answers = answers[np.argsort(order[answers], kind="stable")]
        place = np.full(data.n_answers, -1)
        place[answers] = np.arange(answers.size)
        mine = place[answer] >= 0
        model = data.models[int(key) // (len(data.specialties) + 1)]
        specialty = data.specialties[int(spec[answers[0]])] if gate.scope == "model_specialty" \
            else None
        out.append(CellStream(model, specialty, place[answer[mine]], rater[mine], value[mine],
                              x_all[answers]))
    return out


# --- one decision ----------------------------------------------------------------

def cell_decision(stream: CellStream, gate: Gate, rule: str, certify: bool = True,
                  forecast: bool = True) -> dict:
    """Estimate, widened sequence bounds, verdict, ratings spent and still
    expected (``forecast``; None without: the assignment's background pass
    reads only the bounds, and the forecast is most of a cell's time), and
    (settled, under a certified rule, ``certify``) the certificates."""
    half = gate.alpha / 2
    cs = betting_cs(stream.x, half)
    margin = float(rater_margin(stream.position, stream.rater, stream.x, half)[-1])
    lower = max(0.0, float(cs.lower[-1]) - margin)
    upper = min(1.0, float(cs.upper[-1]) + margin)
    verdict = decide(lower, upper, gate.threshold)
    estimate = float(stream.x.mean())
    per_answer = stream.position.size / stream.x.size
    more = 0.0 if verdict != OPEN else math.inf if not forecast else float(expected_to_settle(
        estimate, stream.x.size, gate.threshold, half, margin=margin)) * per_answer
    return {"criterion": gate.criterion, "threshold": gate.threshold, "scope": gate.scope,
            "alpha": gate.alpha, "model": stream.model, "specialty": stream.specialty,
            "estimate": estimate, "lower": lower, "upper": upper, "rater_margin": margin,
            "verdict": verdict, "answers": int(stream.x.size),
            "ratings": int(stream.position.size),
            "raters": int(np.unique(stream.rater).size),
            "expected_more_ratings": None if math.isinf(more) else math.ceil(more),
            **_certificates(stream, gate, rule, verdict if certify else OPEN, margin)}


def _certificates(stream: CellStream, gate: Gate, rule: str, verdict: str,
                  margin: float) -> dict:
    """Fewest raters and ratings whose removal unsettles the verdict. The
    margin is held at its current value and folded into the threshold (a
    pass needs the plain upper bound at most ``threshold - margin``, a fail
    the plain lower bound above ``threshold + margin``)."""
    none = {"raters_to_unsettle": None, "ratings_to_unsettle": None, "certificate": None}
    if verdict == OPEN or rule not in CERTIFIED_RULES or \
            (gate.criterion == DANGEROUS and rule != "any"):
        return none
    shifted = gate.threshold - margin if verdict == "pass" else gate.threshold + margin
    certs = decision_certificates(stream.position, stream.rater, stream.value,
                                  float(np.clip(shifted, 0.0, 1.0)), alpha=gate.alpha / 2,
                                  rule=rule, max_exact=2, budget=CERTIFICATE_BUDGET)
    kinds = {c.kind for c in certs.values()}
    return {"raters_to_unsettle": certs["raters"].count,
            "ratings_to_unsettle": certs["ratings"].count,
            "certificate": "exact" if kinds == {"exact"} else "greedy_upper_bound"}


def decision_rows(ctx, gates: tuple[Gate, ...], certify: bool = True,
                  forecast: bool = True) -> list[dict]:
    """Every gate's decision in every cell with a rated answer."""
    rule = ctx.settings.response_rule
    return [cell_decision(s, g, rule, certify, forecast)
            for g in gates for s in cell_streams(ctx, g)]


def study_line(rows: list[dict]) -> str:
    """'9 of 26 decisions open; about 340 more ratings expected'."""
    if not rows:
        return "No decisions yet: no gate has a rated answer."
    still = [r for r in rows if r["verdict"] == OPEN]
    if not still:
        return f"All {len(rows)} decisions settled."
    known = [r["expected_more_ratings"] for r in still if r["expected_more_ratings"] is not None]
    line = f"{len(still)} of {len(rows)} decisions open"
    if known:
        line += f"; about {sum(known):,} more ratings expected"
    if len(known) < len(still):
        line += f" ({len(still) - len(known)} not expected to settle at their current rate)"
    return line


# --- a study's decisions now -----------------------------------------------------------

def compute_study(engine: sa.Engine, cfg: StudyConfig, certify: bool,
                  forecast: bool = True) -> dict:
    """The study's decisions now, JSON-ready (certificates with ``certify``,
    ratings still expected with ``forecast``)."""
    from clinieval.audit.context import Context
    from clinieval.audit.data import from_snapshot
    from clinieval.audit.failure import rule_words
    from clinieval.audit.settings import AuditSettings
    from clinieval.platform.study_export import study_snapshot

    gates = [g.model_dump() for g in cfg.gates]
    settings = AuditSettings()
    base = {"gates": gates, "rule": rule_words(settings.response_rule, settings.threshold),
            "verdict_rule": "betting confidence sequence at alpha/2 widened by the rater"
                            " margin at alpha/2"}
    snap = study_snapshot(engine, cfg.study_id)
    if not cfg.gates or snap["ratings"].num_rows == 0:
        return {**base, "decisions": [], "summary": study_line([]), "open": 0}
    rows = decision_rows(Context(from_snapshot(snap), settings), cfg.gates, certify, forecast)
    return {**base, "decisions": rows, "summary": study_line(rows),
            "open": sum(r["verdict"] == OPEN for r in rows)}
