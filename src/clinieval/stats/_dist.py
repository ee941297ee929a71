"""The few distribution functions and ranks the estimators need, from
``scipy.special`` and numpy.

``scipy.stats`` costs about half a second to import (it loads
``scipy.optimize``, ``scipy.spatial`` and hundreds of distributions), a
large share of a whole ``clinieval audit`` run; these are the same
formulas on the special functions it uses itself. Each is checked against
``scipy.stats`` in ``tests/stats/test_stats_dist.py``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, ndtr, ndtri, stdtr, stdtrit


def norm_ppf(q):
    """Standard normal quantile (``scipy.stats.norm.ppf``)."""
    return ndtri(q)


def norm_sf(x):
    """Standard normal upper tail ``P(Z > x)`` (``scipy.stats.norm.sf``)."""
    return ndtr(-np.asarray(x, dtype=float))


def t_ppf(q, df):
    """Student-t quantile (``scipy.stats.t.ppf``)."""
    return stdtrit(df, q)


def t_two_sided_p(t, df):
    """Two-sided p-value of a t statistic, ``2 P(T_df > |t|)``."""
    return 2.0 * stdtr(df, -np.abs(t))


def rankdata(values, method: str = "average", axis: int = -1) -> np.ndarray:
    """Ranks along ``axis`` (``scipy.stats.rankdata`` with ``method``
    ``average`` or ``min``); a slice holding a NaN is all NaN. One stable
    sort per slice; tied values share the first (``min``) or the mean
    (``average``) of their positions."""
    if method not in ("average", "min"):
        raise ValueError(f"method must be 'average' or 'min', got {method!r}")
    x = np.moveaxis(np.asarray(values, dtype=float), axis, -1)
    flat = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    order = np.argsort(flat, axis=1, kind="stable")
    ordered = np.take_along_axis(flat, order, axis=1)
    position = np.broadcast_to(np.arange(flat.shape[1]), flat.shape)
    starts = np.ones(flat.shape, dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    ends = np.ones(flat.shape, dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
    last = np.minimum.accumulate(np.where(ends, position, flat.shape[1])[:, ::-1], axis=1)[:, ::-1]
    by_order = first + 1.0 if method == "min" else (first + last) / 2.0 + 1.0
    ranks = np.empty(flat.shape)
    np.put_along_axis(ranks, order, by_order, axis=1)
    ranks[np.isnan(flat).any(axis=1)] = np.nan
    return np.moveaxis(ranks.reshape(x.shape), -1, axis)


def binom_two_sided_p(k: int, n: int, p: float) -> float:
    """Exact two-sided binomial test p-value: the probability of every
    outcome no more likely than ``k`` (with scipy's relative tolerance of
    1e-7 for ties in likelihood), as ``scipy.stats.binomtest``."""
    i = np.arange(n + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pmf = (gammaln(n + 1) - gammaln(i + 1) - gammaln(n - i + 1)
                   + np.where(i > 0, i * np.log(p), 0.0)
                   + np.where(i < n, (n - i) * np.log1p(-p), 0.0))
    pmf = np.exp(log_pmf)
    if k == p * n:
        return 1.0
    return float(min(1.0, pmf[pmf <= pmf[k] * (1 + 1e-7)].sum()))
