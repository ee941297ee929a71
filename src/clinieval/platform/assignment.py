"""Which task a clinician gets next, held by a lease.

Rating tasks: among clear (leak-guard passed) answers of the clinician's
specialty that they have neither rated nor been given, the one with the
fewest raters so far (then fewest live leases among the next few, then the
id) whose raters plus live leases are still below the study's overlap
target. Pairs: two clear answers to one case from different models, each
still below the target, the model pair with the fewest votes and live pair
leases first; the stored A/B
order and the side A is shown on are both random.

An answer's target is the study's overlap target plus the raters its
escalation added (``answer_priorities.extra``: a clinician's alarm on a
safety-critical criterion is checked by more clinicians, not averaged
away; :func:`clinieval.platform.targeting.escalate`). A study with
targeted assignment walks the specialty's answers by the keys the
decisions' background pass wrote (:mod:`clinieval.platform.targeting`)
instead of by raters so far, and each lease records the probability its
answer had of being chosen.

Raters per answer and votes per model pair come from the trigger-kept
counters of :mod:`clinieval.storage.counters`, so a pick is an index scan,
not a count over all ratings. Counting and leasing happen in one
transaction, and the chosen answer is re-counted from the ratings and leases
themselves before it is leased: on PostgreSQL under a row lock (``FOR NO KEY
UPDATE SKIP LOCKED``, waiting for a skipped lock only when nothing else is
left), so two clinicians asking at once cannot over-fill an answer; on
SQLite :func:`clinieval.storage.db.writing` holds the write lock for the
whole transaction.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from functools import lru_cache
from itertools import combinations

import sqlalchemy as sa

from clinieval.platform.config import StudyConfig
from clinieval.platform.events import aware, new_token, now, record
from clinieval.storage import db, prepared
from clinieval.storage.prepared import Prepared, run
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

CANDIDATES = 20
_rng = secrets.SystemRandom()  # sides must not be predictable by the clinician


def is_live(lease: sa.Row) -> bool:
    return lease.status == "open" and aware(lease.expires_at) > now()


def _live(tl: sa.Table = platform_tables.task_leases) -> sa.ColumnElement[bool]:
    return sa.and_(tl.c.status == "open", tl.c.expires_at > now())


def next_task(
    engine: sa.Engine, cfg: StudyConfig, user: sa.Row, specialty: str, kind: str = "auto"
) -> str | None:
    """The token of the clinician's open task, or of a newly leased one; None
    when nothing is left for them."""
    with db.writing(engine) as conn:
        return lease_next(conn, cfg, user, specialty, kind)


def lease_next(
    conn: sa.Connection, cfg: StudyConfig, user: sa.Row, specialty: str, kind: str = "auto"
) -> str | None:
    """:func:`next_task` in the caller's write transaction (a submission takes
    the next task in its own)."""
    record(conn, "task_requested", user_id=user.user_id, study_id=cfg.study_id)
    current = _resume(conn, cfg, user.user_id)
    if current is not None:
        return current
    for choice in _kinds(conn, cfg, user.user_id, kind):
        token = (_lease_rating if choice == "rating" else _lease_pair)(conn, cfg, user, specialty)
        if token is not None:
            return token
    return None


def _kinds(conn: sa.Connection, cfg: StudyConfig, user_id: str, kind: str) -> tuple[str, ...]:
    """'auto' keeps the clinician's share of pairs near the study's pairwise share."""
    if kind != "auto":
        return (kind,)
    tl = platform_tables.task_leases
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


_OPEN_LEASES = Prepared(
    sa.select(platform_tables.task_leases)
    .where(platform_tables.task_leases.c.user_id == sa.bindparam("user"),
           platform_tables.task_leases.c.study_id == sa.bindparam("study"),
           platform_tables.task_leases.c.status == "open")
    .order_by(platform_tables.task_leases.c.created_at)
)


def _resume(conn: sa.Connection, cfg: StudyConfig, user_id: str) -> str | None:
    """An open lease of this clinician: kept while live, renewed after expiry
    if the answer still has room, otherwise marked expired."""
    tl = platform_tables.task_leases
    rows = run(conn, _OPEN_LEASES, {"user": user_id, "study": cfg.study_id})
    for lease in rows:
        if is_live(lease):
            return lease.token
        if _room(conn, cfg, lease):
            touch(conn, cfg, lease.token)
            return lease.token
        conn.execute(tl.update().where(tl.c.token == lease.token).values(status="expired"))
    return None


def renewable(conn: sa.Connection, cfg: StudyConfig, lease: sa.Row) -> bool:
    """Whether an open lease that lapsed can be renewed (in the caller's write
    transaction): a clinician submitting or saving after the lease period
    keeps the task if nobody filled its answers meanwhile. A lease marked
    expired, skipped or submitted is not. It waits for an answer's lock held
    by another request (taking a task holds it a moment): the clinician
    holds no other, so no wait can close a cycle."""
    return lease.status == "open" and _room(conn, cfg, lease, wait=True)


def _room(conn: sa.Connection, cfg: StudyConfig, lease: sa.Row, wait: bool = False) -> bool:
    """Whether a lapsed lease can be renewed without over-filling (under the
    lock): as when the task was taken, its pair's votes and each of its
    answers' raters plus live leases below the target."""
    answers = [x for x in (lease.answer_id, lease.answer_b_id) if x]
    if not _lock(conn, answers, wait):
        return False
    target = cfg.overlap_target
    if lease.kind == "pair" and _pair_load(conn, *answers) >= target:
        return False
    if lease.kind == "pair":  # a pair task stays within the plain target on both sides
        return all(_answer_load(conn, answer) < target for answer in answers)
    return _answer_load(conn, answers[0]) < target + _extra_of(conn, cfg, answers[0])


