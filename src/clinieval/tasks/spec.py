"""Benchmark files: a benchmark as data (TOML, or YAML with the same keys),
written without Python.

The smallest file names its cases, its prompt and its scorer::

    id = "medqa-sample"
    category = "decision_support"        # MedHELM taxonomy
    subcategory = "knowledge_support"
    cases = "medqa_sample.jsonl"         # beside this file; format from the file
    template = "multiple_choice.j2"      # bundled, beside this file, or in the prompts folder
    answer = "choice"                    # text, choice, number or json
    scorer = "choice"

Longer forms: ``[cases]`` (``path``, ``format``, ``limit``, and for plain
JSONL/CSV the ``id``, ``reference`` and ``choices`` columns), ``[prompt]``
(``system``, ``template`` or ``template_file``, ``[[prompt.examples]]``
few-shot turns), ``[answer]`` (``format``, ``unit``, ``tolerance``,
``abs_tolerance``, ``schema``, ``field``, ``normalise``), ``[[scorers]]``
(``kind`` plus its options; the first is the benchmark's score) and
``[normalisation]`` (the registry's 0..1 mapping: ``kind = "identity"`` or
``"range"`` with ``low``/``high``). Every error names the file and the key
(``scorers[1].kind``).
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clinieval.catalogs import Normalisation, load_taxonomy
from clinieval.errors import InputError, from_validation

ANSWER_FORMATS = ("text", "choice", "number", "json")
CASE_FORMATS = ("auto", "medqa", "pubmedqa", "medmcqa", "healthbench", "jsonl", "csv", "import")
REFERENCE_SCORERS = ("exact_match", "choice", "numeric", "regex", "f1")
JUDGE_SCORERS = ("rubric", "jury", "rule")
SCORER_KINDS = (*REFERENCE_SCORERS, *JUDGE_SCORERS, "python")
NORMALISE_STEPS = ("lower", "punctuation", "articles", "whitespace")
METRIC_OF = {"exact_match": "exact_match", "choice": "exact_match", "numeric": "exact_match",
             "regex": "exact_match", "python": "exact_match", "f1": "f1", "jury": "jury",
             "rubric": "rubric", "rule": "rubric"}
"""The registry metric (:data:`clinieval.catalogs.METRICS`) of each scorer kind."""
MAX_BYTES = 2_000_000
_STRICT = ConfigDict(extra="forbid", frozen=True)


class Cases(BaseModel):
    model_config = _STRICT
    path: str = Field(min_length=1, description="Cases file, relative to the benchmark file.")
    format: Literal[CASE_FORMATS] = "auto"
    limit: int | None = Field(default=None, ge=1)
    id: str = Field(default="id", min_length=1, description="JSONL/CSV: the id column.")
    reference: str = Field(default="answer", min_length=1,
                           description="JSONL/CSV: the reference answer's column.")
    choices: str = Field(default="choices", min_length=1,
                         description="JSONL/CSV: the choices column (object or list).")


class Example(BaseModel):
    """A few-shot turn pair shown before the case."""

    model_config = _STRICT
    user: str = Field(min_length=1)
    assistant: str = Field(min_length=1)


class Prompt(BaseModel):
    model_config = _STRICT
    system: str = ""
    template: str | None = Field(default=None, description="Jinja2 text of the user turn.")
    template_file: str | None = Field(default=None, description="A Jinja2 file.")
    examples: tuple[Example, ...] = ()

    @model_validator(mode="after")
    def _one_template(self) -> Prompt:
        if self.template is not None and self.template_file is not None:
            raise ValueError("give template or template_file, not both")
        return self


class Answer(BaseModel):
    model_config = _STRICT
    format: Literal[ANSWER_FORMATS] = "text"
    unit: str | None = Field(default=None, description="number: the unit the answer is in.")
    tolerance: float = Field(default=0.0, ge=0, description="number: relative tolerance.")
    abs_tolerance: float = Field(default=0.0, ge=0, description="number: absolute tolerance.")
    schema_: dict[str, Any] | None = Field(default=None, alias="schema",
                                           description="json: the answer's JSON schema.")
    field: str | None = Field(default=None, description="json: the key holding the answer.")
    normalise: tuple[Literal[NORMALISE_STEPS], ...] = NORMALISE_STEPS


class Scorer(BaseModel):
    """One scorer and its options (only those of its kind are allowed)."""

    model_config = _STRICT
    kind: str
    name: str | None = Field(default=None, description="Its name in the results (default"
                             " the kind).")
    pattern: str | None = Field(default=None, description="regex: the answer is group 1.")
    function: str | None = Field(default=None, description="python: a registered name, or"
                                 " FILE.py:NAME beside the benchmark file.")
    judge: str | None = Field(default=None, description="rubric, jury, rule: the judge's"
                              " model file (else --judge).")
    jurors: int = Field(default=1, ge=1, le=50)

    @field_validator("kind")
    @classmethod
    def _known(cls, kind: str) -> str:
        if kind not in SCORER_KINDS:
            raise ValueError(f"unknown scorer {kind!r}; known: {', '.join(SCORER_KINDS)}")
        return kind

    @model_validator(mode="after")
    def _options(self) -> Scorer:
        if self.kind == "regex":
            if not self.pattern:
                raise ValueError("the regex scorer needs pattern")
            import re

            try:
                compiled = re.compile(self.pattern)
            except re.error as err:
                raise ValueError(f"pattern is not a regular expression: {err}") from None
            if compiled.groups < 1:
                raise ValueError("pattern needs a group: the answer is group 1")
        elif self.pattern is not None:
            raise ValueError(f"pattern is an option of the regex scorer, not {self.kind}")
        if self.kind == "python" and not self.function:
            raise ValueError("the python scorer needs function")
        if self.kind != "python" and self.function is not None:
            raise ValueError(f"function is an option of the python scorer, not {self.kind}")
        if self.kind not in JUDGE_SCORERS and (self.judge is not None or self.jurors != 1):
            raise ValueError(f"judge and jurors are options of judge scorers, not {self.kind}")
        return self

    @property
    def label(self) -> str:
        return self.name or self.kind

    @property
    def needs_reference(self) -> bool:
        return self.kind in REFERENCE_SCORERS


class BenchmarkFile(BaseModel):
    model_config = _STRICT
    id: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
    label: str = ""
    description: str = ""
    category: str = Field(min_length=1)
    subcategory: str = Field(min_length=1)
    cases: Cases
    prompt: Prompt = Field(default_factory=Prompt)
    template: str | None = Field(default=None, description="Short for prompt.template_file.")
    answer: Answer = Field(default_factory=Answer)
    scorers: tuple[Scorer, ...] = Field(min_length=1)
    normalisation: Normalisation = Field(
        default_factory=lambda: Normalisation(kind="identity"))

    @model_validator(mode="before")
    @classmethod
    def _short_forms(cls, data: Any) -> Any:
        """``cases = "file"``, ``answer = "choice"``, ``scorer = "choice"`` or
        ``scorers = ["choice", "f1"]``."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if isinstance(data.get("cases"), str):
            data["cases"] = {"path": data["cases"]}
        if isinstance(data.get("answer"), str):
            data["answer"] = {"format": data["answer"]}
        if "scorer" in data:
            if "scorers" in data:
                raise ValueError("give scorer or scorers, not both")
            data["scorers"] = [data.pop("scorer")]
        if isinstance(data.get("scorers"), list | tuple):
            data["scorers"] = [{"kind": s} if isinstance(s, str) else s for s in data["scorers"]]
        return data

    @model_validator(mode="after")
    def _checks(self) -> BenchmarkFile:
        if self.template is not None and (self.prompt.template or self.prompt.template_file):
            raise ValueError("template: give it once (top level or in [prompt])")
        labels = [s.label for s in self.scorers]
        repeated = next((n for i, n in enumerate(labels) if n in labels[:i]), None)
        if repeated:
            raise ValueError(f"two scorers named {repeated!r}: give one a name")
        kinds = {s.kind for s in self.scorers}
        if "choice" in kinds and self.answer.format != "choice":
            raise ValueError("the choice scorer needs answer = \"choice\"")
        if "numeric" in kinds and self.answer.format not in ("number", "json"):
            raise ValueError("the numeric scorer needs answer = \"number\" (or json)")
        if self.answer.format == "json" and self.answer.schema_ is None:
            raise ValueError("answer format json needs answer.schema")
        return self


