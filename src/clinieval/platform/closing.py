"""Closing a study (issue 33 §5): once every decision of its gates is
settled an admin closes it, the platform hands out no new task, and the
verdicts it closed on are kept (in ``study_closures`` and the
``study_closed`` event of its decision log, which the export carries).
Tasks leased before the close can still be submitted: no rating a
clinician is writing is lost."""

from __future__ import annotations

import json

import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.platform.config import StudyConfig
from clinieval.platform.decisions import OPEN, compute_study
from clinieval.platform.events import aware, now, record
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables

SOURCE = "close study"
KEPT = ("criterion", "threshold", "scope", "alpha", "model", "specialty", "estimate", "lower",
        "upper", "verdict", "answers", "ratings")
"""The columns of each decision a closure keeps."""


class NotYet(InputError):
    """The study cannot be closed now (409)."""

    status = 409


def closed_at(conn: sa.Connection, study_id: str) -> str | None:
    """When the study was closed (ISO, UTC), or None while it is open."""
    c = platform_tables.study_closures
    at = conn.execute(sa.select(c.c.closed_at).where(c.c.study_id == study_id)).scalar()
    return None if at is None else aware(at).isoformat(timespec="seconds")


def close_study(engine: sa.Engine, user_id: str, cfg: StudyConfig) -> dict:
    """Close the study if every decision is settled; refused naming
    ``decisions`` (no gates, nothing rated yet, or decisions still open) or
    ``study`` (closed already), writing nothing."""
    found = compute_study(engine, cfg, certify=False)
    rows = found["decisions"]
    if not cfg.gates or not rows:
        raise NotYet(SOURCE, "the study has no decision to settle yet (no gates, or no rated"
                     " answer in any of their cells)", field="decisions")
    still = sum(r["verdict"] == OPEN for r in rows)
    if still:
        raise NotYet(SOURCE, f"{still} of {len(rows)} decisions are still open",
                     field="decisions")
    kept = [{k: r[k] for k in KEPT} for r in rows]
    with db.writing(engine) as conn:
        db.one_at_a_time(conn, f"close {cfg.study_id}")
        if closed_at(conn, cfg.study_id) is not None:
            raise NotYet(SOURCE, "the study is closed already", field="study")
        conn.execute(platform_tables.study_closures.insert().values(
            study_id=cfg.study_id, closed_at=now(), user_id=user_id,
            decisions=json.dumps(kept, sort_keys=True)))
        record(conn, "study_closed", user_id=user_id, study_id=cfg.study_id,
               detail={"rule": found["rule"], "decisions": kept})
    return {"summary": found["summary"], "decisions": kept}
