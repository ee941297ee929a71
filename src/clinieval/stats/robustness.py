"""Robustness certificates: how few raters, ratings or votes would have to go
for a settled verdict or the top of a preference ranking to change.

A verdict can be statistically settled and still rest on a handful of
ratings: Broderick, Giordano & Meager ("An automatic finite-sample robustness
metric: when can dropping a little data make a big difference?", 2020/2023)
show conclusions that flip when a small share of the data is dropped, and on
Chatbot-Arena preference data dropping two of 57,477 votes can change the
top model (Huang, Shen, Wei & Broderick, "Dropping just a handful of
preferences can change top large language model rankings", arXiv 2025). The
certificate is the fewest units (raters, ratings, votes) whose removal
changes the result:

* **exact** when a search over every removal set of up to ``max_exact``
  units found it, or found none below the greedy bound (so the bound is the
  minimum);
* **greedy_upper_bound** otherwise: a removal set that does change the
  result, found greedily (each step drops the unit whose removal weakens the
  result most), so the true minimum is at most this.

Removal sets are searched over *classes* of interchangeable units (ratings
of one answer with the same value; votes with the same table contribution),
which keeps the exact search to distinct cases.

Decisions are re-run with :func:`clinieval.stats.sequences.settled_verdict`
(the final verdict of the betting confidence sequence); "unsettled" means the
verdict is no longer the same (open, or the other way). Rankings are refitted
with :func:`clinieval.stats.bt_fit_many`; the top "changes" when another model
reaches the leader's strength (a tie counts: the leader is no longer alone).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations_with_replacement
from typing import NamedTuple

import numpy as np

from clinieval.stats.bradley_terry import (
    DEFAULT_ALPHA,
    bt_fit,
    bt_fit_many,
    cluster_outcome_tables,
    vote_credits,
)
from clinieval.stats.sequences import (
    AT_MOST,
    BREAKS,
    OPEN,
    PASS,
    gate_evidence,
    settled_verdict,
)

EXACT, GREEDY = "exact", "greedy_upper_bound"
KINDS = (EXACT, GREEDY)
RULES = ("mean", "any", "majority")
"""Per-answer value from its ratings' values: their mean (a rescaled score or
the share of raters who fail it), any (the largest: fails when any rater
fails it) or majority (1 when more than half of the values are 1)."""
_TIE = 1e-8  # strengths closer than this count as a tie at the top


class Certificate(NamedTuple):
    """Fewest units whose removal changes the result, how it was found, and
    one such removal set (unit ids: raters, rating or vote row indices)."""

    count: int
    kind: str
    removed: tuple[int, ...]


# --- the search --------------------------------------------------------------


class _Units(NamedTuple):
    """Removable units grouped in classes of interchangeable ones."""

    members: list[np.ndarray]  # per class, its unit ids


def _search(units: _Units, changed: Callable, score: Callable, max_exact: int,
            budget: int, shortlist: Callable | None = None) -> Certificate:
    # changed(list of unit-id arrays) -> bool array; score(list) -> float array
    # (lower = closer to changing). Greedy first for an upper bound, then
    # exhaustive search of smaller sets while the budget lasts.
    bound = _greedy(units, changed, score, shortlist)
    for k in range(1, min(bound.count - 1, max_exact) + 1):
        sets = _multisets(units, k, budget)
        if sets is None:
            return bound
        budget -= len(sets)
        hits = np.flatnonzero(changed(sets)) if sets else np.array([], dtype=int)
        if hits.size:
            return Certificate(k, EXACT, tuple(sorted(int(u) for u in sets[hits[0]])))
    exact = bound.count - 1 <= max_exact
    return bound._replace(kind=EXACT if exact else GREEDY)


def _multisets(units: _Units, k: int, budget: int):
    """Every removal set of ``k`` units, one per multiset of classes, or
    ``None`` when there are more than ``budget``."""
    sizes = np.array([m.size for m in units.members])
    out = []
    for combo in combinations_with_replacement(range(sizes.size), k):
        classes, counts = np.unique(combo, return_counts=True)
        if np.any(counts > sizes[classes]):
            continue
        parts = [units.members[c][:n] for c, n in zip(classes, counts, strict=True)]
        out.append(np.concatenate(parts))
        if len(out) > budget:
            return None
    return out


def _greedy(units: _Units, changed: Callable, score: Callable,
            shortlist: Callable | None = None) -> Certificate:
    # Each step scores every open class (or a shortlist of them), drops a
    # unit of the lowest-scoring one and stops once that changed the result.
    taken = np.zeros(len(units.members), dtype=np.int64)
    removed: list[int] = []
    sizes = np.array([m.size for m in units.members])
    while True:
        open_classes = np.flatnonzero(taken < sizes)
        if open_classes.size == 0:
            raise ValueError("removing every unit did not change the result")
        if shortlist is not None:
            open_classes = shortlist(removed, open_classes, taken)
        trials = [np.array(removed + [int(units.members[c][taken[c]])], dtype=np.int64)
                  for c in open_classes]
        c = open_classes[int(np.argmin(score(trials)))]
        removed.append(int(units.members[c][taken[c]]))
        taken[c] += 1
        if changed([np.array(removed, dtype=np.int64)])[0]:
            return Certificate(len(removed), GREEDY, tuple(sorted(removed)))


# --- decisions ---------------------------------------------------------------


def answer_stream(answer, value, keep=None, rule: str = "mean") -> np.ndarray:
    """Per-answer values, in answer order, of the answers with a kept rating.

    ``answer`` numbers each rating's answer by its place in the stream (the
    order answers were completed); ``value`` is each rating's value in
    [0, 1] (a fail indicator for ``any`` and ``majority``).
    """
    answer = np.asarray(answer, dtype=np.int64)
    value = np.asarray(value, dtype=float)
    keep = np.ones(answer.size, dtype=bool) if keep is None else keep
    n_answers = int(answer.max()) + 1 if answer.size else 0
    n = np.bincount(answer[keep], minlength=n_answers)
    present = n > 0
    if rule == "mean":
        per = np.bincount(answer[keep], value[keep], n_answers)[present] / n[present]
    elif rule == "any":
        per = np.zeros(n_answers)
        np.maximum.at(per, answer[keep], value[keep])
        per = per[present]
    elif rule == "majority":
        fails = np.bincount(answer[keep], value[keep], n_answers)
        per = (2 * fails > n)[present].astype(float)
    else:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return per


def decision_certificates(
    answer,
    rater,
    value,
    threshold: float,
    direction: str = AT_MOST,
    alpha: float = 0.05,
    *,
    rule: str = "mean",
    breaks: int = BREAKS,
    max_exact: int = 3,
    budget: int = 4_000,
    width: int = 48,
) -> dict[str, Certificate]:
    """Certificates of a gate's verdict: ``{"raters": ..., "ratings": ...}``.

    One row per rating: its answer's place in the stream, its rater and its
    value (see :func:`answer_stream`). Removing a rater removes all their
    ratings; an answer left with no rating leaves the stream, one left with
    some gets its value recomputed by ``rule``. An open verdict gets
    ``Certificate(0, "exact", ())``. ``budget`` caps the removal sets the
    exact search may re-run (per certificate); ``width`` is how many
    candidate ratings each greedy step scores (the raters are all scored),
    shortlisted by how far their removal moves the plain mean.
    """
    answer = np.asarray(answer, dtype=np.int64)
    rater = np.asarray(rater, dtype=np.int64)
    value = np.asarray(value, dtype=float)
    if not answer.shape == rater.shape == value.shape or answer.ndim != 1:
        raise ValueError("need one answer, rater and value per rating")
    options = {"threshold": threshold, "direction": direction, "alpha": alpha, "breaks": breaks}
    stream = answer_stream(answer, value, rule=rule)
    verdict = settled_verdict(stream, **options)
    if verdict == OPEN:
        return {"raters": Certificate(0, EXACT, ()), "ratings": Certificate(0, EXACT, ())}

    def streams(sets):
        for ids in sets:
            keep = np.ones(answer.size, dtype=bool)
            keep[ids] = False
            yield answer_stream(answer, value, keep, rule)

    def changed_ratings(sets):
        return np.array([s.size == 0 or settled_verdict(s, **options) != verdict
                         for s in streams(sets)])

    def score_ratings(sets):
        return np.array([-np.inf if s.size == 0 else gate_evidence(s, verdict=verdict, **options)
                         for s in streams(sets)])

    by_rater = [np.flatnonzero(rater == r) for r in np.unique(rater)]
    rater_ids = np.unique(rater)

    def ratings_of(sets):
        return [np.concatenate([by_rater[i] for i in ids]) for ids in sets]

    raters = _search(_Units([np.array([i]) for i in range(len(by_rater))]),
                     lambda sets: changed_ratings(ratings_of(sets)),
                     lambda sets: score_ratings(ratings_of(sets)), max_exact, budget)
    raters = raters._replace(removed=tuple(int(rater_ids[i]) for i in raters.removed))
    classes = _rating_classes(answer, value)
    harmful = 1.0 if (verdict == PASS) == (direction == AT_MOST) else -1.0
    shortlist = _rating_shortlist(answer, value, rule, classes, harmful, width)
    ratings = _search(classes, changed_ratings, score_ratings, max_exact, budget, shortlist)
    return {"raters": raters, "ratings": ratings}


def _rating_shortlist(answer, value, rule, classes, harmful, width):
    # The ``width`` classes whose next removal moves the stream's plain mean
    # furthest towards the threshold (``harmful`` = +1: upwards), earlier
    # answers first among equals (their bets are larger). Only a guide for
    # the greedy step, which then scores them with the capital itself.
    def pick(removed, open_classes, taken):
        keep = np.ones(answer.size, dtype=bool)
        keep[removed] = False
        stream_ids = np.unique(answer[keep])
        per = answer_stream(answer, value, keep, rule)
        total, count = per.sum(), per.size
        moves = np.empty(open_classes.size)
        for i, c in enumerate(open_classes):
            unit = classes.members[c][taken[c]]
            mine = keep & (answer == answer[unit])
            mine[unit] = False
            old = per[np.searchsorted(stream_ids, answer[unit])]
            if mine.any():
                new = answer_stream(np.zeros(int(mine.sum()), dtype=np.int64), value[mine],
                                    rule=rule)[0]
                moves[i] = (total - old + new) / count
            else:
                moves[i] = (total - old) / (count - 1) if count > 1 else np.inf
        order = np.lexsort((answer[[classes.members[c][0] for c in open_classes]],
                            -harmful * moves))
        return open_classes[order[:width]]

    return pick


def _rating_classes(answer, value) -> _Units:
    # Ratings of one answer with the same value are interchangeable.
    keys = np.column_stack([answer, value])
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    return _Units(np.split(order, bounds))


# --- preference ranking -------------------------------------------------------


def top_model_certificates(
    a_idx,
    b_idx,
    outcome,
    n_models: int,
    rater=None,
    *,
    tie_mode: str = "half",
    bothbad_mode: str = "half",
    alpha: float = DEFAULT_ALPHA,
    max_exact: int = 3,
    budget: int = 50_000,
) -> dict[str, Certificate]:
    """Certificates of the Bradley-Terry leader: ``{"votes": ..., "raters":
    ...}`` (raters only when ``rater`` gives each vote's rater).

    The leader is the strongest model of :func:`bt_fit` on all votes; a
    removal set changes the top when, refitted, another model's strength is
    within ``1e-8`` of the leader's or above it. Greedy: drop the vote
    (rater) whose removal most reduces the leader's margin over the best
    other model, refit, repeat; among votes of equal effect the leader's
    wins over the runner-up go first. Votes a tie mode drops never count.
    A ranking with no unique leader gets ``Certificate(0, "exact", ())``.
    """
    a = np.asarray(a_idx, dtype=np.int64)
    b = np.asarray(b_idx, dtype=np.int64)
    credit_a, credit_b = vote_credits(outcome, tie_mode=tie_mode, bothbad_mode=bothbad_mode)
    rows = _vote_rows(a, b, credit_a, credit_b, n_models)
    table = rows.sum(axis=0)
    theta = bt_fit(table, alpha=alpha)
    leader = int(np.argmax(theta))
    runner = int(np.argmax(np.where(np.arange(n_models) == leader, -np.inf, theta)))
    if _margin(theta[None], leader)[0] < _TIE:
        zero = Certificate(0, EXACT, ())
        return {"votes": zero, "raters": zero} if rater is not None else {"votes": zero}

    def margins(tables):
        return _margin(bt_fit_many(np.stack(tables), alpha=alpha, start=theta), leader)

    def removed_tables(sets, contributions):
        return [table - contributions[ids].sum(axis=0) for ids in sets]

    out = {"votes": _search(
        _vote_classes(a, b, credit_a, credit_b, leader, runner),
        lambda sets: margins(removed_tables(sets, rows)) < _TIE,
        lambda sets: margins(removed_tables(sets, rows)), max_exact, budget)}
    if rater is not None:
        rater = np.asarray(rater, dtype=np.int64)
        ids, codes = np.unique(rater, return_inverse=True)
        per_rater = cluster_outcome_tables(a, b, outcome, codes.ravel(), n_models, ids.size,
                                           tie_mode=tie_mode, bothbad_mode=bothbad_mode)
        cert = _search(_Units([np.array([i]) for i in range(ids.size)]),
                       lambda sets: margins(removed_tables(sets, per_rater)) < _TIE,
                       lambda sets: margins(removed_tables(sets, per_rater)), max_exact, budget)
        out["raters"] = cert._replace(removed=tuple(int(ids[i]) for i in cert.removed))
    return out


def _vote_rows(a, b, credit_a, credit_b, n_models):
    rows = np.zeros((a.size, n_models, n_models))
    idx = np.arange(a.size)
    rows[idx, a, b] = credit_a
    rows[idx, b, a] += credit_b
    return rows


def _margin(theta, leader):
    others = np.delete(theta, leader, axis=1)
    return theta[:, leader] - others.max(axis=1)


def _vote_classes(a, b, credit_a, credit_b, leader, runner) -> _Units:
    # Votes with the same (pair, credits) are interchangeable; votes with no
    # credit (dropped ties) change nothing and are left out. The leader's
    # wins over the runner-up come first, so that ties in the greedy's
    # choice go to them.
    low, high = np.minimum(a, b), np.maximum(a, b)
    credit_low = np.where(a == low, credit_a, credit_b)
    credit_high = np.where(a == low, credit_b, credit_a)
    useful = np.flatnonzero(credit_a + credit_b > 0)
    keys = np.column_stack([low, high, credit_low, credit_high])[useful]
    _, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    winner = np.where(credit_a > credit_b, a, np.where(credit_b > credit_a, b, -1))[useful]
    loser = np.where(credit_a > credit_b, b, np.where(credit_b > credit_a, a, -1))[useful]
    first = (winner == leader) & (loser == runner)
    members = [useful[inverse == c] for c in range(int(inverse.max()) + 1 if useful.size else 0)]
    lead = [i for i, m in enumerate(members) if first[np.searchsorted(useful, m[0])]]
    order = lead + [i for i in range(len(members)) if i not in lead]
    return _Units([members[i] for i in order])


