"""Scores of automated evaluations: rule and gate scores, Worst@k, paired
bootstrap comparisons with Holm's correction, and benchmark win rates.

Methods follow CSEDB (gate scores, Worst@k, paired bootstrap, Holm) and
MedHELM (pairwise win rate and macro-average over benchmarks). Arrays in,
arrays out; every resampling function takes a ``numpy.random.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import comb

TieRule = Literal["half", "geq"]
_CHUNK_ELEMENTS = 2**22  # case draws per chunk of replicates (32 MB as int64)


def rubric_example_scores(points, met, example, clip: bool = True) -> np.ndarray:
    """HealthBench-style score per example: the points of the rubric items the
    answer met over the example's total positive points, clipped to [0, 1]
    unless ``clip`` is False (HealthBench's reference clips only the mean of
    these: see :func:`~clinieval.stats.judge_scores.clipped_rubric_mean`).

    ``points`` (signed), ``met`` (bool) and ``example`` (integer codes
    0..E-1) describe one rubric item each. Negative items that are met pull
    the score down; an example with no positive points scores NaN.
    """
    points = np.asarray(points, dtype=float)
    met = np.asarray(met, dtype=bool)
    example = np.asarray(example, dtype=np.int64)
    n = int(example.max()) + 1 if example.size else 0
    earned = np.bincount(example, weights=np.where(met, points, 0.0), minlength=n)
    possible = np.bincount(example, weights=np.clip(points, 0.0, None), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(possible > 0, earned / possible, np.nan)
    return np.clip(raw, 0.0, 1.0) if clip else raw


def gate_case_scores(points, met, case, graded) -> np.ndarray:
    """CSEDB case score per case: a binary case scores 1 when every rule is
    met and 0 otherwise; a graded case scores earned over total rule points.

    ``points`` are the (non-negative) rule weights, ``met`` whether each rule
    was met, ``case`` integer codes 0..C-1, and ``graded`` a per-case flag.
    """
    points = np.asarray(points, dtype=float)
    met = np.asarray(met, dtype=bool)
    case = np.asarray(case, dtype=np.int64)
    n = len(graded)
    earned = np.bincount(case, weights=np.where(met, points, 0.0), minlength=n)
    total = np.bincount(case, weights=points, minlength=n)
    missed = np.bincount(case, weights=~met, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        graded_score = np.where(total > 0, earned / total, np.nan)
    return np.where(np.asarray(graded, dtype=bool), graded_score, (missed == 0).astype(float))


def worst_at_k(samples) -> np.ndarray:
    """Expected minimum over ``k`` of ``n`` samples, exactly, for k = 1..n.

    ``samples`` is ``(cases, n)``: n scored samples of each case. With the
    row sorted, s(1) <= ... <= s(n), a uniformly random k-subset has its
    minimum at s(i) with probability C(n-i, k-1) / C(n, k), so
    E[min] = sum_i s(i) C(n-i, k-1) / C(n, k) (order statistics of sampling
    without replacement). Returns ``(cases, n)``; column ``k - 1`` is
    Worst@k, column 0 the mean and the last column the minimum.
    """
    s = np.sort(np.atleast_2d(np.asarray(samples, dtype=float)), axis=1)
    n = s.shape[1]
    i = np.arange(1, n + 1)
    k = np.arange(1, n + 1)[:, None]
    weights = comb(n - i[None, :], k - 1) / comb(n, k)  # (k, i); rows sum to 1
    return s @ weights.T


def bootstrap_case_means(scores, B: int, rng: np.random.Generator,
                         weights=None, dtype=np.float64) -> np.ndarray:
    """``(B, M)`` bootstrap means of ``M`` columns resampling the same cases.

    ``scores`` is ``(cases, M)`` (e.g. one column per model, every model
    scored on the same cases): each replicate draws the cases once, with
    replacement, and applies that draw to every column, which is what makes
    differences between columns *paired*. With ``weights`` (one per case)
    the replicate means are weighted means. Draws are multinomial counts, so
    each replicate costs one row of a matrix product; ``dtype=np.float32``
    halves that product's cost (counts are exact in float32; the sums carry
    about 1e-6 relative rounding).
    """
    scores = np.asarray(scores, dtype=dtype)
    n = scores.shape[0]
    w = np.ones(n, dtype=dtype) if weights is None else np.asarray(weights, dtype=dtype)
    out = np.empty((B, scores.shape[1]))
    step = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for start in range(0, B, step):
        counts = _case_counts(n, min(step, B - start), rng, dtype) * w
        out[start:start + len(counts)] = (counts @ scores) / counts.sum(axis=1, keepdims=True)
    return out


def _case_counts(n: int, B: int, rng: np.random.Generator, dtype=np.float64) -> np.ndarray:
    """``(B, n)`` multiplicities of ``n`` cases drawn with replacement: uniform
    index draws counted by one offset ``bincount`` (a multinomial draw with
    the same distribution, several times faster than ``rng.multinomial``)."""
    picks = rng.integers(0, n, size=(B, n)) + (np.arange(B) * n)[:, None]
    return np.bincount(picks.ravel(), minlength=B * n).reshape(B, n).astype(dtype)


@dataclass(frozen=True)
class Comparison:
    """One two-sided bootstrap comparison ``first - second``."""

    first: int
    second: int
    difference: float
    lower: float
    upper: float
    p_value: float
    p_holm: float


def paired_comparisons(scores, B: int, rng: np.random.Generator, *, weights=None,
                       level: float = 0.95) -> list[Comparison]:
    """Every pair of columns of ``(cases, M)`` scores compared by a paired
    bootstrap over cases, with Holm's correction over the whole family.

    The two-sided p-value is the share of centred replicate differences at
    least as far from zero as the observed one (Efron & Tibshirani, 1993,
    §16.4); the interval is the percentile interval of the replicates.
    """
    scores = np.asarray(scores, dtype=float)
    w = np.ones(scores.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    observed = (w @ scores) / w.sum()
    reps = bootstrap_case_means(scores, B, rng, weights=w)
    return _comparisons(observed, reps, level)


def paired_comparisons_many(blocks, B: int, rng: np.random.Generator, *,
                            level: float = 0.95, dtype=np.float32) -> list[list[Comparison]]:
    """:func:`paired_comparisons` for many independent blocks at once (e.g.
    benchmarks), each ``(cases, M_k)``, Holm's correction within each block.

    Blocks with the same number of cases share one draw of case counts per
    replicate: their columns are stacked into one matrix, so every block
    costs a slice of a single matrix product instead of its own draw. Each
    block's rows are first put in a random order of their own, so the shared
    counts land on unrelated cases; within a block the resampling is exactly
    the paired bootstrap (each block's replicates are a valid bootstrap of
    it), and only the Monte Carlo noise is shared across blocks.
    """
    blocks = [np.asarray(b, dtype=float) for b in blocks]
    out: list[list[Comparison] | None] = [None] * len(blocks)
    by_size: dict[int, list[int]] = {}
    for i, block in enumerate(blocks):
        by_size.setdefault(block.shape[0], []).append(i)
    for members in by_size.values():
        shuffled = [blocks[i][rng.permutation(blocks[i].shape[0])] for i in members]
        reps = bootstrap_case_means(np.hstack(shuffled), B, rng, dtype=dtype)
        edges = np.cumsum([0] + [b.shape[1] for b in shuffled])
        for i, lo, hi in zip(members, edges[:-1], edges[1:], strict=True):
            out[i] = _comparisons(blocks[i].mean(axis=0), reps[:, lo:hi], level)
    return out


def independent_comparison(x, y, B: int, rng: np.random.Generator,
                           level: float = 0.95) -> Comparison:
    """Two cohorts with no shared cases: each resampled on its own."""
    rx = bootstrap_case_means(np.asarray(x, dtype=float)[:, None], B, rng)[:, 0]
    ry = bootstrap_case_means(np.asarray(y, dtype=float)[:, None], B, rng)[:, 0]
    observed = np.array([np.mean(x), np.mean(y)])
    return _comparisons(observed, np.column_stack([rx, ry]), level)[0]


def _comparisons(observed, reps, level: float) -> list[Comparison]:
    first, second = np.triu_indices(len(observed), k=1)
    diff = observed[first] - observed[second]
    rep_diff = reps[:, first] - reps[:, second]
    centred = np.abs(rep_diff - diff)
    p = (centred >= np.abs(diff) - 1e-12).mean(axis=0)
    tail = (1.0 - level) / 2.0
    lower, upper = np.quantile(rep_diff, [tail, 1.0 - tail], axis=0)
    holm = holm_adjust(p)
    return [Comparison(int(a), int(b), float(d), float(lo), float(hi), float(pv), float(ph))
            for a, b, d, lo, hi, pv, ph in zip(first, second, diff, lower, upper, p, holm,
                                               strict=True)]


def holm_adjust(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values (Holm, 1979): the i-th smallest of
    m p-values is multiplied by m - i + 1, made monotone, capped at 1.

    An undefined (NaN) p-value is no test: it stays NaN and is not counted
    in m, as statsmodels' ``multipletests`` on the defined ones."""
    p = np.asarray(p_values, dtype=float)
    out = np.full_like(p, np.nan)
    defined = np.flatnonzero(~np.isnan(p))
    order = defined[np.argsort(p[defined], kind="stable")]
    m = order.size
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out[order] = np.minimum(stepped, 1.0)
    return out


