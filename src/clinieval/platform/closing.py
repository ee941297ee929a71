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
from clinieval.platform.config import StudyConfig, study_config
from clinieval.platform.decisions import OPEN, compute_study
from clinieval.platform.events import aware, now, record
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

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


ATTEMPTS = 3
"""Times the decisions are recomputed when ratings land while they are."""


def close_study(engine: sa.Engine, user_id: str, cfg: StudyConfig) -> dict:
    """Close the study if every decision is settled; refused naming
    ``decisions`` (no gates, nothing rated yet, or decisions still open) or
    ``study`` (closed already), writing nothing.

    The decisions take seconds to compute, so not under the write lock: the
    close checks, under it and with new ratings held back, that no rating
    and no gate changed since they were read, and computes them again if
    one did. A rating that lands before the close is in the verdicts it
    keeps; one that lands after comes after the close."""
    for _ in range(ATTEMPTS):
        with db.reading(engine) as conn:
            seen = _version(conn, cfg.study_id)
        found = compute_study(engine, cfg, certify=False)
        kept = _settled(cfg, found["decisions"])
        with db.writing(engine) as conn:
            db.one_at_a_time(conn, f"close {cfg.study_id}")
            _hold_ratings(conn)
            if closed_at(conn, cfg.study_id) is not None:
                raise NotYet(SOURCE, "the study is closed already", field="study")
            if _version(conn, cfg.study_id) != seen:
                cfg = study_config(conn, cfg.study_id)
                continue
            conn.execute(platform_tables.study_closures.insert().values(
                study_id=cfg.study_id, closed_at=now(), user_id=user_id,
                decisions=json.dumps(kept, sort_keys=True)))
            record(conn, "study_closed", user_id=user_id, study_id=cfg.study_id,
                   detail={"rule": found["rule"], "decisions": kept})
        return {"summary": found["summary"], "decisions": kept}
    raise NotYet(SOURCE, "ratings kept arriving while the decisions were computed; try"
                 " again", field="decisions")


def _settled(cfg: StudyConfig, rows: list[dict]) -> list[dict]:
    """The decisions a closure keeps; NotYet while none exists or one is open."""
    if not cfg.gates or not rows:
        raise NotYet(SOURCE, "the study has no decision to settle yet (no gates, or no rated"
                     " answer in any of their cells)", field="decisions")
    still = sum(r["verdict"] == OPEN for r in rows)
    if still:
        raise NotYet(SOURCE, f"{still} of {len(rows)} decisions are still open",
                     field="decisions")
    return [{k: r[k] for k in KEPT} for r in rows]


def _version(conn: sa.Connection, study_id: str) -> tuple:
    """What the decisions are computed from: the newest rating (a revision is
    a new row; any study's counts, a spurious recompute at worst) and the
    study's gates."""
    r, st = snapshot_tables.ratings, platform_tables.study_settings
    return (conn.execute(sa.select(sa.func.max(r.c.rating_id))).scalar(),
            conn.execute(sa.select(st.c.gates).where(st.c.study_id == study_id)).scalar())


def _hold_ratings(conn: sa.Connection) -> None:
    """Hold back new ratings until the transaction ends. SQLite's write lock
    (:func:`db.writing`) does already; on PostgreSQL a SHARE lock on the
    table waits for the submissions writing and holds off new ones (reads
    go on)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text(f"LOCK TABLE {snapshot_tables.ratings.name} IN SHARE MODE"))
