"""The two-way bootstrap of ratio means: pigeonhole replicates whose
deviations from the estimate are scaled to the two-way cluster-robust
variance and the t reference (see :mod:`clinieval.stats.crossed`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from clinieval.stats.crossed.design import t_over_z
from clinieval.stats.crossed.pigeonhole import pigeonhole_totals
from clinieval.stats.crossed.variance import CrossedVariance, count_ratio_variance


def crossed_ratio_bootstrap(rows, cols, stats, num_map, den_map, B: int,
                            rng: np.random.Generator, level: float = 0.95, contrasts=None
                            ) -> tuple[np.ndarray, CrossedVariance]:
    """Two-way replicates ``(B, G)`` of ratio means of linear statistics.

    Statistic ``g`` is ``sum(stats @ num_map[:, g]) / sum(stats @ den_map[:, g])``
    over the ``K`` cells of ``stats`` ``(K, P)``. Each replicate comes from the
    pigeonhole bootstrap (:func:`pigeonhole_totals`) and its deviation from the
    estimate is scaled by ``sqrt(twoway / pigeonhole)`` (see the module
    docstring), so the replicates have the two-way cluster-robust variance.
    ``contrasts`` ``(G, H)`` adds ``H`` linear combinations of the ratios
    (e.g. differences of means), each scaled to its own two-way variance,
    so the result is ``(B, G + H)``. Scaled replicates are kept inside the
    range the statistic can take (see :func:`ratio_range`). Also returns
    the :class:`CrossedVariance`. NaN where ``den`` sums to 0.
    """
    totals = pigeonhole_totals(rows, cols, stats, B, rng)
    return crossed_ratio_replicates(totals, rows, cols, stats, num_map, den_map, level,
                                    contrasts)


def crossed_ratio_replicates(totals, rows, cols, stats, num_map, den_map, level: float = 0.95,
                             contrasts=None, variance: CrossedVariance | None = None
                             ) -> tuple[np.ndarray, CrossedVariance]:
    """:func:`crossed_ratio_bootstrap` from its pigeonhole ``totals``
    ``(B, P)`` (:func:`pigeonhole_totals` of ``stats``): the same raw
    replicates serve every set of ratio maps over those statistics.
    ``variance``, if given, is :func:`count_ratio_variance` of the same maps
    computed by the caller (e.g. together with other statistics)."""
    stats = sp.csr_matrix(stats, dtype=float)
    num_map, den_map = sp.csr_matrix(num_map), sp.csr_matrix(den_map)
    # totals @ map is computed by scipy as (map.T @ totals.T).T with a
    # contiguous copy of totals.T each time; one copy serves both maps.
    by_statistic = np.ascontiguousarray(np.asarray(totals).T)
    top, bottom = (num_map.T @ by_statistic).T, (den_map.T @ by_statistic).T
    reps = np.divide(top, bottom, out=np.full(top.shape, np.nan), where=bottom > 0)
    if variance is None:
        variance = count_ratio_variance(rows, cols, stats, num_map, den_map, contrasts)
    column_totals = np.asarray(stats.sum(axis=0)).ravel()
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = (num_map.T @ column_totals) / (den_map.T @ column_totals)
    low, high = ratio_range(num_map, den_map)
    if contrasts is not None:
        contrasts = sp.csr_matrix(contrasts, dtype=float)
        reps = np.hstack([reps, np.asarray(contrasts.T @ reps.T).T])
        estimate = np.concatenate([estimate, contrasts.T @ estimate])
        low, high = _contrast_range(contrasts, low, high)
    # Scaling deviations up (by as much as 6.5 with two clusters) can carry a
    # replicate past any value the data could give: a share past 100%.
    return np.clip(_calibrate(reps, estimate, variance, level), low, high), variance


def ratio_range(num_map, den_map) -> tuple[np.ndarray, np.ndarray]:
    """Per ratio ``g``, the least and greatest values it can take over
    non-negative statistics: a ratio of ``sum_p t_p num[p, g]`` over
    ``sum_p t_p den[p, g]`` is a weighted mean of ``num[p, g] / den[p, g]``
    over the statistics with ``den[p, g] > 0`` (a share: 0..1; a mean score:
    the lowest to the highest score). Unbounded when a statistic adds to the
    numerator only, or a denominator weight is negative."""
    num, den = sp.csr_matrix(num_map, dtype=float), sp.coo_matrix(den_map, dtype=float)
    groups = den.shape[1]
    low, high = np.full(groups, np.inf), np.full(groups, -np.inf)
    counted = den.data > 0
    rows, cols = den.row[counted], den.col[counted]
    ratio = np.asarray(num[rows, cols]).ravel() / den.data[counted]
    np.minimum.at(low, cols, ratio)
    np.maximum.at(high, cols, ratio)
    numerator = num.tocoo()
    alone = np.asarray(sp.csr_matrix(den_map, dtype=float)[numerator.row, numerator.col]
                       ).ravel() <= 0
    free = np.zeros(groups, dtype=bool)
    free[numerator.col[alone & (numerator.data != 0)]] = True
    free[den.col[den.data < 0]] = True
    free |= low > high  # no statistic counts for it: nothing to bound by
    return np.where(free, -np.inf, low), np.where(free, np.inf, high)


def _contrast_range(contrasts: sp.csr_matrix, low, high) -> tuple[np.ndarray, np.ndarray]:
    """The ratios' ranges extended by each contrast's (interval arithmetic:
    a positive weight takes the ratio's low end to the contrast's, a
    negative one its high end)."""
    c = contrasts.tocoo()
    with np.errstate(invalid="ignore"):
        at_low = np.where(c.data > 0, c.data * low[c.row], c.data * high[c.row])
        at_high = np.where(c.data > 0, c.data * high[c.row], c.data * low[c.row])
    c_low, c_high = np.zeros(c.shape[1]), np.zeros(c.shape[1])
    np.add.at(c_low, c.col, at_low)
    np.add.at(c_high, c.col, at_high)
    return np.concatenate([low, c_low]), np.concatenate([high, c_high])


def _calibrate(reps, estimate, variance: CrossedVariance, level: float) -> np.ndarray:
    """Scale replicate deviations to the two-way variance and the t reference."""
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(variance.pigeonhole > 0,
                          np.sqrt(variance.twoway / variance.pigeonhole), 1.0)
    return estimate + factor * t_over_z(variance.clusters, level) * (reps - estimate)
