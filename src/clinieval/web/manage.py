"""What a study's admin does, as plain functions on the engine: both the admin
pages and the JSON API call these, so the two cannot drift apart.

Every function that changes something appends an audit event in the same
transaction, naming the admin who acted.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path

import sqlalchemy as sa

from clinieval.errors import InputError
from clinieval.io import archive
from clinieval.io.validate import has_nul, unencodable
from clinieval.snapshot import Snapshot
from clinieval.storage import db
from clinieval.storage import platform_tables as P
from clinieval.storage import sqltables as S
from clinieval.web import auth
from clinieval.web.studies import DEFAULT_CONSENT, StudyPlan, create_study

MAX_UPLOAD = 50 * 1024 * 1024
MAX_RUBRIC = 2**20
MAX_INVITES = 1000
MAX_MEMBERS = 10_000
"""Files in an uploaded zip (a source has a few tables, or a bundle's files)."""
MAX_EMAIL = 254


@dataclass(frozen=True)
class Upload:
    """An uploaded file: its name (the importer reads the format from the
    suffix) and its bytes."""

    filename: str
    content: bytes


def _read_upload(upload: Upload, what: str):
    """Read an uploaded source with the same reader (and the same all-or-nothing
    checks and messages) as ``clinieval import``."""
    from clinieval.io.importer import read_source

    if len(upload.content) > MAX_UPLOAD:
        raise InputError(upload.filename, f"larger than {MAX_UPLOAD // 2**20} MiB", field=what)
    name = _file_name(upload.filename, "upload")
    folder = Path(tempfile.mkdtemp(prefix="clinieval-upload-"))
    try:
        path = folder / name
        path.write_bytes(upload.content)
        if name.lower().endswith(".zip"):
            path = archive.unpack(path, folder / "unzipped", max_bytes=4 * MAX_UPLOAD,
                                  max_members=MAX_MEMBERS)
        return read_source(path)[0]
    except InputError as err:
        raise _as_sent(err, folder, upload.filename) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _file_name(sent: str | None, default: str) -> str:
    """The uploaded file's name as a name inside our temporary folder: its last
    part, without NUL, at most 100 characters (keeping the suffix the
    reader goes by); ``default`` (and the suffix) when nothing usable is left."""
    name = Path((sent or "").replace("\x00", "")).name
    suffix = "".join(Path(name).suffixes)[-16:]
    if name in ("", ".", "..") or len(name.encode()) > 100:
        name = default + (suffix if len(suffix.encode()) <= 16 else "")
    return name


def _as_sent(err: InputError, folder: Path, sent: str | None) -> InputError:
    """``err`` naming the upload as sent instead of our temporary copy of it."""
    for path in (folder / "unzipped", *sorted(folder.iterdir(), reverse=True), folder):
        archive.naming(err, path, sent or "upload")
    return err


def _rubric(upload: Upload | None):
    from clinieval.rubric import load_rubric

    if upload is None or not upload.content:
        return load_rubric()
    if len(upload.content) > MAX_RUBRIC:
        raise InputError(upload.filename, f"larger than {MAX_RUBRIC // 2**20} MiB",
                         field="rubric")
    folder = Path(tempfile.mkdtemp(prefix="clinieval-rubric-"))
    try:
        path = folder / _file_name(upload.filename, "rubric")
        path.write_bytes(upload.content)
        return load_rubric(path)
    except InputError as err:
        raise _as_sent(err, folder, upload.filename) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _number(form: dict, name: str, kind, default):
    raw = str(form.get(name) or "").strip()
    if not raw:
        return default
    try:
        return kind(raw)
    except ValueError:
        raise InputError("study form", "not a number", field=name, got=raw) from None


def plan_from_form(form: dict, rubric: Upload | None) -> StudyPlan:
    """A study plan from the admin's form (or the API's fields)."""
    rub = _rubric(rubric)
    shown = [c.strip() for c in str(form.get("criteria") or "").split(",") if c.strip()]
    known = [c.criterion_id for c in rub.criteria]
    for c in shown:
        if c not in known:
            raise InputError("study form", "not a criterion of the rubric", field="criteria",
                             expected=", ".join(known), got=c)
    if shown:
        rub = rub.model_copy(update={"criteria": tuple(c for c in rub.criteria
                                                  if c.criterion_id in shown)})
    specialties = tuple(s.strip() for s in str(form.get("specialties") or "").split(",")
                        if s.strip())
    return StudyPlan(
        study_id=str(form.get("study_id") or "").strip(),
        name=str(form.get("name") or "").strip() or str(form.get("study_id") or ""),
        description=str(form.get("description") or "").strip() or None,
        consent_text=str(form.get("consent_text") or "").strip() or DEFAULT_CONSENT,
        rubric=rub,
        overlap_target=_number(form, "overlap_target", int, 3),
        pairwise_share=_number(form, "pairwise_share", float, 0.2),
        specialties=specialties,
        rationale_required=str(form.get("rationale_required", "yes")).lower()
        in ("yes", "true", "on", "1"),
    )


def new_study(engine: sa.Engine, user_id: str, form: dict, source: Upload,
              rubric: Upload | None = None) -> dict:
    """Create a study from the form and an uploaded source; the creator becomes
    its admin. Nothing is written when the source or the form is bad."""
    return write_study(engine, user_id, *prepare_study(engine, form, source, rubric))


def prepare_study(engine: sa.Engine, form: dict, source: Upload, rubric: Upload | None = None
                  ) -> tuple[StudyPlan, Snapshot]:
    """What :func:`new_study` checks and reads before it writes: the plan from
    the form (the form is checked first) and the parsed source. Writes
    nothing and takes no lock, so the server runs it in a thread beside the
    clinicians' requests (a large upload takes seconds to parse)."""
    plan = plan_from_form(form, rubric)
    plan.check()
    with engine.connect() as conn:
        if conn.execute(sa.select(S.studies.c.study_id).where(
                S.studies.c.study_id == plan.study_id)).first():
            raise InputError("study form", "a study with this id exists", field="study_id",
                             got=plan.study_id)
    return plan, read_source(source)


def write_study(engine: sa.Engine, user_id: str, plan: StudyPlan, snapshot: Snapshot) -> dict:
    """Store a study prepared by :func:`prepare_study` in one transaction,
    with the creator as its admin."""

    def creator_is_admin(conn: sa.Connection, counts: dict) -> None:
        auth.record(conn, "study_created", user_id=user_id, study_id=plan.study_id,
                    detail=counts)
        conn.execute(P.memberships.insert().values(study_id=plan.study_id, user_id=user_id,
                                                   role="admin", consented_at=auth.now()))

    counts = create_study(engine, plan, snapshot, creator_is_admin)
    return {"study_id": plan.study_id, **counts}


def read_source(source: Upload) -> Snapshot:
    """An uploaded source of cases and answers, parsed and checked as
    ``clinieval import`` does (no database involved)."""
    return _read_upload(source, "source")


def content_counts(engine: sa.Engine, study_id: str) -> dict[str, int]:
    c, a = S.cases, S.answers
    with engine.connect() as conn:
        cases = conn.execute(sa.select(sa.func.count()).where(
            c.c.study_id == study_id)).scalar_one()
        answers = conn.execute(sa.select(sa.func.count()).select_from(a).join(
            c, c.c.case_id == a.c.case_id).where(c.c.study_id == study_id)).scalar_one()
    return {"cases": cases, "answers": answers}


def add_cases(engine: sa.Engine, user_id: str, study_id: str, source: Upload | Snapshot
              ) -> dict:
    """Add an uploaded source's cases and answers to the study, all or nothing
    (the importer's checks and messages), and log it. ``source`` may be
    parsed already (:func:`read_source`)."""
    from clinieval.web.studies import add_cases as add

    def logged(conn: sa.Connection, counts: dict) -> None:
        auth.record(conn, "cases_added", user_id=user_id, study_id=study_id, detail=counts)

    snapshot = read_source(source) if isinstance(source, Upload) else source
    counts = add(engine, study_id, snapshot, logged)
    return {"study_id": study_id, **counts}


def new_rubric_version(engine: sa.Engine, user_id: str | None, study_id: str,
                       rubric) -> dict:
    """Make ``rubric`` (a :class:`~clinieval.schema.domain.Rubric`, or an
    :class:`Upload` of one) the study's current version: ratings given from
    now on record it. It must be the same rubric (id) under a version not used
    before, and keep every criterion the study shows."""
    from clinieval.web.assignment import study_config
    from clinieval.web.studies import store_rubric_version

    if isinstance(rubric, Upload):
        if not rubric.content:
            raise InputError("rubric", "upload a rubric file", field="rubric")
        rubric = _rubric(rubric)
    if has_nul(rubric.model_dump()):
        raise InputError("rubric", "contains a NUL character", field="rubric")
    sr = P.study_rubrics
    with db.writing(engine) as conn:
        current = conn.execute(sa.select(sr).where(sr.c.study_id == study_id)).first()
        cfg = study_config(conn, study_id)
        if current is None or cfg is None:
            raise InputError("rubric", "no such study", field="study", got=study_id)
        _check_new_version(conn, rubric, current, cfg.criteria)
        conn.execute(sr.update().where(sr.c.study_id == study_id)
                     .values(version=str(rubric.version)))
        store_rubric_version(conn, study_id, rubric, user_id)
        auth.record(conn, "rubric_version_added", user_id=user_id, study_id=study_id,
                    subject=str(rubric.version), detail={"previous": current.version})
    return {"study_id": study_id, "version": str(rubric.version)}


def _check_new_version(conn: sa.Connection, rubric, current: sa.Row, shown: list[str]) -> None:
    v = P.study_rubric_versions
    if rubric.rubric_id != current.rubric_id:
        raise InputError("rubric", "a new version must be of the study's rubric",
                         field="rubric_id", expected=current.rubric_id, got=rubric.rubric_id)
    used = conn.execute(sa.select(v.c.version).where(
        v.c.study_id == current.study_id)).scalars().all()
    if str(rubric.version) in {*used, current.version}:
        raise InputError("rubric", "this version was already used in the study",
                         field="version", expected=f"not one of {', '.join(sorted(used))}",
                         got=rubric.version)
    missing = [c for c in shown if c not in rubric.ids]
    if missing:
        raise InputError("rubric", "the new version drops criteria the study shows",
                         field="criteria", got=", ".join(missing))


def may_create_studies(conn: sa.Connection, user_id: str) -> bool:
    """Admins of any study may create more (the first admin comes from the CLI)."""
    return conn.execute(sa.select(P.memberships.c.study_id).where(
        P.memberships.c.user_id == user_id, P.memberships.c.role == "admin")).first() is not None


# --- invitations and members ----------------------------------------------------

_AROUND_ADDRESS = "<>\"'()[],:"


def parse_emails(text: str) -> list[str]:
    """E-mail addresses from pasted text or a CSV (any column holding an '@')."""
    if "\x00" in text:
        raise InputError("invitations", "contains a NUL character", field="emails")
    if unencodable(text):
        raise InputError("invitations", "holds a lone surrogate, not text", field="emails")
    emails = []
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as err:  # a cell past the csv module's limit (128 KiB), say
        raise InputError("invitations", f"not a readable list or CSV: {err}",
                         field="emails") from None
    for row in rows:
        for cell in row:
            for part in cell.replace(";", " ").split():
                # "Ana Silva <ana@example.org>": the address without its brackets (an
                # invitation admits exactly the address it names).
                part = part.strip(_AROUND_ADDRESS).lower()
                if "@" in part and len(part) > MAX_EMAIL:
                    raise InputError("invitations", f"longer than {MAX_EMAIL} characters,"
                                     " not an e-mail address", field="emails", got=part[:40])
                if "@" in part and part not in emails:
                    emails.append(part)
    if len(emails) > MAX_INVITES:
        raise InputError("invitations", f"at most {MAX_INVITES} at once", field="emails",
                         got=len(emails))
    return emails


def invite_many(engine: sa.Engine, user_id: str, study_id: str, role: str,
                emails: list[str], count: int = 0) -> list[dict]:
    """One single-use link per e-mail address (or ``count`` unnamed links).
    Sending mail is not the platform's job: the links are returned."""
    targets = emails or [None] * max(0, min(count, MAX_INVITES))
    if not targets:
        raise InputError("invitations", "give e-mail addresses or a number of links",
                         field="emails")
    with db.writing(engine) as conn:  # every link or none
        tokens = auth.create_invitations(conn, study_id, role, len(targets),
                                         emails=emails or None)
        auth.record(conn, "invited", user_id=user_id, study_id=study_id,
                    detail={"role": role, "links": len(tokens)})
    return [{"email": email, "token": token} for email, token in zip(targets, tokens,
                                                                      strict=True)]


def pending_invitations(engine: sa.Engine, study_id: str) -> list[dict]:
    """The study's invitation links that still work (unused, not expired),
    counted per role and kind: made for an address, or unnamed (anyone
    holding the link); with the last expiry. Neither tokens nor addresses."""
    inv = P.invitations
    named = inv.c.email.is_not(None)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(inv.c.role, named.label("named"), sa.func.count(),
                      sa.func.max(inv.c.expires_at))
            .where(inv.c.study_id == study_id, inv.c.used_at.is_(None),
                   inv.c.expires_at > auth.now())
            .group_by(inv.c.role, named).order_by(inv.c.role, named)).all()
    return [{"role": role, "for": "an address" if is_named else "anyone with the link",
             "links": n, "last_expires": auth.aware(last).astimezone(UTC).strftime(
                 "%Y-%m-%d %H:%M")}
            for role, is_named, n, last in rows]


