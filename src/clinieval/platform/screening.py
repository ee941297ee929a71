"""The leak guard's queue: answers held back from clinicians because their
text may give away their model, and an admin's decision on each (released
to clinicians, or withdrawn for good), taken once and logged.
"""

from __future__ import annotations

import sqlalchemy as sa

from clinieval.contract.validate import has_nul
from clinieval.errors import InputError
from clinieval.platform.events import DECISION_EVENTS, now, record
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables


def flagged_answers(engine: sa.Engine, study_id: str) -> list[dict]:
    """Answers the leak guard held back, with the reason (for the admin)."""
    s, a = platform_tables.answer_screens, snapshot_tables.answers
    query = (
        sa.select(s.c.answer_id, a.c.case_id, a.c.model_id, s.c.reason)
        .join(a, a.c.answer_id == s.c.answer_id)
        .where(s.c.study_id == study_id, s.c.status == "flagged")
        .order_by(s.c.answer_id)
    )
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def flagged_queue(engine: sa.Engine, study_id: str) -> list[dict]:
    """Flagged answers awaiting a decision, with their text and the reason."""
    s, d = platform_tables.answer_screens, platform_tables.screen_decisions
    a = snapshot_tables.answers
    decided = sa.select(d.c.answer_id).where(d.c.study_id == study_id)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(s.c.answer_id, a.c.model_id, a.c.text, s.c.reason)
            .join(a, a.c.answer_id == s.c.answer_id)
            .where(s.c.study_id == study_id, s.c.status == "flagged",
                   s.c.answer_id.not_in(decided)).order_by(s.c.answer_id)).all()
    return [dict(r._mapping) for r in rows]


def decide(engine: sa.Engine, user_id: str, study_id: str, answer_id: str,
           decision: str) -> None:
    """Release a flagged answer to clinicians, or withdraw it for good."""
    if decision not in platform_tables.SCREEN_DECISIONS:
        raise InputError("flagged answer", "unknown decision", field="decision",
                         expected=" | ".join(platform_tables.SCREEN_DECISIONS), got=decision)
    if has_nul(answer_id):
        raise InputError("flagged answer", "not awaiting a decision", field="answer_id")
    s, d = platform_tables.answer_screens, platform_tables.screen_decisions
    with db.writing(engine) as conn:
        # Checked under the screen row's lock (SQLite: the write lock), so two
        # admins deciding at once cannot both decide: the second is refused.
        # The decisions are read after the lock is held, by a statement of
        # their own (on PostgreSQL a statement sees what committed before it).
        status = conn.execute(sa.select(s.c.status).where(
            s.c.study_id == study_id, s.c.answer_id == answer_id).with_for_update()).scalar()
        decided = conn.execute(sa.select(d.c.decision).where(
            d.c.study_id == study_id, d.c.answer_id == answer_id)).first()
        if status != "flagged" or decided is not None:
            raise InputError("flagged answer", "not awaiting a decision", field="answer_id",
                             got=answer_id)
        if decision == "release":
            _check_has_text(conn, answer_id)
        conn.execute(platform_tables.screen_decisions.insert().values(
            study_id=study_id, answer_id=answer_id, decision=decision, user_id=user_id,
            decided_at=now()))
        if decision == "release":
            conn.execute(s.update().where(s.c.study_id == study_id, s.c.answer_id == answer_id)
                         .values(status="clear"))
        record(conn, DECISION_EVENTS[decision], user_id=user_id, study_id=study_id,
                    subject=answer_id)


def _check_has_text(conn: sa.Connection, answer_id: str) -> None:
    """An answer without text would reach clinicians as an empty panel that
    nobody can rate: it is not releasable (withdrawing it is)."""
    a = snapshot_tables.answers
    text = conn.execute(sa.select(a.c.text).where(a.c.answer_id == answer_id)).scalar()
    if not (text or "").strip():
        raise InputError("flagged answer", "has no text, so clinicians would see an empty"
                         " panel; it cannot be released (withdraw it)", field="answer_id",
                         got=answer_id)
