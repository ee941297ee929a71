"""Errors raised by the estimators."""

from __future__ import annotations

from clinieval.errors import ClinievalError


class ConvergenceError(ClinievalError, RuntimeError):
    """An iterative fit stopped before meeting its convergence criterion.

    Raised instead of returning a half-fitted estimate: typical causes are
    complete separation (a model that never wins or never loses, with no
    penalty) or a comparison graph that is not connected.
    """
