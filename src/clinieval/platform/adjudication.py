"""Adjudication: an answer whose clinicians disagree across the fail line on a
safety-critical criterion (someone scored it <= -1, someone >= +1) goes to
the study's adjudicators, senior clinicians who rule fail or pass on each
disputed criterion and give their reason (issue 33 §3).

A verdict is a row of ``adjudications``; a revised verdict is a new row
naming the one it supersedes, so the history stays and ratings are never
touched. A task is addressed by an opaque reference (an HMAC of the answer
under the platform key): an answer id can carry a model's name, and model
identity never reaches an adjudicator's browser. :class:`TaskView` is what
the page receives; it has no field for a model, a provider or an answer id.

A submission carries the id of the newest verdict its page showed
(``supersedes``). Sent again unchanged it writes nothing and gets the same
outcome (idempotent); if another verdict was recorded meanwhile it is
refused (409, field ``supersedes``) and nothing is written, so two
conflicting verdicts submitted at once never both land.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

from clinieval.contract import vocabulary
from clinieval.contract.validate import check_text
from clinieval.errors import InputError
from clinieval.platform.events import aware, now, record
from clinieval.schema.domain import REASON_MAX
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

FAIL_AT, PASS_AT = -1, 1
"""A criterion is disputed when one clinician's current score is at most
FAIL_AT (an alarm) and another's at least PASS_AT."""
ROLE = "adjudicator"
SOURCE = "adjudication"
VERDICTS = vocabulary.ADJUDICATION_VERDICTS


class Refused(InputError):
    """The request may not do this (403): not an adjudicator of the study."""

    status = 403


class Conflict(InputError):
    """The answer changed since the page was shown (409)."""

    status = 409


class NotFound(InputError):
    """No such task in this study (404)."""

    status = 404


# --- what is disputed ---------------------------------------------------------------

def _current_ratings(study_id: str, safety_only: bool = True) -> sa.Select:
    """The study's current ratings (latest revision of each answer x rater x
    criterion), on safety-critical criteria only unless ``safety_only`` is off."""
    r, newer = snapshot_tables.ratings, snapshot_tables.ratings.alias("newer")
    a, c, cr = snapshot_tables.answers, snapshot_tables.cases, snapshot_tables.criteria
    later = sa.exists().where(newer.c.answer_id == r.c.answer_id,
                              newer.c.rater_id == r.c.rater_id,
                              newer.c.criterion_id == r.c.criterion_id,
                              newer.c.revision > r.c.revision)
    query = (sa.select(r.c.answer_id, r.c.criterion_id, r.c.rater_id, r.c.score, r.c.comment,
                       r.c.rating_id)
             .join(a, a.c.answer_id == r.c.answer_id).join(c, c.c.case_id == a.c.case_id)
             .join(cr, cr.c.criterion_id == r.c.criterion_id)
             .where(c.c.study_id == study_id, ~later))
    return query.where(cr.c.safety_critical.is_(True)) if safety_only else query


def disputed(conn: sa.Connection, study_id: str, answer_id: str | None = None
             ) -> dict[str, tuple[str, ...]]:
    """Per disputed answer of the study, its disputed criteria (sorted), among
    the study's criteria."""
    current = _current_ratings(study_id)
    if answer_id is not None:
        current = current.where(snapshot_tables.ratings.c.answer_id == answer_id)
    current = current.subquery()
    rows = conn.execute(
        sa.select(current.c.answer_id, current.c.criterion_id)
        .group_by(current.c.answer_id, current.c.criterion_id)
        .having(sa.and_(sa.func.min(current.c.score) <= FAIL_AT,
                        sa.func.max(current.c.score) >= PASS_AT))
        .order_by(current.c.answer_id, current.c.criterion_id)).all()
    wanted = set(_study_criteria(conn, study_id))
    out: dict[str, tuple[str, ...]] = {}
    for answer, criterion in rows:
        if criterion in wanted:
            out[answer] = (*out.get(answer, ()), criterion)
    return out


def _study_criteria(conn: sa.Connection, study_id: str) -> list[str]:
    st = platform_tables.study_settings
    text = conn.execute(sa.select(st.c.criteria).where(st.c.study_id == study_id)).scalar()
    return json.loads(text) if text else []


# --- task references ----------------------------------------------------------------

def task_ref(key: bytes, study_id: str, answer_id: str) -> str:
    """The opaque address of an answer's adjudication task in a study."""
    return hmac.new(key, f"adjudication\x1f{study_id}\x1f{answer_id}".encode(),
                    hashlib.sha256).hexdigest()[:32]


