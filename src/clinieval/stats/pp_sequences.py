"""Prediction-powered anytime-valid confidence sequences for a bounded mean.

A judge's prediction ``f`` in [0, 1] of every answer of a cell is cheap; the
clinicians' value ``y`` in [0, 1] (the per-answer value of
:mod:`clinieval.stats.sequences`) is known for the answers they rated. The
rated answers' *rectifier* ``y - lam f`` carries what the judge gets wrong,
and ``theta = E[y] = E[y - lam f] + lam E[f]``: prediction-powered inference
(Angelopoulos, Bates, Fannjiang, Jordan & Zrnic, "Prediction-powered
inference", Science 382:669, 2023; with a tuned ``lam``, PPI++: Angelopoulos,
Duchi & Zrnic, arXiv:2311.01453, 2023). Their sequential versions are
*asymptotic* confidence sequences (a time-uniform central limit theorem;
e.g. Kilian, Cortinovis & Caron, "Anytime-valid, Bayes-assisted,
prediction-powered inference", arXiv:2505.18000, 2025). This one is exact
for finite samples: a betting capital on the rectified stream
(Waudby-Smith & Ramdas, JRSS-B 86:1, 2024, "WSR") joined by a union bound
with a betting sequence for the judge's mean.

Estimand, and what is random
----------------------------
The estimand is the clinicians-only path's (:mod:`clinieval.stats.sequences`):
the expected per-answer value over the population of the cell's answers,
given the study's panel of raters. The cell's answers are i.i.d. draws of
``(y, f)`` (``f`` a fixed function of the answer: the judge never sees the
ratings), and the answers reach clinicians in an order that does not depend
on their values (even spreading). Then the rated stream ``(y_t, f_t)`` is
i.i.d., and so are the judged answers' ``f``. Two pieces, by the union bound:

1. ``mu = E[f]`` lies in ``[mu_lo, mu_hi]``, the judge's sequence
   (:func:`judge_mean_bounds`: WSR's hedged betting CS of every judged
   answer's ``f``, rated or not, in the data's order, intersected over
   time) at ``alpha_f = judge_share * alpha``; the rated answers' ``f`` are
   in it too, which the union bound does not mind.
2. For each candidate ``m`` and judge mean ``mu`` the capitals over the
   rated stream::

       K+_t(m, mu) = prod_i (1 + b+_i (y_i - m - lam_i (f_i - mu)))
       K-_t(m, mu) = prod_i (1 - b-_i (y_i - m - lam_i (f_i - mu)))

   have ``E[factor | past] = 1`` at ``(m, mu) = (theta, E f)``, because
   ``lam_i`` and the bets depend on the past rated pairs only (they are
   *predictable*: :func:`predictable_lambda`, and WSR's plug-in bets of the
   rectifier ``y - lam f``). The step lies in ``[-(m + lam (1 - mu)), 1 - m
   + lam mu]``, so bets truncated at ``c / (m + lam (1 - mu))`` (``K+``) and
   ``c / (1 - m + lam mu)`` (``K-``), ``c = 1/2``, keep every factor at least
   ``1 - c``: non-negative martingales, and by Ville's inequality the
   truth's capitals pass ``1 / (alpha_r theta)`` and ``1 / (alpha_r (1 -
   theta))`` with probability at most ``alpha_r = alpha - alpha_f`` (hedged
   over the two sides as :func:`~clinieval.stats.sequences.betting_cs`).

With ``lam >= 0`` every factor of ``K+`` rises with ``mu`` and every factor of
``K-`` falls, truncation included (checked case by case: each is a min or
max of functions monotone in ``mu`` the same way). So ``K+(m, mu_lo) <=
K+(m, E f)`` and ``K-(m, mu_hi) <= K-(m, E f)`` whenever ``E f`` is in its
sequence: excluding ``m`` when ``K+(m, mu_lo)`` or ``K-(m, mu_hi)`` is past
its bar excludes the truth only on the union of the two events above, of
probability at most ``alpha``. Each capital is evaluated at a constant
``mu``, so its bets stay predictable although ``[mu_lo, mu_hi]`` itself uses
the judged values of answers rated later. With ``lam = 0`` every step is
the clinicians' own: the sequence is
:func:`~clinieval.stats.sequences.betting_cs` of ``y`` (at the whole
``alpha`` when ``lam`` is fixed at 0, as no judge's mean is then needed).

Why not the cell's finite population: with the judge's mean over the cell's
``N`` answers taken as exact, the rectified stream is a sample *without
replacement* of the cell, whose remaining mean moves with every draw, and
the values carry rater noise, so the without-replacement capital
(Waudby-Smith & Ramdas, "Confidence sequences for sampling without
replacement", NeurIPS 2020), which needs each drawn unit's exact value, does
not apply; and it would cover the rate of these ``N`` answers, not the
cell's rate that the clinicians-only sequence covers. The price of the
superpopulation is piece 1: about ``lam`` times the judge's half-width at
``N``, added to the rectifier's at ``n`` rated answers, so the saving needs
judged answers well beyond the rated ones (``benchmarks/pp_sequences_error.py``).

Rater noise: ``y`` includes it, the judge's ``f`` does not, so the gap
between the panel's rate and the rate over clinicians at large is the same
as in the clinicians-only path, and the decisions widen this sequence by the
same :func:`~clinieval.stats.sequences.rater_margin` of ``y``.

Targeted assignment (:mod:`clinieval.platform.targeting`) is covered: it
moves clinicians between cells by their decisions so far, but within a cell
spreads each pick evenly over the answers with room, so the cell's rated
stream is still a uniform sample of its answers (how many of them are
rated, and when, depends on the past; the sequence is valid at any such
time). Not covered: picks within a cell with probabilities that depend on
the judge or on values (e.g. preferring answers the judge is unsure of):
the rated stream's ``f`` is then not drawn like the judged answers', and
piece 2 would need inverse-probability weights.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from clinieval.stats.sequences import (
    BREAKS,
    _check_levels,
    _check_stream,
    _grid_bounds,
    _hedged_processes,
    _Process,
    log_capital,
    plugin_bets,
)

JUDGE_SHARE = 0.1
"""Share of alpha spent on the judge's mean: its sequence runs over many
more answers than the rectifier's, so a small share costs it little, and a
useless judge's sequence (``lam`` near 0) loses little to the split."""
PRIOR_ANSWERS = 10.0
"""Rated pairs' worth of shrinkage of :func:`predictable_lambda` towards 0."""


