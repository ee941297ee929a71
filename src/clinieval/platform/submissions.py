"""Checking and storing a submitted task: ratings (and a vote for a pair).

One call carries a submission (:func:`submit`): in one write transaction it
reads the task's lease once, locked, checks the body against the task,
writes, and leases the clinician's next task when asked to.

A submission is validated completely before anything is written, then
stored in one transaction together with its idempotency key and the lease's
new status; the transaction commits before the response says "saved". A
retry with the same key returns the stored result and writes nothing. A
second submission of a submitted task is an edit: changed criteria, and a
changed vote, get a new row with the next revision; earlier rows stay. Each
rating records the study's rubric version current when it was given.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, field_validator

from clinieval.contract import vocabulary
from clinieval.contract.validate import check_text
from clinieval.errors import InputError
from clinieval.platform.assignment import is_live, lease_next, renewable
from clinieval.platform.config import StudyConfig
from clinieval.platform.events import aware, now, record
from clinieval.platform.read_models import (
    COMMENT_PREFIX,
    SCORE_PREFIX,
    CriterionView,
    comment_field,
    criteria_views,
    panel_answers,
    score_field,
    stored_choice,
)
from clinieval.platform.targeting import ALARM, escalate, schedule_refresh
from clinieval.storage import db, prepared
from clinieval.storage.prepared import Prepared, run
from clinieval.storage.rows import refusal
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

MAX_COMMENT = 4000
SOURCE = "submission"
RETRIES = 5


@dataclass(frozen=True)
class Submission:
    key: str
    scores: dict[tuple[int, str], int]
    comments: dict[tuple[int, str], str | None]
    choice: str | None
    time_spent_s: float | None
    rubric_version: str | None = None


def parse(
    form: Mapping[str, object], lease: sa.Row, criteria: tuple[CriterionView, ...],
    rationale_required: bool = True,
) -> Submission:
    """Check a submission against the task; InputError names the first bad field.
    ``rationale_required`` is the study's rule for safety-critical scores <= -1."""
    panels = range(1, 3 if lease.kind == "pair" else 2)
    known = {"idempotency_key", "time_spent_s", "csrf", "choice"} | task_fields(lease.kind,
                                                                                criteria)
    for name, value in form.items():
        if name not in known:
            raise InputError(SOURCE, "unknown field (not a criterion of this task)", field=name)
        if isinstance(value, list | dict):  # a field holds one value (JSON may nest anything)
            raise InputError(SOURCE, "expected a single value, not a list or object", field=name)
        if isinstance(value, str):
            check_text(SOURCE, name, value)
    key = str(form.get("idempotency_key") or "")
    if not 8 <= len(key) <= 100:
        raise InputError(SOURCE, "missing or malformed", field="idempotency_key")
    scores, comments = {}, {}
    for p in panels:
        for c in criteria:
            scores[(p, c.criterion_id)] = _score(form, score_field(p, c.criterion_id))
            comments[(p, c.criterion_id)] = _comment(form, p, c, scores[(p, c.criterion_id)],
                                                     rationale_required)
    return Submission(key, scores, comments, _choice(form, lease), _time(form))


def task_fields(kind: str, criteria: tuple[CriterionView, ...]) -> set[str]:
    """The form fields of a task of ``kind``: a score and a comment per
    criterion and answer on screen (a submission's and a draft's)."""
    panels = range(1, 3 if kind == "pair" else 2)
    return {
        f(p, c.criterion_id) for p in panels for c in criteria for f in (score_field, comment_field)
    }


_SCORE_TEXT = {str(s): s for s in vocabulary.SCORES}


def check_value(source: str, name: str, value: str) -> None:
    """The rules one field of a task's form follows, given or left empty (a
    draft's fields; a submission checks the same and that nothing is left out)."""
    check_text(source, name, value)
    text = value.strip()
    if name.startswith(SCORE_PREFIX) and text and text not in _SCORE_TEXT:
        raise InputError(source, "score out of range", field=name,
                         expected=f"an integer {vocabulary.SCORE_MIN}..{vocabulary.SCORE_MAX}",
                         got=value)
    if name.startswith(COMMENT_PREFIX) and len(text) > MAX_COMMENT:
        raise InputError(source, f"longer than {MAX_COMMENT} characters", field=name)


