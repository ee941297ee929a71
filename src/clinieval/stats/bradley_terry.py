"""Bradley-Terry preference strengths from pairwise votes.

Model (Bradley & Terry, 1952): ``P(i beats j) = expit(theta_i - theta_j)``.
Votes collapse to an outcome table ``W`` with ``W[i, j]`` = wins of ``i`` over
``j``, which is a sufficient statistic, so every fit here works on the
``m x m`` table instead of the vote list.

Conventions
-----------
* Outcome codes: ``0`` = A wins, ``1`` = B wins, ``2`` = tie, ``3`` = both
  unacceptable. Ties and both-unacceptable votes count half a win to each side
  by default (``"half"``) or are left out (``"drop"``).
* Strengths are natural-log strengths centred to mean zero over all models.
* The fit maximises the penalised log-likelihood
  ``sum_ij W_ij log expit(theta_i - theta_j) - alpha * sum_i theta_i**2``,
  the same objective as ``choix.opt_pairwise`` (Maystre, 2018), by Newton's
  method with Armijo step halving (see Hunter, 2004, Ann. Statist. 32:384, for
  the likelihood and its concavity). The ridge keeps a model with no wins
  finite; at the optimum the penalty also makes the strengths sum to zero.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from clinieval.stats._dist import rankdata
from clinieval.stats._errors import ConvergenceError
from clinieval.stats.bootstrap import resample_counts
from clinieval.stats.crossed.bootstrap import _calibrate
from clinieval.stats.crossed.codes import _dense, _first_index
from clinieval.stats.crossed.pigeonhole import pigeonhole_totals
from clinieval.stats.crossed.variance import influence_variance
from clinieval.stats.regression import LogisticFit, check_design, irls

A_WINS, B_WINS, TIE, BOTH_BAD = 0, 1, 2, 3
"""Vote outcome codes: index of the choice in ``clinieval.contract.vocabulary.CHOICES``
(answer A better, B better, tie, both unacceptable)."""
TIE_MODES = ("half", "drop")
DEFAULT_ALPHA = 1e-6
_ARMIJO = 1e-4
_MAX_HALVINGS = 40
_TABLE_BUDGET = 2**20  # table entries per fitting chunk (about 8 MB a stack)


class RankIntervals(NamedTuple):
    """Rank (1 = strongest) and its bootstrap interval, per model."""

    rank: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


class FeatureBTFit(NamedTuple):
    """Result of :func:`bt_with_features`."""

    strengths: np.ndarray
    strength_se: np.ndarray
    feature_coef: np.ndarray
    feature_se: np.ndarray
    fit: LogisticFit


# --- votes to tables -------------------------------------------------------


def vote_credits(outcome, *, tie_mode: str = "half", bothbad_mode: str = "half"):
    """Win credit ``(credit_a, credit_b)`` of each vote under the tie modes."""
    credit = np.array([[1.0, 0.0], [0.0, 1.0], _shared(tie_mode), _shared(bothbad_mode)])
    codes = np.asarray(outcome)
    if codes.size and (codes.min() < A_WINS or codes.max() > BOTH_BAD):
        raise ValueError("outcome codes must be 0 (A), 1 (B), 2 (tie) or 3 (both bad)")
    return credit[codes, 0], credit[codes, 1]


def pairwise_response(outcome, *, tie_mode: str = "half", bothbad_mode: str = "half"):
    """Logistic response ``y`` (1 = A wins) and a mask of the votes kept."""
    credit_a, credit_b = vote_credits(outcome, tie_mode=tie_mode, bothbad_mode=bothbad_mode)
    keep = (credit_a + credit_b) > 0
    return np.where(keep, credit_a, np.nan), keep


def outcome_table(
    a_idx,
    b_idx,
    outcome,
    n_models: int,
    *,
    tie_mode: str = "half",
    bothbad_mode: str = "half",
    counts=None,
) -> np.ndarray:
    """``(m, m)`` table of wins, ``W[i, j]`` = wins of ``i`` over ``j``.

    ``counts`` optionally gives the multiplicity of each row (cell form).
    """
    a, b, credit_a, credit_b = _check_votes(a_idx, b_idx, outcome, n_models, tie_mode, bothbad_mode)
    w = np.ones(a.shape) if counts is None else np.asarray(counts, dtype=float)
    size = n_models * n_models
    flat = np.bincount(a * n_models + b, weights=w * credit_a, minlength=size)
    flat += np.bincount(b * n_models + a, weights=w * credit_b, minlength=size)
    return flat.reshape(n_models, n_models)


def collapse_votes(a_idx, b_idx, outcome):
    """Distinct ``(a, b, outcome)`` cells as a ``(K, 3)`` array, and their counts."""
    votes = np.column_stack([a_idx, b_idx, outcome]).astype(np.int64)
    return np.unique(votes, axis=0, return_counts=True)


def cluster_outcome_tables(
    a_idx,
    b_idx,
    outcome,
    cluster_idx,
    n_models: int,
    n_clusters: int,
    *,
    tie_mode: str = "half",
    bothbad_mode: str = "half",
) -> np.ndarray:
    """``(C, m, m)`` outcome tables, one per cluster (e.g. per rater)."""
    a, b, credit_a, credit_b = _check_votes(a_idx, b_idx, outcome, n_models, tie_mode, bothbad_mode)
    c = np.asarray(cluster_idx, dtype=np.int64)
    if c.shape != a.shape or (c.size and (c.min() < 0 or c.max() >= n_clusters)):
        raise ValueError(f"need one cluster index in [0, {n_clusters}) per vote")
    size = n_models * n_models
    base = c * size
    flat = np.bincount(base + a * n_models + b, weights=credit_a, minlength=n_clusters * size)
    flat += np.bincount(base + b * n_models + a, weights=credit_b, minlength=n_clusters * size)
    return flat.reshape(n_clusters, n_models, n_models)


def _shared(mode):
    if mode not in TIE_MODES:
        raise ValueError(f"tie mode must be one of {TIE_MODES}, got {mode!r}")
    return [0.5, 0.5] if mode == "half" else [0.0, 0.0]


def _check_votes(a_idx, b_idx, outcome, n_models, tie_mode, bothbad_mode):
    a, b = _check_pairs(a_idx, b_idx, n_models)
    credit_a, credit_b = vote_credits(outcome, tie_mode=tie_mode, bothbad_mode=bothbad_mode)
    if credit_a.shape != a.shape:
        raise ValueError("need one outcome code per vote")
    return a, b, credit_a, credit_b


def _check_pairs(a_idx, b_idx, n_models):
    a = np.asarray(a_idx, dtype=np.int64)
    b = np.asarray(b_idx, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("a_idx and b_idx must be 1-D arrays of the same length")
    if a.size and (min(a.min(), b.min()) < 0 or max(a.max(), b.max()) >= n_models):
        raise ValueError(f"model indices must lie in [0, {n_models})")
    if np.any(a == b):
        raise ValueError("a vote compares a model with itself")
    return a, b


# --- fitting ---------------------------------------------------------------


def bt_fit(
    table, *, alpha: float = DEFAULT_ALPHA, tol: float = 1e-9, max_iter: int = 200
) -> np.ndarray:
    """Centred log-strengths from one ``(m, m)`` outcome table."""
    return bt_fit_many(
        np.asarray(table, dtype=float)[None], alpha=alpha, tol=tol, max_iter=max_iter
    )[0]


def bt_fit_many(
    tables, *, alpha: float = DEFAULT_ALPHA, tol: float = 1e-9, max_iter: int = 200,
    start=None,
) -> np.ndarray:
    """Centred log-strengths for a stack of ``(R, m, m)`` tables, ``(R, m)``.

    All tables are fitted at once by batched Newton steps; each stops moving
    once its full Newton step is below ``tol``. ``alpha=0`` is allowed when
    every table's comparison graph is connected and no model is unbeaten or
    winless; otherwise the fit raises :class:`ConvergenceError`. ``start``
    ``(m,)`` or ``(R, m)`` (default 0) is where the steps begin: bootstrap
    tables started from the fit to all the data need a step fewer.
    """
    W = _check_tables(tables, alpha)
    theta = np.zeros(W.shape[:2]) if start is None else np.broadcast_to(
        np.asarray(start, dtype=float), W.shape[:2]).copy()
    theta -= theta.mean(axis=1, keepdims=True)  # the Newton step assumes centred iterates
    value = _neg_objective(W, theta, alpha)
    active = np.arange(W.shape[0])
    for _ in range(max_iter):
        tables = W[active]
        grad, hess = _derivatives(tables, theta[active], alpha)
        step = _solve(hess, grad)
        moving = np.max(np.abs(step), axis=1) >= tol
        active, tables, grad, step = active[moving], tables[moving], grad[moving], step[moving]
        if active.size == 0:
            return theta - theta.mean(axis=1, keepdims=True)
        slope = np.sum(grad * step, axis=1)
        t, value[active] = _armijo_steps(tables, theta[active], value[active], step, slope,
                                         alpha)
        theta[active] -= t[:, None] * step
    raise ConvergenceError(
        f"Bradley-Terry Newton fit: {active.size} of {W.shape[0]} tables did not "
        f"converge in {max_iter} iterations (use alpha > 0 for winless models)"
    )


def _check_tables(tables, alpha):
    W = np.asarray(tables, dtype=float)
    if W.ndim != 3 or W.shape[1] != W.shape[2]:
        raise ValueError(f"tables must have shape (R, m, m), got {W.shape}")
    if np.any(W < 0) or not np.all(np.isfinite(W)) or alpha < 0:
        raise ValueError("win counts must be finite and non-negative, alpha >= 0")
    return W


def bt_objective(table, theta, alpha: float = DEFAULT_ALPHA) -> float:
    """The function :func:`bt_fit` minimises: the negative log-likelihood of
    one ``(m, m)`` outcome table (``table[i, j]`` = wins of ``i`` over ``j``)
    at log-strengths ``theta``, plus the ridge penalty ``alpha * sum(theta**2)``:
    ``sum_ij W_ij log(1 + exp(theta_j - theta_i))``."""
    W, theta = _one_table(table, theta, alpha)
    return float(_neg_objective(W, theta, alpha)[0])


def bt_gradient(table, theta, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """Gradient of :func:`bt_objective` with respect to ``theta``."""
    W, theta = _one_table(table, theta, alpha)
    return _derivatives(W, theta, alpha)[0][0]


def bt_hessian(table, theta, alpha: float = DEFAULT_ALPHA) -> np.ndarray:
    """Hessian of :func:`bt_objective` (a weighted graph Laplacian plus
    ``2 alpha I``); the fit adds ``11'/m`` to it internally, removed here."""
    W, theta = _one_table(table, theta, alpha)
    return _derivatives(W, theta, alpha)[1][0] - 1.0 / theta.shape[1]