class PPSequence(NamedTuple):
    """Bounds after each rated answer, the ``lam`` of each step, and the
    sequence of the judge's mean (over the judged answers) they used."""

    lower: np.ndarray
    upper: np.ndarray
    lam: np.ndarray
    judge_lower: float
    judge_upper: float


def predictable_lambda(y, f, n_judged: int | None = None,
                       prior_answers: float = PRIOR_ANSWERS) -> np.ndarray:
    """``lam_t`` from the rated pairs before ``t`` only, clipped to [0, 1].

    Without ``n_judged``: the least-squares slope of ``y`` on ``f`` over the
    first ``t - 1`` pairs (the ``lam`` that makes the rectifier's variance
    smallest), ``C / V`` with ``C`` and ``V`` their sums of centred
    cross-products and squares. With ``n_judged`` (the judged answers ``N``,
    fixed before the data): the slope that makes the sequence narrowest,
    which weighs the rectifier's half-width at ``t`` against ``lam`` times
    the judge mean's at ``N`` (the two add, by the union bound). In units of
    the standard deviations, ``l = lam sd_f / sd_y`` minimises
    ``sqrt(1 - 2 rho l + l**2) + k l`` with ``k = sqrt(t / N)``, so ``l = rho
    - k sqrt((1 - rho**2) / (1 - k**2))`` (0 once ``k >= 1``). Either is
    shrunk by ``(t - 1) / (t - 1 + prior_answers)`` so that ``lam`` starts at
    0 and follows the slope once a few pairs show it (``lam_1 = 0``). Only
    the past enters, so the capitals stay martingales whatever the judge.
    """
    y, f = np.asarray(y, dtype=float), np.asarray(f, dtype=float)
    t = np.arange(1, y.size + 1)
    sy, sf = np.cumsum(y), np.cumsum(f)
    cross = np.cumsum(y * f) - sy * sf / t
    squares = np.cumsum(f * f) - sf * sf / t
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = cross / squares
        if n_judged is not None:
            ys = np.cumsum(y * y) - sy * sy / t
            k = np.sqrt(np.minimum(t / n_judged, 1.0))
            spread = np.sqrt(np.maximum(ys * squares - cross**2, 0.0) / (1 - k**2))
            lam = np.where(k < 1, (cross - k * spread) / squares, 0.0)
    lam = np.clip(np.nan_to_num(lam, nan=0.0, posinf=0.0, neginf=0.0), 0.0, 1.0)
    lam *= (t - 1) / (t - 1 + prior_answers)
    return np.concatenate([[0.0], lam[:-1]])


