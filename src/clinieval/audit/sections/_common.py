"""What every section module shares."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from clinieval.audit.result import Section

R = TypeVar("R")


@dataclass(frozen=True)
class Skipped:
    """A section that cannot be computed from this snapshot, and why (one line)."""

    reason: str


@dataclass(frozen=True)
class Estimate:
    """A point estimate with the bounds of its interval (NaN when undefined)."""

    value: float
    lo: float
    hi: float


def run_section(key: str, title: str, computed: R | Skipped,
                present: Callable[[R], Section]) -> Section:
    """The presented section, or a skipped one that says why."""
    if isinstance(computed, Skipped):
        return Section(key, title, skipped=computed.reason)
    return present(computed)
