"""A study's people: invitation links (by address, or unnamed), its members
and their revocation, and the API tokens an admin creates and revokes.

Every function that changes something appends an audit event in the same
transaction, naming the admin who acted; the log shows pseudonymous ids,
never an e-mail address.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC

import sqlalchemy as sa

from clinieval.contract.validate import unencodable
from clinieval.errors import InputError
from clinieval.platform.accounts import create_invitations, digest
from clinieval.platform.events import aware, new_token, now, record
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

MAX_INVITES = 1000
MAX_EMAIL = 254

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
        tokens = create_invitations(conn, study_id, role, len(targets),
                                         emails=emails or None)
        record(conn, "invited", user_id=user_id, study_id=study_id,
                    detail={"role": role, "links": len(tokens)})
    return [{"email": email, "token": token} for email, token in zip(targets, tokens,
                                                                      strict=True)]


def pending_invitations(engine: sa.Engine, study_id: str) -> list[dict]:
    """The study's invitation links that still work (unused, not expired),
    counted per role and kind: made for an address, or unnamed (anyone
    holding the link); with the last expiry. Neither tokens nor addresses."""
    inv = platform_tables.invitations
    named = inv.c.email.is_not(None)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(inv.c.role, named.label("named"), sa.func.count(),
                      sa.func.max(inv.c.expires_at))
            .where(inv.c.study_id == study_id, inv.c.used_at.is_(None),
                   inv.c.expires_at > now())
            .group_by(inv.c.role, named).order_by(inv.c.role, named)).all()
    return [{"role": role, "for": "an address" if is_named else "anyone with the link",
             "links": n, "last_expires": aware(last).astimezone(UTC).strftime(
                 "%Y-%m-%d %H:%M")}
            for role, is_named, n, last in rows]


WITHDRAWABLE = ("unnamed", "all")


def withdraw_invitations(engine: sa.Engine, user_id: str, study_id: str, which: str) -> int:
    """Expire the study's unused links: the unnamed ones (bearer links, which
    no address revokes) or all of them. Returns how many; logs the count."""
    if which not in WITHDRAWABLE:
        raise InputError("invitations", "which links to withdraw", field="which",
                         expected=" | ".join(WITHDRAWABLE), got=str(which)[:20])
    inv = platform_tables.invitations
    with db.writing(engine) as conn:
        at = now()
        chosen = sa.and_(inv.c.study_id == study_id, inv.c.used_at.is_(None),
                         inv.c.expires_at > at)
        if which == "unnamed":
            chosen = sa.and_(chosen, inv.c.email.is_(None))
        expired = conn.execute(inv.update().where(chosen).values(expires_at=at)).rowcount
        if expired:
            record(conn, "invitations_withdrawn", user_id=user_id, study_id=study_id,
                        detail={"links": expired, "which": which})
    return expired


def members(engine: sa.Engine, study_id: str) -> list[dict]:
    """Members with pseudonymous id, role, specialty and counts; no e-mail."""
    m, u, r = platform_tables.memberships, platform_tables.users, snapshot_tables.raters
    tl = platform_tables.task_leases
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
    u, m, inv = platform_tables.users, platform_tables.memberships, platform_tables.invitations
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
        at = now()
        expired = conn.execute(inv.update().where(
            inv.c.study_id == study_id, inv.c.email == email, inv.c.used_at.is_(None),
            inv.c.expires_at > at).values(expires_at=at)).rowcount
        if not expired:
            raise InputError("revoke", "no member of this study and no unused invitation to it"
                             " has this e-mail address", field="email")
        # The address is not logged (the log shows pseudonyms only): how many links went.
        record(conn, "invitations_withdrawn", user_id=user_id, study_id=study_id,
                    detail={"links": expired})
    return None, expired


def revoke(engine: sa.Engine, user_id: str, study_id: str, rater_id: str) -> None:
    """End a member's access to the study: the membership goes, open tasks
    return to the pool, and the unused invitations to the study made for their
    e-mail address expire (an invitation made before the revocation cannot
    bring them back either: :func:`accounts.join`). Their submitted ratings stay
    (they were given)."""
    u, m, tl, inv = (platform_tables.users, platform_tables.memberships,
                     platform_tables.task_leases, platform_tables.invitations)
    if "\x00" in rater_id:
        raise InputError("revoke", "not a member you can revoke", field="rater_id")
    with db.writing(engine) as conn:
        # Locked, as joining locks it (accounts._join): a link accepted at the same moment
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
        at = now()
        conn.execute(inv.update().where(inv.c.study_id == study_id, inv.c.email == found.email,
                                        inv.c.used_at.is_(None), inv.c.expires_at > at)
                     .values(expires_at=at))
        record(conn, "access_revoked", user_id=user_id, study_id=study_id,
                    subject=rater_id)


# --- the leak guard's queue -------------------------------------------------------


# --- audit log, API tokens, export -----------------------------------------------


def create_token(engine: sa.Engine, user_id: str, study_id: str | None, role: str,
                 label: str) -> str:
    if role not in platform_tables.API_TOKEN_ROLES:
        raise InputError("API token", "unknown role", field="role",
                         expected=" | ".join(platform_tables.API_TOKEN_ROLES), got=role)
    if "\x00" in label:
        raise InputError("API token", "contains a NUL character", field="label")
    token = "ce_" + new_token()
    with db.writing(engine) as conn:
        conn.execute(platform_tables.api_tokens.insert().values(
            token_hash=digest(token), label=label[:100] or "token", study_id=study_id,
            user_id=user_id, role=role, created_at=now()))
        record(conn, "token_created", user_id=user_id, study_id=study_id,
                    subject=digest(token)[:12], detail={"role": role})
    return token


def _visible(study_id: str, user_id: str) -> sa.ColumnElement[bool]:
    """Tokens of this study, and the admin's own tokens for all their studies."""
    t = platform_tables.api_tokens
    return sa.or_(t.c.study_id == study_id,
                  sa.and_(t.c.study_id.is_(None), t.c.user_id == user_id))


def tokens(engine: sa.Engine, study_id: str, user_id: str) -> list[dict]:
    t = platform_tables.api_tokens
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.token_hash, t.c.label, t.c.role, t.c.study_id,
                                      t.c.revoked_at).where(_visible(study_id, user_id))
                            .order_by(t.c.created_at)).all()
    return [{"token_id": r.token_hash[:12], "label": r.label, "role": r.role,
             "scope": r.study_id or "all my studies", "revoked": r.revoked_at is not None}
            for r in rows]


def revoke_token(engine: sa.Engine, user_id: str, study_id: str, token_id: str) -> None:
    t = platform_tables.api_tokens
    if len(token_id) != 12 or "\x00" in token_id:
        raise InputError("API token", "no such live token", field="token_id", got=token_id)
    with db.writing(engine) as conn:
        done = conn.execute(t.update().where(
            _visible(study_id, user_id), t.c.token_hash.startswith(token_id, autoescape=True),
            t.c.revoked_at.is_(None)).values(revoked_at=now()))
        if len(token_id) != 12 or done.rowcount != 1:
            raise InputError("API token", "no such live token", field="token_id", got=token_id)
        record(conn, "token_revoked", user_id=user_id, study_id=study_id, subject=token_id)