def check_choice(source: str, kind: str, raw: object, *, required: bool) -> None:
    """A vote only on a pair, one of the choices; ``required`` for a submission."""
    if kind == "rating":
        if raw not in (None, ""):
            raise InputError(source, "a rating task has no vote", field="choice")
    elif raw not in vocabulary.CHOICES and (required or raw not in (None, "")):
        raise InputError(source, "choose A, B, tie or both unacceptable", field="choice",
                         expected=" | ".join(vocabulary.CHOICES), got=raw)


def _score(form: Mapping[str, object], name: str) -> int:
    raw = form.get(name)
    if raw is None or raw == "":
        raise InputError(SOURCE, "choose a score for every criterion", field=name)
    if isinstance(raw, bool) or str(raw).strip() not in _SCORE_TEXT:
        raise InputError(
            SOURCE,
            "score out of range",
            field=name,
            expected=f"an integer {vocabulary.SCORE_MIN}..{vocabulary.SCORE_MAX}",
            got=raw,
        )
    return _SCORE_TEXT[str(raw).strip()]


def _comment(form: Mapping[str, object], panel: int, c: CriterionView, score: int,
             required: bool) -> str | None:
    name = comment_field(panel, c.criterion_id)
    text = str(form.get(name) or "").strip()
    if len(text) > MAX_COMMENT:
        raise InputError(SOURCE, f"longer than {MAX_COMMENT} characters", field=name)
    if required and c.safety_critical and score <= -1 and not text:
        raise InputError(
            SOURCE, f"a rationale is required when {c.name} is scored {score}", field=name
        )
    return text or None


def _choice(form: Mapping[str, object], lease: sa.Row) -> str | None:
    raw = form.get("choice")
    check_choice(SOURCE, lease.kind, raw, required=True)
    return None if lease.kind == "rating" else str(raw)


def _time(form: Mapping[str, object]) -> float | None:
    raw = form.get("time_spent_s")
    if raw in (None, ""):
        return None
    try:
        value = float(str(raw))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError(
            SOURCE, "not a duration", field="time_spent_s", expected="seconds >= 0", got=raw
        )
    return value


# --- storing -----------------------------------------------------------------


class NoSuchTask(LookupError):
    """The task is not this clinician's in this study (the route answers 404)."""


class KeyReused(InputError):
    """An idempotency key sent again with different answers: storing the
    stored result would drop the change while answering "saved"."""

    status = 409


@dataclass(frozen=True)
class Outcome:
    """What a submission or a draft save did: ``result`` is the answer's body;
    for a submission, whether the task had been submitted before (the new one
    is a revision) and the token of the next task leased, when one was asked
    for and there was one."""

    result: dict
    revised: bool = False
    next_token: str | None = None


class SubmissionBody(BaseModel):
    """A submission as sent: the form's fields, checked against the task by
    :func:`parse`, and the kind of task to lease next (``next``: a task kind,
    ``auto``, or none). Checked in that order; the validators raise the
    :class:`InputError` naming the first bad one."""

    model_config = ConfigDict(frozen=True)

    form: dict[str, object]
    next: str | None = None

    @field_validator("form", mode="before")
    @classmethod
    def _form(cls, form: object) -> object:
        if not isinstance(form, dict):
            raise InputError("submission", "expected a JSON object", field="body")
        return form

    @field_validator("next", mode="before")
    @classmethod
    def _next(cls, kind: object) -> object:
        if kind not in (None, "auto", *platform_tables.TASK_KINDS):
            raise InputError("submission", "unknown kind of next task", field="next",
                             expected="auto | " + " | ".join(platform_tables.TASK_KINDS), got=kind)
        return kind


def submit(engine: sa.Engine, cfg: StudyConfig, token: str, user: sa.Row, specialty: str,
           body: object, next_kind: object = None) -> Outcome:
    """Check and write the submission ``body`` of the task ``token`` (or find
    the stored result of a repeated key) and, with ``next_kind``, lease the
    clinician's next task (of the ``specialty``), all in one transaction with
    one read of the task's lease, locked: another clinician's task is
    :class:`NoSuchTask` whatever the body says, and an :class:`InputError`
    rolls everything back.

    The same key sent twice at once: the second transaction's key insert
    clashes, rolls back, and the retry returns the first one's result.
    """
    for attempt in range(RETRIES):
        try:
            outcome = _submit_once(engine, cfg, token, user, specialty, body, next_kind)
        except sa.exc.IntegrityError:
            if attempt == RETRIES - 1:
                raise
            continue
        schedule_refresh(engine, cfg)  # after the commit, off the request path
        return outcome
    raise AssertionError("unreachable")


