"""Means over answers chosen with known, unequal probabilities.

When answers were chosen for clinicians with recorded probabilities (a
study's targeted assignment), a plain mean over the rated answers leans
towards the cells and answers that were chosen more often. Each rated
answer ``i`` of cell ``c`` is weighted by its inverse probability,
Hajek-normalised within its cell and scaled to the cell's size ``N_c``::

    w_i = N_c * (1 / p_i) / sum_{j rated in c} (1 / p_j)

so a mean over any union of cells, ``sum w y / sum w``, weights every cell
by its size (post-stratification on the cell, whose sizes are known) and
the answers within a cell by inverse probability (Horvitz & Thompson, 1952;
Hajek, 1971; for probabilities chosen adaptively from the data seen so far,
Zrnic & Candes, 2024, arXiv:2403.03208). With equal probabilities within
each cell this is the size-weighted mean of the cells' plain means.

The interval resamples raters and answers (the pigeonhole bootstrap of
:mod:`clinieval.stats.crossed`), each rating carrying its share of its
answer's weighted value, with the weights recomputed in every replicate.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from clinieval.stats.crossed import pigeonhole_weights


class WeightedMean(NamedTuple):
    estimate: float
    lower: float
    upper: float
    n_answers: int
    n_raters: int


def cell_weights(probability, cell, cell_size) -> np.ndarray:
    """Per rated answer its weight ``w_i`` (see the module docstring).
    ``probability`` ``(n,)`` in ``(0, 1]``; ``cell`` ``(n,)`` integer codes;
    ``cell_size[c]`` the cell's answers (rated or not)."""
    p = np.asarray(probability, dtype=float)
    if np.any(~(p > 0) | (p > 1)):
        raise ValueError("probabilities must lie in (0, 1]")
    cell = np.asarray(cell, dtype=np.int64)
    inverse = 1.0 / p
    totals = np.bincount(cell, weights=inverse, minlength=len(cell_size))
    return np.asarray(cell_size, dtype=float)[cell] * inverse / totals[cell]


def weighted_answer_mean(answer_value, weight, rating_answer, rating_rater, *,
                         rng: np.random.Generator, B: int = 1000, level: float = 0.95
                         ) -> WeightedMean:
    """``sum w y / sum w`` over answers (``answer_value``, ``weight`` per
    answer; an answer with no rating is left out), with a two-way bootstrap
    percentile interval over raters and answers."""
    y = np.asarray(answer_value, dtype=float)
    w = np.asarray(weight, dtype=float)
    answer = np.asarray(rating_answer, dtype=np.int64)
    raters, rater = np.unique(np.asarray(rating_rater), return_inverse=True)
    answers, a_code = np.unique(answer, return_inverse=True)
    per_answer = np.bincount(a_code)
    share = 1.0 / per_answer[a_code]  # each rating carries its share of the answer
    wy, ww = w[answer] * y[answer] * share, w[answer] * share
    estimate = float(wy.sum() / ww.sum())
    U, V = pigeonhole_weights(answers.size, raters.size, B, rng)
    m = U[:, a_code] * V[:, rater.ravel()]
    reps = (m @ wy) / np.maximum(m @ ww, 1e-300)
    reps = reps[np.isfinite(reps) & ((m @ ww) > 0)]
    tail = (1 - level) / 2
    lo, hi = np.quantile(reps, [tail, 1 - tail]) if reps.size else (np.nan, np.nan)
    return WeightedMean(estimate, float(lo), float(hi), int(answers.size), int(raters.size))