def _answer_of(conn: sa.Connection, key: bytes, study_id: str, ref: str) -> str:
    """The study's answer a reference addresses; NotFound for none. A lookup
    in the study's table of references (:func:`_lookup`), not an HMAC of
    every answer of the study per request."""
    if len(ref) == 32 and all(ch in "0123456789abcdef" for ch in ref):
        found = _lookup(conn, key, study_id, ref)
        if found is not None:
            return found
    raise NotFound(SOURCE, "no such adjudication task in this study", field="task")


_REFS: dict[tuple[str, bytes, str], tuple[int, dict[str, str]]] = {}
"""Per database, study and platform key: the study's answer count when the
table was made, and reference -> answer id."""
_REFS_LOCK = threading.Lock()
REFS_KEPT = 64
"""Studies whose reference tables a process keeps."""


def _lookup(conn: sa.Connection, key: bytes, study_id: str, ref: str) -> str | None:
    """The answer ``ref`` addresses, from the kept table; a reference it does
    not hold makes it again if the study's answer count grew since (answers
    are added, never removed or moved to another study)."""
    memo = (conn.engine.url.render_as_string(), key, study_id)
    with _REFS_LOCK:
        kept = _REFS.get(memo)
    if kept is not None and ref in kept[1]:
        return kept[1][ref]
    a, c = snapshot_tables.answers, snapshot_tables.cases
    in_study = sa.select(a.c.answer_id).join(c, c.c.case_id == a.c.case_id) \
        .where(c.c.study_id == study_id)
    if kept is not None and kept[0] == conn.execute(
            sa.select(sa.func.count()).select_from(in_study.subquery())).scalar_one():
        return None
    ids = conn.execute(in_study).scalars().all()
    table = {task_ref(key, study_id, answer_id): answer_id for answer_id in ids}
    with _REFS_LOCK:
        if len(_REFS) >= REFS_KEPT and memo not in _REFS:
            _REFS.pop(next(iter(_REFS)))
        _REFS[memo] = (len(ids), table)
    return table.get(ref)


# --- verdicts ---------------------------------------------------------------------

def _verdicts(conn: sa.Connection, answer_ids) -> list[sa.Row]:
    adj = snapshot_tables.adjudications
    return conn.execute(sa.select(adj).where(adj.c.answer_id.in_(list(answer_ids)))
                        .order_by(adj.c.adjudication_id)).all()


def _current(rows: list[sa.Row]) -> dict[tuple[str, str], sa.Row]:
    """The standing verdict per (answer, criterion): the newest row."""
    return {(row.answer_id, row.criterion_id): row for row in rows}


def _newest_id(rows: list[sa.Row]) -> int:
    return max((row.adjudication_id for row in rows), default=0)


# --- the adjudicator's list --------------------------------------------------------

def tasks(engine: sa.Engine, key: bytes, study_id: str) -> list[dict]:
    """Every disputed answer of the study as a task: its reference,
    specialty, disputed criteria and whether each has a standing verdict;
    open tasks (a disputed criterion without a verdict) first."""
    a, c, cr = snapshot_tables.answers, snapshot_tables.cases, snapshot_tables.criteria
    with db.reading(engine) as conn:
        found = disputed(conn, study_id)
        if not found:
            return []
        specialty = dict(conn.execute(sa.select(a.c.answer_id, c.c.specialty)
                                      .join(c, c.c.case_id == a.c.case_id)
                                      .where(a.c.answer_id.in_(list(found)))).all())
        names = dict(conn.execute(sa.select(cr.c.criterion_id, cr.c.name)).all())
        standing = _current(_verdicts(conn, found))
    out = []
    for answer_id, criteria in found.items():
        ruled = [criterion for criterion in criteria if (answer_id, criterion) in standing]
        out.append({"ref": task_ref(key, study_id, answer_id), "specialty": specialty[answer_id],
                    "criteria": [names.get(cid, cid) for cid in criteria],
                    "open": len(ruled) < len(criteria), "ruled": len(ruled)})
    return sorted(out, key=lambda t: (not t["open"], t["specialty"], t["ref"]))


# --- one task, as its page shows it ---------------------------------------------------

