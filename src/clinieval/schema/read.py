"""Read models per audience.

What a clinician's browser receives during a blinded task is its own type:
it carries answer texts under neutral slot labels and no field from which a
model can be identified (model id, name, version, provider, answer id).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from clinieval.schema.domain import Criterion

MODEL_IDENTIFYING_FIELDS = frozenset(
    {"model_id", "display_name", "version", "provider", "answer_id", "judge_model"}
)


class _ReadModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BlindedAnswer(_ReadModel):
    """One answer as a blinded clinician sees it: a slot label and the text."""

    slot: str
    text: str


class BlindedPairTask(_ReadModel):
    """A pairwise review as shown to a clinician: a case and two answers
    labelled only by screen position."""

    task_token: str
    prompt: str
    specialty: str
    left: BlindedAnswer
    right: BlindedAnswer
    criteria: tuple[Criterion, ...]


class BlindedRatingTask(_ReadModel):
    """A single-answer rubric task as shown to a clinician."""

    task_token: str
    prompt: str
    specialty: str
    answer: BlindedAnswer
    criteria: tuple[Criterion, ...]
