"""Draw the whole world, in a fixed order, before it becomes tables.

The order of the calls in :func:`_draw` is part of the output: two calls
that share a stream (models, specialties) must stay in the order they are
in, or every later draw of that stream changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clinieval.synth.constants import _INTERACTION_SD, _MODELS
from clinieval.synth.design import Progress, SynthSettings, _Design, _design
from clinieval.synth.entities import _Answers, _answers, _Cases, _cases, _Raters, _raters
from clinieval.synth.quality import (
    _Criteria,
    _criteria,
    _quality,
    _Specialties,
    _specialties,
    _specialty_effects,
)
from clinieval.synth.scores import _scores, _seconds, _votes
from clinieval.synth.sessions import _Sessions, _sessions


@dataclass(frozen=True)
class _World:
    """Everything drawn, before it becomes tables."""

    settings: SynthSettings
    design: _Design
    crit: _Criteria
    quality: np.ndarray
    spec: _Specialties
    effect: np.ndarray
    """Specialty x criterion latent offset."""
    interaction: np.ndarray
    cases: _Cases
    answers: _Answers
    raters: _Raters
    sessions: _Sessions
    scores: np.ndarray
    choice: np.ndarray
    vote_side: np.ndarray
    spent: np.ndarray
    done: np.ndarray


def _draw(rng: dict[str, np.random.Generator], s: SynthSettings, criterion_ids: tuple[str, ...],
          step: Progress) -> _World:
    crit = _criteria(criterion_ids, s.leniency_sd, s.consensus_drift)
    d = _design(s, len(criterion_ids))
    quality = _quality(rng["models"], crit)
    spec = _specialties(rng["specialties"], d.n_specialties)
    interaction = rng["models"].normal(0, _INTERACTION_SD,
                                       (len(_MODELS), len(spec.names), len(criterion_ids)))
    cases = _cases(rng["cases"], d.n_cases, spec, s.consensus_drift)
    answers = _answers(rng["answers"], d.n_cases, s.answers_per_case, crit)
    mix = np.bincount(cases.specialty[answers.case] * len(_MODELS) + answers.model,
                      minlength=len(spec.names) * len(_MODELS)).reshape(len(spec.names), -1)
    effect = _specialty_effects(rng["specialties"], spec, quality, interaction, crit, mix)
    raters = _raters(rng["raters"], d.n_raters, spec, s.leniency_sd)
    step("sessions", 0.15)
    sessions = _sessions(rng["sessions"], d, s, cases, answers, raters)
    step("scores", 0.3)
    scores = _scores(rng["scores"], sessions, cases, answers, raters, quality, effect,
                     interaction, crit)
    step("votes", 0.45)
    choice, vote_side = _votes(rng["votes"], s, sessions, answers, scores, crit)
    spent, done = _seconds(rng["times"], sessions, len(criterion_ids))
    return _World(s, d, crit, quality, spec, effect, interaction, cases, answers, raters, sessions,
                  scores, choice, vote_side, spent, done)
