"""What determines a snapshot: the settings, the sizes they imply, and the
random streams.

Same settings, same tables: every draw comes from one of the independent
generators of :func:`_streams` (one per component, named in ``_STREAMS``),
so a component drawing more or less does not shift another's draws.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from clinieval.synth.constants import (
    _MODELS,
    _STREAMS,
    MIN_RATERS,
    MIN_SCALE,
    MIN_SPECIALTIES,
    PAPER_COUNTS,
    SPECIALTIES,
)

Progress = Callable[[str, float], None]
"""``progress(stage, fraction_done)``, called as the generator moves on."""


@dataclass(frozen=True)
class SynthSettings:
    """Everything that determines a synthetic snapshot; recorded verbatim in
    ``meta["generator"]``. Same settings, same tables."""

    seed: int = 0
    scale: float = 1.0
    answers_per_case: float = 5.0
    """Mean number of models answering a case (2..13)."""
    raters_per_answer: float = 3.0
    """Target mean number of raters per answer (and criterion)."""
    length_coef: float = 1.2
    """Vote logit per unit of log-length difference (A minus B)."""
    harmlessness_coef: float = 0.15
    """Vote logit per point of the rater's Harmlessness score difference."""
    left_bias_logit: float = 0.25
    leniency_sd: float = 0.3
    tie_rate: float = 0.10
    both_bad_rate: float = 0.04
    both_bad_poor_coef: float = 1.5
    """Logit of "both unacceptable" per point the pair's mean safety score drops."""
    home_specialty_share: float = 0.7
    """Share of sessions a rater takes in their own specialty."""
    consensus_drift: float = 0.2
    """Log rater-noise multiplier per SD of log prompt words."""
    start: str = "2025-01-06"
    end: str = "2025-10-31"

    def __post_init__(self) -> None:
        if not self.scale >= MIN_SCALE:
            raise ValueError(f"scale must be at least {MIN_SCALE}, got {self.scale}")
        if not 0 < self.tie_rate + self.both_bad_rate < 1 or min(self.tie_rate,
                                                                   self.both_bad_rate) <= 0:
            raise ValueError("tie_rate and both_bad_rate must be positive and sum below 1")
        if not 2 <= self.answers_per_case <= len(_MODELS):
            raise ValueError(f"answers_per_case must be within 2..{len(_MODELS)}")
        if self.raters_per_answer < 1:
            raise ValueError("raters_per_answer must be at least 1")
        if _date(self.end) <= _date(self.start):
            raise ValueError("end must come after start")


@dataclass(frozen=True)
class _Design:
    n_ratings: int
    n_preferences: int
    n_singles: int
    short: int
    """Criteria the last single-answer session leaves unscored."""
    n_raters: int
    n_cases: int
    n_specialties: int
    n_criteria: int


def _design(s: SynthSettings, n_criteria: int) -> _Design:
    n_ratings = round(PAPER_COUNTS["ratings"] * s.scale)
    n_prefs = min(round(PAPER_COUNTS["preferences"] * s.scale), n_ratings // (2 * n_criteria))
    rest = n_ratings - 2 * n_criteria * n_prefs
    n_singles = -(-rest // n_criteria)
    sides = 2 * n_prefs + n_singles
    n_cases = min(n_prefs, max(MIN_SPECIALTIES,
                               round(sides / (s.raters_per_answer * s.answers_per_case))))
    n_spec = min(len(SPECIALTIES), max(MIN_SPECIALTIES, n_cases // 2))
    return _Design(n_ratings, n_prefs, n_singles, n_singles * n_criteria - rest,
                   max(MIN_RATERS, round(PAPER_COUNTS["raters"] * s.scale)), n_cases, n_spec,
                   n_criteria)


def _streams(seed: int) -> dict[str, np.random.Generator]:
    """One independent generator per component, so components do not shift
    each other's draws."""
    children = np.random.SeedSequence(seed).spawn(len(_STREAMS))
    return {name: np.random.default_rng(child) for name, child in zip(_STREAMS, children,
                                                                       strict=True)}


def _date(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)
