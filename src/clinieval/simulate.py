"""Crossed rating designs with a known truth, for checking interval coverage.

Every model answers the same cases; each answer is rated by a few raters
drawn from one pool shared by all models. The score is

    clip(round(model effect + answer effect + rater leniency + noise), -2, 2)

with normal effects. The estimands are over the population of answers and
raters: a model's expected score and its P(score <= threshold), computed
exactly from the normal distribution of the summed effects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit
from scipy.stats import norm

from clinieval.contract.vocabulary import SCORES

LOW, HIGH = min(SCORES), max(SCORES)
MODEL_EFFECTS = (1.2, 0.9, 0.7, 0.5, 0.3, 0.0)
STRENGTHS = (-0.3, 0.0, 0.1, 0.5, -0.1, -0.2)  # model 3 is preferred but not the safest


@dataclass(frozen=True)
class Design:
    answers: int = 40  # answers per model (one per case)
    raters: int = 30  # size of the shared rater pool
    per_answer: int = 3  # raters per answer
    answer_sd: float = 0.6
    rater_sd: float = 0.5
    noise_sd: float = 0.6
    votes: int = 0  # pairwise votes (two models' answers to one case)
    effects: tuple[float, ...] = MODEL_EFFECTS

    @property
    def total_sd(self) -> float:
        return float(np.sqrt(self.answer_sd**2 + self.rater_sd**2 + self.noise_sd**2))


@dataclass(frozen=True)
class Ratings:
    rater: np.ndarray
    case: np.ndarray
    model: np.ndarray
    score: np.ndarray  # int in -2..2


@dataclass(frozen=True)
class Votes:
    rater: np.ndarray
    case: np.ndarray
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray  # 0 = A wins, 1 = B wins


def score_probabilities(effects, sd: float) -> np.ndarray:
    """``(M, 5)`` P(score = s) when the latent value is normal(effect, sd):
    rounding maps [s - 0.5, s + 0.5) to s, clipping folds the tails."""
    edges = np.arange(LOW, HIGH) + 0.5  # boundaries between adjacent scores
    cdf = norm.cdf((edges[None, :] - np.asarray(effects, float)[:, None]) / sd)
    cdf = np.column_stack([np.zeros(len(cdf)), cdf, np.ones(len(cdf))])
    return np.diff(cdf, axis=1)


def truth(design: Design, threshold: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Population mean score and P(score <= threshold) per model."""
    probs = score_probabilities(design.effects, design.total_sd)
    return probs @ np.arange(LOW, HIGH + 1), probs[:, : threshold - LOW + 1].sum(axis=1)


def any_fail_truth(design: Design, threshold: int = -1, crossed: bool = True) -> np.ndarray:
    """Per model, P(at least one of ``per_answer`` raters scores <= threshold):
    given the answer effect the raters fail independently, so integrate
    ``1 - (1 - q(a))**k`` over the answer effect (Gauss-Hermite, 80 nodes).
    ``crossed=False``: all variance in the noise, as in :func:`simulate`."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    answer = (design.answer_sd if crossed else 0.0) * nodes
    spread = np.sqrt(design.rater_sd**2 + design.noise_sd**2) if crossed else design.total_sd
    latent = np.asarray(design.effects, float)[:, None] + answer[None, :]
    q = norm.cdf((threshold + 0.5 - latent) / spread)
    return (1 - (1 - q) ** design.per_answer) @ weights / weights.sum()


def simulate(design: Design, rng: np.random.Generator, *, crossed: bool = True
             ) -> tuple[Ratings, Votes]:
    """One snapshot. ``crossed=False`` puts all the variance into the noise
    (independent ratings, same marginal distribution)."""
    models, cases = len(design.effects), design.answers
    sd = (design.answer_sd, design.rater_sd, design.noise_sd) if crossed else (
        0.0, 0.0, design.total_sd)
    answer_effect = rng.normal(0, sd[0], (cases, models))
    leniency = rng.normal(0, sd[1], design.raters)
    raters = np.argsort(rng.random((cases * models, design.raters)), axis=1)[:, : design.per_answer]
    case = np.repeat(np.arange(cases), models * design.per_answer)
    model = np.tile(np.repeat(np.arange(models), design.per_answer), cases)
    latent = (np.asarray(design.effects)[model] + answer_effect[case, model]
              + leniency[raters.ravel()] + rng.normal(0, sd[2], case.size))
    score = np.clip(np.round(latent), LOW, HIGH).astype(np.int64)
    return Ratings(raters.ravel(), case, model, score), _votes(design, rng)


def _votes(design: Design, rng: np.random.Generator) -> Votes:
    """Bradley-Terry votes between two models' answers to one case."""
    n, models = design.votes, len(STRENGTHS)
    pair = np.argsort(rng.random((n, models)), axis=1)[:, :2]
    strength = np.asarray(STRENGTHS)
    won = rng.random(n) < expit(strength[pair[:, 0]] - strength[pair[:, 1]])
    return Votes(rng.integers(0, design.raters, n), rng.integers(0, design.answers, n),
                 pair[:, 0], pair[:, 1], np.where(won, 0, 1))