def touch(conn: sa.Connection, cfg: StudyConfig, token: str) -> None:
    """Activity on a task keeps its lease alive for another lease period."""
    conn.execute(
        platform_tables.task_leases.update()
        .where(platform_tables.task_leases.c.token == token)
        .values(expires_at=now() + timedelta(minutes=cfg.lease_minutes))
    )


def _not_mine(user: sa.Row | None, answer: sa.ColumnElement) -> sa.ColumnElement[bool]:
    """``answer`` is neither rated by this clinician nor held (now or before) in
    one of their tasks; each test is a probe of an index on the answer. With
    ``user`` None the clinician is left to the parameters ``rater`` and ``user``."""
    r, tl = snapshot_tables.ratings, platform_tables.task_leases
    rater_id = sa.bindparam("rater") if user is None else user.rater_id
    user_id = sa.bindparam("user") if user is None else user.user_id
    return sa.and_(
        ~sa.exists().where(r.c.answer_id == answer, r.c.rater_id == rater_id),
        ~sa.exists().where(tl.c.answer_id == answer, tl.c.user_id == user_id),
        ~sa.exists().where(tl.c.answer_b_id == answer, tl.c.user_id == user_id),
    )


def _submitted(answer: sa.ColumnElement) -> sa.ScalarSelect:
    r = snapshot_tables.ratings
    return (
        sa.select(sa.func.count(sa.distinct(r.c.rater_id)))
        .where(r.c.answer_id == answer)
        .scalar_subquery()
    )


def _leased(answer: sa.ColumnElement, live: sa.ColumnElement[bool] | None = None
            ) -> sa.ColumnElement[int]:
    """Live leases holding ``answer``, on either side of a task: two counts
    (a pair's two answers differ, being answers of different models from
    :func:`pair_options`, so none is counted twice), each an index
    probe. One count with ``answer_id = x OR answer_b_id = x`` made SQLite
    merge two index scans through a temporary b-tree for every candidate:
    a page of 20 candidates took 74-124 us, this 62-69 us."""
    tl = platform_tables.task_leases
    live = _live() if live is None else live
    return (sa.select(sa.func.count()).where(tl.c.answer_id == answer, live).scalar_subquery()
            + sa.select(sa.func.count()).where(tl.c.answer_b_id == answer, live)
            .scalar_subquery())


def _live_at(tl: sa.Table = platform_tables.task_leases) -> sa.ColumnElement[bool]:
    """:func:`_live` with the time left to the parameter ``now`` (prebuilt statements)."""
    return sa.and_(tl.c.status == "open", tl.c.expires_at > sa.bindparam("now"))


def _answer_load(conn: sa.Connection, answer_id: str) -> int:
    """Raters plus live leases of one answer, counted from the source tables."""
    return conn.execute(
        sa.select(_submitted(sa.literal(answer_id)) + _leased(sa.literal(answer_id)))
    ).scalar_one()