WITHDRAWABLE = ("unnamed", "all")


def withdraw_invitations(engine: sa.Engine, user_id: str, study_id: str, which: str) -> int:
    """Expire the study's unused links: the unnamed ones (bearer links, which
    no address revokes) or all of them. Returns how many; logs the count."""
    if which not in WITHDRAWABLE:
        raise InputError("invitations", "which links to withdraw", field="which",
                         expected=" | ".join(WITHDRAWABLE), got=str(which)[:20])
    inv = P.invitations
    with db.writing(engine) as conn:
        at = auth.now()
        chosen = sa.and_(inv.c.study_id == study_id, inv.c.used_at.is_(None),
                         inv.c.expires_at > at)
        if which == "unnamed":
            chosen = sa.and_(chosen, inv.c.email.is_(None))
        expired = conn.execute(inv.update().where(chosen).values(expires_at=at)).rowcount
        if expired:
            auth.record(conn, "invitations_withdrawn", user_id=user_id, study_id=study_id,
                        detail={"links": expired, "which": which})
    return expired


def members(engine: sa.Engine, study_id: str) -> list[dict]:
    """Members with pseudonymous id, role, specialty and counts; no e-mail."""
    m, u, r = P.memberships, P.users, S.raters
    tl = P.task_leases
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(r.c.rater_id, m.c.role, r.c.specialty, m.c.consented_at)
            .select_from(m).join(u, u.c.user_id == m.c.user_id)
            .join(r, r.c.rater_id == u.c.rater_id)
            .where(m.c.study_id == study_id).order_by(m.c.role, r.c.rater_id)).all()
        done = dict(conn.execute(
            sa.select(u.c.rater_id, sa.func.count()).select_from(tl)
            .join(u, u.c.user_id == tl.c.user_id)
            .where(tl.c.study_id == study_id, tl.c.status == "submitted")
            .group_by(u.c.rater_id)).all())
    return [{"rater_id": row.rater_id, "role": row.role, "specialty": row.specialty,
             # A clinician has joined once their profile and consent are in (before that
             # they cannot rate); a viewer or admin, who rates nothing, on accepting the link.
             "joined": row.consented_at is not None or row.role != "clinician",
             "tasks_done": done.get(row.rater_id, 0)}
            for row in rows]


