"""The clinieval domain: entities, rubric, and per-audience read models."""

from clinieval.schema.domain import (
    Adjudication,
    Anchors,
    Answer,
    Case,
    Choice,
    Criterion,
    Judgment,
    Model,
    Preference,
    Rater,
    Rating,
    Rubric,
    Score,
    Study,
)
from clinieval.schema.read import BlindedAnswer, BlindedPairTask, BlindedRatingTask

__all__ = [
    "Adjudication",
    "Anchors",
    "Answer",
    "BlindedAnswer",
    "BlindedPairTask",
    "BlindedRatingTask",
    "Case",
    "Choice",
    "Criterion",
    "Judgment",
    "Model",
    "Preference",
    "Rater",
    "Rating",
    "Rubric",
    "Score",
    "Study",
]