def _submit_once(engine: sa.Engine, cfg: StudyConfig, token: str, user: sa.Row,
                 specialty: str, body: object, next_kind: object) -> Outcome:
    with db.writing(engine) as conn:
        lease = locked_lease(conn, token, user.user_id, cfg.study_id)
        sent = SubmissionBody(form=body, next=next_kind)
        views = criteria_views(conn, cfg)
        sub = parse(sent.form, lease, views, cfg.rationale_required)
        record(conn, "submitted", user_id=user.user_id, study_id=cfg.study_id, subject=token)
        result = _stored_result(conn, sub, user.user_id, lease.token)
        if result is None:
            result = _write(conn, cfg, lease, user, sub)
            alarmed = _alarmed(lease, sub, views)
            if alarmed:
                escalate(conn, cfg, alarmed)
        following = None
        if sent.next is not None:
            following = lease_next(conn, cfg, user, specialty, sent.next)
    return Outcome(result, lease.status == "submitted", following)


def _write(conn: sa.Connection, cfg: StudyConfig, lease: sa.Row, user: sa.Row, sub: Submission
           ) -> dict:
    # A lease that lapsed while the clinician was still rating is renewed, as taking
    # the task up again would renew it, if its answers still have room.
    if lease.status != "submitted" and not (is_live(lease) or renewable(conn, cfg, lease)):
        raise InputError(
            SOURCE, "this task's lease has expired or was released; take a new task", field="lease"
        )
    sub = replace(sub, rubric_version=_rubric_version(conn, cfg.study_id))
    if lease.status == "submitted":
        result = _revise(conn, lease, user.rater_id, sub)
    else:
        result = _first(conn, lease, user.rater_id, sub)
    stored = {**result, "content": _content(sub)}
    run(conn, _NEW_KEY, {"key": sub.key, "user_id": user.user_id, "token": lease.token,
                            "result": json.dumps(stored), "created_at": now()})
    return result


def _alarmed(lease: sa.Row, sub: Submission, views) -> list[str]:
    """The task's answers this submission scored at or below the alarm line on
    a safety-critical criterion."""
    critical = {c.criterion_id for c in views if c.safety_critical}
    answers = panel_answers(lease)
    return sorted({answers[p - 1] for (p, c), score in sub.scores.items()
                   if c in critical and score <= ALARM})


def _content(sub: Submission) -> str:
    """A digest of what a submission says (scores, comments, vote; not the
    time spent, which a retry measures again), kept with its key."""
    said = [sorted((f"{p}.{c}", v) for (p, c), v in sub.scores.items()),
            sorted((f"{p}.{c}", v or "") for (p, c), v in sub.comments.items()), sub.choice]
    return hashlib.sha256(json.dumps(said).encode()).hexdigest()


_RUBRIC_VERSION = Prepared(sa.select(platform_tables.study_rubrics.c.version).where(
    platform_tables.study_rubrics.c.study_id == sa.bindparam("study")))
_STORED_RESULT = Prepared(sa.select(platform_tables.idempotency_keys.c.result,
                                    platform_tables.idempotency_keys.c.user_id,
                                    platform_tables.idempotency_keys.c.token).where(
    platform_tables.idempotency_keys.c.key == sa.bindparam("key")))
_LOCKED_LEASE = Prepared(sa.select(platform_tables.task_leases).where(
    platform_tables.task_leases.c.token == sa.bindparam("token"),
    platform_tables.task_leases.c.user_id == sa.bindparam("user"),
    platform_tables.task_leases.c.study_id == sa.bindparam("study")).with_for_update())
_NEW_KEY = prepared.insert(platform_tables.idempotency_keys, "key", "user_id", "token", "result",
                           "created_at")
_SUBMITTED = Prepared(platform_tables.task_leases.update().where(
    platform_tables.task_leases.c.token == sa.bindparam("lease")).values(
    status="submitted", preference_id=sa.bindparam("preference")))
_DROP_DRAFT = Prepared(platform_tables.drafts.delete().where(
    platform_tables.drafts.c.token == sa.bindparam("lease")))
"""The statements of every submission, built once and run on the driver."""


def _rubric_version(conn: sa.Connection, study_id: str) -> str | None:
    """The study's current rubric version, read inside the write transaction."""
    return run(conn, _RUBRIC_VERSION, {"study": study_id}).scalar()


