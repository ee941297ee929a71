"""Confidence intervals for binomial proportions."""

from __future__ import annotations

import numpy as np

from clinieval.stats._dist import binom_two_sided_p, norm_ppf


def wilson_ci(k, n, level: float = 0.95):
    """Wilson score interval (Wilson, 1927, JASA 22:209), vectorised.

    With ``p = k / n`` and ``z`` the two-sided normal quantile::

        centre = (p + z**2 / (2 n)) / (1 + z**2 / n)
        half   = z * sqrt(p (1 - p) / n + z**2 / (4 n**2)) / (1 + z**2 / n)

    Returns ``(lower, upper)`` clipped to [0, 1]; ``n = 0`` gives NaN. Matches
    ``statsmodels.stats.proportion.proportion_confint(method="wilson")``.
    """
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if np.any((k < 0) | (k > n)):
        raise ValueError("need 0 <= k <= n")
    z2 = norm_ppf((1.0 - level) / 2.0) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        p = k / n
        denom = 1.0 + z2 / n
        centre = (p + z2 / (2.0 * n)) / denom
        half = np.sqrt(z2 * (p * (1.0 - p) / n + z2 / (4.0 * n**2))) / denom
    # Clipping only removes rounding error: the exact bounds lie in [0, 1].
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def binomial_p_value(k: int, n: int, p: float = 0.5) -> float:
    """Exact two-sided binomial test of ``k`` successes in ``n`` against ``p``
    (``scipy.stats.binomtest``; outcomes no more likely than ``k`` count as
    extreme). NaN when ``n = 0``."""
    if n == 0:
        return float("nan")
    return binom_two_sided_p(int(k), int(n), p)
