"""Sufficient statistics shared by the analyses, computed once per audit.

Scores take five values, so everything about ratings reduces to count
arrays: per (model, criterion) and per (answer, criterion). Votes reduce to
distinct (model A, model B, outcome) cells. A score's code is its index in
``vocabulary.SCORES``; every count array's last axis runs over the five codes.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from clinieval.audit.data import N_SCORES, AuditData
from clinieval.contract import vocabulary
from clinieval.stats import unique_codes, within_item_std

SCORES = np.asarray(vocabulary.SCORES, dtype=float)
"""The value of each score code (code = index in ``vocabulary.SCORES``)."""


def score_sum(counts: np.ndarray, stop: int = N_SCORES, dtype=np.int64) -> np.ndarray:
    """``counts[..., :stop].sum(axis=-1)`` in ``dtype``, by adding the score
    slices (numpy's sum along a five-long axis is several times slower)."""
    total = counts[..., 0].astype(dtype)
    for slot in range(1, stop):
        total += counts[..., slot]
    return total


class RatingCounts:
    """The count arrays of ratings and votes, and the codes of their
    (answer, rater) pairs; part of :class:`~clinieval.audit.context.Context`."""

    data: AuditData

    @cached_property
    def score_index(self) -> np.ndarray:
        """Per rating its score code 0..4 (int8: one byte per rating at 100x)."""
        return (self.data.rating_score - vocabulary.SCORE_MIN).astype(np.int8)

    def _rating_key(self, unit: np.ndarray, criterion: bool = True, score: bool = True
                    ) -> np.ndarray:
        """``(unit * criteria + criterion) * 5 + score code`` per rating, int64,
        built in place: one array of the ratings' length, not one per step."""
        d = self.data
        key = unit.astype(np.int64)
        if criterion:
            key *= d.n_criteria
            key += d.rating_criterion
        if score:
            key *= N_SCORES
            key += self.score_index
        return key

    @cached_property
    def model_counts(self) -> np.ndarray:
        """(models, criteria, 5) rating counts per score value."""
        d = self.data
        key = self._rating_key(d.rating_model())
        flat = np.bincount(key, minlength=d.n_models * d.n_criteria * N_SCORES)
        return flat.reshape(d.n_models, d.n_criteria, N_SCORES)

    @cached_property
    def answer_counts(self) -> np.ndarray:
        """(answers, criteria, 5) rating counts per score value (int32)."""
        d = self.data
        key = self._rating_key(d.rating_answer)
        size = d.n_answers * d.n_criteria * N_SCORES
        return np.bincount(key, minlength=size).astype(np.int32).reshape(
            d.n_answers, d.n_criteria, N_SCORES)

    @cached_property
    def model_n(self) -> np.ndarray:
        """(models, criteria) number of ratings."""
        return self.model_counts.sum(axis=2)

    @cached_property
    def model_mean(self) -> np.ndarray:
        """(models, criteria) mean score, NaN when unrated."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.model_n > 0, (self.model_counts @ SCORES) / self.model_n, np.nan)

    @property
    def answer_n(self) -> np.ndarray:
        """(answers, criteria) number of ratings (int32, as the counts; not
        kept: 50 MB at 100x)."""
        return score_sum(self.answer_counts, dtype=np.int32)

    @cached_property
    def answer_mean(self) -> np.ndarray:
        """(answers, criteria) mean score, NaN when unrated."""
        counts = self.answer_counts
        n = self.answer_n
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (counts @ SCORES) / n, np.nan)

    @cached_property
    def answer_std(self) -> np.ndarray:
        """(answers, criteria) sample SD of the scores, NaN below two ratings."""
        return within_item_std(self.answer_counts, SCORES)

    def rate_by(self, flags: np.ndarray, groups: np.ndarray, n_groups: int
                ) -> tuple[np.ndarray, np.ndarray]:
        """Per group: how many answers have the flag (k) among those rated (n).
        ``flags`` is per answer, 1.0 / 0.0 / NaN for unrated."""
        rated = ~np.isnan(flags)
        n = np.bincount(groups[rated], minlength=n_groups)
        k = np.bincount(groups[rated], weights=flags[rated], minlength=n_groups)
        return k, n

    @cached_property
    def answer_raters(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct (answer, rater) pairs among the ratings."""
        d = self.data
        starts = self._pair_runs
        pairs = unique_codes(d.rating_answer[starts].astype(np.int64) * max(d.n_raters, 1)
                             + d.rating_rater[starts])
        return pairs // max(d.n_raters, 1), pairs % max(d.n_raters, 1)

    @property
    def _pair_runs(self) -> np.ndarray:
        """Where each run of consecutive ratings of one (answer, rater) pair
        starts. A bundle stores an answer's ratings by one rater together (one
        per criterion), so per-pair codes are found over the runs (4 M at
        100x) instead of the ratings (37.5 M) and repeated over each run."""
        d = self.data
        change = np.empty(d.rating_answer.size, dtype=bool)
        change[:1] = True
        np.not_equal(d.rating_answer[1:], d.rating_answer[:-1], out=change[1:])
        change[1:] |= d.rating_rater[1:] != d.rating_rater[:-1]
        return np.flatnonzero(change)

    @cached_property
    def answer_rater_cells(self) -> np.ndarray:
        """Per distinct (answer, rater) pair its (rater, case) cell, coded
        once for every share's two-way variance."""
        answers, raters = self.answer_raters
        case = self.data.answer_case[answers].astype(np.int64)
        return unique_codes(raters * (int(case.max()) + 1) + case, return_inverse=True)[1] \
            if case.size else np.zeros(0, dtype=np.int64)

    @cached_property
    def vote_models(self) -> tuple[np.ndarray, np.ndarray]:
        d = self.data
        return d.answer_model[d.pref_a], d.answer_model[d.pref_b]

    @cached_property
    def bt_votes(self) -> np.ndarray:
        """Mask of votes usable for Bradley-Terry (two different models)."""
        a, b = self.vote_models
        return a != b