def _stored_result(conn: sa.Connection, sub: Submission, user_id: str, token: str
                   ) -> dict | None:
    """The result stored under the submission's key when it was this task's
    same submission (a repeat); a key used for another task or by another
    user is refused (it had answered "saved" for a task it stored nothing
    for), and so is one sent with different answers (:class:`KeyReused`).
    A key stored before digests were kept is taken for a repeat."""
    row = run(conn, _STORED_RESULT, {"key": sub.key}).first()
    if row is None:
        return None
    if row.user_id != user_id or row.token != token:
        raise InputError(SOURCE, "key already used for another submission",
                         field="idempotency_key")
    result = json.loads(row.result)
    if result.pop("content", _content(sub)) != _content(sub):
        raise KeyReused(SOURCE, "key already used for a submission with different answers;"
                        " send the changed answers with a new key (they are stored as a"
                        " revision)", field="idempotency_key")
    return {**result, "repeated": True}


def locked_lease(conn: sa.Connection, token: str, user_id: str, study_id: str) -> sa.Row:
    lease = run(conn, _LOCKED_LEASE, {"token": token, "user": user_id, "study": study_id}).first()
    if lease is None:
        raise NoSuchTask(token)
    return lease


def _first(conn: sa.Connection, lease: sa.Row, rater_id: str, sub: Submission) -> dict:
    answers = panel_answers(lease)
    if sub.time_spent_s is not None:
        # The browser measures; it cannot have spent longer than the task existed.
        held = (now() - aware(lease.created_at)).total_seconds()
        sub = replace(sub, time_spent_s=min(sub.time_spent_s, held))
    preference_id = None
    if lease.kind == "pair":
        preference_id = _add_preference(conn, lease, rater_id, sub.choice)
    rows = [
        _rating(answers[p - 1], rater_id, c, score, sub, p, 0, preference_id)
        for (p, c), score in sub.scores.items()
    ]
    ids = _add_ratings(conn, rows)
    run(conn, _SUBMITTED, {"lease": lease.token, "preference": preference_id})
    run(conn, _DROP_DRAFT, {"lease": lease.token})
    return {
        "saved": True,
        "task": lease.token,
        "revision": 0,
        "rating_ids": ids,
        "preference_id": preference_id,
    }


def _revise(conn: sa.Connection, lease: sa.Row, rater_id: str, sub: Submission) -> dict:
    """Append a revision for each criterion whose score or comment changed,
    and for the vote when it changed."""
    preference_id, vote_revision = lease.preference_id, 0
    if lease.kind == "pair":
        preference_id, vote_revision = _revise_vote(conn, lease, sub.choice)
    answers = panel_answers(lease)
    latest = _latest(conn, answers, rater_id)
    rows = []
    for (p, c), score in sub.scores.items():
        old = latest[(answers[p - 1], c)]
        if (old.score, old.comment) != (score, sub.comments[(p, c)]):
            rows.append(
                _rating(answers[p - 1], rater_id, c, score, sub, p, old.revision + 1, old.review_id)
            )
    ids = _add_ratings(conn, rows)
    revision = max((r["revision"] for r in rows), default=0)
    return {
        "saved": True,
        "task": lease.token,
        "revision": max(revision, vote_revision),
        "rating_ids": ids,
        "preference_id": preference_id,
    }


def _revise_vote(conn: sa.Connection, lease: sa.Row, choice: str | None) -> tuple[int, int]:
    """A changed vote is a new preference row with the next revision (the
    lease then points at it); an unchanged one writes nothing. Returns the
    current preference id and its revision."""
    p = snapshot_tables.preferences
    stored = conn.execute(sa.select(p).where(p.c.preference_id == lease.preference_id)).one()
    revision = stored.revision or 0
    new_choice = stored_choice(choice or "", lease.shown_left)
    if stored.choice == new_choice:
        return stored.preference_id, 0
    row = {**{k: v for k, v in stored._mapping.items() if k != "preference_id"},
           "choice": new_choice, "revision": revision + 1, "created_at": now()}
    statement = p.insert().returning(p.c.preference_id)
    preference_id = _insert_one(conn, statement, "preferences", row, 0)
    leases = platform_tables.task_leases
    conn.execute(leases.update().where(leases.c.token == lease.token)
                 .values(preference_id=preference_id))
    return preference_id, revision + 1


def _latest(conn: sa.Connection, answers: list[str], rater_id: str) -> dict:
    r = snapshot_tables.ratings
    rows = conn.execute(
        sa.select(r)
        .where(r.c.answer_id.in_(answers), r.c.rater_id == rater_id)
        .order_by(r.c.revision)
    )
    return {(row.answer_id, row.criterion_id): row for row in rows}