def _one_table(table, theta, alpha):
    W = _check_tables(np.asarray(table, dtype=float)[None], alpha)
    theta = np.asarray(theta, dtype=float)[None]
    if theta.shape != W.shape[:2]:
        raise ValueError(f"theta must have {W.shape[1]} values, got {theta.shape[1:]}")
    return W, theta


def _neg_objective(W, theta, alpha):
    diff = theta[:, None, :] - theta[:, :, None]  # theta_j - theta_i at [i, j]
    return np.sum(W * np.logaddexp(0.0, diff), axis=(1, 2)) + alpha * np.sum(theta**2, axis=1)


def _derivatives(W, theta, alpha):
    # Gradient and Hessian of the negative penalised log-likelihood. Adding
    # 11'/m to the Hessian fixes the translation null space of the graph
    # Laplacian; since the iterates stay centred it leaves the step unchanged.
    games = W + W.transpose(0, 2, 1)
    p = expit(theta[:, :, None] - theta[:, None, :])
    grad = np.sum(games * p, axis=2) - W.sum(axis=2) + 2 * alpha * theta
    v = games * p * (1 - p)
    m = theta.shape[1]
    hess = -v + np.eye(m) * (v.sum(axis=2, keepdims=True) + 2 * alpha) + 1.0 / m
    return grad, hess


