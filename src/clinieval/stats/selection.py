"""The gap between the preference leader's rate and the lowest rate, with
an interval whose replicates re-make both choices (the leader and the
safest model), so the spread of the selections enters the interval.
"""

from __future__ import annotations

import numpy as np

from clinieval.stats.bootstrap import percentile_ci


def selected_gap(leader_scores, rates, eligible=None) -> np.ndarray:
    """``rates[leader] - min(rates[eligible])`` per row, where the leader is
    the row's highest ``leader_scores``: both choices made inside the row.

    ``leader_scores`` and ``rates`` are ``(..., M)``; ``eligible`` an
    optional ``(M,)`` mask of models that may be named safest. A row whose
    scores or eligible rates are all NaN (nothing to pick) gives NaN.
    """
    leader_scores, rates = np.asarray(leader_scores, float), np.asarray(rates, float)
    scored = np.isfinite(leader_scores).any(axis=-1)
    leader = np.argmax(np.where(np.isnan(leader_scores), -np.inf, leader_scores), axis=-1)
    at_leader = np.take_along_axis(rates, leader[..., None], axis=-1)[..., 0]
    lowest = np.fmin.reduce(_pool(rates, eligible), axis=-1)  # NaN only if all are NaN
    return np.where(scored, at_leader - lowest, np.nan)


def selection_adjusted_gap_ci(leader_scores, leader_reps, rates, rate_reps, eligible=None,
                              level: float = 0.95) -> tuple[float, float, float]:
    """Gap between the preference leader's rate and the lowest rate, with a
    percentile interval whose replicates re-make both choices.

    With the leader and the safest model held at the observed ones, the
    interval ignores that either choice might have gone another way; here
    each replicate picks its own leader (highest ``leader_reps`` row) and its
    own safest eligible model (lowest ``rate_reps`` row), so the spread of
    the selections enters the interval. In simulation
    (``benchmarks/coverage.py``) this covers at or above the nominal level,
    also when the two safest models are tied. Returns ``(gap, lower,
    upper)`` with the observed gap.
    """
    gap = float(selected_gap(leader_scores, rates, eligible))
    reps = selected_gap(leader_reps, rate_reps, eligible)
    reps = reps[np.isfinite(reps)]
    if reps.size == 0:
        return gap, np.nan, np.nan
    lo, hi = percentile_ci(reps, level)
    return gap, float(lo), float(hi)


def _pool(rates, eligible):
    return rates if eligible is None else np.where(np.asarray(eligible), rates, np.nan)
