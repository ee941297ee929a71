"""Large-sample (normal) intervals and tests: Wald intervals from a standard
error, and per-group means with their normal intervals."""

from __future__ import annotations

import numpy as np

from clinieval.stats._dist import norm_ppf, norm_sf


def normal_quantile(level: float) -> float:
    """Two-sided standard normal quantile ``z`` for a ``level`` interval (1.96 at 0.95)."""
    return float(-norm_ppf((1.0 - level) / 2.0))


def normal_ci(est, se, level: float = 0.95):
    """Wald interval ``est -/+ z se`` (vectorised); a NaN ``se`` gives NaN bounds."""
    est, half = np.asarray(est, dtype=float), normal_quantile(level) * np.asarray(se, dtype=float)
    return est - half, est + half


def normal_p_value(z):
    """Two-sided p-value of a standard normal statistic, ``2 P(Z > |z|)``."""
    return 2.0 * norm_sf(np.abs(np.asarray(z, dtype=float)))


def group_mean_ci(groups, values, n_groups: int, level: float = 0.95):
    """Mean of ``values`` per group with a normal interval, all groups at once.

    ``mean -/+ z s / sqrt(k)`` with ``s`` the sample standard deviation
    (ddof = 1) of the group's ``k`` values. Returns ``(k, mean, lower, upper)``,
    each ``(n_groups,)``; the mean is NaN without values and the bounds NaN
    below two values.
    """
    groups = np.asarray(groups, dtype=np.int64)
    values = np.asarray(values, dtype=float)
    k = np.bincount(groups, minlength=n_groups)
    total = np.bincount(groups, weights=values, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(k > 0, total / k, np.nan)
        spread = values - mean[groups]  # centred first: no cancellation in the sum of squares
        var = np.bincount(groups, weights=spread**2, minlength=n_groups) / (k - 1)
        se = np.where(k >= 2, np.sqrt(var / k), np.nan)
    lower, upper = normal_ci(mean, se, level)
    return k, mean, lower, upper
