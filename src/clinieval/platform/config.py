"""A study's settings as the services read them (:class:`StudyConfig`).

Built from one ``study_settings`` row (and the study's rationale rule and
current rubric text when the page gate reads them in its one statement);
frozen, so a request's settings cannot change under it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache

import sqlalchemy as sa

from clinieval.storage.schema import platform as platform_tables


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
    rubric: str | None = field(default=None, repr=False, compare=False)
    """The current rubric version's stored text when it was read with the
    settings (the page gate does); None: ask the database."""


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
    m["rationale_required"] = True if rationale_required is None else bool(rationale_required)
    return StudyConfig(**m, rubric=rubric)


def _names(text: str) -> list[str]:
    return list(_parsed_names(text))


@lru_cache(maxsize=256)
def _parsed_names(text: str) -> tuple[str, ...]:
    """A stored JSON list of names, parsed once per distinct text."""
    return tuple(json.loads(text))
