"""Which task a clinician gets next, held by a lease.

Rating tasks: among clear (leak-guard passed) answers of the clinician's
specialty that they have neither rated nor been given, the one with the
fewest submitted ratings (then fewest live leases, then the id) whose
submitted ratings plus live leases are still below the study's overlap
target. Pairs: two clear answers to one case from different models, the
model pair with the fewest votes and live pair leases first; the stored A/B
order and the side A is shown on are both random.

Counting and leasing happen in one transaction. On PostgreSQL the chosen
answer rows are locked with ``FOR UPDATE SKIP LOCKED`` and the count is
repeated under the lock, so two clinicians asking at once cannot over-fill
an answer; on SQLite :func:`clinieval.storage.db.writing` holds the write
lock for the whole transaction.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import timedelta
from itertools import combinations

import sqlalchemy as sa

from clinieval.storage import db
from clinieval.storage import platform_tables as P
from clinieval.storage import sqltables as S
from clinieval.web.auth import aware, new_token, now, record

CANDIDATES = 20
_rng = secrets.SystemRandom()  # sides must not be predictable by the clinician


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


def study_config(conn: sa.Connection, study_id: str) -> StudyConfig | None:
    row = conn.execute(
        sa.select(P.study_settings).where(P.study_settings.c.study_id == study_id)
    ).first()
    if row is None:
        return None
    m = dict(row._mapping)
    m["specialties"], m["criteria"] = json.loads(m["specialties"]), json.loads(m["criteria"])
    rule = conn.execute(sa.select(P.study_rubrics.c.rationale_required).where(
        P.study_rubrics.c.study_id == study_id)).scalar()
    m["rationale_required"] = True if rule is None else bool(rule)
    return StudyConfig(**m)


def is_live(lease: sa.Row) -> bool:
    return lease.status == "open" and aware(lease.expires_at) > now()


def _live(tl: sa.Table = P.task_leases) -> sa.ColumnElement[bool]:
    return sa.and_(tl.c.status == "open", tl.c.expires_at > now())


def next_task(
    engine: sa.Engine, cfg: StudyConfig, user: sa.Row, specialty: str, kind: str = "auto"
) -> str | None:
    """The token of the clinician's open task, or of a newly leased one; None
    when nothing is left for them."""
    with db.writing(engine) as conn:
        record(conn, "task_requested", user_id=user.user_id, study_id=cfg.study_id)
        current = _resume(conn, cfg, user.user_id)
        if current is not None:
            return current
        for choice in _kinds(conn, cfg, user.user_id, kind):
            token = (_lease_rating if choice == "rating" else _lease_pair)(
                conn, cfg, user, specialty
            )
            if token is not None:
                return token
    return None


def _kinds(conn: sa.Connection, cfg: StudyConfig, user_id: str, kind: str) -> tuple[str, ...]:
    """'auto' keeps the clinician's share of pairs near the study's pairwise share."""
    if kind != "auto":
        return (kind,)
    tl = P.task_leases
    done = dict(
        conn.execute(
            sa.select(tl.c.kind, sa.func.count())
            .where(
                tl.c.user_id == user_id,
                tl.c.study_id == cfg.study_id,
                tl.c.status == "submitted",
            )
            .group_by(tl.c.kind)
        ).all()
    )
    total = sum(done.values())
    wants_pair = done.get("pair", 0) < cfg.pairwise_share * (total + 1)
    return ("pair", "rating") if wants_pair else ("rating", "pair")


def _resume(conn: sa.Connection, cfg: StudyConfig, user_id: str) -> str | None:
    """An open lease of this clinician: kept while live, renewed after expiry
    if the answer still has room, otherwise marked expired."""
    tl = P.task_leases
    rows = conn.execute(
        sa.select(tl)
        .where(tl.c.user_id == user_id, tl.c.study_id == cfg.study_id, tl.c.status == "open")
        .order_by(tl.c.created_at)
    ).all()
    for lease in rows:
        if is_live(lease):
            return lease.token
        if _room(conn, cfg, lease):
            touch(conn, cfg, lease.token)
            return lease.token
        conn.execute(tl.update().where(tl.c.token == lease.token).values(status="expired"))
    return None


def _room(conn: sa.Connection, cfg: StudyConfig, lease: sa.Row) -> bool:
    """Whether a lapsed lease can be renewed without over-filling (under the lock)."""
    if not _lock(conn, [x for x in (lease.answer_id, lease.answer_b_id) if x]):
        return False
    if lease.kind == "pair":
        return _pair_load(conn, lease.answer_id, lease.answer_b_id) < cfg.overlap_target
    return _answer_load(conn, lease.answer_id) < cfg.overlap_target


def touch(conn: sa.Connection, cfg: StudyConfig, token: str) -> None:
    """Activity on a task keeps its lease alive for another lease period."""
    conn.execute(
        P.task_leases.update()
        .where(P.task_leases.c.token == token)
        .values(expires_at=now() + timedelta(minutes=cfg.lease_minutes))
    )


def _mine(user: sa.Row) -> tuple[sa.Select, sa.Select, sa.Select]:
    """Answers this clinician rated, or holds or held in any task."""
    tl = P.task_leases
    return (
        sa.select(S.ratings.c.answer_id).where(S.ratings.c.rater_id == user.rater_id),
        sa.select(tl.c.answer_id).where(tl.c.user_id == user.user_id),
        sa.select(tl.c.answer_b_id).where(
            tl.c.user_id == user.user_id, tl.c.answer_b_id.is_not(None)
        ),
    )


def _pool(cfg: StudyConfig, specialty: str) -> sa.Select:
    a, c, s = S.answers, S.cases, P.answer_screens
    return (
        sa.select(a.c.answer_id, a.c.case_id, a.c.model_id)
        .join(c, c.c.case_id == a.c.case_id)
        .join(s, sa.and_(s.c.answer_id == a.c.answer_id, s.c.study_id == cfg.study_id))
        .where(c.c.study_id == cfg.study_id, c.c.specialty == specialty, s.c.status == "clear")
    )


def _submitted(answer: sa.ColumnElement) -> sa.ScalarSelect:
    r = S.ratings
    return (
        sa.select(sa.func.count(sa.distinct(r.c.rater_id)))
        .where(r.c.answer_id == answer)
        .scalar_subquery()
    )


def _leased(answer: sa.ColumnElement) -> sa.ScalarSelect:
    tl = P.task_leases
    return (
        sa.select(sa.func.count())
        .where(sa.or_(tl.c.answer_id == answer, tl.c.answer_b_id == answer), _live())
        .scalar_subquery()
    )


def _answer_load(conn: sa.Connection, answer_id: str) -> int:
    return conn.execute(
        sa.select(_submitted(sa.literal(answer_id)) + _leased(sa.literal(answer_id)))
    ).scalar_one()


def _lock(conn: sa.Connection, answer_ids: list[str]) -> bool:
    """Lock the answer rows, or report that another transaction holds one."""
    if conn.dialect.name != "postgresql":
        return True
    a = S.answers
    got = (
        conn.execute(
            sa.select(a.c.answer_id)
            .where(a.c.answer_id.in_(answer_ids))
            .with_for_update(skip_locked=True)
        )
        .scalars()
        .all()
    )
    return len(got) == len(set(answer_ids))


def _lease_rating(
    conn: sa.Connection, cfg: StudyConfig, user: sa.Row, specialty: str
) -> str | None:
    pool = _pool(cfg, specialty).subquery()
    rated, held, held_b = _mine(user)
    submitted, leased = _submitted(pool.c.answer_id), _leased(pool.c.answer_id)
    query = (
        sa.select(pool.c.answer_id)
        .where(
            pool.c.answer_id.not_in(rated),
            pool.c.answer_id.not_in(held),
            pool.c.answer_id.not_in(held_b),
            submitted + leased < cfg.overlap_target,
        )
        .order_by(submitted, leased, pool.c.answer_id)
        .limit(CANDIDATES)
    )
    for answer_id in conn.execute(query).scalars():
        if _lock(conn, [answer_id]) and _answer_load(conn, answer_id) < cfg.overlap_target:
            return _insert_lease(conn, cfg, user, "rating", answer_id)
    return None


def _insert_lease(
    conn: sa.Connection,
    cfg: StudyConfig,
    user: sa.Row,
    kind: str,
    answer_id: str,
    answer_b_id: str | None = None,
    shown_left: str | None = None,
) -> str:
    token = new_token()
    conn.execute(
        P.task_leases.insert().values(
            token=token,
            study_id=cfg.study_id,
            user_id=user.user_id,
            kind=kind,
            answer_id=answer_id,
            answer_b_id=answer_b_id,
            shown_left=shown_left,
            status="open",
            created_at=now(),
            expires_at=now() + timedelta(minutes=cfg.lease_minutes),
        )
    )
    return token


# --- pairs -------------------------------------------------------------------


def _pair_load(conn: sa.Connection, a: str, b: str) -> int:
    """Votes (each once, however often it was edited) plus live leases on the
    unordered pair {a, b}."""
    p, tl = S.preferences, P.task_leases

    def both(x: sa.ColumnElement, y: sa.ColumnElement) -> sa.ColumnElement[bool]:
        return sa.or_(sa.and_(x == a, y == b), sa.and_(x == b, y == a))

    votes = conn.execute(
        sa.select(sa.func.count()).where(both(p.c.answer_a_id, p.c.answer_b_id),
                                         sa.func.coalesce(p.c.revision, 0) == 0)
    ).scalar_one()
    live = conn.execute(
        sa.select(sa.func.count()).where(both(tl.c.answer_id, tl.c.answer_b_id), _live())
    ).scalar_one()
    return votes + live


def _model_pair_loads(conn: sa.Connection, cfg: StudyConfig) -> dict[tuple[str, str], int]:
    """Votes plus live pair leases per unordered model pair in the study."""
    a1, a2 = S.answers.alias("a1"), S.answers.alias("a2")
    p, tl = S.preferences, P.task_leases
    loads: dict[tuple[str, str], int] = {}
    votes = (
        sa.select(a1.c.model_id, a2.c.model_id)
        .select_from(p)
        .join(a1, a1.c.answer_id == p.c.answer_a_id)
        .join(a2, a2.c.answer_id == p.c.answer_b_id)
        .join(S.cases, S.cases.c.case_id == p.c.case_id)
        .where(S.cases.c.study_id == cfg.study_id, sa.func.coalesce(p.c.revision, 0) == 0)
    )
    leases = (
        sa.select(a1.c.model_id, a2.c.model_id)
        .select_from(tl)
        .join(a1, a1.c.answer_id == tl.c.answer_id)
        .join(a2, a2.c.answer_id == tl.c.answer_b_id)
        .where(tl.c.study_id == cfg.study_id, tl.c.kind == "pair", _live())
    )
    for query in (votes, leases):
        for m1, m2 in conn.execute(query):
            key = tuple(sorted((m1, m2)))
            loads[key] = loads.get(key, 0) + 1
    return loads


def _lease_pair(conn: sa.Connection, cfg: StudyConfig, user: sa.Row, specialty: str) -> str | None:
    rated, held, held_b = _mine(user)
    pool = _pool(cfg, specialty).where(
        S.answers.c.answer_id.not_in(rated),
        S.answers.c.answer_id.not_in(held),
        S.answers.c.answer_id.not_in(held_b),
    )
    by_case: dict[str, list[tuple[str, str]]] = {}
    for answer_id, case_id, model_id in conn.execute(pool.order_by(S.answers.c.answer_id)):
        by_case.setdefault(case_id, []).append((answer_id, model_id))
    loads = _model_pair_loads(conn, cfg)
    options = sorted(
        (loads.get(tuple(sorted((m1, m2))), 0), case_id, x, y)
        for case_id, answers in by_case.items()
        for (x, m1), (y, m2) in combinations(answers, 2)
        if m1 != m2
    )
    for _, _, x, y in options[:CANDIDATES]:
        if _lock(conn, [x, y]) and _pair_load(conn, x, y) < cfg.overlap_target:
            a, b = _rng.sample([x, y], 2)
            return _insert_lease(conn, cfg, user, "pair", a, b, _rng.choice(("A", "B")))
    return None


def skip(engine: sa.Engine, lease: sa.Row) -> None:
    """ "Outside my expertise": the lease ends without a rating and the answer
    stays excluded for this clinician (their lease row remembers it)."""
    with db.writing(engine) as conn:
        record(
            conn,
            "task_skipped",
            user_id=lease.user_id,
            study_id=lease.study_id,
            subject=lease.token,
        )
        conn.execute(
            P.task_leases.update()
            .where(
                P.task_leases.c.token == lease.token,
                P.task_leases.c.status == "open",
            )
            .values(status="skipped")
        )
