"""Logistic regression fitted by iteratively reweighted least squares (IRLS).

IRLS is Newton-Raphson on the binomial log-likelihood with the canonical logit
link (McCullagh & Nelder, *Generalized Linear Models*, 2nd ed., 1989, §2.5 and
§4.4). Responses may be fractional in [0, 1] (quasi-binomial working response,
e.g. 0.5 for a tie), and ``weights`` are frequency weights. Standard errors
come from the inverse observed information ``X' diag(w p (1 - p)) X``, which
for the canonical link equals the expected information; the dispersion is
fixed at 1, as in ``statsmodels`` ``GLM(family=Binomial())``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.special import expit, log_expit

from clinieval.stats._errors import ConvergenceError

_MAX_HALVINGS = 30


class LogisticFit(NamedTuple):
    """Result of :func:`logistic_irls`."""

    coef: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    converged: bool
    n_iter: int


def logistic_irls(
    X,
    y,
    weights=None,
    *,
    tol: float = 1e-10,
    max_iter: int = 100,
    strict: bool = True,
) -> LogisticFit:
    """Fit ``P(y=1) = expit(X @ coef)`` by IRLS (no intercept is added).

    Converged means the largest Newton step fell below ``tol``. Under
    separation the coefficients drift off to infinity and the step never
    shrinks (or the information matrix turns singular), so the fit raises
    :class:`ConvergenceError` (or, with ``strict=False``, returns
    ``converged=False``, with NaN standard errors if the information matrix
    is singular). NaN in ``y`` is rejected: drop those rows first.
    """
    X, y, w = check_design(X, y, weights)
    return irls(DenseDesign(X), y, w, tol=tol, max_iter=max_iter, strict=strict)


class DenseDesign:
    """A design matrix held as it is; :func:`irls` asks a design only for
    the linear predictor, ``X' r`` and ``X' diag(v) X``, so a design with
    structure (e.g. Bradley-Terry's +1/-1 model columns) can answer those
    without forming the matrix."""

    def __init__(self, X: np.ndarray) -> None:
        self.X = X
        self.n_coef = X.shape[1]

    def eta(self, coef: np.ndarray) -> np.ndarray:
        return self.X @ coef

    def score(self, r: np.ndarray) -> np.ndarray:
        return self.X.T @ r

    def information(self, v: np.ndarray) -> np.ndarray:
        return (self.X * v[:, None]).T @ self.X


def irls(design, y, w, *, tol: float = 1e-10, max_iter: int = 100,
         strict: bool = True) -> LogisticFit:
    """:func:`logistic_irls` on a checked ``y`` and ``w`` and a design that
    answers ``eta(coef)``, ``score(r)`` and ``information(v)`` (see
    :class:`DenseDesign`)."""
    coef = np.zeros(design.n_coef)
    value = _neg_loglik(design, y, w, coef)
    n_iter, converged = 0, False
    while n_iter < max_iter and not converged:
        n_iter += 1
        step = _newton_step(design, y, w, coef)
        if step is None:
            break
        t, value = _halve_until_better(design, y, w, coef, value, step)
        coef = coef + t * step
        converged = bool(np.max(np.abs(step), initial=0.0) < tol)
    if strict and not converged:
        raise ConvergenceError(
            f"logistic IRLS did not converge in {n_iter} iterations "
            "(separated or rank-deficient data?)"
        )
    return _finish(design, w, coef, converged, n_iter)


def check_design(X, y, weights):
    """``X`` (n, p), ``y`` (n,) in [0, 1] and ``weights`` (n,), non-negative
    (all ones when None), as float arrays; ValueError names what is wrong.
    Shared by the logistic fits here and Bradley-Terry's."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, p) and y (n,); got {X.shape} and {y.shape}")
    if not (np.all((y >= 0) & (y <= 1)) and np.all(np.isfinite(X))):
        raise ValueError("y must lie in [0, 1] and X must be finite")
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != y.shape or np.any(w < 0):
        raise ValueError("weights must be non-negative with the same shape as y")
    return X, y, w


def _information(design, w, p):
    """``X' diag(w p (1 - p)) X`` at fitted probabilities ``p``."""
    return design.information(w * p * (1 - p))


def _newton_step(design, y, w, coef):
    # None when the information matrix is singular (rank-deficient design, or
    # fitted probabilities driven to 0/1 by separation).
    p = expit(design.eta(coef))
    try:
        return np.linalg.solve(_information(design, w, p), design.score(w * (y - p)))
    except np.linalg.LinAlgError:
        return None


def _neg_loglik(design, y, w, coef):
    # y log p + (1 - y) log(1 - p) with log p - log(1 - p) = eta: one
    # log-sigmoid per observation instead of two.
    eta = design.eta(coef)
    return -np.sum(w * (y * eta + log_expit(-eta)))


def _halve_until_better(design, y, w, coef, start, step):
    # Plain Newton can overshoot far from the optimum; halving keeps every
    # iteration a descent step (the usual step-halving safeguard for IRLS).
    # ``start`` is the objective at ``coef``; returns the step length and
    # the objective where it leads.
    slack = 1e-12 * (1.0 + abs(start))
    t = 1.0
    for _ in range(_MAX_HALVINGS):
        value = _neg_loglik(design, y, w, coef + t * step)
        if value <= start + slack:
            return t, value
        t /= 2
    return t, _neg_loglik(design, y, w, coef + t * step)


def _finish(design, w, coef, converged, n_iter):
    try:
        cov = np.linalg.inv(_information(design, w, expit(design.eta(coef))))
    except np.linalg.LinAlgError:
        cov = np.full((coef.size, coef.size), np.nan)
    return LogisticFit(coef, np.sqrt(np.diag(cov)), cov, converged, n_iter)