def revoke_address(engine: sa.Engine, user_id: str, study_id: str, email: str
                   ) -> tuple[str | None, int]:
    """Revoke by the e-mail address the admin invited (the People page lists
    members by pseudonym): the member with it, as :func:`revoke` does, or,
    before anyone registered with it, the unused invitations made for it.
    Returns the revoked member's pseudonymous id, or None and how many unused
    invitations expired."""
    u, m, inv = P.users, P.memberships, P.invitations
    email = email.strip().lower()
    if "\x00" in email or unencodable(email) or len(email) > MAX_EMAIL or "@" not in email:
        raise InputError("revoke", "not an e-mail address", field="email")
    with engine.connect() as conn:
        member = conn.execute(sa.select(u.c.rater_id, m.c.role)
                              .join(m, m.c.user_id == u.c.user_id)
                              .where(u.c.email == email, m.c.study_id == study_id)).first()
    if member is not None:  # the admin asking is an admin too: their own address is refused
        if member.role == "admin":
            raise InputError("revoke", "an admin of the study cannot be revoked here",
                             field="email")
        revoke(engine, user_id, study_id, member.rater_id)  # expires their links too
        return member.rater_id, 0
    with db.writing(engine) as conn:
        at = auth.now()
        expired = conn.execute(inv.update().where(
            inv.c.study_id == study_id, inv.c.email == email, inv.c.used_at.is_(None),
            inv.c.expires_at > at).values(expires_at=at)).rowcount
        if not expired:
            raise InputError("revoke", "no member of this study and no unused invitation to it"
                             " has this e-mail address", field="email")
        # The address is not logged (the log shows pseudonyms only): how many links went.
        auth.record(conn, "invitations_withdrawn", user_id=user_id, study_id=study_id,
                    detail={"links": expired})
    return None, expired


