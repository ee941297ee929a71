"""Rubrics (versioned data files) and criterion maps that harmonise imported
scores with other criterion names or scales onto a rubric's -2..+2 scale."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clinieval.errors import InputError, from_validation
from clinieval.io.jsontext import loads, read_text
from clinieval.schema.domain import Rubric

DEFAULT_RUBRIC_FILE = "rubric_default.json"


def load_rubric(path: str | Path | None = None) -> Rubric:
    """Load a rubric JSON file; ``None`` gives the bundled default rubric.

    A criterion without its own anchors inherits the file's ``default_anchors``.
    A malformed file is an :class:`InputError` naming the file and the field.
    """
    if path is None:
        text = resources.files("clinieval.data").joinpath(DEFAULT_RUBRIC_FILE).read_text("utf-8")
        return rubric_from_dict(json.loads(text), DEFAULT_RUBRIC_FILE)
    source, text = read_text(path, limit=MAX_FILE_BYTES)
    return rubric_from_dict(loads(text, source), source)


MAX_FILE_BYTES = 16 << 20
"""Largest rubric or criterion-map file read."""


class RubricFile(BaseModel):
    """The structure of a rubric file, checked before the criteria are built."""

    model_config = ConfigDict(extra="forbid")

    rubric_id: str
    version: str
    description: str = ""
    scale: list[int] | None = None
    default_anchors: dict[str, str] | None = None
    criteria: list[dict[str, Any]]


def rubric_from_dict(data: object, source: str = "rubric") -> Rubric:
    """A :class:`Rubric` from parsed JSON; errors name ``source`` and the field."""
    try:
        head = RubricFile.model_validate(data)
        criteria = [{"anchors": head.default_anchors, **item} for item in head.criteria]
        return Rubric.model_validate({"rubric_id": head.rubric_id, "version": head.version,
                                      "description": head.description, "criteria": criteria},
                                     strict=False)
    except ValidationError as err:
        raise from_validation(source, err, "not a valid rubric") from None


def rubric_to_dict(rubric: Rubric) -> dict:
    data = rubric.model_dump(mode="json", by_alias=True)
    data["scale"] = [-2, -1, 0, 1, 2]
    return data


def _key(name: str) -> str:
    """Normalise a criterion name for matching: case, spacing and punctuation."""
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


class CriterionMap(BaseModel):
    """How source criteria map onto a rubric.

    ``rename`` maps a source criterion name (matched case- and
    punctuation-insensitively) to a rubric criterion id; names equal to a
    rubric id or name map to it without an entry. ``drop`` lists source
    criteria to ignore. Scores on ``source_scale`` (lo, hi) are mapped
    linearly onto -2..+2 and must land on integers (1..5 → score − 3).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "identity"
    rename: dict[str, str] = Field(default_factory=dict)
    drop: tuple[str, ...] = ()
    source_scale: tuple[int, int] = (-2, 2)

    @model_validator(mode="after")
    def _check_scale(self) -> CriterionMap:
        lo, hi = self.source_scale
        if hi <= lo or 4 % (hi - lo) != 0 and (hi - lo) % 4 != 0:
            raise ValueError(f"source_scale {self.source_scale} cannot map onto -2..+2 integers")
        return self

    def resolve(self, rubric: Rubric, source_name: str) -> str | None:
        """The rubric criterion id for ``source_name``, or None if dropped.

        Raises KeyError naming the known criteria when there is no mapping.
        """
        key = _key(source_name)
        if key in {_key(d) for d in self.drop}:
            return None
        renamed = {_key(k): v for k, v in self.rename.items()}
        if key in renamed:
            return renamed[key]
        for c in rubric.criteria:
            if key in (_key(c.criterion_id), _key(c.name)):
                return c.criterion_id
        known = ", ".join(rubric.ids)
        raise KeyError(f"unknown criterion {source_name!r} (rubric has: {known};"
                       " add it to the criterion map's rename or drop)")

    def rescale(self, scores: np.ndarray) -> np.ndarray:
        """Map source-scale scores onto -2..+2; NaN where off-scale or non-integral."""
        lo, hi = self.source_scale
        values = np.asarray(scores, dtype=float)
        mapped = (values - lo) * 4.0 / (hi - lo) - 2.0
        valid = (values >= lo) & (values <= hi) & (mapped == np.round(mapped))
        return np.where(valid, mapped, np.nan)

    def rescale_one(self, score: object, *, source: str, row: int | str, field: str) -> int:
        """Rescale a single source score, raising :class:`InputError` when it is
        not an integer on the source scale."""
        lo, hi = self.source_scale
        expected = f"an integer score from {lo} to {hi}"
        if isinstance(score, bool) or not isinstance(score, int | float | str):
            raise InputError(source, "score is not a number", row=row, field=field,
                             expected=expected, got=score)
        try:
            value = float(score)
        except ValueError:
            raise InputError(source, "score is not a number", row=row, field=field,
                             expected=expected, got=score) from None
        mapped = self.rescale(np.array([value]))[0]
        if np.isnan(mapped) or value != int(value):
            raise InputError(source, "score is off the scale", row=row, field=field,
                             expected=expected, got=score)
        return int(mapped)

    def describe(self) -> dict:
        return self.model_dump(mode="json")


