"""Domain objects, one at a time (the API, the web platform, fixtures).

Bulk data travels as Arrow tables (:mod:`clinieval.contract.tabular`) and is
validated column-wise by :mod:`clinieval.contract.validate`; these classes
state the same rules for single objects.

Invariant: this module depends only on the contract's vocabulary (and
pydantic), so the validator, one floor up, can read its rules.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clinieval.contract import vocabulary

# The vocabulary comes from the contract; Literal[tuple] lists its members.
Score = Annotated[int, Field(ge=vocabulary.SCORE_MIN, le=vocabulary.SCORE_MAX, strict=True)]
"""An anchored rubric score: an integer on :data:`clinieval.contract.vocabulary.SCORES`
(bools and floats refused)."""
Choice = Literal[vocabulary.CHOICES]
Side = Literal[vocabulary.SIDES]
ParseStatus = Literal[vocabulary.PARSE_STATUSES]
Verdict = Literal[vocabulary.ADJUDICATION_VERDICTS]
Id = Field(min_length=1, max_length=200)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Study(_Strict):
    """A named collection of cases with its blinding policy."""

    study_id: str = Id
    name: str
    description: str | None = None
    blinded: bool = True
    created_at: datetime | None = None


class Case(_Strict):
    """A clinical question put to the models, with its specialty and context."""

    case_id: str = Id
    specialty: str = Field(min_length=1)
    prompt: str | None = None
    prompt_words: int | None = Field(default=None, ge=0)
    study_id: str | None = None
    category: str | None = None
    subcategory: str | None = None
    department: str | None = None
    population: str | None = None
    risk_level: int | None = Field(default=None, ge=1, le=5)
    language: str | None = None
    care_setting: str | None = None
    country: str | None = None
    reference_answer: str | None = None
    weight: float | None = Field(default=None, gt=0)


class Model(_Strict):
    """A candidate model, logged with its exact version and prices per 1M tokens."""

    model_id: str = Id
    display_name: str | None = None
    version: str | None = None
    provider: str | None = None
    price_input_per_m: float | None = Field(default=None, ge=0)
    price_output_per_m: float | None = Field(default=None, ge=0)


class Answer(_Strict):
    """One model response to one case (``sample_index`` counts repeats)."""

    answer_id: str = Id
    case_id: str = Id
    model_id: str = Id
    text: str | None = None
    length_chars: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    latency_s: float | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    sample_index: int = Field(default=0, ge=0)
    temperature: float | None = Field(default=None, ge=0)
    system_prompt_variant: str | None = None


class Rater(_Strict):
    """A clinician, known only by a pseudonymous id."""

    rater_id: str = Id
    specialty: str | None = None
    country: str | None = None
    organisation: str | None = None
    experience_years: int | None = Field(default=None, ge=0, le=80)
    role: str | None = None


class Anchors(_Strict):
    """What each score means for one criterion."""

    m2: str = Field(alias="-2")
    m1: str = Field(alias="-1")
    zero: str = Field(alias="0")
    p1: str = Field(alias="1")
    p2: str = Field(alias="2")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def text(self, score: int) -> str:
        return {-2: self.m2, -1: self.m1, 0: self.zero, 1: self.p1, 2: self.p2}[score]


class Criterion(_Strict):
    """A rubric criterion with anchors for every score and a safety flag."""

    criterion_id: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_]+$")
    name: str
    definition: str
    anchors: Anchors
    safety_critical: bool = False
    group: Literal["safety", "effectiveness"] = "effectiveness"
    weight: float = Field(default=1.0, ge=0)


class Rubric(_Strict):
    """A versioned set of criteria with unique ids."""

    rubric_id: str
    version: str
    description: str = ""
    criteria: tuple[Criterion, ...]

    @model_validator(mode="after")
    def _unique_criteria(self) -> Rubric:
        ids = [c.criterion_id for c in self.criteria]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate criterion ids: {', '.join(dupes)}")
        if not ids:
            raise ValueError("a rubric needs at least one criterion")
        return self

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.criterion_id for c in self.criteria)

    @property
    def safety_critical(self) -> tuple[str, ...]:
        return tuple(c.criterion_id for c in self.criteria if c.safety_critical)

    def get(self, criterion_id: str) -> Criterion:
        for c in self.criteria:
            if c.criterion_id == criterion_id:
                return c
        raise KeyError(f"criterion {criterion_id!r} is not in rubric {self.rubric_id!r}")


class Rating(_Strict):
    """One clinician's score of one answer on one criterion; edits are new revisions."""

    answer_id: str = Id
    rater_id: str = Id
    criterion_id: str = Id
    score: Score
    rating_id: int | None = None
    revision: int = Field(default=0, ge=0)
    review_id: int | None = None
    comment: str | None = None
    time_spent_s: float | None = Field(default=None, ge=0)
    created_at: datetime | None = None

    def check_rubric(self, rubric: Rubric) -> Rating:
        """Raise ValueError unless the criterion exists in ``rubric``."""
        if self.criterion_id not in rubric.ids:
            raise ValueError(
                f"criterion {self.criterion_id!r} is not in rubric {rubric.rubric_id!r}"
                f" (known: {', '.join(rubric.ids)})"
            )
        return self


class Preference(_Strict):
    """A blinded pairwise vote between two answers of the same case."""

    case_id: str = Id
    answer_a_id: str = Id
    answer_b_id: str = Id
    choice: Choice
    preference_id: int | None = None
    shown_left: Side | None = None
    rater_id: str | None = None
    created_at: datetime | None = None

    @model_validator(mode="after")
    def _distinct_answers(self) -> Preference:
        if self.answer_a_id == self.answer_b_id:
            raise ValueError("a preference compares two different answers (A == B)")
        return self

    def check_answers(self, answers: dict[str, Answer]) -> Preference:
        """Raise ValueError unless both answers exist and belong to this case."""
        for side, answer_id in (("A", self.answer_a_id), ("B", self.answer_b_id)):
            answer = answers.get(answer_id)
            if answer is None:
                raise ValueError(f"answer {side} {answer_id!r} does not exist")
            if answer.case_id != self.case_id:
                raise ValueError(
                    f"answer {side} {answer_id!r} belongs to case {answer.case_id!r},"
                    f" not {self.case_id!r}"
                )
        return self


class Judgment(_Strict):
    """An automated judge's verdict on one answer for one criterion or rule."""

    answer_id: str = Id
    judge_model: str = Id
    criterion_id: str = Id
    parse_status: ParseStatus
    score: float | None = None
    judgment_id: int | None = None
    raw_output: str | None = None
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    created_at: datetime | None = None

    @model_validator(mode="after")
    def _score_iff_parsed(self) -> Judgment:
        parsed = vocabulary.PARSE_STATUSES[0]
        if (self.parse_status == parsed) != (self.score is not None):
            raise ValueError(f"a judgment has a score exactly when parse_status is {parsed!r}")
        return self


REASON_MAX = 5000
"""The longest adjudication reason (a paragraph or two, as a rationale is)."""


class Adjudication(_Strict):
    """An adjudicator's verdict on one disputed criterion of one answer, with
    the reason; a revised verdict is a new row naming the one it supersedes."""

    answer_id: str = Id
    criterion_id: str = Id
    rater_id: str = Id
    verdict: Verdict
    reason: str = Field(min_length=1, max_length=REASON_MAX)
    adjudication_id: int | None = None
    supersedes: int | None = Field(default=None, ge=1)
    created_at: datetime | None = None