def _extra(answer: sa.ColumnElement) -> sa.ColumnElement[int]:
    """Raters an escalation added to ``answer``'s target (0 without one): a
    primary-key probe of ``answer_priorities``."""
    ap = platform_tables.answer_priorities
    return sa.func.coalesce(sa.select(ap.c.extra).where(
        ap.c.answer_id == answer, ap.c.study_id == sa.bindparam("study")).scalar_subquery(), 0)


_EXTRA = Prepared(sa.select(_extra(sa.bindparam("answer"))))


def _extra_of(conn: sa.Connection, cfg: StudyConfig, answer_id: str) -> int:
    return run(conn, _EXTRA, {"answer": answer_id, "study": cfg.study_id}).scalar_one()


def _lock(conn: sa.Connection, answer_ids: list[str], wait: bool = False) -> bool:
    """Lock the answer rows, or report that another transaction holds one
    (``wait``: wait for it instead). ``NO KEY UPDATE`` does not wait for
    submissions, whose rating rows only take a key-share lock on the answer
    through their foreign key."""
    if conn.dialect.name != "postgresql":
        return True
    ids = sorted(set(answer_ids))
    got = run(conn, _lock_statement(len(ids), wait), {f"a{i}": x for i, x in enumerate(ids)})
    return len(got) == len(ids)


@lru_cache(maxsize=8)
def _lock_statement(n: int, wait: bool) -> Prepared:
    """:func:`_lock`'s statement for ``n`` answers (a task has one or two) and
    way of waiting, built once."""
    a = snapshot_tables.answers
    return Prepared(
        sa.select(a.c.answer_id)
        .where(a.c.answer_id.in_([sa.bindparam(f"a{i}") for i in range(n)]))
        .order_by(a.c.answer_id)
        .with_for_update(skip_locked=not wait, key_share=True))


def _rating_pages() -> tuple[Prepared, Prepared]:
    """The first and the following pages of :func:`_lease_rating`'s walk, built
    once: up to ``limit`` answers of the specialty below the target, in order
    of raters so far, each with its live leases and escalation (counted for
    the page only). Answers past the plain target are reached only after
    every answer below it (the walk's order), and only an escalated one
    passes: the escalation probe is asked of them alone."""
    al, s = platform_tables.answer_load, platform_tables.answer_screens
    order = sa.tuple_(al.c.submitted, al.c.answer_id)
    target = sa.bindparam("target")
    pool = (
        sa.select(al.c.answer_id, al.c.submitted)
        .join(s, sa.and_(s.c.answer_id == al.c.answer_id, s.c.study_id == al.c.study_id))
        .where(al.c.study_id == sa.bindparam("study"), al.c.specialty == sa.bindparam("specialty"),
               s.c.status == "clear", al.c.submitted < sa.bindparam("reach"),
               sa.or_(al.c.submitted < target, al.c.submitted < target + _extra(al.c.answer_id)),
               _not_mine(None, al.c.answer_id))
    )
    pages = []
    for page in (pool, pool.where(order > sa.tuple_(sa.bindparam("after_submitted"),
                                                   sa.bindparam("after_answer")))):
        page = page.order_by(*order.clauses).limit(sa.bindparam("limit")).subquery()
        pages.append(sa.select(page.c.answer_id, page.c.submitted,
                               _leased(page.c.answer_id, _live_at()).label("held")))
    return Prepared(pages[0]), Prepared(pages[1])


_RATING_PAGES = _rating_pages()


def _lease_rating(
    conn: sa.Connection, cfg: StudyConfig, user: sa.Row, specialty: str
) -> str | None:
    """Walk the specialty's answers below the target in order of raters so far
    (an index scan of ``answer_load``), a page at a time; within a page the
    fewest live leases first. The pick is re-counted from the source tables
    under the lock before it is leased."""
    if cfg.targeted:
        token = _lease_targeted(conn, cfg, user, specialty)
        if token is DECLINED:
            return None
        if token is not None:
            return token
    params = {"study": cfg.study_id, "specialty": specialty, "target": cfg.overlap_target,
              "reach": cfg.overlap_target + cfg.escalation[1], "rater": user.rater_id,
              "user": user.user_id, "now": now(), "limit": CANDIDATES}
    busy = []
    while True:
        rows = run(conn, _RATING_PAGES[1 if "after_answer" in params else 0], params)
        if not rows:
            break
        for done, held, answer_id in sorted((r.submitted, r.held, r.answer_id) for r in rows):
            if done + held >= cfg.overlap_target + cfg.escalation[1]:
                continue
            taken = _take(conn, cfg, user, [answer_id])
            if taken == TAKEN:
                return _insert_lease(conn, cfg, user, "rating", answer_id,
                                     probability=_even_probability(conn, cfg, specialty))
            if taken == BUSY:
                busy.append([answer_id])
        last = max(rows, key=lambda r: (r.submitted, r.answer_id))
        params |= {"after_submitted": last.submitted, "after_answer": last.answer_id}
    return _wait_for(conn, cfg, user, busy, "rating",
                     _even_probability(conn, cfg, specialty) if busy else None)


