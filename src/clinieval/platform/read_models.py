"""What a clinician's browser receives for a task: text only.

:class:`TaskView` is the blinded read model. It is built from a lease and
holds the case prompt, the answer texts by screen position, the rubric and
the clinician's own values; there is no field for a model, a provider, a
version or an answer id (a test walks the type to prove it). Tasks are
addressed by their lease token.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import NamedTuple

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

from clinieval.contract import vocabulary
from clinieval.platform.assignment import is_live
from clinieval.platform.config import StudyConfig
from clinieval.storage.prepared import Prepared, run
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

ANCHOR_COLUMNS = ("anchor_m2", "anchor_m1", "anchor_0", "anchor_p1", "anchor_p2")


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Anchor(_View):
    score: int
    text: str


class CriterionView(_View):
    criterion_id: str
    name: str
    definition: str
    safety_critical: bool
    anchors: tuple[Anchor, ...]


class Panel(_View):
    """One answer on screen: panel 1 is the left (or only) one."""

    panel: int
    label: str
    text: str


class TaskView(_View):
    token: str
    kind: str
    prompt: str
    specialty: str
    panels: tuple[Panel, ...]
    criteria: tuple[CriterionView, ...]
    values: dict[str, str]
    choice: str | None
    submitted: bool
    live: bool
    draft_saves: int = 0  # the stored draft's version: saves so far (0: none); drafts start from it
    draft_page: str | None = None  # the page (one load of it in a browser) that saved it
    draft_seq: int | None = None  # that page's count of changes when it saved it


SCORE_PREFIX, COMMENT_PREFIX = "s", "c"
"""The first letter of a task form's score and comment fields."""


def score_field(panel: int, criterion_id: str) -> str:
    return f"{SCORE_PREFIX}{panel}.{criterion_id}"


def comment_field(panel: int, criterion_id: str) -> str:
    return f"{COMMENT_PREFIX}{panel}.{criterion_id}"


def criteria_views(conn: sa.Connection, cfg: StudyConfig) -> tuple[CriterionView, ...]:
    """The shown criteria in the texts of the study's current rubric version
    (the criteria table's, for a version stored without its texts)."""
    text = cfg.rubric if cfg.rubric is not None else current_rubric_text(conn, cfg.study_id)
    if text:
        return _criteria_of_text(text, tuple(cfg.criteria))
    c = snapshot_tables.criteria
    rows = {r.criterion_id: r._mapping
            for r in conn.execute(sa.select(c).where(c.c.criterion_id.in_(cfg.criteria)))}
    return _criteria(rows, cfg.criteria)


@lru_cache(maxsize=64)
def _criteria_of_text(text: str, criteria: tuple[str, ...]) -> tuple[CriterionView, ...]:
    """A stored rubric version never changes: its views are built once."""
    return _criteria(_rubric_rows(text), criteria)


def _criteria(rows, criteria) -> tuple[CriterionView, ...]:
    return tuple(
        CriterionView(
            criterion_id=cid,
            name=rows[cid]["name"],
            definition=rows[cid]["definition"] or "",
            safety_critical=bool(rows[cid]["safety_critical"]),
            anchors=tuple(
                Anchor(score=s, text=rows[cid][col] or "")
                for s, col in zip(vocabulary.SCORES, ANCHOR_COLUMNS, strict=True)
            ),
        )
        for cid in criteria
    )


def current_rubric_text(conn: sa.Connection, study_id: str) -> str | None:
    v, sr = platform_tables.study_rubric_versions, platform_tables.study_rubrics
    return conn.execute(
        sa.select(v.c.rubric)
        .join(sr, sa.and_(sr.c.study_id == v.c.study_id, sr.c.version == v.c.version))
        .where(sr.c.study_id == study_id)
    ).scalar()


@lru_cache(maxsize=64)
def _rubric_rows(text: str) -> dict[str, dict]:
    """Criteria rows of a stored rubric (parsed once per distinct text)."""
    from clinieval.rubric import rubric_from_dict, rubric_to_rows

    return {row["criterion_id"]: row for row in rubric_to_rows(rubric_from_dict(json.loads(text)))}


def panel_answers(lease: sa.Row) -> list[str]:
    """Answer ids by screen panel (left first); never sent to the browser."""
    if lease.kind == "rating":
        return [lease.answer_id]
    a, b = lease.answer_id, lease.answer_b_id
    return [a, b] if lease.shown_left == "A" else [b, a]


