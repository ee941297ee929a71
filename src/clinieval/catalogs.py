"""Data files that describe what is scored: gate indicators (CSEDB style),
the task taxonomy (MedHELM style) and a registry of benchmarks placed in it.

Each file is validated by pydantic on load; an error names the file and the
field (``indicators[3].weight``). The bundled defaults live in
``clinieval/data``; a study can pass its own file.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clinieval.errors import InputError, from_validation
from clinieval.io.jsontext import loads, read_text

GATES = ("safety", "effectiveness")
SCORING = ("binary", "graded")
METRICS = ("exact_match", "f1", "jury", "rubric", "gate")
"""How a benchmark is scored: exact match, F1, an LLM jury's 1..5 scores, a
rubric score (HealthBench style) or a gate score (CSEDB style)."""

DEFAULT_INDICATORS = "indicators_default.json"
DEFAULT_TAXONOMY = "taxonomy_medhelm.json"
EXAMPLE_BENCHMARKS = "benchmarks_example.json"
_MAX_BYTES = 5_000_000
_STRICT = ConfigDict(extra="forbid", frozen=True)


class Indicator(BaseModel):
    """One gate indicator: its gate, weight 1..5 and scoring type."""

    model_config = _STRICT
    indicator_id: str = Field(min_length=1)
    gate: Literal[GATES]
    name: str = Field(min_length=1)
    description: str = ""
    scoring: Literal[SCORING]
    weight: int = Field(ge=1, le=5)
    basis: Literal["paper", "unnamed", "study"] = "study"


class IndicatorSet(BaseModel):
    """A versioned set of indicators with unique ids."""

    model_config = _STRICT
    indicator_set_id: str = Field(min_length=1)
    version: int = Field(ge=1)
    notes: list[str] = []
    indicators: list[Indicator] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> IndicatorSet:
        _no_duplicates([i.indicator_id for i in self.indicators], "indicator_id")
        return self

    def by_id(self) -> dict[str, Indicator]:
        return {i.indicator_id: i for i in self.indicators}


class Subcategory(BaseModel):
    """A subcategory of tasks."""

    model_config = _STRICT
    subcategory_id: str = Field(min_length=1)
    label: str = Field(min_length=1)


class Category(BaseModel):
    """A category of tasks and its subcategories."""

    model_config = _STRICT
    category_id: str = Field(min_length=1)
    label: str = Field(min_length=1)
    description: str = ""
    subcategories: list[Subcategory] = Field(min_length=1)


class Taxonomy(BaseModel):
    """Categories of medical tasks, each with its subcategories (ids unique)."""

    model_config = _STRICT
    taxonomy_id: str = Field(min_length=1)
    version: int = Field(ge=1)
    source: str = ""
    categories: list[Category] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Taxonomy:
        _no_duplicates([c.category_id for c in self.categories], "category_id")
        _no_duplicates([s.subcategory_id for c in self.categories for s in c.subcategories],
                       "subcategory_id")
        return self

    def parent(self) -> dict[str, str]:
        """Category id of every subcategory id."""
        return {s.subcategory_id: c.category_id for c in self.categories for s in c.subcategories}


class Normalisation(BaseModel):
    """How a raw benchmark score maps to 0..1: as is (``identity``), or
    linearly from ``low``..``high`` (``range``); ``higher_is_better`` false
    flips the scale (an error rate becomes a success rate)."""

    model_config = _STRICT
    kind: Literal["identity", "range"]
    low: float | None = None
    high: float | None = None
    higher_is_better: bool = True

    @model_validator(mode="after")
    def _bounds(self) -> Normalisation:
        if self.kind == "range" and (self.low is None or self.high is None
                                     or not self.high > self.low):
            raise ValueError("a range normalisation needs low < high")
        return self

    def apply(self, raw: float) -> float:
        return float(self.apply_many(np.asarray([raw], dtype=float))[0])

    def apply_many(self, raw: np.ndarray) -> np.ndarray:
        """:meth:`apply` on an array of raw scores at once."""
        value = raw if self.kind == "identity" else (raw - self.low) / (self.high - self.low)
        value = np.clip(value, 0.0, 1.0)
        return value if self.higher_is_better else 1.0 - value


class Benchmark(BaseModel):
    """One benchmark placed in the taxonomy, with its metric and normalisation."""

    model_config = _STRICT
    benchmark_id: str = Field(min_length=1)
    label: str = ""
    category: str = Field(min_length=1)
    subcategory: str = Field(min_length=1)
    metric: Literal[METRICS]
    normalisation: Normalisation


class BenchmarkRegistry(BaseModel):
    """The benchmarks of a study, checked against a taxonomy."""

    model_config = _STRICT
    registry_id: str = Field(min_length=1)
    version: int = Field(ge=1)
    taxonomy: str = Field(min_length=1)
    description: str = ""
    benchmarks: list[Benchmark] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> BenchmarkRegistry:
        _no_duplicates([b.benchmark_id for b in self.benchmarks], "benchmark_id")
        return self


def _no_duplicates(ids: list[str], field: str) -> None:
    seen = set()
    for value in ids:
        if value in seen:
            raise ValueError(f"duplicate {field} {value!r}")
        seen.add(value)


def _read(path: str | Path | None, default: str) -> tuple[str, object]:
    if path is None:
        return default, json.loads(resources.files("clinieval.data").joinpath(default)
                                   .read_text("utf-8"))
    source, text = read_text(path, limit=_MAX_BYTES)
    return source, loads(text, source)


def _validate(model: type[BaseModel], source: str, data: object, what: str):
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise from_validation(source, err, f"not a valid {what}") from None


def load_indicators(path: str | Path | None = None) -> IndicatorSet:
    """Gate indicators from a JSON file; ``None`` gives the CSEDB-style default."""
    return _validate(IndicatorSet, *_read(path, DEFAULT_INDICATORS), "indicator set")


def load_taxonomy(path: str | Path | None = None) -> Taxonomy:
    """A task taxonomy from a JSON file; ``None`` gives the MedHELM-style one."""
    return _validate(Taxonomy, *_read(path, DEFAULT_TAXONOMY), "taxonomy")


def load_benchmarks(path: str | Path | None = None,
                    taxonomy: Taxonomy | None = None) -> BenchmarkRegistry:
    """A benchmark registry; every benchmark's subcategory must belong to its
    category in ``taxonomy`` (default: the bundled one)."""
    source, data = _read(path, EXAMPLE_BENCHMARKS)
    registry = _validate(BenchmarkRegistry, source, data, "benchmark registry")
    parent = (taxonomy or load_taxonomy()).parent()
    for i, bench in enumerate(registry.benchmarks):
        if parent.get(bench.subcategory) != bench.category:
            allowed = sorted(k for k, v in parent.items() if v == bench.category)
            raise InputError(source, "subcategory is not in this category of the taxonomy",
                             field=f"benchmarks[{i}].subcategory",
                             expected=f"one of {allowed}",
                             got=bench.subcategory)
    return registry