SUFFIXES = (".toml", ".yaml", ".yml")


class Benchmark:
    """A benchmark file read and checked: its definition, where it is, and
    the folders its templates and hooks are looked up in."""

    def __init__(self, definition: BenchmarkFile, path: Path, text: str,
                 keys: frozenset[str] | None = None) -> None:
        self.definition, self.path, self.text = definition, path, text
        self.sha256 = hashlib.sha256(text.encode()).hexdigest()
        self.keys = keys if keys is not None else frozenset(definition.model_fields_set)
        """The top-level keys the file gives (a default it leaves is not one)."""

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def primary(self) -> Scorer:
        return self.definition.scorers[0]

    def resolve(self, relative: str) -> Path:
        """A path the file names, relative to the file's folder."""
        path = Path(relative)
        return path if path.is_absolute() else self.folder / path


def parse_benchmark(text: str, source: str) -> BenchmarkFile:
    """A benchmark definition from TOML text (YAML when ``source`` ends in
    ``.yaml`` or ``.yml``); :class:`InputError` naming ``source`` and the key
    otherwise."""
    return _parse(text, source)[0]


def _parse(text: str, source: str) -> tuple[BenchmarkFile, frozenset[str]]:
    data = _load(text, source)
    try:
        definition = BenchmarkFile.model_validate(data)
    except ValidationError as err:
        raise from_validation(source, err, "not a valid benchmark file") from None
    _in_taxonomy(definition, source)
    return definition, frozenset(str(k) for k in data) if isinstance(data, dict) else frozenset()