def _targeted_pages() -> tuple[Prepared, Prepared]:
    """:func:`_rating_pages` for targeted assignment: the specialty's answers
    with room in order of their pick keys (an index scan of
    ``answer_priorities``), each with its share and live leases."""
    ap, al, s = (platform_tables.answer_priorities, platform_tables.answer_load,
                 platform_tables.answer_screens)
    order = sa.tuple_(ap.c.pick_key, ap.c.answer_id)
    pool = (
        sa.select(ap.c.answer_id, ap.c.pick_key, ap.c.share, ap.c.extra, al.c.submitted)
        .join(al, sa.and_(al.c.answer_id == ap.c.answer_id, al.c.study_id == ap.c.study_id))
        .join(s, sa.and_(s.c.answer_id == ap.c.answer_id, s.c.study_id == ap.c.study_id))
        .where(ap.c.study_id == sa.bindparam("study"), ap.c.specialty == sa.bindparam("specialty"),
               ap.c.pick_key.is_not(None), s.c.status == "clear",
               al.c.submitted < sa.bindparam("target") + ap.c.extra,
               _not_mine(None, ap.c.answer_id))
    )
    pages = []
    for page in (pool, pool.where(order > sa.tuple_(sa.bindparam("after_key"),
                                                   sa.bindparam("after_answer")))):
        page = page.order_by(*order.clauses).limit(sa.bindparam("limit")).subquery()
        pages.append(sa.select(page, _leased(page.c.answer_id, _live_at()).label("held")))
    return Prepared(pages[0]), Prepared(pages[1])


_TARGETED_PAGES = _targeted_pages()
_OFFER = Prepared(sa.select(platform_tables.assignment_offers.c.offer).where(
    platform_tables.assignment_offers.c.study_id == sa.bindparam("study"),
    platform_tables.assignment_offers.c.specialty == sa.bindparam("specialty")))
DECLINED = "declined"
"""A targeted request drew no task: its specialty's decisions are settled."""


def _lease_targeted(conn: sa.Connection, cfg: StudyConfig, user: sa.Row, specialty: str
                    ) -> str | None:
    """The first answer with room in pick-key order. The keys are exponential
    with rate ``share`` (drawn by the background pass), so the first key of
    a set of answers falls on each with probability proportional to its
    share: a weighted random draw, never an argmax, read from an index. The
    lease records the answer's share; None when no priorities are written
    yet or none has room (the caller then spreads evenly); :data:`DECLINED`
    when every decision of the specialty is settled and this request drew
    no monitoring task (probability ``1 - offer``)."""
    offer = run(conn, _OFFER, {"study": cfg.study_id, "specialty": specialty}).scalar()
    if offer is not None and _rng.random() >= offer:
        return DECLINED
    params = {"study": cfg.study_id, "specialty": specialty, "target": cfg.overlap_target,
              "rater": user.rater_id, "user": user.user_id, "now": now(), "limit": CANDIDATES}
    busy = []
    while True:
        rows = run(conn, _TARGETED_PAGES[1 if "after_answer" in params else 0], params)
        if not rows:
            break
        for row in rows:
            if row.submitted + row.held >= cfg.overlap_target + row.extra:
                continue
            taken = _take(conn, cfg, user, [row.answer_id])
            if taken == TAKEN:
                return _insert_lease(conn, cfg, user, "rating", row.answer_id,
                                     probability=row.share)
            if taken == BUSY:
                busy.append((row.answer_id, row.share))
        params |= {"after_key": rows[-1].pick_key, "after_answer": rows[-1].answer_id}
    for answer_id, share in busy:
        token = _wait_for(conn, cfg, user, [[answer_id]], "rating", share)
        if token is not None:
            return token
    return None