def revoke(engine: sa.Engine, user_id: str, study_id: str, rater_id: str) -> None:
    """End a member's access to the study: the membership goes, open tasks
    return to the pool, and the unused invitations to the study made for their
    e-mail address expire (an invitation made before the revocation cannot
    bring them back either: :func:`auth.join`). Their submitted ratings stay
    (they were given)."""
    u, m, tl, inv = P.users, P.memberships, P.task_leases, P.invitations
    if "\x00" in rater_id:
        raise InputError("revoke", "not a member you can revoke", field="rater_id")
    with db.writing(engine) as conn:
        # Locked, as joining locks it (auth._join): a link accepted at the same moment
        # either lands before this and is removed, or after it and sees the revocation.
        found = conn.execute(sa.select(u.c.user_id, u.c.email).where(
            u.c.rater_id == rater_id).with_for_update()).first()
        target = None if found is None else found.user_id
        if target is None or target == user_id:
            raise InputError("revoke", "not a member you can revoke", field="rater_id",
                             got=rater_id)
        role = conn.execute(sa.select(m.c.role).where(m.c.study_id == study_id,
                                                      m.c.user_id == target)).scalar()
        if role == "admin":  # as the People page offers: admins are not revoked here
            raise InputError("revoke", "an admin of the study cannot be revoked here",
                             field="rater_id", got=rater_id)
        gone = conn.execute(m.delete().where(m.c.study_id == study_id, m.c.user_id == target))
        if gone.rowcount != 1:
            raise InputError("revoke", "not a member of this study", field="rater_id",
                             got=rater_id)
        conn.execute(tl.update().where(tl.c.study_id == study_id, tl.c.user_id == target,
                                       tl.c.status == "open").values(status="expired"))
        at = auth.now()
        conn.execute(inv.update().where(inv.c.study_id == study_id, inv.c.email == found.email,
                                        inv.c.used_at.is_(None), inv.c.expires_at > at)
                     .values(expires_at=at))
        auth.record(conn, "access_revoked", user_id=user_id, study_id=study_id,
                    subject=rater_id)


