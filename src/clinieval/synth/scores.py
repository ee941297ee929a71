"""What raters give: ordered-probit scores, the time each rating takes, and
the pairwise votes.

Scores draw from the "scores" stream, times from "times" and votes from
"votes"; timestamps are sums of integer microseconds so that no library's
float rounding can move them.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from clinieval.synth.constants import _CUTS, _SECONDS_PER_CRITERION, _SECONDS_SIGMA
from clinieval.synth.design import SynthSettings
from clinieval.synth.entities import _Answers, _Cases, _Raters
from clinieval.synth.quality import _Criteria, _solve_intercept
from clinieval.synth.sessions import _Sessions


def _scores(rng: np.random.Generator, sessions: _Sessions, cases: _Cases, answers: _Answers,
            raters: _Raters, quality: np.ndarray, effect: np.ndarray,
            interaction: np.ndarray, crit: _Criteria) -> np.ndarray:
    """Side x criterion scores: latent cut at :data:`_CUTS` into -2..+2."""
    ans = sessions.side_answer
    model, case = answers.model[ans], answers.case[ans]
    specialty = cases.specialty[case]
    shift = raters.leniency[sessions.rater[sessions.side_unit]]
    noise_factor = cases.noise_factor[case]
    scores = np.empty((len(ans), len(crit.ids)), dtype=np.int8)
    for c in range(len(crit.ids)):
        latent = (quality[model, c] + effect[specialty, c] + interaction[model, specialty, c]
                  + answers.effect[ans, c] + shift)
        latent += crit.noise_sd[c] * noise_factor * rng.standard_normal(len(ans))
        scores[:, c] = np.searchsorted(_CUTS, latent) - 2
    return scores


def _seconds(rng: np.random.Generator, sessions: _Sessions, n_criteria: int):
    """Seconds spent per rating (to 0.1 s), and each rating's time since the
    session start in integer microseconds: sums of integers, so no library's
    float rounding can move a timestamp."""
    n = len(sessions.side_unit)
    spent = rng.lognormal(np.log(_SECONDS_PER_CRITERION), _SECONDS_SIGMA, (n, n_criteria))
    tenths = np.rint(np.clip(spent, 2.0, 900.0) * 10).astype(np.int64)
    done = np.cumsum(tenths, axis=1) * 100_000
    second = np.flatnonzero(sessions.side_pos == 1)
    done[second] += done[second - 1, -1:]
    return tenths / 10, done


def _votes(rng: np.random.Generator, s: SynthSettings, sessions: _Sessions, answers: _Answers,
           scores: np.ndarray, crit: _Criteria) -> tuple[np.ndarray, np.ndarray]:
    """Choice per review (0 = A, 1 = B, 2 = tie, 3 = both_bad), and the side
    holding the review's last rating (the vote comes after it)."""
    side_a, side_b = _review_sides(sessions)
    a, b = sessions.answer_a, sessions.answer_b
    harm = scores[:, crit.harm].astype(float)
    acc = scores[:, crit.acc].astype(float)
    logit = (s.length_coef * (answers.log_chars[a] - answers.log_chars[b])
             + s.harmlessness_coef * (harm[side_a] - harm[side_b])
             + s.left_bias_logit * np.where(sessions.left_is_a, 1.0, -1.0))
    poor = -(harm[side_a] + harm[side_b] + acc[side_a] + acc[side_b]) / 4
    bad_offset = s.both_bad_poor_coef * poor
    p_bad = expit(_solve_intercept(bad_offset, s.both_bad_rate) + bad_offset)
    tie_offset = -np.abs(logit)
    p_tie = (1 - p_bad) * expit(_solve_intercept(tie_offset, s.tie_rate, 1 - p_bad) + tie_offset)
    u = rng.random(len(a))
    decided = np.where(rng.random(len(a)) < expit(logit), 0, 1)
    choice = np.where(u < p_bad, 3, np.where(u < p_bad + p_tie, 2, decided)).astype(np.int8)
    return choice, np.maximum(side_a, side_b)


def _review_sides(sessions: _Sessions) -> tuple[np.ndarray, np.ndarray]:
    """Side index of answer A and of answer B for each review."""
    left = np.empty(sessions.n_reviews, dtype=np.int64)
    is_left = (sessions.side_unit < sessions.n_reviews) & (sessions.side_pos == 0)
    left[sessions.side_unit[is_left]] = np.flatnonzero(is_left)
    return (np.where(sessions.left_is_a, left, left + 1),
            np.where(sessions.left_is_a, left + 1, left))
