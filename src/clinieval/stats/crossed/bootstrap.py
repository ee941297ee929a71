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
    so the result is ``(B, G + H)``. Also returns the
    :class:`CrossedVariance`. NaN where ``den`` sums to 0.
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
    if contrasts is not None:
        contrasts = sp.csr_matrix(contrasts, dtype=float)
        reps = np.hstack([reps, np.asarray(contrasts.T @ reps.T).T])
        estimate = np.concatenate([estimate, contrasts.T @ estimate])
    return _calibrate(reps, estimate, variance, level), variance


def _calibrate(reps, estimate, variance: CrossedVariance, level: float) -> np.ndarray:
    """Scale replicate deviations to the two-way variance and the t reference."""
    with np.errstate(invalid="ignore", divide="ignore"):
        factor = np.where(variance.pigeonhole > 0,
                          np.sqrt(variance.twoway / variance.pigeonhole), 1.0)
    return estimate + factor * t_over_z(variance.clusters, level) * (reps - estimate)