def _rating(
    answer_id: str,
    rater_id: str,
    criterion_id: str,
    score: int,
    sub: Submission,
    panel: int,
    revision: int,
    review_id: int | None,
) -> dict:
    return {
        "answer_id": answer_id,
        "rater_id": rater_id,
        "criterion_id": criterion_id,
        "score": score,
        "revision": revision,
        "review_id": review_id,
        "comment": sub.comments[(panel, criterion_id)],
        "time_spent_s": sub.time_spent_s,
        "created_at": now(),
        "rubric_version": sub.rubric_version,
    }


def _add_ratings(conn: sa.Connection, rows: list[dict]) -> list[int]:
    """Insert ratings in one prepared statement (one per number of rows); the
    database assigns their ids, returned in the order of ``rows`` (matched by
    answer and criterion, which are unique within a submission: the order in
    which a database returns the rows of a multi-row INSERT is not promised).
    A refusal names the submission's first row (all rows of one submission
    share rater and task; a pair's rows span its two answers, an edit's may
    carry different revisions)."""
    if not rows:
        return []
    if conn.dialect.name == "postgresql":
        statement = _RATINGS_UNNEST
        params = {k: [row[k] for row in rows] for k in _RATING_KEYS}
    else:
        statement = _ratings_insert(len(rows))
        params = {f"{k}_{i}": row[k] for i, row in enumerate(rows) for k in _RATING_KEYS}
    try:
        ids = {(a, c): rating_id for rating_id, a, c in run(conn, statement, params)}
    except sa.exc.IntegrityError as err:
        raise refusal(err, "ratings", rows[0], 0) from None
    return [ids[(row["answer_id"], row["criterion_id"])] for row in rows]


_RATING_KEYS = ("answer_id", "rater_id", "criterion_id", "score", "revision", "review_id",
                "comment", "time_spent_s", "created_at", "rubric_version")
_RATINGS_INSERT: dict[int, Prepared] = {}
_PG_ARRAYS = {"answer_id": "text", "rater_id": "text", "criterion_id": "text",
              "score": "smallint", "revision": "smallint", "review_id": "bigint",
              "comment": "text", "time_spent_s": "float8", "created_at": "timestamptz",
              "rubric_version": "text"}
_RATINGS_UNNEST = Prepared(sa.text(
    f"INSERT INTO ratings ({', '.join(_RATING_KEYS)}) SELECT * FROM unnest("
    + ", ".join(f"CAST(:{k} AS {_PG_ARRAYS[k]}[])" for k in _RATING_KEYS)
    + ") RETURNING rating_id, answer_id, criterion_id",
).columns(rating_id=sa.BigInteger, answer_id=sa.Text, criterion_id=sa.Text))
"""PostgreSQL: the rows as one array per column, so one statement of 10
parameters serves every number of rows. The VALUES form has 10 per row (90
for a rating task): beyond 50 parameters psycopg converts the query text
afresh on every call, a twentieth of the server's CPU per submission."""


def _ratings_insert(n: int) -> Prepared:
    """INSERT of ``n`` ratings (parameters ``<column>_<row>``) returning each
    one's id, answer and criterion."""
    statement = _RATINGS_INSERT.get(n)
    if statement is None:
        r = snapshot_tables.ratings
        statement = _RATINGS_INSERT[n] = Prepared(r.insert().values([
            {k: sa.bindparam(f"{k}_{i}", type_=r.c[k].type) for k in _RATING_KEYS}
            for i in range(n)]).returning(r.c.rating_id, r.c.answer_id, r.c.criterion_id))
    return statement


def _insert_one(conn: sa.Connection, statement, table: str, row: dict, index: int) -> int:
    try:
        return conn.execute(statement, row).scalar_one()
    except sa.exc.IntegrityError as err:
        raise refusal(err, table, row, index) from None


def _add_preference(conn: sa.Connection, lease: sa.Row, rater_id: str, choice: str | None) -> int:
    case_id = conn.execute(
        sa.select(snapshot_tables.answers.c.case_id)
        .where(snapshot_tables.answers.c.answer_id == lease.answer_id)
    ).scalar_one()
    row = {"case_id": case_id, "answer_a_id": lease.answer_id, "answer_b_id": lease.answer_b_id,
           "shown_left": lease.shown_left, "choice": stored_choice(choice or "", lease.shown_left),
           "rater_id": rater_id, "created_at": now(), "revision": 0}
    statement = snapshot_tables.preferences.insert().returning(
        snapshot_tables.preferences.c.preference_id)
    return _insert_one(conn, statement, "preferences", row, 0)