# --- the leak guard's queue -------------------------------------------------------

DECISION_EVENTS = {"release": "answer_released", "withdraw": "answer_withdrawn"}

def flagged_queue(engine: sa.Engine, study_id: str) -> list[dict]:
    """Flagged answers awaiting a decision, with their text and the reason."""
    s, a, d = P.answer_screens, S.answers, P.screen_decisions
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
    if decision not in P.SCREEN_DECISIONS:
        raise InputError("flagged answer", "unknown decision", field="decision",
                         expected=" | ".join(P.SCREEN_DECISIONS), got=decision)
    if has_nul(answer_id):
        raise InputError("flagged answer", "not awaiting a decision", field="answer_id")
    s, d = P.answer_screens, P.screen_decisions
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
        conn.execute(P.screen_decisions.insert().values(
            study_id=study_id, answer_id=answer_id, decision=decision, user_id=user_id,
            decided_at=auth.now()))
        if decision == "release":
            conn.execute(s.update().where(s.c.study_id == study_id, s.c.answer_id == answer_id)
                         .values(status="clear"))
        auth.record(conn, DECISION_EVENTS[decision], user_id=user_id, study_id=study_id,
                    subject=answer_id)


# --- audit log, API tokens, export -----------------------------------------------

ADMIN_EVENTS = ("study_created", "cases_added", "rubric_version_added", "invited",
                "invitation_created", "invitations_withdrawn", "access_revoked",
                *DECISION_EVENTS.values(), "token_created", "token_revoked",
                "exported", "report_run", "signed_in", "joined", "registered")