class _View(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RatingView(_View):
    rater: str
    score: int
    rationale: str


class CriterionRatings(_View):
    criterion_id: str
    name: str
    definition: str
    disputed: bool
    ratings: tuple[RatingView, ...]
    verdict: str | None


class HistoryEntry(_View):
    criterion: str
    verdict: str
    reason: str
    by: str
    at: str
    standing: bool


class TaskView(_View):
    """What an adjudicator's browser receives: the case, the answer's text,
    every current rating and rationale under a per-task rater label, and the
    verdicts so far. No model, provider, version or answer id."""

    ref: str
    prompt: str
    specialty: str
    answer: str
    criteria: tuple[CriterionRatings, ...]
    supersedes: int
    history: tuple[HistoryEntry, ...]


def task_view(engine: sa.Engine, key: bytes, study_id: str, rater_id: str, ref: str
              ) -> TaskView:
    """The task's page content; NotFound for an unknown reference or an
    answer that is not (or no longer) disputed."""
    with db.reading(engine) as conn:
        answer_id = _answer_of(conn, key, study_id, ref)
        criteria = disputed(conn, study_id, answer_id).get(answer_id)
        if not criteria:
            raise NotFound(SOURCE, "this answer's clinicians do not disagree across the"
                           " fail line: there is nothing to adjudicate", field="task")
        case = _case_of(conn, answer_id)
        ratings = conn.execute(_current_ratings(study_id, safety_only=False).where(
            snapshot_tables.ratings.c.answer_id == answer_id)
            .order_by(snapshot_tables.ratings.c.rating_id)).all()
        rows = _verdicts(conn, [answer_id])
        crit = _criteria_rows(conn, {r.criterion_id for r in ratings})
    labels = _labels([r.rater_id for r in ratings])
    judges = _labels([r.rater_id for r in rows if r.rater_id != rater_id], "Adjudicator")
    standing = _current(rows)
    return TaskView(
        ref=ref, prompt=case.prompt or "", specialty=case.specialty, answer=case.text or "",
        criteria=tuple(_criterion_ratings(crit[cid], cid in criteria, ratings, labels,
                                          standing.get((answer_id, cid)))
                       for cid in sorted(crit, key=lambda k: (crit[k].position or 0, k))),
        supersedes=_newest_id(rows),
        history=tuple(_history(row, crit, standing, rater_id, judges) for row in reversed(rows)))


def _case_of(conn: sa.Connection, answer_id: str) -> sa.Row:
    a, c = snapshot_tables.answers, snapshot_tables.cases
    return conn.execute(sa.select(c.c.prompt, c.c.specialty, a.c.text)
                        .join(c, c.c.case_id == a.c.case_id)
                        .where(a.c.answer_id == answer_id)).one()


def _criteria_rows(conn: sa.Connection, ids: set[str]) -> dict[str, sa.Row]:
    cr = snapshot_tables.criteria
    rows = conn.execute(sa.select(cr.c.criterion_id, cr.c.name, cr.c.definition, cr.c.position)
                        .where(cr.c.criterion_id.in_(list(ids)))).all()
    return {row.criterion_id: row for row in rows}


def _labels(ids: list[str], word: str = "Clinician") -> dict[str, str]:
    """Per-task labels in order of first appearance: 'Clinician A', 'Clinician B'."""
    out: dict[str, str] = {}
    for rid in ids:
        if rid not in out:
            n = len(out)
            out[rid] = f"{word} {chr(65 + n) if n < 26 else n + 1}"
    return out


def _criterion_ratings(row: sa.Row, is_disputed: bool, ratings: list[sa.Row],
                       labels: dict[str, str], standing: sa.Row | None) -> CriterionRatings:
    mine = [r for r in ratings if r.criterion_id == row.criterion_id]
    return CriterionRatings(
        criterion_id=row.criterion_id, name=row.name, definition=row.definition or "",
        disputed=is_disputed,
        ratings=tuple(RatingView(rater=labels[r.rater_id], score=r.score,
                                 rationale=r.comment or "") for r in mine),
        verdict=None if standing is None else standing.verdict)


def _history(row: sa.Row, crit: dict[str, sa.Row], standing: dict, rater_id: str,
             judges: dict[str, str]) -> HistoryEntry:
    name = crit[row.criterion_id].name if row.criterion_id in crit else row.criterion_id
    at = aware(row.created_at).strftime("%Y-%m-%d %H:%M UTC") if row.created_at else ""
    return HistoryEntry(criterion=name, verdict=row.verdict, reason=row.reason,
                        by="you" if row.rater_id == rater_id else judges[row.rater_id], at=at,
                        standing=standing.get((row.answer_id, row.criterion_id)) is row)


# --- recording a verdict -------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """The rows a submission stands for, and whether this call wrote them."""

    ids: tuple[int, ...]
    written: bool


@dataclass(frozen=True)
class Submission:
    verdicts: dict[str, str]
    reason: str
    supersedes: int


def parse(form: Mapping[str, str], criteria: tuple[str, ...]) -> Submission:
    """The form's verdict per disputed criterion (``verdict.<criterion_id>``),
    its reason and ``supersedes``; InputError naming the first bad field."""
    extra = sorted(k for k in form if k.startswith("verdict.")
                   and k.removeprefix("verdict.") not in criteria)
    if extra:
        raise InputError(SOURCE, "not a disputed criterion of this answer", field=extra[0])
    verdicts = {}
    for criterion in criteria:
        name = f"verdict.{criterion}"
        value = form.get(name)
        if value not in VERDICTS:
            raise InputError(SOURCE, "give a verdict on every disputed criterion", field=name,
                             expected=" | ".join(VERDICTS), got=None if value is None
                             else str(value)[:20])
        verdicts[criterion] = value
    return Submission(verdicts, _reason(form.get("reason")), _supersedes(form.get("supersedes")))


def _reason(value: str | None) -> str:
    reason = (value or "").strip()
    if not reason:
        raise InputError(SOURCE, "a reason is required", field="reason")
    if len(reason) > REASON_MAX:
        raise InputError(SOURCE, f"at most {REASON_MAX} characters", field="reason",
                         got=len(reason))
    check_text(SOURCE, "reason", reason)
    return reason


def _supersedes(value: str | None) -> int:
    text = (value or "").strip()
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise InputError(SOURCE, "the newest verdict the page showed (0 for none)",
                         field="supersedes", expected="a whole number >= 0",
                         got=None if value is None else str(value)[:20])
    return int(text)


def submit(engine: sa.Engine, key: bytes, study_id: str, user_id: str, ref: str,
           form: Mapping[str, str]) -> Outcome:
    """Record an adjudicator's verdicts on a disputed answer, in one
    transaction: one row per disputed criterion, each superseding the
    criterion's standing verdict. Refused, writing nothing: a user who is not
    the study's adjudicator (403, ``role``), an unknown task (404, ``task``),
    an answer no longer disputed (409, ``task``), a bad field (422), a page
    older than the newest verdict (409, ``supersedes``). A retry of the same
    submission returns its rows and writes nothing."""
    with db.writing(engine) as conn:
        rater_id = _adjudicator(conn, study_id, user_id)
        answer_id = _answer_of(conn, key, study_id, ref)
        db.one_at_a_time(conn, f"adjudication {answer_id}")
        criteria = disputed(conn, study_id, answer_id).get(answer_id)
        if not criteria:
            raise Conflict(SOURCE, "this answer's clinicians do not disagree across the fail"
                           " line: there is nothing to adjudicate", field="task")
        sent = parse(form, criteria)
        rows = _verdicts(conn, [answer_id])
        if sent.supersedes != _newest_id(rows):
            return _retry_or_conflict(rows, sent, rater_id)
        ids = _insert(conn, answer_id, rater_id, sent, _current(rows))
        record(conn, "adjudicated", user_id=user_id, study_id=study_id, subject=ref,
               detail={"criteria": len(ids)})
    return Outcome(ids, True)


def _adjudicator(conn: sa.Connection, study_id: str, user_id: str) -> str:
    m, u = platform_tables.memberships, platform_tables.users
    row = conn.execute(sa.select(m.c.role, u.c.rater_id).join(u, u.c.user_id == m.c.user_id)
                       .where(m.c.study_id == study_id, m.c.user_id == user_id)).first()
    if row is None or row.role != ROLE:
        raise Refused(SOURCE, "only the study's adjudicators record verdicts", field="role",
                      got=None if row is None else row.role)
    return row.rater_id


def _retry_or_conflict(rows: list[sa.Row], sent: Submission, rater_id: str) -> Outcome:
    """A page older than the newest verdict: the same submission already
    recorded (a retry) gets its rows back; anything else is refused."""
    after = [row for row in rows if row.adjudication_id > sent.supersedes]
    same = (sent.supersedes <= _newest_id(rows)
            and {row.criterion_id: row.verdict for row in after} == sent.verdicts
            and len(after) == len(sent.verdicts)
            and all(row.rater_id == rater_id and row.reason == sent.reason for row in after))
    if same:
        return Outcome(tuple(row.adjudication_id for row in after), False)
    raise Conflict(SOURCE, "another verdict on this answer was recorded after this page was"
                   " shown; reload the task and review it", field="supersedes",
                   expected=str(_newest_id(rows)), got=sent.supersedes)


def _insert(conn: sa.Connection, answer_id: str, rater_id: str, sent: Submission,
            standing: dict[tuple[str, str], sa.Row]) -> tuple[int, ...]:
    adj, at, ids = snapshot_tables.adjudications, now(), []
    for criterion, verdict in sent.verdicts.items():
        before = standing.get((answer_id, criterion))
        ids.append(conn.execute(adj.insert().values(
            answer_id=answer_id, criterion_id=criterion, rater_id=rater_id, verdict=verdict,
            reason=sent.reason, supersedes=None if before is None else before.adjudication_id,
            created_at=at).returning(adj.c.adjudication_id)).scalar_one())
    return tuple(ids)