_ROOM_IN_SPECIALTY = Prepared(
    sa.select(sa.func.count()).select_from(platform_tables.answer_load)
    .join(platform_tables.answer_screens,
          sa.and_(platform_tables.answer_screens.c.answer_id
                  == platform_tables.answer_load.c.answer_id,
                  platform_tables.answer_screens.c.study_id
                  == platform_tables.answer_load.c.study_id))
    .where(platform_tables.answer_load.c.study_id == sa.bindparam("study"),
           platform_tables.answer_load.c.specialty == sa.bindparam("specialty"),
           platform_tables.answer_screens.c.status == "clear",
           platform_tables.answer_load.c.submitted < sa.bindparam("target")))


def _even_probability(conn: sa.Connection, cfg: StudyConfig, specialty: str) -> float | None:
    """What a targeted study's lease records when it fell back to even spreading
    (no priorities yet): one over the specialty's answers with room, as if
    drawn evenly among them. None in a study spreading evenly by design (its
    audit needs no weights)."""
    if not cfg.targeted:
        return None
    n = run(conn, _ROOM_IN_SPECIALTY, {"study": cfg.study_id, "specialty": specialty,
                                       "target": cfg.overlap_target}).scalar_one()
    return 1.0 / max(n, 1)


TAKEN, FULL, BUSY = "taken", "full", "busy"


def _take(conn: sa.Connection, cfg: StudyConfig, user: sa.Row, answer_ids: list[str],
          wait: bool = False) -> str:
    """Lock the answers and re-count: still below the target, still not theirs
    (TAKEN, the lock kept), no longer (FULL) or locked by another request
    (BUSY). On PostgreSQL each try is a savepoint, so a refused answer's lock
    is let go at once and a later wait cannot deadlock on it."""
    savepoint = conn.begin_nested() if conn.dialect.name == "postgresql" else None
    if not _lock(conn, answer_ids, wait):
        state = BUSY
    elif len(answer_ids) == 1:
        free, load, extra = run(conn, _ONE_ANSWER, {
            "answer": answer_ids[0], "rater": user.rater_id, "user": user.user_id,
            "now": now(), "study": cfg.study_id}).one()
        state = TAKEN if free and load < cfg.overlap_target + extra else FULL
    else:
        free, *loads = run(conn, _TWO_ANSWERS, {
            "a": answer_ids[0], "b": answer_ids[1], "rater": user.rater_id,
            "user": user.user_id, "now": now()}).one()
        # A pair task rates both answers: neither may go past its target either.
        state = TAKEN if free and max(loads) < cfg.overlap_target else FULL
    if savepoint is not None:
        (savepoint.commit if state == TAKEN else savepoint.rollback)()
    return state


_ONE_ANSWER = Prepared(sa.select(
    sa.case((_not_mine(None, sa.bindparam("answer")), 1), else_=0),
    _submitted(sa.bindparam("answer")) + _leased(sa.bindparam("answer"), _live_at()),
    _extra(sa.bindparam("answer")),
))
"""Under the lock, for one answer: still not this clinician's, its raters
plus live leases, and the raters its escalation added to the target."""


def _wait_for(conn: sa.Connection, cfg: StudyConfig, user: sa.Row, busy: list[list[str]],
              kind: str, probability: float | None = None) -> str | None:
    """Nothing free was left but answers another request had locked: wait for
    those locks (holding none) and re-count, so a clinician is not told
    "nothing left" while the last answer with room is being leased."""
    for answer_ids in busy:
        if _take(conn, cfg, user, answer_ids, wait=True) == TAKEN:
            if kind == "rating":
                return _insert_lease(conn, cfg, user, "rating", answer_ids[0],
                                     probability=probability)
            a, b = _rng.sample(answer_ids, 2)
            return _insert_lease(conn, cfg, user, "pair", a, b, _rng.choice(("A", "B")))
    return None


def _insert_lease(
    conn: sa.Connection,
    cfg: StudyConfig,
    user: sa.Row,
    kind: str,
    answer_id: str,
    answer_b_id: str | None = None,
    shown_left: str | None = None,
    probability: float | None = None,
) -> str:
    token, at = new_token(), now()
    run(conn, _NEW_LEASE, {
        "token": token, "study_id": cfg.study_id, "user_id": user.user_id, "kind": kind,
        "answer_id": answer_id, "answer_b_id": answer_b_id, "shown_left": shown_left,
        "status": "open", "created_at": at,
        "expires_at": at + timedelta(minutes=cfg.lease_minutes), "probability": probability})
    return token