def _solve(hess, grad):
    try:
        return np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError as exc:
        raise ConvergenceError(
            "singular Bradley-Terry Hessian: comparison graph not connected and alpha=0"
        ) from exc


def _armijo_steps(W, theta, start, step, slope, alpha):
    # Backtracking (Armijo) line search, batched: halve the step only for the
    # tables whose objective did not fall enough. ``start`` is the objective
    # at ``theta``; returns the steps and the objective where they lead.
    slack = 1e-12 * (1.0 + np.abs(start))
    t, value = np.ones(theta.shape[0]), np.empty(theta.shape[0])
    todo = np.arange(theta.shape[0])
    for _ in range(_MAX_HALVINGS):
        value[todo] = _neg_objective(W[todo], theta[todo] - t[todo, None] * step[todo], alpha)
        todo = todo[value[todo] > start[todo] - _ARMIJO * t[todo] * slope[todo] + slack[todo]]
        if todo.size == 0:
            return t, value
        t[todo] /= 2
    value[todo] = _neg_objective(W[todo], theta[todo] - t[todo, None] * step[todo], alpha)
    return t, value


# --- bootstrap -------------------------------------------------------------


def bt_bootstrap(
    cells,
    counts,
    n_models: int,
    B: int,
    rng: np.random.Generator,
    *,
    alpha: float = DEFAULT_ALPHA,
    tie_mode: str = "half",
    bothbad_mode: str = "half",
) -> np.ndarray:
    """``(B, m)`` bootstrap replicates of the centred strengths, over votes.

    Nonparametric bootstrap (Efron & Tibshirani, 1993, ch. 6): each replicate
    is a multinomial draw of ``N = sum(counts)`` votes over the distinct
    ``(a, b, outcome)`` cells with probabilities ``counts / N``, which has
    the same distribution as resampling the ``N`` votes with replacement.
    Each replicate is fitted on its ``m x m`` table (see :func:`bt_fit_many`).
    Votes a tie mode drops are still resampled, so the bootstrap repeats the
    whole procedure, dropping included.
    """
    cells = np.asarray(cells, dtype=np.int64).reshape(-1, 3)
    contrib = _cell_contributions(cells, n_models, tie_mode, bothbad_mode)
    draws = resample_counts(np.asarray(counts, dtype=np.int64), B, rng)
    return _fit_in_chunks(draws, contrib, n_models, alpha)


