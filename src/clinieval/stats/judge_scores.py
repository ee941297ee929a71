"""Per-model scores from automated judges: means and shares resampled over
cases and jurors together, Bradley-Terry strengths of two sets of votes
resampled over the same cases, run-to-run spread between repeats, and
HealthBench's rubric score with its clipping rule.

Arrays in, arrays out; every resampling function takes a
``numpy.random.Generator``.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from clinieval.stats.bootstrap import resample_counts, unit_counts
from clinieval.stats.bradley_terry import DEFAULT_ALPHA, bt_fit_many
from clinieval.stats.scoring import bootstrap_case_means

RubricClip = Literal["mean", "example"]


def twoway_draw(n_cases: int, n_jurors: int, B: int, rng: np.random.Generator,
                dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """One pigeonhole draw of :func:`twoway_ratio_bootstrap`: ``(B, n_cases)``
    case and ``(B, n_jurors)`` juror multiplicities (each replicate draws
    every case and every juror with replacement, independently), the same
    counts as :func:`~clinieval.stats.resample_counts` of that many units
    draws, written straight into ``dtype``. ``np.float32`` halves the memory
    the case weights move (at 10x, 43 MB instead of 86 MB, and no 64-bit
    copy in between: the conversion took 0.2 s a draw on this VM) and the
    products over them run in single precision: exact while the weighted
    totals are integers below 2**24 (counts, and sums of integer scores),
    within single-precision rounding otherwise."""
    u = unit_counts(n_cases, B, rng, dtype)
    v = (unit_counts(n_jurors, B, rng, dtype) if n_jurors > 1
         else np.ones((B, max(n_jurors, 1)), dtype=dtype))
    return u, v


def twoway_ratio_bootstrap(sums, counts, B: int, rng: np.random.Generator | None,
                           draw: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """``(B, G)`` replicates of ``G`` ratio means ``sum(sums[g]) / sum(counts[g])``
    under the pigeonhole bootstrap of cases and jurors (Owen, 2007, "The
    pigeonhole bootstrap", Ann. Appl. Stat. 1:386).

    ``sums`` and ``counts`` are ``(G, C, J)``: per group (e.g. model), the
    total and the number of scores of case ``c`` by juror ``j``. Each
    replicate draws the ``C`` cases and the ``J`` jurors with replacement,
    independently, and weights cell ``(c, j)`` by the product of their
    multiplicities. Jurors are crossed with cases (every juror scores every
    case), so a verdict depends on which jurors sat as much as on which cases
    were asked; with ``J = 1`` this is the case bootstrap. Repeats nested in
    a case need no draw of their own: resampling whole cases carries their
    spread. NaN where a replicate has no scores.

    ``draw`` (:func:`twoway_draw` for these ``C`` cases and ``J`` jurors)
    replaces the draw from ``rng``: blocks of the same cases and jurors
    (one judge's criteria) then share one draw, each with the distribution
    it has alone (drawing every case afresh per block cost a 10x audit's
    judge scores 6 s of index draws and conversions).
    """
    sums, counts = np.asarray(sums, dtype=float), np.asarray(counts, dtype=float)
    if sums.ndim != 3 or sums.shape != counts.shape:
        raise ValueError(f"sums and counts must share a (G, C, J) shape, got {sums.shape}"
                         f" and {counts.shape}")
    _, n_cases, n_jurors = sums.shape
    if draw is None:
        u, v = twoway_draw(n_cases, n_jurors, B, rng)
    else:
        u, v = draw
        if u.shape != (B, n_cases) or v.shape != (B, max(n_jurors, 1)):
            raise ValueError(f"the draw is for {u.shape[1]} cases and {v.shape[1]} jurors"
                             f" x {u.shape[0]} replicates, the cells for {n_cases} and"
                             f" {n_jurors} x {B}")
    top, bottom = _weighted_totals(u, sums, v), _weighted_totals(u, counts, v)
    return np.divide(top, bottom, out=np.full_like(top, np.nan), where=bottom > 0)


def _weighted_totals(u, cells, v) -> np.ndarray:
    """``(B, G)``: ``sum_{c, j} u[b, c] cells[g, c, j] v[b, j]``, the cases'
    weights applied by one matrix product over every (group, juror) column,
    then the jurors' (``einsum`` of the three operands loops in C without
    BLAS: 23 s of a 10x audit's judge scores, against well under one)."""
    G, C, J = cells.shape
    wide = cells.transpose(1, 0, 2).reshape(C, G * J).astype(u.dtype, copy=False)
    by_case = (u @ wide).astype(float, copy=False)  # (B, G * J), in u's precision
    return np.einsum("bgj,bj->bg", by_case.reshape(-1, G, J), v.astype(float, copy=False))


def paired_bt_cluster_bootstrap(tables_x, tables_y, B: int, rng: np.random.Generator, *,
                                alpha: float = DEFAULT_ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """``(B, m)`` Bradley-Terry strengths of two sets of votes on the same
    clusters (e.g. a judge's and the clinicians' votes, per case), resampled
    with the same draw of clusters.

    ``tables_x`` and ``tables_y`` are ``(C, m, m)`` outcome tables per
    cluster (:func:`~clinieval.stats.bradley_terry.cluster_outcome_tables`).
    Each replicate draws the ``C`` clusters with replacement (Davison &
    Hinkley, 1997, §3.8) and fits the weighted sum of each set's tables, so
    a statistic of both fits (a rank correlation between them) gets an
    interval that keeps their dependence on the shared cases.
    """
    x, y = np.asarray(tables_x, dtype=float), np.asarray(tables_y, dtype=float)
    if x.shape != y.shape or x.ndim != 3:
        raise ValueError(f"need two (C, m, m) stacks of one shape, got {x.shape} and {y.shape}")
    n_clusters, m = x.shape[0], x.shape[1]
    w = resample_counts(np.ones(n_clusters, dtype=np.int64), B, rng).astype(float)
    fit = [bt_fit_many((w @ t.reshape(n_clusters, m * m)).reshape(B, m, m), alpha=alpha)
           for t in (x, y)]
    return fit[0], fit[1]


def repeat_spread(unit, value) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per unit judged at least twice (same judge, answer, criterion, order,
    juror; ``unit`` integer codes), over its repeats: the sample variance
    (ddof 1) of ``value``, whether any two repeats differ, and the number of
    repeats. Returned in ascending unit code, only units with two or more.

    The pooled SD, ``sqrt(mean(variance))``, is the run-to-run spread CSEDB
    reports; the share of units that differ is how often re-running the
    judge changes its verdict.
    """
    unit = np.asarray(unit, dtype=np.int64)
    value = np.asarray(value, dtype=float)
    codes, inverse, size = np.unique(unit, return_inverse=True, return_counts=True)
    total = np.bincount(inverse, value, codes.size)
    square = np.bincount(inverse, value**2, codes.size)
    low = np.full(codes.size, np.inf)
    high = np.full(codes.size, -np.inf)
    np.minimum.at(low, inverse, value)
    np.maximum.at(high, inverse, value)
    keep = size >= 2
    n = size[keep]
    mean = total[keep] / n
    # max(0, .): the two sums of equal values may differ by rounding
    variance = np.maximum(square[keep] - n * mean**2, 0.0) / (n - 1)
    return variance, high[keep] > low[keep], n


def clipped_rubric_mean(example_scores, B: int, rng: np.random.Generator,
                        clip: RubricClip = "mean") -> tuple[float, np.ndarray]:
    """HealthBench's rubric score of one model and ``(B,)`` bootstrap
    replicates over examples, from unclipped per-example scores (met points
    over positive points, which a met negative item can push below 0).

    ``clip="mean"`` follows the reference implementation (simple-evals
    ``healthbench_eval.py``): the mean of the per-example scores is clipped
    to [0, 1], and so is every replicate mean. ``clip="example"`` clips each
    example's score first, which forgives an answer's harms below zero and
    so scores a model higher whenever some of its answers fall below zero.
    """
    scores = np.asarray(example_scores, dtype=float)
    if clip not in ("mean", "example"):
        raise ValueError(f"clip must be 'mean' or 'example', got {clip!r}")
    if clip == "example":
        scores = np.clip(scores, 0.0, 1.0)
    reps = bootstrap_case_means(scores[:, None], B, rng)[:, 0]
    if clip == "mean":
        return float(np.clip(scores.mean(), 0.0, 1.0)), np.clip(reps, 0.0, 1.0)
    return float(scores.mean()), reps
