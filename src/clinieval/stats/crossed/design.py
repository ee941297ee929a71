"""Intervals that carry a crossed design's variance: the t reference for
few clusters, Kish's design effect of a share (never below 1) and the
Wilson interval on the design-effect-adjusted n.
"""

from __future__ import annotations

import numpy as np

from clinieval.stats._dist import norm_ppf, t_ppf
from clinieval.stats.proportions import wilson_ci


def t_over_z(clusters, level: float = 0.95) -> np.ndarray:
    """Student-t quantile with ``clusters - 1`` degrees of freedom over the
    normal one, at two-sided ``level`` (1 when fewer than 2 clusters)."""
    q = (1 + level) / 2
    df = np.maximum(np.asarray(clusters, dtype=float) - 1, 1)
    return np.where(np.asarray(clusters) > 1, t_ppf(q, df) / norm_ppf(q), 1.0)


def design_effect(variance, share, n, fallback=1.0) -> np.ndarray:
    """Kish's design effect of a share: its variance over ``p (1 - p) / n``.

    Where the share is 0 or 1 (no spread to measure) ``fallback`` is used,
    e.g. the design effect of the mean score of the same ratings. Never
    below 1: clustering is not allowed to make an interval narrower than
    the one for independent ratings.
    """
    share = np.asarray(share, dtype=float)
    binomial = share * (1 - share) / np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        deff = np.where(binomial > 0, np.asarray(variance) / binomial, fallback)
    return np.maximum(np.nan_to_num(deff, nan=1.0), 1.0)


def wilson_design_ci(k, n, deff, level: float = 0.95):
    """Wilson interval on the effective sample size ``n / deff``.

    Keeps Wilson's good behaviour for small proportions (the bound moves
    away from 0 however few failures were seen) while widening it for
    clustering; the effective-n substitution follows Korn & Graubard
    (1998, Survey Methodology 24:193). ``n = 0`` gives NaN.
    """
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    n_eff = n / np.maximum(np.asarray(deff, dtype=float), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        k_eff = np.where(n > 0, k / n, 0.0) * n_eff
    return wilson_ci(k_eff, n_eff, level)
