"""Anytime-valid confidence sequences for a bounded mean, and gate verdicts.

A confidence sequence ``(L_t, U_t)`` covers the mean at *every* time at once,
``P(for all t: L_t <= mu <= U_t) >= 1 - alpha``, so a verdict read off it stays
valid however often the live view is looked at and whenever the study stops
(Howard, Ramdas, McAuliffe & Sekhon, Ann. Statist. 49:1055, 2021). A
fixed-sample interval looked at after every answer does not: see
``benchmarks/sequences_error.py`` for the wrong-stop rate of naive peeking.

Methods (Waudby-Smith & Ramdas, "Estimating means of bounded random variables
by betting", JRSS-B 86:1, 2024; "WSR" below):

* :func:`betting_cs` -- the hedged-capital betting CS (WSR, "hedged
  capital process" with predictable plug-in bets). For each candidate mean ``m`` on a grid,
  ``K+_t(m) = prod_i (1 + l+_i(m) (x_i - m))`` and
  ``K-_t(m) = prod_i (1 - l-_i(m) (x_i - m))`` are non-negative martingales
  when the mean is ``m``; ``m`` is excluded at ``t`` when
  ``max(theta K+_t, (1 - theta) K-_t) > 1 / alpha`` (Ville's inequality). Bets
  are the predictable plug-in ones (WSR's "PrPl" bets):
  ``l_t = sqrt(2 log(1 / (alpha theta)) / (t log(1 + t) s2_{t-1}))``,
  truncated at ``c / m`` (``c / (1 - m)`` for ``K-``) with ``c = 1/2``.
* :func:`empirical_bernstein_cs` -- the predictable plug-in empirical-Bernstein
  CS (WSR's PrPl-EB), closed form, wider than the betting CS.
* :func:`ipw_betting_cs` -- the betting CS for a stream of inverse-probability
  weighted outcomes (answers picked with known probabilities): the
  one-sided capital needs only a lower bound on the data (Waudby-Smith, Wu,
  Ramdas, Karampatziakis & Mineiro, "Anytime-valid off-policy inference for
  contextual bandits", ACM/IMS J. Data Sci., 2024).

Estimand and sampling unit
--------------------------
A gate's cell (a model, or a model x specialty) has a *true rate*: the
expected per-answer value ``x`` (the answer's fail indicator under the study's
response rule, or its mean rating rescaled to [0, 1]) over the population of
the cell's answers *and* of the raters who could rate them. The stream is one
``x`` per answer, in the order the answers were completed. The answer, not
the rating, is the unit because ratings of one answer share its difficulty:
counting each rating as an observation would count the answer's effect several
times and make the sequence overconfident. Each answer's raters are drawn at
random, independently of the answer and of the past, so rater leniency is
part of the per-answer noise: given the study's panel of raters the ``x_t``
are i.i.d., with mean the *panel's* rate, and :func:`betting_cs` is exactly
valid for that. The panel's rate differs from the population's by the
panel's sampling error, which no number of answers removes; for the
population rate, widen the sequence by :func:`rater_margin`
(``benchmarks/sequences_error.py``: with 60 clinicians and a cell at the gate,
12-15 % of plain-sequence verdicts are wrong against the population rate but
under 1 % against the panel's; with the margin, about 1 %). Two things break
the i.i.d. stream and must be kept out of it: an answer's value must not
decide *when* it enters (an answer escalated to extra raters because one of
them flagged it would enter late, and early answers would look safer than
they are -- enter it at its first ``k`` ratings), and a targeted choice of
answers needs :func:`ipw_betting_cs`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import stdtrit

PASS, FAIL, OPEN = "pass", "fail", "open"
VERDICTS = (PASS, FAIL, OPEN)
AT_MOST, AT_LEAST = "at_most", "at_least"
DIRECTIONS = (AT_MOST, AT_LEAST)
"""``at_most``: the gate holds when the rate is <= the threshold (Fail %);
``at_least``: when it is >= the threshold (a mean score)."""
BREAKS = 1000
TRUNCATION = 0.5
_CELL_BUDGET = 2**22  # grid x stream entries per chunk (32 MB of float64)


class ConfidenceSequence(NamedTuple):
    """Lower and upper bounds after each observation, shape ``(..., T)``."""

    lower: np.ndarray
    upper: np.ndarray


class _Process(NamedTuple):
    """One capital process: data, bets, sign (+1 for K+, -1 for K-), the
    log of the capital at which it excludes a candidate mean, and a shift
    of the candidates (per observation) the capital is computed at: the
    process for candidate ``m`` is :func:`log_capital` at ``m + offset``
    (0 for a plain stream; the prediction-powered sequences move each
    step's truncation with it, :mod:`clinieval.stats.pp_sequences`)."""

    x: np.ndarray
    bets: np.ndarray
    sign: int
    log_threshold: float
    offset: np.ndarray | float = 0.0


# --- bets --------------------------------------------------------------------


def plugin_bets(x, alpha: float, *, prior_mean: float = 0.5,
                prior_variance: float = 0.25) -> np.ndarray:
    """Predictable plug-in bets of WSR (PrPl), along the last axis.

    ``l_t = sqrt(2 log(1 / alpha) / (t log(1 + t) s2_{t-1}))`` with the
    regularised running mean and variance
    ``mu_t = (prior_mean + sum_{i<=t} x_i) / (t + 1)`` and
    ``s2_t = (prior_variance + sum_{i<=t} (x_i - mu_i)**2) / (t + 1)``
    (``s2_0 = prior_variance``): ``l_t`` uses only ``x_1 .. x_{t-1}``.
    ``alpha`` is the level spent on the one side the bets serve.
    """
    x = np.asarray(x, dtype=float)
    t = np.arange(1, x.shape[-1] + 1)
    mean = (prior_mean + np.cumsum(x, axis=-1)) / (t + 1)
    s2 = (prior_variance + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    s2_before = np.concatenate([np.full(x.shape[:-1] + (1,), prior_variance), s2[..., :-1]],
                               axis=-1)
    return np.sqrt(2.0 * np.log(1.0 / alpha) / (t * np.log1p(t) * s2_before))


# --- capital processes on a grid ----------------------------------------------


def grid_means(breaks: int = BREAKS) -> np.ndarray:
    """The candidate means ``0, 1/breaks, ..., 1``."""
    return np.arange(breaks + 1) / breaks


def log_capital(x, bets, m, sign: int, truncation: float = TRUNCATION) -> np.ndarray:
    """``log K_t(m)`` for every ``t`` (last axis) and candidate mean ``m``.

    ``sign = +1``: ``K+_t(m) = prod (1 + l_i (x_i - m))`` with
    ``l_i = min(bets_i, truncation / m)``; ``sign = -1``:
    ``K-_t(m) = prod (1 - l_i (x_i - m))`` with ``l_i = min(bets_i,
    truncation / (1 - m))``. ``m`` broadcasts against ``x`` (a column of
    candidates gives one row per candidate). Each factor is at least
    ``1 - truncation`` for data in [0, 1], so with ``truncation < 1`` the logs
    stay finite.
    """
    m = np.asarray(m, dtype=float)
    with np.errstate(divide="ignore"):
        cap = truncation / (m if sign > 0 else 1.0 - m)
        step = sign * np.minimum(bets, cap) * (x - m)
        return np.cumsum(np.log1p(step), axis=-1)


def _grid_bounds(processes, breaks: int, running_intersection: bool) -> ConfidenceSequence:
    # The candidates not excluded by any process at t; the bounds are the
    # outermost of them padded by one grid step (the CS's edge lies between
    # a kept candidate and the excluded one next to it). A time at which
    # every candidate is excluded gives [0, 1].
    grid = grid_means(breaks)
    shape = processes[0].x.shape
    first = np.full(shape, grid.size, dtype=np.int64)
    last = np.full(shape, -1, dtype=np.int64)
    chunk = max(1, _CELL_BUDGET // max(1, processes[0].x.size))
    for start in range(0, grid.size, chunk):
        m = grid[start : start + chunk].reshape((-1,) + (1,) * len(shape))
        kept = np.ones((m.shape[0],) + shape, dtype=bool)
        for p in processes:
            kept &= log_capital(p.x, p.bets, m + p.offset, p.sign) <= p.log_threshold
        any_kept = kept.any(axis=0)
        first = np.where((first == grid.size) & any_kept, start + kept.argmax(axis=0), first)
        last = np.where(any_kept, start + m.shape[0] - 1 - kept[::-1].argmax(axis=0), last)
    empty = last < 0
    lower = np.where(empty, 0.0, np.maximum(0.0, grid[np.minimum(first, breaks)] - 1 / breaks))
    upper = np.where(empty, 1.0, np.minimum(1.0, grid[np.maximum(last, 0)] + 1 / breaks))
    return _intersect(lower, upper) if running_intersection else ConfidenceSequence(lower,
                                                                                     upper)


def _intersect(lower, upper) -> ConfidenceSequence:
    return ConfidenceSequence(np.maximum.accumulate(lower, axis=-1),
                              np.minimum.accumulate(upper, axis=-1))


def _check_stream(x, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError("need a non-empty stream of observations (last axis)")
    if not np.all((x >= low) & (x <= high)):
        raise ValueError(f"observations must lie in [{low}, {high}]")
    return x


def _check_levels(alpha, theta, breaks):
    if not 0 < alpha < 1 or not 0 < theta < 1:
        raise ValueError("need 0 < alpha < 1 and 0 < theta < 1")
    if int(breaks) != breaks or breaks < 2:
        raise ValueError("breaks must be an integer >= 2")


# --- the confidence sequences -------------------------------------------------


def betting_cs(
    x,
    alpha: float = 0.05,
    *,
    theta: float = 0.5,
    breaks: int = BREAKS,
    running_intersection: bool = True,
    prior_mean: float = 0.5,
    prior_variance: float = 0.25,
) -> ConfidenceSequence:
    """Hedged-capital betting CS for the mean of a [0, 1] stream (WSR).

    ``x`` has the observations along its last axis (several streams may be
    stacked in leading axes). A grid mean ``m = k / breaks`` is kept at
    ``t`` while ``theta K+_t(m) <= 1/alpha`` and ``(1 - theta) K-_t(m) <=
    1/alpha`` (see :func:`log_capital`; bets from :func:`plugin_bets` at
    ``alpha theta`` and ``alpha (1 - theta)``, truncated at ``1/2``); the
    bounds are the outermost kept means widened by ``1 / breaks``, and with
    ``running_intersection`` the running max of the lower and min of the
    upper bounds, so they move monotonically (a CS intersected with its past
    is still a CS: WSR, and Howard et al. 2021). The same
    parameters as ``confseq.betting.hedged_cs`` give the same bounds.
    """
    x = _check_stream(x)
    _check_levels(alpha, theta, breaks)
    bets = _hedged_processes(x, alpha, theta, prior_mean, prior_variance)
    return _grid_bounds(bets, int(breaks), running_intersection)


def _hedged_processes(x, alpha, theta, prior_mean, prior_variance):
    prior = {"prior_mean": prior_mean, "prior_variance": prior_variance}
    return (
        _Process(x, plugin_bets(x, alpha * theta, **prior), 1, np.log(1 / (alpha * theta))),
        _Process(x, plugin_bets(x, alpha * (1 - theta), **prior), -1,
                 np.log(1 / (alpha * (1 - theta)))),
    )


def empirical_bernstein_cs(
    x,
    alpha: float = 0.05,
    *,
    truncation: float = TRUNCATION,
    running_intersection: bool = True,
) -> ConfidenceSequence:
    """Predictable plug-in empirical-Bernstein CS (WSR's PrPl-EB), closed form.

    With bets ``l_t = min(plugin, truncation)`` (:func:`plugin_bets` at
    ``alpha / 2``), ``mu_hat_{t-1} = (1/2 + sum_{i<t} x_i) / t`` and
    ``psi(l) = -log(1 - l) - l``::

        centre_t = sum l_i x_i / sum l_i
        margin_t = (log(2/alpha) + sum (x_i - mu_hat_{i-1})**2 psi(l_i)) / sum l_i

    and ``centre -/+ margin`` clipped to [0, 1]. Wider than
    :func:`betting_cs` (WSR's experiments; a test here checks it);
    kept as a closed-form check and for very long streams.
    """
    x = _check_stream(x)
    _check_levels(alpha, 0.5, BREAKS)
    lam = np.minimum(plugin_bets(x, alpha / 2), truncation)
    t = np.arange(1, x.shape[-1] + 1)
    before = (0.5 + np.cumsum(x, axis=-1) - x) / t
    weight = np.cumsum(lam, axis=-1)
    centre = np.cumsum(lam * x, axis=-1) / weight
    spread = np.cumsum((x - before) ** 2 * (-np.log1p(-lam) - lam), axis=-1)
    margin = (np.log(2 / alpha) + spread) / weight
    lower, upper = np.clip(centre - margin, 0.0, 1.0), np.clip(centre + margin, 0.0, 1.0)
    return _intersect(lower, upper) if running_intersection else ConfidenceSequence(lower,
                                                                                     upper)


def ipw_betting_cs(
    x,
    weights,
    alpha: float = 0.05,
    *,
    breaks: int = BREAKS,
    running_intersection: bool = True,
) -> ConfidenceSequence:
    """Betting CS for a cell's mean when answers are picked with known
    probabilities (inverse-probability weighting).

    ``x_t`` in [0, 1] is the value of the answer rated at step ``t`` and
    ``weights_t = 1 / (N p_t)``, with ``p_t`` the probability that answer had
    of being picked among the cell's ``N`` answers, fixed *before* the pick
    (predictable; recorded on the lease). Then ``E[w_t x_t | past]`` is the
    mean over the cell's answers whatever the (positive) probabilities, but
    ``w_t x_t`` is not bounded above. A lower capital process
    ``prod (1 + l_i (w_i x_i - m))`` with ``0 <= l_i <= 1/(2m)`` needs only
    ``w x >= 0`` to stay a non-negative martingale (Waudby-Smith et al.
    2024, off-policy CSs); the upper bound is one minus the lower
    bound of ``1 - mean`` from ``w_t (1 - x_t)``. Each side spends
    ``alpha / 2``. Valid when answers are picked *with replacement* at every
    step (a re-picked answer gets a fresh rater) and every probability is
    positive -- the monitoring share guarantees it. Weights 1 give a CS
    like :func:`betting_cs`, only with separate per-side bets.
    """
    x = _check_stream(x)
    w = np.asarray(weights, dtype=float)
    if w.shape != x.shape or not np.all(np.isfinite(w) & (w > 0)):
        raise ValueError("need one positive finite weight per observation")
    _check_levels(alpha, 0.5, breaks)
    gain, loss = w * x, w * (1.0 - x)
    level = np.log(2 / alpha)
    processes = (
        _Process(gain, plugin_bets(gain, alpha / 2), 1, level),
        # 1 - l (y - m) with y = 1 - w (1 - x) is 1 + l (w (1 - x) - (1 - m)).
        _Process(1.0 - loss, plugin_bets(loss, alpha / 2), -1, level),
    )
    return _grid_bounds(processes, int(breaks), running_intersection)


# --- verdicts ----------------------------------------------------------------


def decide(lower, upper, threshold, direction: str = AT_MOST):
    """``pass`` / ``fail`` / ``open`` from confidence bounds, vectorised.

    ``at_most`` (e.g. Fail % <= 10 %): pass when ``upper <= threshold``,
    fail when ``lower > threshold``. ``at_least`` (e.g. mean score >=
    threshold): pass when ``lower >= threshold``, fail when ``upper <
    threshold``. Both at once can only happen when a running intersection
    has become empty (the stream does not look like one constant rate:
    drift, or the ``alpha`` chance of a miss); that stays ``open``. Returns a
    ``str`` for scalar bounds, else an array of them.
    """
    lower, upper = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    if direction == AT_MOST:
        passed, failed = upper <= threshold, lower > threshold
    elif direction == AT_LEAST:
        passed, failed = lower >= threshold, upper < threshold
    else:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    verdict = np.where(passed & ~failed, PASS, np.where(failed & ~passed, FAIL, OPEN))
    return str(verdict) if verdict.ndim == 0 else verdict


def settled_verdict(
    x,
    threshold: float,
    direction: str = AT_MOST,
    alpha: float = 0.05,
    *,
    theta: float = 0.5,
    breaks: int = BREAKS,
) -> str:
    """The final verdict of :func:`betting_cs` (running intersection) on a 1-D
    stream, without the whole grid: ``decide(lower[-1], upper[-1], ...)``.

    Both capitals are monotone in ``m`` (``K+`` falls, ``K-`` rises: each
    factor does, bets and truncation included), so the kept set at ``t`` is
    an interval and "the upper bound is at most the threshold" is "``K-``
    excludes the first grid mean whose padded bound passes it, and the set
    is not empty". That costs two capital paths and a bisection at the
    times that qualify instead of ``breaks + 1`` paths; the certificates
    re-run it thousands of times. Tested equal to :func:`decide` on
    :func:`betting_cs`.
    """
    passed, failed = crossing_times(x, threshold, direction, alpha, theta=theta, breaks=breaks)
    passed, failed = passed is not None, failed is not None
    return PASS if passed and not failed else FAIL if failed and not passed else OPEN


def first_settled(
    x,
    threshold: float,
    direction: str = AT_MOST,
    alpha: float = 0.05,
    *,
    theta: float = 0.5,
    breaks: int = BREAKS,
) -> tuple[str, int | None]:
    """The verdict of a study that stops at the first settled look, and the
    number of observations by then (``(open, None)`` if it never settles).

    Looking after every observation of :func:`betting_cs` and stopping as
    soon as :func:`decide` says ``pass`` or ``fail``: the verdict is wrong
    with probability at most ``alpha`` (for a threshold not equal to the
    true mean), the anytime guarantee. Same fast path as
    :func:`settled_verdict`.
    """
    passed, failed = crossing_times(x, threshold, direction, alpha, theta=theta, breaks=breaks)
    if passed is None and failed is None:
        return OPEN, None
    if failed is None or (passed is not None and passed < failed):
        return PASS, passed + 1
    if passed is None or failed < passed:
        return FAIL, failed + 1
    return OPEN, None  # both at the same look: an empty set's contradiction


def crossing_times(
    x,
    threshold: float,
    direction: str = AT_MOST,
    alpha: float = 0.05,
    *,
    theta: float = 0.5,
    breaks: int = BREAKS,
) -> tuple[int | None, int | None]:
    """The first index (0-based) at which :func:`betting_cs`'s bounds pass
    the gate and the first at which they fail it (``None``: never), as
    :func:`decide` reads them. With ``threshold`` the true mean, a fail at
    ``at_least`` or at ``at_most`` is a miss of the sequence."""
    processes, grid = _setup(x, alpha, theta, breaks)
    times = {}
    for verdict in (PASS, FAIL):
        process, mean = _deciding_mean(processes, grid, threshold, direction, verdict)
        if mean is None:
            times[verdict] = None
            continue
        if isinstance(mean, bool):
            gone = np.ones(process.x.shape, dtype=bool)
        else:
            gone = log_capital(process.x, process.bets, mean, process.sign) \
                > process.log_threshold
        hits = (int(t) for t in np.flatnonzero(gone) if _kept_set_nonempty(processes, grid, t))
        times[verdict] = next(hits, None)
    return times[PASS], times[FAIL]


def gate_evidence(
    x,
    threshold: float,
    direction: str,
    verdict: str,
    alpha: float = 0.05,
    *,
    theta: float = 0.5,
    breaks: int = BREAKS,
) -> float:
    """How far past its bar the capital that settles ``verdict`` got:
    ``max_t log K_t(m*) - log bar``, with ``m*`` the grid mean beside the
    threshold that the verdict has to exclude (``K-`` for an upper bound,
    ``K+`` for a lower one). Positive at a look with a non-empty kept set is
    what settles the verdict; the robustness certificates' greedy search
    drives it down. ``inf`` when the bound passes whatever the data,
    ``-inf`` when it never can."""
    processes, grid = _setup(x, alpha, theta, breaks)
    process, mean = _deciding_mean(processes, grid, threshold, direction, verdict)
    if mean is None:
        return -np.inf
    if isinstance(mean, bool):
        return np.inf
    return float(np.max(log_capital(process.x, process.bets, mean, process.sign))
                 - process.log_threshold)


def _setup(x, alpha, theta, breaks):
    x = _check_stream(x)
    if x.ndim != 1:
        raise ValueError("one stream at a time")
    _check_levels(alpha, theta, breaks)
    return _hedged_processes(x, alpha, theta, 0.5, 0.25), grid_means(int(breaks))


def _deciding_mean(processes, grid, threshold, direction, verdict):
    # Which side's bound decides the verdict, and the grid mean its capital
    # must exclude: the padded upper bound of grid index j passes "<= thr"
    # for j <= J (a prefix), so the bound is there once K- excludes J + 1
    # and the kept set is not empty; lower bounds mirror it with K+.
    # Returns (process, mean), (process, True) when nothing needs excluding,
    # or (None, None) when no bound can ever get there.
    breaks = grid.size - 1
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    if verdict not in (PASS, FAIL):
        raise ValueError(f"verdict must be {PASS!r} or {FAIL!r}, got {verdict!r}")
    upper_side = (verdict == PASS) == (direction == AT_MOST)
    if upper_side:
        bound = np.minimum(1.0, grid + 1 / breaks)
        ok = bound <= threshold if direction == AT_MOST else bound < threshold
        beyond = int(np.count_nonzero(ok))  # J + 1
        outside = beyond == 0
        process = processes[1]
    else:
        bound = np.maximum(0.0, grid - 1 / breaks)
        ok = bound > threshold if direction == AT_MOST else bound >= threshold
        beyond = grid.size - int(np.count_nonzero(ok)) - 1
        outside = beyond == grid.size - 1
        process = processes[0]
    if outside:
        return None, None
    if not 0 <= beyond < grid.size:
        return process, True
    return process, grid[beyond]


def _kept_set_nonempty(processes, grid, t: int) -> bool:
    # K+ falls with m: bisect for the first grid mean it keeps at t, the one
    # K- (rising with m) is likeliest to keep too.
    # The grid mean nearest the sample mean is almost always kept: try it first.
    plus, minus = processes

    def kept(process, j):
        value = log_capital(process.x[: t + 1], process.bets[: t + 1], grid[j], process.sign)
        return bool(value[-1] <= process.log_threshold)

    def kept_by_plus(j):
        return kept(plus, j)

    near = int(np.clip(np.rint(np.mean(plus.x[: t + 1]) * (grid.size - 1)), 0, grid.size - 1))
    if kept(plus, near) and kept(minus, near):
        return True
    lo, hi = 0, grid.size  # answer in [lo, hi]; hi = none kept
    while lo < hi:
        mid = (lo + hi) // 2
        if kept_by_plus(mid):
            hi = mid
        else:
            lo = mid + 1
    if lo == grid.size:
        return False
    return kept(minus, lo)


# --- the rater panel ----------------------------------------------------------


def rater_margin(answer, rater, x, alpha: float = 0.025) -> np.ndarray:
    """Half-width, after each answer, that covers the gap between the rate
    of the study's rater panel and the rate over the rater population.

    Given the panel, a stream's answers are i.i.d. draws with mean the
    *panel's* rate, so :func:`betting_cs` covers that; the population rate
    differs from it by the panel's sampling error, which no number of
    answers removes (the simulation in ``benchmarks/sequences_error.py``
    shows verdicts near the gate going wrong well above ``alpha`` without
    it, with a panel of 60 clinicians). Writing ``d_r`` for how much rater
    ``r`` shifts the value of an answer they rate, the gap is about
    ``sum_r (n_r / T) d_r``, with ``n_r`` of the ``T`` answers rated by
    ``r``; the ``d_r`` are i.i.d. across the rater population with variance
    ``tau2``, estimated by the one-way random-effects moment estimator on
    each rater's mean answer value ``m_r`` (the ANOVA estimator of the
    unbalanced one-way classification: Searle, Casella & McCulloch,
    *Variance Components*, 1992, ch. 3)::

        SSB  = sum_r n_r (m_r - m)**2,  N = sum_r n_r
        tau2 = max(0, (SSB - (R - 1) s2) / (N - sum_r n_r**2 / N))

    with ``s2`` the variance of the answer values; ``m_r - m`` is deflated
    by ``1 - (k - 1) / (R - 1)`` for ``k`` ratings per answer, because the
    other raters of ``r``'s answers come from the same panel. The margin is
    ``t_{R-1, 1 - alpha/2} sqrt(tau2 sum_r n_r**2) / T``: a t approximation
    for a fixed panel (not anytime-valid in the raters, who do not change as
    one looks). Use the sequence at ``alpha_total - alpha`` and widen both
    bounds by this margin (``decide(lower - margin, upper + margin, ...)``);
    by the union bound the miss rate is about ``alpha_total``. With fewer
    than two raters so far the margin is 1 (no verdict).

    ``answer`` gives each rating's answer by its place in the stream ``x``
    (one value per answer), ``rater`` its rater.
    """
    x = _check_stream(x)
    answer = np.asarray(answer, dtype=np.int64)
    _, codes = np.unique(np.asarray(rater), return_inverse=True)
    codes = codes.ravel()
    if x.ndim != 1 or answer.shape != codes.shape or answer.max() >= x.size:
        raise ValueError("need one answer index into x and one rater per rating")
    counts = np.zeros((x.size, int(codes.max()) + 1))
    np.add.at(counts, (answer, codes), 1.0)
    n = np.cumsum(counts, axis=0)
    total = np.cumsum(counts * x[:, None], axis=0)
    return _margin_path(n, total, x, alpha)


def _margin_path(n, total, x, alpha):
    t = np.arange(1, x.size + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        big_n = n.sum(axis=1)
        centre = total.sum(axis=1) / big_n
        ssb = np.sum(np.where(n > 0, total**2 / n, 0.0), axis=1) - big_n * centre**2
        raters = np.count_nonzero(n, axis=1)
        mean = np.cumsum(x) / t
        s2 = (np.cumsum(x**2) - t * mean**2) / (t - 1)
        sum_sq = np.sum(n**2, axis=1)
        tau2 = np.maximum(0.0, (ssb - (raters - 1) * s2) / (big_n - sum_sq / big_n))
        # A rater's answers' other raters come from the same panel, which
        # pulls m_r towards the others by (k - 1) / (R - 1).
        shrink = 1.0 - (big_n / t - 1.0) / (raters - 1)
        quantile = stdtrit(np.maximum(raters - 1, 1), 1 - alpha / 2)
        margin = quantile * np.sqrt(tau2 * sum_sq) / (t * shrink)
    return np.where((raters >= 2) & (shrink > 0) & np.isfinite(margin), margin, 1.0)


# --- planning ----------------------------------------------------------------


def expected_to_settle(
    estimate,
    n,
    threshold,
    alpha: float = 0.05,
    *,
    margin=0.0,
    max_n: int = 200_000,
) -> np.ndarray:
    """Rough number of further answers until a cell's sequence excludes its
    threshold, for the live view's "about N more ratings". Vectorised.

    Approximation (documented, not a guarantee): the rate stays at
    ``estimate`` and the sequence's half-width at ``t`` is the
    PrPl-EB margin of :func:`empirical_bernstein_cs` with every random quantity
    replaced by its expectation under that rate (``s2 = v_i = p (1 - p)``)::

        margin(t) = (log(2/alpha) + p (1 - p) sum psi(l_i)) / sum l_i

    The answer is ``max(0, t* - n)`` for the first ``t*`` with
    ``margin(t*) <= |estimate - threshold|``; ``inf`` when the estimate sits
    on the threshold or ``t*`` is beyond ``max_n``. ``margin`` (e.g. the
    current :func:`rater_margin`) is taken off the distance to the
    threshold, held fixed. The betting sequence is
    a little narrower, so this leans long; the simulation test checks it
    against the betting CS's median stopping time within a factor of two.
    """
    estimate = np.asarray(estimate, dtype=float)
    p, n, gap = np.broadcast_arrays(estimate, np.asarray(n, dtype=float),
                                    np.abs(estimate - threshold) - np.asarray(margin))
    out = np.empty(p.shape)
    for idx in np.ndindex(p.shape):
        out[idx] = _answers_to_margin(float(p[idx]), float(gap[idx]), alpha, max_n)
    out = np.maximum(0.0, out - n)
    return out if out.ndim else float(out)


def _answers_to_margin(p, gap, alpha, max_n):
    if gap <= 0:
        return np.inf
    t = np.arange(1, max_n + 1, dtype=float)
    var = p * (1.0 - p)
    with np.errstate(divide="ignore"):
        lam = np.minimum(np.sqrt(2 * np.log(2 / alpha) / (t * np.log1p(t) * var)), TRUNCATION)
    margin = (np.log(2 / alpha) + var * np.cumsum(-np.log1p(-lam) - lam)) / np.cumsum(lam)
    hit = np.flatnonzero(margin <= gap)
    return float(t[hit[0]]) if hit.size else np.inf
