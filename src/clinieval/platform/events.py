"""The platform's clock, its tokens and its audit trail.

Every timestamp is aware UTC (SQLite hands them back naive; :func:`aware`
restores the zone). Every change a person makes appends an audit event in
the same transaction as the change (:func:`record`), so the log and the data
cannot disagree; the study's log page and its export read it back
(:func:`audit_log`) with pseudonymous ids only.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime

import sqlalchemy as sa

from clinieval.storage import prepared
from clinieval.storage.prepared import run
from clinieval.storage.schema import platform as platform_tables


def now() -> datetime:
    return datetime.now(UTC)


def aware(moment: datetime) -> datetime:
    """SQLite hands timestamps back without a zone; they were stored in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def record(
    conn: sa.Connection,
    kind: str,
    *,
    user_id: str | None = None,
    study_id: str | None = None,
    subject: str | None = None,
    detail: dict | None = None,
    client: str | None = None,
) -> None:
    """Append an audit event (in the caller's transaction); ``client`` is the
    network address a sign-in came from, which its throttling counts by."""
    run(conn, _EVENT, {
        "at": now(), "kind": kind, "user_id": user_id, "study_id": study_id, "subject": subject,
        "detail": json.dumps(detail, sort_keys=True) if detail else None, "client": client})


_EVENT = prepared.insert(platform_tables.audit_events, "at", "kind", "user_id", "study_id",
                         "subject", "detail", "client")

DECISION_EVENTS = {"release": "answer_released", "withdraw": "answer_withdrawn"}
"""The events of an admin's decision on a flagged answer."""
ADMIN_EVENTS = ("study_created", "cases_added", "rubric_version_added", "invited",
                "invitation_created", "invitations_withdrawn", "access_revoked",
                *DECISION_EVENTS.values(), "token_created", "token_revoked",
                "exported", "report_run", "signed_in", "joined", "registered", "adjudicated",
                "study_closed")


def audit_log(engine: sa.Engine, study_id: str, limit: int = 500) -> list[dict]:
    """Admin actions in the study, and the sign-ins and all-studies API tokens
    (which reach this study too) of its members, newest first, with
    pseudonymous ids (no e-mail addresses)."""
    e, u, m = platform_tables.audit_events, platform_tables.users, platform_tables.memberships
    members_now = sa.select(m.c.user_id).where(m.c.study_id == study_id)
    query = (sa.select(e.c.at, e.c.kind, u.c.rater_id, e.c.subject, e.c.detail)
             .select_from(e).outerjoin(u, u.c.user_id == e.c.user_id)
             .where(e.c.kind.in_(ADMIN_EVENTS),
                    sa.or_(e.c.study_id == study_id,
                           sa.and_(e.c.study_id.is_(None), e.c.user_id.in_(members_now),
                                   e.c.kind.in_(("signed_in", "token_created")))))
             .order_by(e.c.event_id.desc()).limit(limit))
    with engine.connect() as conn:
        return [{"at": aware(r.at).isoformat(timespec="seconds"), "kind": r.kind,
                 "who": r.rater_id, "subject": r.subject,
                 "detail": json.loads(r.detail) if r.detail else None}
                for r in conn.execute(query)]
