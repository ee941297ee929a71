"""Who rates what, and when: pairwise reviews and single-answer sessions.

Every case gets at least one review, every rater is active when there are
enough sessions, and no rater scores the same answer twice. The last
single-answer session starts last of all (it is the one cut short).
Draws come from the "sessions" stream only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clinieval.synth.design import SynthSettings, _date, _Design
from clinieval.synth.entities import _Answers, _Cases, _Raters


@dataclass(frozen=True)
class _Sessions:
    """Units are reviews (0..P-1) then single-answer sessions (P..P+S-1);
    sides are the (unit, answer) pairs in time order, left answer first."""

    n_reviews: int
    case: np.ndarray
    rater: np.ndarray
    start_s: np.ndarray
    left_is_a: np.ndarray
    answer_a: np.ndarray
    answer_b: np.ndarray
    preference_id: np.ndarray
    side_unit: np.ndarray
    side_pos: np.ndarray
    side_answer: np.ndarray


def _sessions(rng: np.random.Generator, d: _Design, s: SynthSettings, cases: _Cases,
              answers: _Answers, raters: _Raters) -> _Sessions:
    review_case, a, b = _review_pairs(rng, d, answers)
    single = _single_answers(rng, d.n_singles, answers, np.concatenate([a, b]))
    left_is_a = rng.random(len(a)) < 0.5
    first = np.concatenate([np.where(left_is_a, a, b), single])
    second = np.concatenate([np.where(left_is_a, b, a), np.full(len(single), -1)])
    case = np.concatenate([review_case, answers.case[single]])
    rater = _assign_raters(rng, cases.specialty[case], first, second, raters, s)
    start = _start_times(rng, len(case), d.n_preferences, s)
    order = np.argsort(start, kind="stable")
    preference_id = np.zeros(len(case), dtype=np.int64)
    reviews_in_time = order[order < d.n_preferences]
    preference_id[reviews_in_time] = np.arange(1, d.n_preferences + 1)
    side_unit = np.repeat(order, np.where(order < d.n_preferences, 2, 1))
    side_pos = np.zeros(len(side_unit), dtype=np.int8)
    side_pos[1:] = side_unit[1:] == side_unit[:-1]
    side_answer = np.where(side_pos == 0, first[side_unit], second[side_unit])
    return _Sessions(d.n_preferences, case, rater, start, left_is_a, a, b, preference_id,
                     side_unit, side_pos, side_answer)


def _review_pairs(rng: np.random.Generator, d: _Design,
                  answers: _Answers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every case gets a review; the rest go to cases in proportion to their
    answer count. Each review compares two distinct answers of its case."""
    n_cases = len(answers.count)
    extra = rng.multinomial(d.n_preferences - n_cases, answers.count / answers.count.sum())
    case = np.repeat(np.arange(n_cases), 1 + extra)
    k = answers.count[case]
    i = np.floor(rng.random(len(case)) * k).astype(np.int64)
    j = np.floor(rng.random(len(case)) * (k - 1)).astype(np.int64)
    j += j >= i
    base = answers.start[case]
    return case, base + i, base + j


def _single_answers(rng: np.random.Generator, n: int, answers: _Answers,
                    reviewed: np.ndarray) -> np.ndarray:
    """Answers for single-answer sessions: never-reviewed answers first, then
    answers with few review raters preferred."""
    n_rev = np.bincount(reviewed, minlength=len(answers.case))
    unrated = rng.permutation(np.flatnonzero(n_rev == 0))[:n]
    weight = 1.0 / (1.0 + n_rev) ** 2
    rest = rng.choice(len(n_rev), n - len(unrated), p=weight / weight.sum())
    return np.concatenate([unrated, rest])


def _assign_raters(rng: np.random.Generator, spec: np.ndarray, first: np.ndarray,
                   second: np.ndarray, raters: _Raters, s: SynthSettings) -> np.ndarray:
    """Draw a rater per unit; give idle raters a unit each (when there are
    enough units), and redraw (from all raters) units whose rater already
    scored one of its answers, until every rater is active and no rater
    scores an answer twice."""
    rater = raters.draw(rng, spec, s.home_specialty_share)
    n_raters = len(raters.order)
    paired = np.flatnonzero(second >= 0)
    unit = np.concatenate([np.arange(len(first)), paired])
    answer = np.concatenate([first, second[paired]]).astype(np.int64)
    for _ in range(200):
        idle = np.flatnonzero(np.bincount(rater, minlength=n_raters) == 0)
        if 0 < idle.size and len(rater) >= n_raters:
            rater[rng.choice(len(rater), idle.size, replace=False)] = idle
        clash = _repeats(answer * n_raters + rater[unit])
        if clash.size == 0 and (idle.size == 0 or len(rater) < n_raters):
            return rater
        redo = np.unique(unit[clash])
        rater[redo] = raters.draw(rng, spec[redo], 0.0)
    raise RuntimeError("could not give every answer distinct raters; raise the rater count")


def _repeats(keys: np.ndarray) -> np.ndarray:
    """Positions of values already seen earlier (in stable sort order)."""
    order = np.argsort(keys, kind="stable")
    ranked = keys[order]
    return order[1:][ranked[1:] == ranked[:-1]]


def _start_times(rng: np.random.Generator, n: int, n_reviews: int, s: SynthSettings) -> np.ndarray:
    """Session start in whole seconds after ``s.start`` (int64); activity grows
    over time. The last single-answer session (the partial one) is the last of all.
    Whole seconds keep timestamps independent of how a numpy build rounds ``**``."""
    span = (_date(s.end) - _date(s.start)).total_seconds() - 86_400
    start = np.floor(span * rng.random(n) ** 0.8).astype(np.int64)
    if n > n_reviews:
        start[-1] = start.max() + 60
    return start