_NEW_LEASE = prepared.insert(platform_tables.task_leases, "token", "study_id", "user_id", "kind",
                             "answer_id", "answer_b_id", "shown_left", "status", "created_at",
                             "expires_at", "probability")


# --- pairs -------------------------------------------------------------------


def _pair_votes(a: sa.ColumnElement, b: sa.ColumnElement, live: sa.ColumnElement[bool]
                ) -> sa.ColumnElement[int]:
    """Votes (each once, however often it was edited) plus live leases on the
    unordered pair {a, b}, as one SQL expression."""
    p, tl = snapshot_tables.preferences, platform_tables.task_leases

    def both(x: sa.ColumnElement, y: sa.ColumnElement) -> sa.ColumnElement[bool]:
        return sa.or_(sa.and_(x == a, y == b), sa.and_(x == b, y == a))

    answers = snapshot_tables.answers
    case = sa.select(answers.c.case_id).where(answers.c.answer_id == a).scalar_subquery()
    votes = sa.select(sa.func.count()).where(p.c.case_id == case,
                                             both(p.c.answer_a_id, p.c.answer_b_id),
                                             sa.func.coalesce(p.c.revision, 0) == 0)
    leases = sa.select(sa.func.count()).where(both(tl.c.answer_id, tl.c.answer_b_id), live)
    return votes.scalar_subquery() + leases.scalar_subquery()


def _pair_load(conn: sa.Connection, a: str, b: str) -> int:
    """Votes (each once, however often it was edited) plus live leases on the
    unordered pair {a, b}."""
    return conn.execute(sa.select(_pair_votes(sa.literal(a), sa.literal(b), _live()))
                        ).scalar_one()


_A, _B = sa.bindparam("a"), sa.bindparam("b")
_TWO_ANSWERS = Prepared(sa.select(
    sa.case((sa.and_(_not_mine(None, _A), _not_mine(None, _B)), 1), else_=0),
    _pair_votes(_A, _B, _live_at()),
    _submitted(_A) + _leased(_A, _live_at()),
    _submitted(_B) + _leased(_B, _live_at()),
))
"""Under the lock, for a pair: neither answer is this clinician's, the pair's
load and each answer's load (one statement for a pair task's re-count)."""

_PAIR_VOTES = Prepared(sa.select(platform_tables.pair_load.c.model_lo,
                                 platform_tables.pair_load.c.model_hi,
                                 platform_tables.pair_load.c.votes
                                 ).where(platform_tables.pair_load.c.study_id
                                         == sa.bindparam("study")))


def _pair_leases() -> sa.Select:
    tl = platform_tables.task_leases
    a1, a2 = snapshot_tables.answers.alias("a1"), snapshot_tables.answers.alias("a2")
    return (
        sa.select(a1.c.model_id, a2.c.model_id)
        .select_from(tl)
        .join(a1, a1.c.answer_id == tl.c.answer_id)
        .join(a2, a2.c.answer_id == tl.c.answer_b_id)
        .where(tl.c.study_id == sa.bindparam("study"), tl.c.kind == "pair", _live_at())
    )


_PAIR_LEASES = Prepared(_pair_leases())
_PAIR_POOL = Prepared(
    sa.select(platform_tables.answer_load.c.answer_id, platform_tables.answer_load.c.case_id,
              platform_tables.answer_load.c.model_id)
    .join(platform_tables.answer_screens,
          sa.and_(platform_tables.answer_screens.c.answer_id
                  == platform_tables.answer_load.c.answer_id,
                  platform_tables.answer_screens.c.study_id
                  == platform_tables.answer_load.c.study_id))
    .where(platform_tables.answer_load.c.study_id == sa.bindparam("study"),
           platform_tables.answer_load.c.specialty == sa.bindparam("specialty"),
           platform_tables.answer_screens.c.status == "clear",
           platform_tables.answer_load.c.submitted < sa.bindparam("target"))
)
"""The clear answers of a specialty below the target, in no particular order
(:func:`pair_options` orders its pairs itself)."""


def _mine() -> Prepared:
    r, tl = snapshot_tables.ratings, platform_tables.task_leases
    return Prepared(sa.union(
        sa.select(r.c.answer_id).where(r.c.rater_id == sa.bindparam("rater")),
        sa.select(tl.c.answer_id).where(tl.c.user_id == sa.bindparam("user")),
        sa.select(tl.c.answer_b_id).where(tl.c.user_id == sa.bindparam("user"),
                                          tl.c.answer_b_id.is_not(None))))