def audit_log(engine: sa.Engine, study_id: str, limit: int = 500) -> list[dict]:
    """Admin actions in the study, and the sign-ins and all-studies API tokens
    (which reach this study too) of its members, newest first, with
    pseudonymous ids (no e-mail addresses)."""
    e, u, m = P.audit_events, P.users, P.memberships
    members_now = sa.select(m.c.user_id).where(m.c.study_id == study_id)
    query = (sa.select(e.c.at, e.c.kind, u.c.rater_id, e.c.subject, e.c.detail)
             .select_from(e).outerjoin(u, u.c.user_id == e.c.user_id)
             .where(e.c.kind.in_(ADMIN_EVENTS),
                    sa.or_(e.c.study_id == study_id,
                           sa.and_(e.c.study_id.is_(None), e.c.user_id.in_(members_now),
                                   e.c.kind.in_(("signed_in", "token_created")))))
             .order_by(e.c.event_id.desc()).limit(limit))
    with engine.connect() as conn:
        return [{"at": auth.aware(r.at).isoformat(timespec="seconds"), "kind": r.kind,
                 "who": r.rater_id, "subject": r.subject,
                 "detail": json.loads(r.detail) if r.detail else None}
                for r in conn.execute(query)]


def create_token(engine: sa.Engine, user_id: str, study_id: str | None, role: str,
                 label: str) -> str:
    if role not in P.API_TOKEN_ROLES:
        raise InputError("API token", "unknown role", field="role",
                         expected=" | ".join(P.API_TOKEN_ROLES), got=role)
    if "\x00" in label:
        raise InputError("API token", "contains a NUL character", field="label")
    token = "ce_" + auth.new_token()
    with db.writing(engine) as conn:
        conn.execute(P.api_tokens.insert().values(
            token_hash=auth.digest(token), label=label[:100] or "token", study_id=study_id,
            user_id=user_id, role=role, created_at=auth.now()))
        auth.record(conn, "token_created", user_id=user_id, study_id=study_id,
                    subject=auth.digest(token)[:12], detail={"role": role})
    return token