def pp_betting_cs(
    y,
    f,
    judged,
    alpha: float = 0.05,
    *,
    lam=None,
    judge_share: float = JUDGE_SHARE,
    theta: float = 0.5,
    breaks: int = BREAKS,
    running_intersection: bool = True,
) -> PPSequence:
    """Prediction-powered betting CS for the mean of ``y`` (see the module).

    ``y`` and ``f``: the rated answers' values and the judge's predictions
    of them, in the order they were rated (1-D, in [0, 1]); ``judged``: the
    judge's prediction of every judged answer of the cell, the rated ones
    included, in the order they were judged. ``lam``: None for
    :func:`predictable_lambda`, else fixed values in [0, 1] (a scalar or one
    per step, fixed before the data: a test, or the clinicians alone at 0,
    which then spends no alpha on the judge). Bets are WSR's predictable
    plug-in bets of the rectifier at ``alpha_r theta`` and ``alpha_r (1 -
    theta)``, as :func:`~clinieval.stats.sequences.betting_cs` bets on ``y``.
    """
    y, f = _check_stream(y), _check_stream(f)
    judged = _check_stream(judged)
    if y.ndim != 1 or f.shape != y.shape or judged.ndim != 1:
        raise ValueError("need 1-D y and f of one length and a 1-D judged")
    _check_levels(alpha, theta, breaks)
    if not 0 < judge_share < 1:
        raise ValueError("need 0 < judge_share < 1")
    lam, alpha_f = _lambda_path(y, f, judged.size, lam, alpha * judge_share)
    mu_lo, mu_hi = judge_mean_bounds(judged, alpha_f, theta=theta) if alpha_f else (0.0, 1.0)
    processes = _rectified_processes(y - lam * f, lam, mu_lo, mu_hi, alpha - alpha_f, theta)
    cs = _grid_bounds(processes, int(breaks), running_intersection)
    return PPSequence(cs.lower, cs.upper, lam, mu_lo, mu_hi)


def judge_mean_bounds(judged, alpha: float, *, theta: float = 0.5,
                      tol: float = 1e-6) -> tuple[float, float]:
    """The judge's mean's sequence after every judged answer, intersected over
    them: the hedged betting CS of :func:`~clinieval.stats.sequences.betting_cs`
    with running intersection, at its last look, on the continuum instead
    of the grid (so without its ``1 / breaks`` padding).

    ``m`` is below the lower bound when ``K+_t(m)`` passed ``1 / (alpha
    theta)`` at some ``t`` (``K+`` falls with ``m``, so that is a prefix of
    [0, 1]) and above the upper one when ``K-_t(m)`` passed ``1 / (alpha (1
    - theta))``: each edge is a bisection to ``tol``, one capital path per
    step instead of one per grid mean. An empty intersection (the judged
    values do not look like one mean: drift, or the ``alpha`` chance) gives
    [0, 1], no information, as the grid version does at such a time.
    """
    judged = _check_stream(judged)
    _check_levels(alpha, theta, BREAKS)
    plus, minus = _hedged_processes(judged, alpha, theta, 0.5, 0.25)

    def excluded(process, m) -> bool:
        return bool(np.max(log_capital(process.x, process.bets, m, process.sign))
                    > process.log_threshold)

    lower = _turn(lambda m: excluded(plus, m), tol)[0]  # rounded down
    upper = _turn(lambda m: not excluded(minus, m), tol)[1]  # rounded up
    return (lower, upper) if lower <= upper else (0.0, 1.0)


def _turn(before, tol: float) -> tuple[float, float]:
    """``(lo, hi)`` within ``tol`` of each other around the point of [0, 1]
    where the monotone predicate ``before`` turns from true to false
    (``before(lo)`` and not ``before(hi)``, except at the ends)."""
    lo, hi = 0.0, 1.0
    if not before(lo):
        return lo, lo
    if before(hi):
        return hi, hi
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if before(mid) else (lo, mid)
    return lo, hi


def _lambda_path(y, f, n_judged, lam, alpha_f) -> tuple[np.ndarray, float]:
    """The ``lam`` of each step and the alpha its judge's mean needs (none
    when ``lam`` is fixed at 0)."""
    if lam is None:
        return predictable_lambda(y, f, n_judged), alpha_f
    lam = np.broadcast_to(np.asarray(lam, dtype=float), y.shape).copy()
    if not np.all((lam >= 0) & (lam <= 1)):
        raise ValueError("lam must lie in [0, 1]")
    return lam, alpha_f if lam.any() else 0.0


def _rectified_processes(r, lam, mu_lo, mu_hi, alpha_r, theta):
    """``K+`` at ``mu_lo`` and ``K-`` at ``mu_hi`` as plain processes. At
    ``mu`` the rectified step ``r - m + lam mu`` lies in ``[-(m + lam (1 -
    mu)), 1 - m + lam mu]``, so ``K+`` is truncated at ``c / (m + lam (1 -
    mu_lo))`` and ``K-`` at ``c / (1 - m + lam mu_hi)``: that is
    :func:`~clinieval.stats.sequences.log_capital` of data ``r + lam`` at
    candidate ``m + lam (1 - mu_lo)``, and of ``r`` at ``m - lam mu_hi``."""
    prior = {"prior_mean": 0.5, "prior_variance": 0.25}
    low, high = alpha_r * theta, alpha_r * (1 - theta)
    return (
        _Process(r + lam, plugin_bets(r, low, **prior), 1, np.log(1 / low), lam * (1 - mu_lo)),
        _Process(r, plugin_bets(r, high, **prior), -1, np.log(1 / high), -lam * mu_hi),
    )