def _load(text: str, source: str) -> Any:
    if source.endswith((".yaml", ".yml")):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise InputError(source, f"not valid YAML: {err}") from None
        except RecursionError:
            raise InputError(source, "not valid YAML: nested too deep") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise InputError(source, f"not valid TOML: {err}") from None
    except RecursionError:
        raise InputError(source, "not valid TOML: nested too deep") from None


def _in_taxonomy(definition: BenchmarkFile, source: str) -> None:
    taxonomy = load_taxonomy()
    parents = taxonomy.parent()
    categories = [c.category_id for c in taxonomy.categories]
    if definition.category not in categories:
        raise InputError(source, "category is not in the MedHELM taxonomy", field="category",
                         expected=", ".join(categories), got=definition.category)
    if parents.get(definition.subcategory) != definition.category:
        own = [s for s, c in parents.items() if c == definition.category]
        raise InputError(source, f"subcategory is not one of {definition.category}'s",
                         field="subcategory", expected=", ".join(own),
                         got=definition.subcategory)


def load_benchmark(path: str | Path) -> Benchmark:
    """Read a benchmark file (TOML, or YAML by its suffix); errors name the
    file and the key."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        raise InputError(str(path), "no such benchmark file") from None
    if len(raw) > MAX_BYTES:
        raise InputError(str(path), "benchmark file too large",
                         expected=f"at most {MAX_BYTES:,} bytes", got=len(raw))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(str(path), f"not UTF-8 text: {err}") from None
    definition, keys = _parse(text, str(path))
    return Benchmark(definition, path, text, keys)
