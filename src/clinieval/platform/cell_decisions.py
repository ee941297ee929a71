"""A gate's cells as decisions: per cell, pass, fail or open by an
anytime-valid confidence sequence, with what it cost, what it still needs and
how robust it is (issue 33). The core the audit's ``decisions`` section and
the platform (:mod:`clinieval.platform.decisions`) share, so the report and
the live view agree.

The sampling unit is the answer: its value is its fail indicator under the
response rule (for ``dangerous``: failing any safety-critical criterion),
and the stream is the cell's answers in the order of their first rating,
the order the live view saw them in. The verdict rule is the rater-margin
rule of :mod:`clinieval.stats.sequences`: a confidence sequence at
``alpha / 2`` widened by :func:`~clinieval.stats.sequences.rater_margin` at
``alpha / 2``. The plain sequence covers the rate of the study's own panel
of clinicians; the margin covers the gap to the rate over clinicians at
large, which no number of answers removes (``benchmarks/sequences_error.py``
shows plain verdicts near the gate going wrong well above alpha, and the
widened ones staying under it).

The sequence is the clinicians' betting sequence
(:func:`~clinieval.stats.sequences.betting_cs`) unless the study's judge is
licensed for every stratum (judge x criterion x specialty) of the cell and
judged every answer of it: then it is the prediction-powered one
(:func:`~clinieval.stats.pp_sequences.pp_betting_cs`), which estimates the
same rate with the judge's predictions of all the cell's answers corrected
by the clinicians' values. Each row names the sequence it used
(``method``). The choice rests on the licence, not on the bounds, and each
sequence covers the rate at its level; a cell whose licence changes while
it is watched reads first one, then the other, which can at worst add their
error levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from clinieval.platform.config import DANGEROUS, Gate
from clinieval.stats.pp_sequences import pp_betting_cs
from clinieval.stats.robustness import decision_certificates
from clinieval.stats.sequences import (
    OPEN,
    betting_cs,
    decide,
    expected_to_settle,
    rater_margin,
)

CLINICIANS_ONLY = "clinicians only"
"""The ``method`` of a cell read off the clinicians' sequence alone."""
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
    judge: CellJudge | None = None
    method: str = CLINICIANS_ONLY


@dataclass(frozen=True)
class CellJudge:
    """A licensed judge's predictions for one cell: of each stream answer
    (``f``, in stream order) and of every answer of the cell (``judged``, in
    the data's answer order), each a fail share in [0, 1]."""

    label: str
    f: np.ndarray
    judged: np.ndarray


@dataclass(frozen=True)
class DecisionJudge:
    """The study's judge as the decisions use it (built by the audit's
    judge machinery: :func:`clinieval.audit.sections._decision_judges.decision_judge`).

    Per (answer, criterion) its share of parsed calls at or below the fail
    line (``fail``, NaN where every call is unparsed) and whether it called
    at all (``called``); per answer the same over the safety-critical
    criteria (``worst``: the largest share; ``called_all``: called on every
    one of them); the strata it is licensed in as (criterion code, specialty
    code); and, when it may not power any cell, why (``why_not``)."""

    label: str
    fail: np.ndarray
    called: np.ndarray
    worst: np.ndarray
    called_all: np.ndarray
    licensed: frozenset[tuple[int, int]]
    why_not: str = ""


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


def cell_streams(ctx, gate: Gate, judge: DecisionJudge | None = None) -> list[CellStream]:
    """The gate's cells that have a rated answer, each as a stream, with the
    judge's predictions where it may power the cell's sequence."""
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
        stream = CellStream(model, specialty, place[answer[mine]], rater[mine], value[mine],
                            x_all[answers])
        out.append(_with_judge(ctx, gate, stream, cell == key, answers, judge))
    return out


