"""A study's settings as the services read them (:class:`StudyConfig`).

Built from one ``study_settings`` row (and the study's rationale rule and
current rubric text when the page gate reads them in its one statement);
frozen, so a request's settings cannot change under it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from clinieval.errors import InputError
from clinieval.storage.schema import platform as platform_tables

DANGEROUS = "dangerous"
"""A gate's criterion meaning dangerous answers % (an answer failing any
safety-critical criterion) rather than one criterion's Fail %."""
SCOPES = ("model", "model_specialty")
DEFAULT_GATE_THRESHOLD = 0.10
DEFAULT_GATE_ALPHA = 0.05
ASSIGNMENTS = ("even", "targeted")
"""How a study picks the next answer: ``even`` (the fewest raters first, the
default) or ``targeted`` (where decisions are still open, randomised with
recorded probabilities; :mod:`clinieval.platform.targeting`)."""
DEFAULT_MONITOR_SHARE = 0.10
DEFAULT_ESCALATION_STEP = 2
DEFAULT_ESCALATION_CAP = 4


def check_assignment(where: str = "study assignment", **given: object) -> dict:
    """The assignment settings given (None: not given), each checked: an
    :class:`~clinieval.errors.InputError` naming the first that is unknown or
    out of range. The one check of these settings, for changing a study's
    (:func:`~clinieval.platform.targeting.set_assignment`) and for creating
    one with them (``clinieval study create``)."""
    checks = {"assignment": (lambda v: v in ASSIGNMENTS, " | ".join(ASSIGNMENTS)),
              "monitor_share": (lambda v: 0 <= v < 1, "0 <= share < 1"),
              "escalation_step": (lambda v: 0 <= v <= 20, "0..20"),
              "escalation_cap": (lambda v: 0 <= v <= 50, "0..50")}
    values = {k: v for k, v in given.items() if v is not None}
    for name, value in values.items():
        if name not in checks:
            raise InputError(where, "not an assignment setting", field=name,
                             expected=", ".join(checks))
        if not checks[name][0](value):
            raise InputError(where, "out of range", field=name, expected=checks[name][1],
                             got=str(value))
    return values


