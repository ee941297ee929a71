"""Cases, answers and raters drawn before any session.

A case's answers are contiguous (``_Answers.start`` and ``count`` index
them) and no model answers a case twice; rater leniency is centred so it
shifts no expected score. Draws come from the "cases", "answers" and
"raters" streams only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clinieval.synth.constants import (
    _LOG_CHARS_SD,
    _MODELS,
    _PROMPT_WORDS_MEDIAN,
    _PROMPT_WORDS_RANGE,
    _PROMPT_WORDS_SIGMA,
    _SHARED_ANSWER,
)
from clinieval.synth.quality import _Criteria, _Specialties


@dataclass(frozen=True)
class _Cases:
    specialty: np.ndarray
    words: np.ndarray
    noise_factor: np.ndarray


def _cases(rng: np.random.Generator, n: int, spec: _Specialties, drift: float) -> _Cases:
    k = len(spec.names)
    specialty = np.concatenate([np.arange(k), rng.choice(k, n - k, p=spec.share)])
    rng.shuffle(specialty)
    log_words = rng.normal(np.log(_PROMPT_WORDS_MEDIAN), _PROMPT_WORDS_SIGMA, n)
    words = np.clip(np.round(np.exp(log_words)), *_PROMPT_WORDS_RANGE).astype(np.int32)
    z = (np.log(words) - np.log(_PROMPT_WORDS_MEDIAN)) / _PROMPT_WORDS_SIGMA
    return _Cases(specialty, words, np.exp(drift * z))


@dataclass(frozen=True)
class _Answers:
    case: np.ndarray
    model: np.ndarray
    start: np.ndarray
    """Index of each case's first answer (a case's answers are contiguous)."""
    count: np.ndarray
    log_chars: np.ndarray
    effect: np.ndarray
    """Answer x criterion offset on the latent scale."""


def _answers(rng: np.random.Generator, n_cases: int, per_case: float, crit: _Criteria) -> _Answers:
    m = len(_MODELS)
    count = np.clip(rng.poisson(per_case - 1, n_cases) + 1, 2, m)
    presence = np.log([spec.presence for spec in _MODELS])
    keys = presence + rng.gumbel(size=(n_cases, m))  # Gumbel top-k: weighted, no repeats
    order = np.argsort(-keys, axis=1)
    chosen = np.sort(np.where(np.arange(m) < count[:, None], order, m), axis=1)
    model = chosen[chosen < m]
    case = np.repeat(np.arange(n_cases), count)
    log_chars = np.array([s.log_chars for s in _MODELS])[model]
    log_chars = log_chars + rng.normal(0, _LOG_CHARS_SD, len(model))
    shared = rng.standard_normal((len(model), 1))
    own = rng.standard_normal((len(model), len(crit.ids)))
    effect = crit.answer_sd * (np.sqrt(_SHARED_ANSWER) * shared + np.sqrt(1 - _SHARED_ANSWER) * own)
    return _Answers(case, model, np.cumsum(count) - count, count, log_chars, effect)


@dataclass(frozen=True)
class _Raters:
    specialty: np.ndarray
    activity: np.ndarray
    leniency: np.ndarray
    order: np.ndarray
    """Raters sorted by specialty; ``cum`` is their cumulative activity."""
    cum: np.ndarray
    spec_lo: np.ndarray
    spec_hi: np.ndarray
    spec_last: np.ndarray
    spec_has: np.ndarray

    def draw(self, rng: np.random.Generator, spec: np.ndarray, home_share: float) -> np.ndarray:
        """Raters for sessions in specialties ``spec``, in proportion to
        activity; a ``home_share`` of them from the session's own specialty."""
        n = len(self.order)
        home = (rng.random(len(spec)) < home_share) & self.spec_has[spec]
        lo = np.where(home, self.spec_lo[spec], 0.0)
        hi = np.where(home, self.spec_hi[spec], self.cum[-1])
        pos = np.searchsorted(self.cum, lo + rng.random(len(spec)) * (hi - lo), side="right")
        return self.order[np.minimum(pos, np.where(home, self.spec_last[spec], n - 1))]


def _raters(rng: np.random.Generator, n: int, spec: _Specialties, leniency_sd: float) -> _Raters:
    specialty = rng.choice(len(spec.names), n, p=spec.share)
    activity = rng.lognormal(0, 1.0, n)
    leniency = rng.normal(0, leniency_sd, n)
    leniency -= np.average(leniency, weights=activity)  # no net shift of the expected scores
    order = np.argsort(specialty, kind="stable")
    cum = np.cumsum(activity[order])
    counts = np.bincount(specialty, minlength=len(spec.names))
    first = np.cumsum(counts) - counts
    before = np.concatenate([[0.0], cum])  # activity of all raters before position i
    return _Raters(specialty, activity, leniency, order, cum, before[first],
                   before[first + counts], np.maximum(first + counts - 1, 0), counts > 0)