IDENTITY = CriterionMap()

MOOVE_MAP = CriterionMap(
    name="moove-1to5",
    source_scale=(1, 5),
    rename={
        "Harmfulness": "harmlessness",
        "Safety": "harmlessness",
        "Alignment with guidelines": "accuracy",
        "Alignment with clinical guidelines": "accuracy",
        "Factual accuracy": "accuracy",
        "Correctness": "accuracy",
        "Completeness": "completeness",
        "Completeness and relevance": "completeness",
        "Reasoning": "reasoning",
        "Contextual relevance": "context_awareness",
        "Context awareness": "context_awareness",
        "Ask for context": "context_seeking",
        "Question comprehension": "context_seeking",
        "Uncertainty": "uncertainty",
        "Confidence": "uncertainty",
        "Communication": "communication",
        "Clarity": "communication",
        "Bias": "fairness",
        "Fairness and bias": "fairness",
    },
)
"""Default map for MOOVE-style exports: 1–5 scores, public criterion names.

Two source criteria that land on the same rubric criterion for one answer are
an input error naming both."""


def load_criterion_map(path: str | Path | None, default: CriterionMap = IDENTITY) -> CriterionMap:
    """A criterion map from a JSON file, or ``default`` when no path is given;
    a malformed file is an :class:`InputError` naming the file and the field."""
    if path is None:
        return default
    source, text = read_text(path, limit=MAX_FILE_BYTES)
    try:
        return CriterionMap.model_validate(loads(text, source))
    except ValidationError as err:
        raise from_validation(source, err, "not a valid criterion map") from None


_ANCHOR_COLUMNS = {"-2": "anchor_m2", "-1": "anchor_m1", "0": "anchor_0", "1": "anchor_p1",
                   "2": "anchor_p2"}


def rubric_to_rows(rubric: Rubric) -> list[dict]:
    """The rubric as rows of the ``criteria`` table."""
    rows = []
    for position, c in enumerate(rubric.criteria):
        anchors = c.anchors.model_dump(by_alias=True)
        row = {k: getattr(c, k) for k in ("criterion_id", "name", "definition",
                                          "safety_critical", "group", "weight")}
        row.update({col: anchors[score] for score, col in _ANCHOR_COLUMNS.items()})
        row["position"] = position
        rows.append(row)
    return rows


def rubric_from_rows(rows: list[dict], info: object = None, source: str = "criteria table",
                     ) -> Rubric:
    """Rebuild a rubric from ``criteria`` table rows (inverse of :func:`rubric_to_rows`);
    ``info`` (rubric id, version, description) may come from an imported manifest,
    so anything but an object of strings is ignored."""
    info = {k: v for k, v in info.items() if isinstance(v, str)} if isinstance(info, dict) else {}
    criteria = []
    for row in sorted(rows, key=lambda r: (r.get("position") is None, r.get("position") or 0)):
        anchors = {score: row.get(col) or "" for score, col in _ANCHOR_COLUMNS.items()}
        criteria.append({
            "criterion_id": row["criterion_id"], "name": row["name"],
            "definition": row.get("definition") or "", "anchors": anchors,
            "safety_critical": bool(row.get("safety_critical")),
            "group": row.get("group") or "effectiveness", "weight": row.get("weight") or 1.0,
        })
    return rubric_from_dict({"rubric_id": info.get("rubric_id", "imported"),
                             "version": info.get("version", "unknown"),
                             "description": info.get("description", ""), "criteria": criteria},
                            source)