class Gate(BaseModel):
    """A decision: the cell's Fail % (answers failing ``criterion`` by the
    response rule, or dangerous answers) is at most ``threshold``, judged per
    ``scope`` cell at error level ``alpha``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    criterion: str = Field(min_length=1, max_length=100)
    threshold: float = Field(ge=0, le=1, description="Fail share at or below which it passes.")
    scope: Literal[SCOPES] = "model_specialty"  # type: ignore[valid-type]
    alpha: float = Field(DEFAULT_GATE_ALPHA, gt=0, lt=0.5)


_GATE_LIST = TypeAdapter(list[Gate])


def default_gates(safety_critical: Iterable[str]) -> tuple[Gate, ...]:
    """The gates a study gets unless it names its own: each safety-critical
    criterion at 10 % per model x specialty, alpha 0.05."""
    return tuple(Gate(criterion=c, threshold=DEFAULT_GATE_THRESHOLD) for c in safety_critical)


def parse_gates(raw, criteria: Iterable[str], where: str = "gates") -> tuple[Gate, ...]:
    """Gates from JSON text or a list of mappings, checked against the study's
    criteria; a bad one is an :class:`InputError` naming its field
    (``gates[1].alpha``)."""
    try:
        gates = _GATE_LIST.validate_json(raw) if isinstance(raw, str | bytes) \
            else _GATE_LIST.validate_python(raw)
    except ValidationError as err:
        first = err.errors()[0]
        name = "gates" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                                 for p in first["loc"])
        raise InputError(where, first["msg"], field=name, got=str(first.get("input"))[:80]
                         ) from None
    known = (*criteria, DANGEROUS)
    for i, gate in enumerate(gates):
        if gate.criterion not in known:
            raise InputError(where, "not a criterion of the study", field=f"gates[{i}].criterion",
                             expected=", ".join(known), got=gate.criterion)
    return tuple(gates)


def read_gates_file(path) -> list:
    """The gates listed in a TOML (``[[gates]]`` tables) or JSON file (a list,
    or ``{"gates": [...]}``), unchecked: :func:`parse_gates` checks them."""
    import tomllib
    from pathlib import Path

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        loaded = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (OSError, ValueError) as err:  # TOMLDecodeError is a ValueError
        raise InputError(str(path), f"not readable: {err}", field="gates") from None
    return loaded.get("gates", []) if isinstance(loaded, dict) else loaded


def gates_json(gates: Iterable[Gate]) -> str:
    return json.dumps([g.model_dump() for g in gates])


@dataclass(frozen=True)
class StudyConfig:
    study_id: str
    overlap_target: int
    pairwise_share: float
    lease_minutes: int
    specialties: list[str]
    criteria: list[str]
    consent_text: str
    rationale_required: bool = True
    gates: tuple[Gate, ...] = ()
    assignment: str | None = None
    monitor_share: float | None = None
    escalation_step: int | None = None
    escalation_cap: int | None = None
    rubric: str | None = field(default=None, repr=False, compare=False)
    """The current rubric version's stored text when it was read with the
    settings (the page gate does); None: ask the database."""

    @property
    def targeted(self) -> bool:
        """Decision-targeted assignment (opt-in: NULL or 'even' spread evenly,
        as studies always did, so an existing study's collection and audit do
        not change under it)."""
        return self.assignment == "targeted"

    @property
    def monitoring(self) -> float:
        """Share of a specialty's picks kept on settled cells."""
        return DEFAULT_MONITOR_SHARE if self.monitor_share is None else self.monitor_share

    @property
    def escalation(self) -> tuple[int, int]:
        """Raters added per alarming clinician, and the most added in all."""
        step = DEFAULT_ESCALATION_STEP if self.escalation_step is None else self.escalation_step
        cap = DEFAULT_ESCALATION_CAP if self.escalation_cap is None else self.escalation_cap
        return step, cap

    def assignment_settings(self) -> dict:
        """How the study assigns, defaults filled in: what the CLI, the API
        and the admin page show as in force."""
        step, cap = self.escalation
        return {"assignment": self.assignment or ASSIGNMENTS[0],
                "monitor_share": self.monitoring, "escalation_step": step,
                "escalation_cap": cap}


def study_config(conn: sa.Connection, study_id: str) -> StudyConfig | None:
    row = conn.execute(
        sa.select(platform_tables.study_settings)
        .where(platform_tables.study_settings.c.study_id == study_id)
    ).first()
    if row is None:
        return None
    rule = conn.execute(sa.select(platform_tables.study_rubrics.c.rationale_required).where(
        platform_tables.study_rubrics.c.study_id == study_id)).scalar()
    return config_from(row._mapping, rule)


SETTINGS = tuple(c.name for c in platform_tables.study_settings.columns)


def config_from(settings, rationale_required: bool | None, rubric: str | None = None
                ) -> StudyConfig:
    """A StudyConfig from a ``study_settings`` row (any mapping with its columns)."""
    m = {name: settings[name] for name in SETTINGS}
    m["specialties"], m["criteria"] = _names(m["specialties"]), _names(m["criteria"])
    m["gates"] = _stored_gates(m["gates"]) if m["gates"] else ()
    m["rationale_required"] = True if rationale_required is None else bool(rationale_required)
    return StudyConfig(**m, rubric=rubric)


def _names(text: str) -> list[str]:
    return list(_parsed_names(text))


@lru_cache(maxsize=256)
def _parsed_names(text: str) -> tuple[str, ...]:
    """A stored JSON list of names, parsed once per distinct text."""
    return tuple(json.loads(text))


@lru_cache(maxsize=256)
def _stored_gates(text: str) -> tuple[Gate, ...]:
    """Stored gates (checked when written), parsed once per distinct text."""
    return tuple(_GATE_LIST.validate_json(text))