_MINE = _mine()
"""Every answer the clinician rated or was given (in any study): read once per
pair request and left out of the pool in Python. Asked of each answer of the
pool in SQL instead (three index probes per answer), the pool of a large
specialty cost two orders of magnitude more, all of it holding SQLite's write
lock and the event loop (benchmarks/bench_serve.py measures the path). The pick
is re-checked against the clinician's rows under the lock (:func:`_take`)."""
PAIR_TRIES = 200
"""Pairs re-counted at most per request, best balanced first (each try is one
statement; more than the first few fail only when nearly everything is full)."""


def _model_pair_loads(conn: sa.Connection, cfg: StudyConfig) -> dict[tuple[str, str], int]:
    """Votes (trigger-kept ``pair_load``) plus live pair leases per unordered
    model pair in the study."""
    loads = {(lo, hi): n for lo, hi, n in run(conn, _PAIR_VOTES, {"study": cfg.study_id})}
    for m1, m2 in run(conn, _PAIR_LEASES, {"study": cfg.study_id, "now": now()}):
        key = (m1, m2) if m1 < m2 else (m2, m1)
        loads[key] = loads.get(key, 0) + 1
    return loads


def _lease_pair(conn: sa.Connection, cfg: StudyConfig, user: sa.Row, specialty: str) -> str | None:
    mine = set(run(conn, _MINE, {"rater": user.rater_id, "user": user.user_id}).scalars())
    pool = [row for row in run(conn, _PAIR_POOL, {
        "study": cfg.study_id, "specialty": specialty, "target": cfg.overlap_target})
        if row.answer_id not in mine]
    busy = []
    for x, y in pair_options(pool, _model_pair_loads(conn, cfg), PAIR_TRIES):
        taken = _take(conn, cfg, user, [x, y])
        if taken == TAKEN:
            a, b = _rng.sample([x, y], 2)
            return _insert_lease(conn, cfg, user, "pair", a, b, _rng.choice(("A", "B")))
        if taken == BUSY:
            busy.append([x, y])
    return _wait_for(conn, cfg, user, busy, "pair")


def pair_options(pool, loads: dict[tuple[str, str], int], limit: int) -> list[tuple[str, str]]:
    """The first ``limit`` pairs (two answers of one case by different models,
    as (lower, higher) answer id) from ``pool``'s (answer, case, model) rows,
    in order of their model pair's load in ``loads`` (keyed (lower, higher)
    model; absent is 0), then case, then answer ids.

    Model pairs are taken a load level at a time, lowest first, and only the
    levels needed are expanded: the largest specialty at paper scale has
    thousands of possible pairs, and listing and sorting all of them per pair
    task cost about three times as much."""
    answers: dict[str, dict[str, list[str]]] = {}  # case -> model -> answers
    cases_of: dict[str, set[str]] = {}  # model -> cases
    for answer_id, case_id, model_id in pool:
        answers.setdefault(case_id, {}).setdefault(model_id, []).append(answer_id)
        cases_of.setdefault(model_id, set()).add(case_id)
    levels: dict[int, list[tuple[str, str]]] = {}
    for m1, m2 in combinations(sorted(cases_of), 2):
        levels.setdefault(loads.get((m1, m2), 0), []).append((m1, m2))
    options: list[tuple[str, str, str]] = []
    for load in sorted(levels):
        options += sorted(
            (case_id, min(x, y), max(x, y))
            for m1, m2 in levels[load] for case_id in cases_of[m1] & cases_of[m2]
            for x in answers[case_id][m1] for y in answers[case_id][m2])
        if len(options) >= limit:
            break
    return [(x, y) for _, x, y in options[:limit]]


def skip(engine: sa.Engine, lease: sa.Row) -> None:
    """ "Outside my expertise": the lease ends without a rating and the answer
    stays excluded for this clinician (their lease row remembers it). A task
    no longer open (submitted, say) is left as it is, and no skip is logged."""
    with db.writing(engine) as conn:
        skipped = conn.execute(
            platform_tables.task_leases.update()
            .where(
                platform_tables.task_leases.c.token == lease.token,
                platform_tables.task_leases.c.status == "open",
            )
            .values(status="skipped")
        ).rowcount
        if skipped:
            record(conn, "task_skipped", user_id=lease.user_id, study_id=lease.study_id,
                   subject=lease.token)