def bt_cluster_bootstrap(
    tables,
    B: int,
    rng: np.random.Generator,
    *,
    alpha: float = DEFAULT_ALPHA,
) -> np.ndarray:
    """``(B, m)`` cluster-bootstrap replicates of the centred strengths.

    The resampling unit is the cluster (e.g. a rater): each replicate draws
    ``C`` clusters with replacement (multinomial weights with ``C`` trials
    and equal probabilities, the classic cluster bootstrap of Davison &
    Hinkley, 1997, §3.8) and fits the weighted sum of their tables.
    ``tables`` is the ``(C, m, m)`` output of :func:`cluster_outcome_tables`.
    """
    tables = np.asarray(tables, dtype=float)
    n_clusters, n_models = tables.shape[0], tables.shape[1]
    draws = resample_counts(np.ones(n_clusters, dtype=np.int64), B, rng)
    flat = tables.reshape(n_clusters, n_models * n_models)
    return _fit_in_chunks(draws, flat, n_models, alpha)


def _cell_contributions(cells, n_models, tie_mode, bothbad_mode):
    a, b, credit_a, credit_b = _check_votes(
        cells[:, 0], cells[:, 1], cells[:, 2], n_models, tie_mode, bothbad_mode
    )
    rows = np.concatenate([np.arange(a.size)] * 2)
    cols = np.concatenate([a * n_models + b, b * n_models + a])
    data = np.concatenate([credit_a, credit_b])
    return sp.csr_matrix((data, (rows, cols)), shape=(a.size, n_models * n_models))