def _visible(study_id: str, user_id: str) -> sa.ColumnElement[bool]:
    """Tokens of this study, and the admin's own tokens for all their studies."""
    t = P.api_tokens
    return sa.or_(t.c.study_id == study_id,
                  sa.and_(t.c.study_id.is_(None), t.c.user_id == user_id))


def tokens(engine: sa.Engine, study_id: str, user_id: str) -> list[dict]:
    t = P.api_tokens
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.token_hash, t.c.label, t.c.role, t.c.study_id,
                                      t.c.revoked_at).where(_visible(study_id, user_id))
                            .order_by(t.c.created_at)).all()
    return [{"token_id": r.token_hash[:12], "label": r.label, "role": r.role,
             "scope": r.study_id or "all my studies", "revoked": r.revoked_at is not None}
            for r in rows]


def revoke_token(engine: sa.Engine, user_id: str, study_id: str, token_id: str) -> None:
    t = P.api_tokens
    if len(token_id) != 12 or "\x00" in token_id:
        raise InputError("API token", "no such live token", field="token_id", got=token_id)
    with db.writing(engine) as conn:
        done = conn.execute(t.update().where(
            _visible(study_id, user_id), t.c.token_hash.startswith(token_id, autoescape=True),
            t.c.revoked_at.is_(None)).values(revoked_at=auth.now()))
        if len(token_id) != 12 or done.rowcount != 1:
            raise InputError("API token", "no such live token", field="token_id", got=token_id)
        auth.record(conn, "token_revoked", user_id=user_id, study_id=study_id, subject=token_id)


def export_salt(engine: sa.Engine) -> str:
    """The pseudonym salt of exports from the browser: the configured one, or
    else a secret one created once per database (never the public default,
    from which anyone could recompute the pseudonyms)."""
    import secrets

    from clinieval.io.export import DEFAULT_SALT
    from clinieval.settings import get_settings

    configured = get_settings().pseudonym_salt
    if configured != DEFAULT_SALT:
        return configured
    table = P.platform_secrets
    stored = sa.select(table.c.value).where(table.c.name == "pseudonym_salt")
    with db.reading(engine) as conn:  # once created, read without the write lock
        value = conn.execute(stored).scalar()
    if value is not None:
        return value
    with db.writing(engine) as conn:
        value = conn.execute(stored).scalar()
        if value is None:
            value = secrets.token_hex(32)
            conn.execute(table.insert().values(name="pseudonym_salt", value=value))
    return value


def export_zip(engine: sa.Engine, user_id: str, study_id: str) -> bytes:
    """The study's pseudonymous bundle (what ``clinieval study export`` writes),
    with the audit log beside it, as a zip archive."""
    from clinieval.web.studies import export_study

    folder = Path(tempfile.mkdtemp(prefix="clinieval-export-"))
    try:
        bundle = folder / f"{study_id}-export"
        export_study(engine, study_id, bundle, salt=export_salt(engine))
        with db.writing(engine) as conn:
            auth.record(conn, "exported", user_id=user_id, study_id=study_id)
        # Who acted (and on whom) is left out: the bundle's rater ids are salted.
        log = [{k: v for k, v in e.items() if k not in ("who", "subject")}
               for e in audit_log(engine, study_id)]
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in sorted(bundle.rglob("*")):
                if path.is_file():
                    zf.write(path, path.relative_to(folder).as_posix())
            zf.writestr(f"{study_id}-audit-log.json", json.dumps(log, indent=1))
        return buffer.getvalue()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