def _with_judge(ctx, gate: Gate, stream: CellStream, in_cell: np.ndarray, rated: np.ndarray,
                judge: DecisionJudge | None) -> CellStream:
    """``stream`` with the judge's predictions when it is licensed in every
    stratum of the cell (its criteria x the specialties of its answers) and
    called every answer of the cell; else with the reason it is not."""
    if judge is None:
        return stream
    if judge.why_not:
        return replace(stream, method=f"{CLINICIANS_ONLY}: {judge.why_not}")
    cell = np.flatnonzero(in_cell)
    criteria = [ctx.data.criteria.index(c) for c in _criteria_of(ctx, gate)]
    strata = {(c, int(s)) for c in criteria for s in np.unique(ctx.data.answer_specialty[cell])}
    if not strata <= judge.licensed:
        return replace(stream, method=f"{CLINICIANS_ONLY}: {judge.label} not licensed here")
    if gate.criterion == DANGEROUS:
        called, share = judge.called_all, judge.worst
    else:
        called, share = judge.called[:, criteria[0]], judge.fail[:, criteria[0]]
    if not called[cell].all():
        return replace(stream, method=f"{CLINICIANS_ONLY}: {judge.label} did not judge every"
                                      " answer")
    # An answer whose every call is unparsed is predicted 0: a prediction may
    # be any fixed function of the answer, so the sequence stays exact.
    share = np.nan_to_num(share, nan=0.0)
    return replace(stream, judge=CellJudge(judge.label, share[rated], share[cell]),
                   method=f"judge-powered: {judge.label} (licensed)")


# --- one decision ----------------------------------------------------------------

def cell_decision(stream: CellStream, gate: Gate, rule: str, certify: bool = True,
                  forecast: bool = True) -> dict:
    """Estimate, widened sequence bounds, verdict, ratings spent and still
    expected (``forecast``; None without: the assignment's background pass
    reads only the bounds, and the forecast is most of a cell's time), the
    sequence used (``method``, with the judge's last ``lambda`` when it
    powered it), and (settled, under a certified rule, ``certify``) the
    certificates (searched for the clinicians' sequence only)."""
    half = gate.alpha / 2
    lower, upper, lam = _sequence(stream, half)
    margin = float(rater_margin(stream.position, stream.rater, stream.x, half)[-1])
    lower, upper = max(0.0, lower - margin), min(1.0, upper + margin)
    verdict = decide(lower, upper, gate.threshold)
    estimate = float(stream.x.mean())
    more = 0.0 if verdict != OPEN else math.inf if not forecast else _expected_more(
        stream, estimate, gate, margin, lam)
    powered = stream.judge is not None
    return {"criterion": gate.criterion, "threshold": gate.threshold, "scope": gate.scope,
            "alpha": gate.alpha, "model": stream.model, "specialty": stream.specialty,
            "estimate": estimate, "lower": lower, "upper": upper, "rater_margin": margin,
            "verdict": verdict, "answers": int(stream.x.size),
            "ratings": int(stream.position.size),
            "raters": int(np.unique(stream.rater).size),
            "expected_more_ratings": None if math.isinf(more) else math.ceil(more),
            **_certificates(stream, gate, rule, verdict if certify and not powered else OPEN,
                            margin),
            "method": stream.method, "judge_lambda": lam if powered else None}


def _sequence(stream: CellStream, alpha: float) -> tuple[float, float, float]:
    """The last bounds of the cell's sequence at ``alpha`` and the judge's
    last ``lambda`` (0 for the clinicians' own)."""
    if stream.judge is None:
        cs = betting_cs(stream.x, alpha)
        return float(cs.lower[-1]), float(cs.upper[-1]), 0.0
    pp = pp_betting_cs(stream.x, stream.judge.f, stream.judge.judged, alpha)
    return float(pp.lower[-1]), float(pp.upper[-1]), float(pp.lam[-1])


def _expected_more(stream: CellStream, estimate: float, gate: Gate, margin: float,
                   lam: float) -> float:
    """Ratings still expected: :func:`~clinieval.stats.sequences.expected_to_settle`
    in answers, times the ratings per answer so far. A judge-powered cell's
    answers to settle are scaled by the variance its judge leaves (that of
    ``x - lambda f`` over that of ``x`` on the rated answers): a rough
    figure, as the clinicians' one is."""
    per_answer = stream.position.size / stream.x.size
    total = float(expected_to_settle(estimate, 0, gate.threshold, gate.alpha / 2,
                                     margin=margin))
    if stream.judge is not None and lam > 0 and np.var(stream.x) > 0:
        total *= min(1.0, float(np.var(stream.x - lam * stream.judge.f) / np.var(stream.x)))
    return max(0.0, total - stream.x.size) * per_answer


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
                  forecast: bool = True, judge: DecisionJudge | None = None) -> list[dict]:
    """Every gate's decision in every cell with a rated answer (judge-powered
    where ``judge`` is licensed: :func:`cell_streams`)."""
    rule = ctx.settings.response_rule
    return [cell_decision(s, g, rule, certify, forecast)
            for g in gates for s in cell_streams(ctx, g, judge)]


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