def _fit_in_chunks(draws, contrib, n_models, alpha):
    size = max(1, _TABLE_BUDGET // (n_models * n_models))
    out = np.empty((draws.shape[0], n_models))
    for start in range(0, draws.shape[0], size):
        part = draws[start : start + size].astype(float)
        tables = np.asarray(part @ contrib).reshape(-1, n_models, n_models)
        out[start : start + size] = bt_fit_many(tables, alpha=alpha)
    return out


def bt_twoway_bootstrap(a_idx, b_idx, outcome, rows, cols, n_models: int, B: int,
                        rng: np.random.Generator, *, alpha: float = DEFAULT_ALPHA,
                        tie_mode: str = "half", bothbad_mode: str = "half",
                        level: float = 0.95) -> np.ndarray:
    """``(B, m)`` Bradley-Terry strengths under the two-way bootstrap of
    votes over raters (``rows``) and cases (``cols``).

    Each vote's win credits go to its (rater, case) cell; a pigeonhole
    replicate fits the outcome table ``sum_k U[rater_k] V[case_k] W_k`` (see
    :func:`clinieval.stats.bt_fit_many`). As for ratio means, the deviations
    from the fit are scaled to the two-way cluster-robust variance, here of
    the sandwich (influence) form: ``z_v = H^+ g_v`` with ``g_v`` the vote's
    score vector and ``H`` the Fisher information at the fit. Replicates are
    centred again afterwards, like every strength vector here.
    """
    a, b = np.asarray(a_idx, dtype=np.int64), np.asarray(b_idx, dtype=np.int64)
    credit_a, credit_b = vote_credits(outcome, tie_mode=tie_mode, bothbad_mode=bothbad_mode)
    row_code, n_rows = _dense(rows)
    col_code, n_cols = _dense(cols)
    cell, _ = _dense(row_code.astype(np.int64) * n_cols + col_code)
    table = sp.coo_matrix((np.concatenate([credit_a, credit_b]),
                           (np.concatenate([cell, cell]),
                            np.concatenate([a * n_models + b, b * n_models + a]))),
                          shape=(cell.max() + 1, n_models * n_models)).tocsr()
    table.eliminate_zeros()  # a decisive vote's loser credit: no work in the product
    first = _first_index(cell)
    totals = pigeonhole_totals(row_code[first], col_code[first], table, B, rng)
    fit = bt_fit(np.asarray(table.sum(axis=0)).reshape(n_models, n_models), alpha=alpha)
    reps = bt_fit_many(totals.reshape(B, n_models, n_models), alpha=alpha, start=fit)
    z = _bt_influence(fit, a, b, credit_a, credit_b, alpha)
    variance = influence_variance(row_code, col_code, z, z != 0)
    scaled = _calibrate(reps, fit, variance, level)
    return scaled - scaled.mean(axis=1, keepdims=True)  # per-model factors moved the centre


def _bt_influence(theta, a, b, credit_a, credit_b, alpha) -> np.ndarray:
    """Per vote ``H^+ g``: ``g`` is the gradient of its log-likelihood term
    ``(credit_a - games * p) (e_a - e_b)``, ``H`` the penalised information."""
    m = theta.size
    games = credit_a + credit_b
    p = expit(theta[a] - theta[b])
    rows = np.arange(a.size)
    diff = sp.csr_matrix((np.concatenate([np.ones(a.size), -np.ones(a.size)]),
                          (np.concatenate([rows, rows]), np.concatenate([a, b]))),
                         shape=(a.size, m))
    info = (diff.T @ diff.multiply((games * p * (1 - p))[:, None])).toarray()
    info += 2 * alpha * np.eye(m)
    return np.asarray(diff.multiply((credit_a - games * p)[:, None]) @ np.linalg.pinv(info))


def rank_intervals(estimate, samples, level: float = 0.95) -> RankIntervals:
    """Ranks (1 = strongest, ties share the best rank) and rank intervals.

    The rank comes from the point estimate; the interval is the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the per-replicate
    ranks, taken outward so the bounds are observed integer ranks: with the
    ``B`` replicate ranks sorted, the quantile position ``(B - 1) q`` is
    rounded down for the lower bound and up for the upper bound.
    """
    tail = (1.0 - level) / 2.0
    rank = rankdata(-np.asarray(estimate, dtype=float), method="min")
    reps = rankdata(-np.asarray(samples, dtype=float), method="min", axis=1)
    lower = np.quantile(reps, tail, axis=0, method="lower")
    upper = np.quantile(reps, 1.0 - tail, axis=0, method="higher")
    return RankIntervals(rank.astype(int), lower.astype(int), upper.astype(int))


# --- style control ---------------------------------------------------------


def bt_with_features(
    a_idx,
    b_idx,
    y,
    X,
    n_models: int,
    *,
    weights=None,
    reference: int = 0,
) -> FeatureBTFit:
    """Bradley-Terry with covariates ("style control") by logistic regression.

    ``logit P(A wins) = theta_a - theta_b + X @ beta``: the design has +1 in
    A's model column, -1 in B's, the ``reference`` model's column dropped,
    then the feature columns ``X`` (one row per vote; ``None`` for plain BT).
    ``y`` is 1 when A wins, 0 when B wins, 0.5 for a half-credit tie. Fitted
    by :func:`logistic_irls`; strengths are re-centred to mean zero with
    their standard errors carried through the centring.
    """
    a, b = _check_pairs(a_idx, b_idx, n_models)
    feats = np.zeros((a.size, 0)) if X is None else np.asarray(X, dtype=float).reshape(a.size, -1)
    if not 0 <= reference < n_models:
        raise ValueError(f"reference must lie in [0, {n_models})")
    feats, y, w = check_design(feats, y, weights)
    if feats.shape[1] == 0:  # the rows are (a, b, y) only: one weighted row per distinct one
        a, b, y, w = _distinct_pair_rows(a, b, y, w, n_models)
        feats = np.zeros((a.size, 0))
    fit = irls(_PairDesign(a, b, feats, n_models, reference), y, w)
    lift = _centring_map(n_models, reference)
    k = n_models - 1
    strengths = lift @ fit.coef[:k]
    strength_se = np.sqrt(np.diag(lift @ fit.cov[:k, :k] @ lift.T))
    return FeatureBTFit(strengths, strength_se, fit.coef[k:], fit.se[k:], fit)


class _PairDesign:
    """The design ``[D F]`` of :func:`bt_with_features` without forming it:
    ``D`` has +1 in A's model column and -1 in B's (the reference model's
    column dropped), ``F`` holds the features. The information's model block
    is the weighted comparison graph's Laplacian and its cross block
    per-model sums, both bincounts over the votes, so an iteration costs a
    few passes over them instead of products with an ``(n, m)`` matrix
    (1.9 M votes at 100x paper scale)."""

    def __init__(self, a, b, feats, n_models: int, reference: int) -> None:
        self.a, self.b, self.F, self.m = a, b, feats, n_models
        self.pair = a * n_models + b
        self.keep = np.delete(np.arange(n_models), reference)
        self.n_coef = n_models - 1 + feats.shape[1]

    def eta(self, coef):
        theta = np.zeros(self.m)
        theta[self.keep] = coef[: self.m - 1]
        return theta[self.a] - theta[self.b] + self.F @ coef[self.m - 1:]

    def _by_model(self, r):
        """``D' r``: per model, r summed over its votes as A minus as B."""
        m = self.m
        return (np.bincount(self.a, r, m) - np.bincount(self.b, r, m))[self.keep]

    def score(self, r):
        return np.concatenate([self._by_model(r), self.F.T @ r])

    def information(self, v):
        m, q = self.m, self.F.shape[1]
        pair = np.bincount(self.pair, v, m * m).reshape(m, m)
        pair += pair.T
        laplacian = np.diag(pair.sum(axis=1)) - pair
        cross = np.column_stack([self._by_model(v * self.F[:, j]) for j in range(q)]) \
            if q else np.zeros((m - 1, 0))
        info = np.empty((self.n_coef, self.n_coef))
        info[: m - 1, : m - 1] = laplacian[np.ix_(self.keep, self.keep)]
        info[: m - 1, m - 1:] = cross
        info[m - 1:, : m - 1] = cross.T
        info[m - 1:, m - 1:] = (self.F * v[:, None]).T @ self.F
        return info


def _distinct_pair_rows(a, b, y, w, n_models):
    """Votes with the same models and response merged into one row weighted
    by their summed weights: the same likelihood in a few hundred rows."""
    values, y_code = np.unique(y, return_inverse=True)
    key = (a * n_models + b) * values.size + y_code.ravel()
    rows, merged = np.unique(key, return_inverse=True)
    weight = np.bincount(merged.ravel(), w, rows.size)
    pair, code = rows // values.size, rows % values.size
    return pair // n_models, pair % n_models, values[code], weight


def length_feature(len_a, len_b) -> np.ndarray:
    """Standardised relative length difference ``(a - b) / (a + b)``.

    Scaled to unit root-mean-square rather than z-scored: there is no
    intercept in BT, and not centring keeps the feature antisymmetric
    (swapping A and B flips its sign). Pairs with zero total length give 0.
    """
    la = np.asarray(len_a, dtype=float)
    lb = np.asarray(len_b, dtype=float)
    total = la + lb
    rel = np.divide(la - lb, total, out=np.zeros_like(total), where=total > 0)
    scale = np.sqrt(np.mean(rel**2)) if rel.size else 0.0
    return rel / scale if scale > 0 else rel


def _centring_map(n_models, reference):
    # theta = lift @ coef: put coef back beside a zero for the reference
    # model, then subtract the mean.
    embed = np.delete(np.eye(n_models), reference, axis=1)
    return (np.eye(n_models) - 1.0 / n_models) @ embed