@dataclass(frozen=True)
class BenchmarkSummary:
    """MedHELM-style summary of ``M`` models over ``K`` benchmarks."""

    win_rate: np.ndarray
    """Mean share of (benchmark, rival) comparisons won, per model."""
    win_sd: np.ndarray
    """SD over benchmarks of each model's per-benchmark win share."""
    macro_average: np.ndarray
    """Mean normalised score over benchmarks, each weighted equally."""
    macro_sd: np.ndarray
    """SD of the normalised scores over benchmarks."""


def benchmark_summary(scores, ties: TieRule = "half") -> BenchmarkSummary:
    """Win rate and macro-average from ``(M, K)`` normalised scores.

    On each benchmark every model meets every other model once. A higher
    score wins; equal scores count half a win each (``ties="half"``) or a
    win for both (``"geq"``, the wording of MedHELM's paper). Benchmarks a
    model has no score on (NaN) are left out of its comparisons.
    """
    s = np.asarray(scores, dtype=float)
    a, b = s[:, None, :], s[None, :, :]
    tie_credit = 0.5 if ties == "half" else 1.0
    with np.errstate(invalid="ignore"):
        credit = np.where(a > b, 1.0, np.where(a == b, tie_credit, 0.0))
    valid = ~np.isnan(a) & ~np.isnan(b)
    valid &= ~np.eye(s.shape[0], dtype=bool)[:, :, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        per_bench = (credit * valid).sum(axis=1) / valid.sum(axis=1)  # (M, K)
        win = (credit * valid).sum(axis=(1, 2)) / valid.sum(axis=(1, 2))
    return BenchmarkSummary(win, np.nanstd(per_bench, axis=1, ddof=1),
                            np.nanmean(s, axis=1), np.nanstd(s, axis=1, ddof=1))