def stored_choice(screen_choice: str, shown_left: str) -> str:
    """The screen says A for the left answer; the record says which stored
    answer that was."""
    if screen_choice not in vocabulary.SIDES or shown_left == "A":
        return screen_choice
    return vocabulary.SIDES[1 - vocabulary.SIDES.index(screen_choice)]


def screen_choice(stored: str, shown_left: str) -> str:
    return stored_choice(stored, shown_left)  # swapping is its own inverse


_TEXTS = Prepared(sa.select(snapshot_tables.answers.c.answer_id, snapshot_tables.answers.c.text,
                            snapshot_tables.cases.c.prompt, snapshot_tables.cases.c.specialty)
          .join(snapshot_tables.cases,
                snapshot_tables.cases.c.case_id == snapshot_tables.answers.c.case_id)
          .where(snapshot_tables.answers.c.answer_id.in_([sa.bindparam("a"), sa.bindparam("b")])))
"""The texts of a task's one or two answers (``a`` and ``b``, the same id
for a rating task): a fixed list, so the statement is prepared once."""
_DRAFT = Prepared(sa.select(platform_tables.drafts.c.data)
                  .where(platform_tables.drafts.c.token == sa.bindparam("token")))


def task_view(conn: sa.Connection, cfg: StudyConfig, lease: sa.Row, rater_id: str) -> TaskView:
    answer_ids = panel_answers(lease)
    rows = {r.answer_id: r for r in run(conn, _TEXTS, {"a": answer_ids[0],
                                                        "b": answer_ids[-1]})}
    first = rows[answer_ids[0]]
    labels = ("Answer",) if lease.kind == "rating" else vocabulary.SIDES
    panels = tuple(
        Panel(panel=i + 1, label=labels[i], text=rows[x].text or "")
        for i, x in enumerate(answer_ids)
    )
    values, choice, draft_saves, draft_page, draft_seq = _values(conn, lease, answer_ids, rater_id)
    return TaskView(
        token=lease.token,
        kind=lease.kind,
        prompt=first.prompt or "",
        specialty=first.specialty,
        panels=panels,
        criteria=criteria_views(conn, cfg),
        values=values,
        choice=choice,
        submitted=lease.status == "submitted",
        live=is_live(lease),
        draft_saves=draft_saves,
        draft_page=draft_page,
        draft_seq=draft_seq,
    )


def _values(
    conn: sa.Connection, lease: sa.Row, answer_ids: list[str], rater_id: str
) -> StoredDraft:
    """Latest submitted values for a submitted task, else the saved draft
    (with its version, the page that saved it and that page's change count)."""
    if lease.status == "submitted":
        values = latest_values(conn, answer_ids, rater_id)
        return StoredDraft(values, _vote(conn, lease), 0, None, None)
    return stored_draft(conn, lease.token)


class StoredDraft(NamedTuple):
    fields: dict[str, str]
    choice: str | None
    version: int  # saves so far (0: no draft)
    page: str | None  # the page (one load of it in a browser) that saved it
    seq: int | None  # that page's count of changes when it sent this


def stored_draft(conn: sa.Connection, token: str) -> StoredDraft:
    """The task's saved draft (empty, version 0, without one)."""
    draft = run(conn, _DRAFT, {"token": token}).scalar()
    data = json.loads(draft) if draft else {}
    version, seq = data.get("version"), data.get("seq")
    return StoredDraft(dict(data.get("fields", {})), data.get("choice"),
                       version if type(version) is int else 0, data.get("page"),
                       seq if type(seq) is int else None)


def latest_values(conn: sa.Connection, answer_ids: list[str], rater_id: str) -> dict[str, str]:
    r = snapshot_tables.ratings
    rows = conn.execute(
        sa.select(r.c.answer_id, r.c.criterion_id, r.c.score, r.c.comment)
        .where(r.c.answer_id.in_(answer_ids), r.c.rater_id == rater_id)
        .order_by(r.c.revision)
    )
    values: dict[str, str] = {}
    for row in rows:  # later revisions overwrite earlier ones
        panel = answer_ids.index(row.answer_id) + 1
        values[score_field(panel, row.criterion_id)] = str(row.score)
        values[comment_field(panel, row.criterion_id)] = row.comment or ""
    return values


def _vote(conn: sa.Connection, lease: sa.Row) -> str | None:
    if lease.preference_id is None:
        return None
    p = snapshot_tables.preferences
    stored = conn.execute(
        sa.select(p.c.choice).where(p.c.preference_id == lease.preference_id)
    ).scalar_one()
    return screen_choice(stored, lease.shown_left)
