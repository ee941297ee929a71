"""Pearson and Spearman correlation, and Spearman's rho over replicates."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from clinieval.stats._dist import rankdata, t_two_sided_p


class Correlation(NamedTuple):
    """A correlation coefficient, its two-sided p-value and the pairs used."""

    r: float
    p: float
    n: int


def pearson(x, y) -> Correlation:
    """Pearson's r with the exact t-based p-value (as ``scipy.stats.pearsonr``).

    Pairs with a non-finite value are left out; ``n`` counts the pairs used.
    Fewer than 3 pairs or a constant input give NaN.
    """
    x, y = _finite_pairs(x, y)
    if not _estimable(x, y):
        return Correlation(float("nan"), float("nan"), x.size)
    r = _pearson_r(x, y)
    return Correlation(r, _t_p(r, x.size), x.size)


def spearman(x, y) -> Correlation:
    """Spearman's rho (Spearman, 1904) with ``scipy.stats.spearmanr``'s t-based p-value.

    Average ranks for ties; same pair handling as :func:`pearson`.
    """
    x, y = _finite_pairs(x, y)
    if not _estimable(x, y):
        return Correlation(float("nan"), float("nan"), x.size)
    r = _pearson_r(rankdata(x), rankdata(y))
    return Correlation(r, _t_p(r, x.size), x.size)


def bootstrap_rank_correlation(x_reps, y_reps) -> np.ndarray:
    """Spearman's rho of each replicate row of two paired ``(B, m)`` arrays.

    Row ``b`` correlates ``x_reps[b]`` with ``y_reps[b]`` across the ``m``
    units (average ranks for ties), all rows at once. A row where either side
    is constant gives NaN. Take a percentile interval of the result for a
    bootstrap CI of rho.
    """
    rx = _centred(rankdata(np.asarray(x_reps, dtype=float), axis=1))
    ry = _centred(rankdata(np.asarray(y_reps, dtype=float), axis=1))
    denom = np.sqrt(np.sum(rx**2, axis=1) * np.sum(ry**2, axis=1))
    top = np.sum(rx * ry, axis=1)
    return np.divide(top, denom, out=np.full_like(top, np.nan), where=denom > 0)


def _pearson_r(x, y) -> float:
    xm, ym = x - x.mean(), y - y.mean()
    xm, ym = xm / np.linalg.norm(xm), ym / np.linalg.norm(ym)  # scaled first, as scipy does
    return float(np.clip(xm @ ym, -1.0, 1.0))


def _t_p(r: float, n: int) -> float:
    """Two-sided p-value of r with n - 2 degrees of freedom: exact for
    Pearson under normality, and scipy's p-value for Spearman."""
    if abs(r) == 1.0:
        return 0.0
    return float(t_two_sided_p(r * np.sqrt((n - 2) / ((1.0 + r) * (1.0 - r))), n - 2))


def _finite_pairs(x, y):
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x and y differ in length: {x.size} and {y.size}")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _estimable(x, y):
    return x.size >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0


def _centred(ranks):
    return ranks - ranks.mean(axis=1, keepdims=True)
