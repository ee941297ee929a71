"""Accounts, invitations, sign-in links, sessions and the login rate limit
(the cookies and CSRF tokens that carry a session are :mod:`clinieval.web.kernel`'s).

Every token a browser holds (invitation, sign-in link, session) comes from ``secrets`` and
is stored only as its SHA-256 digest.
"""

from __future__ import annotations

import functools
import hashlib
import math
import secrets
from datetime import datetime, timedelta

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from clinieval.contract import vocabulary
from clinieval.errors import InputError
from clinieval.platform.events import aware, new_token, now, record
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

SESSION_DAYS = 14
INVITATION_DAYS = 14
SIGNIN_LINK_MINUTES = 60
LOGIN_MAX_FAILURES = 5
"""Failed sign-ins for one address from one client before delays start."""
LOGIN_ADDRESS_FAILURES = 50
"""Failed sign-ins for one address from any clients before delays start: far
more than one client gets through its own delays within LOGIN_MEMORY, so only
guessing from many clients at once slows the owner's sign-in (whose one-time
sign-in links are never throttled)."""
LOGIN_CLIENT_FAILURES = 50
"""Failed sign-ins from one client for any addresses (password spraying)
before delays start."""
LOGIN_DELAY = timedelta(minutes=1)
"""The first delay once a limit is reached; each further failure doubles it."""
LOGIN_MEMORY = timedelta(hours=24)
"""How long a failure counts."""
MIN_PASSWORD = 10

_hasher = PasswordHasher()


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class AuthError(Exception):
    """A sign-in or registration step was refused; the message is for the user."""


class RateLimited(AuthError):
    pass


# --- invitations and accounts ------------------------------------------------


def create_invitation(
    engine: sa.Engine, study_id: str, role: str, days: int = INVITATION_DAYS
) -> str:
    """A single-use invitation token for ``role`` in ``study_id``."""
    with db.writing(engine) as conn:
        return create_invitations(conn, study_id, role, 1, days)[0]


def create_invitations(conn: sa.Connection, study_id: str, role: str, n: int,
                       days: int = INVITATION_DAYS, emails: list[str] | None = None
                       ) -> list[str]:
    """``n`` single-use invitation tokens for ``role`` in ``study_id``, in the
    caller's write transaction (all or none). With ``emails`` (``n`` of them)
    each token admits only its address: it registers that address, or a
    signed-in user whose account has it."""
    if emails is not None and len(emails) != n:
        raise ValueError("one e-mail address per invitation")
    if role not in vocabulary.ROLES:
        raise InputError(
            "invite", "unknown role", field="role", expected=" | ".join(vocabulary.ROLES), got=role
        )
    if conn.execute(sa.select(snapshot_tables.studies.c.study_id).where(
            snapshot_tables.studies.c.study_id == study_id)).first() is None:
        raise InputError("invite", "no such study", field="study", got=study_id)
    tokens, at = [new_token() for _ in range(n)], now()
    for _ in tokens:
        record(conn, "invitation_created", study_id=study_id, detail={"role": role})
    if tokens:
        conn.execute(platform_tables.invitations.insert(), [
            {"token_hash": digest(token), "study_id": study_id, "role": role, "created_at": at,
             "expires_at": at + timedelta(days=days),
             "email": None if emails is None else emails[i].strip().lower()}
            for i, token in enumerate(tokens)])
    return tokens


def open_invitation(conn: sa.Connection, token: str) -> sa.Row:
    """The invitation row, or AuthError when unknown, used or expired."""
    row = conn.execute(
        sa.select(platform_tables.invitations)
        .where(platform_tables.invitations.c.token_hash == digest(token))
    ).first()
    if row is None:
        raise AuthError("This invitation link is not valid.")
    if row.used_at is not None:
        raise AuthError("This invitation link has already been used.")
    if aware(row.expires_at) < now():
        raise AuthError("This invitation link has expired or was withdrawn; ask for a new one.")
    return row


def hash_password(password: str) -> str:
    check_password(password)
    return _hasher.hash(password)


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise InputError(
            "registration",
            f"the password needs at least {MIN_PASSWORD} characters",
            field="password",
        )


def register(engine: sa.Engine, token: str, email: str, password: str) -> str:
    """Create the account an invitation is for; returns the new user id."""
    email = email.strip().lower()
    if "@" not in email:
        raise InputError("registration", "enter an e-mail address", field="email")
    check_password(password)
    with engine.connect() as conn:  # a bad link is refused before the hashing
        _for_address(open_invitation(conn, token), email)
    # Hashed before the transaction: argon2 takes about 0.1 s, which inside
    # it would hold SQLite's write lock (and every clinician's write) meanwhile.
    password_hash = hash_password(password)
    user_id, rater_id = "u_" + secrets.token_hex(8), "r_" + secrets.token_hex(8)
    with db.writing(engine) as conn:
        invitation = open_invitation(conn, token)  # its address is checked again by _join
        record(conn, "registered", user_id=user_id, study_id=invitation.study_id)
        users = platform_tables.users
        if conn.execute(sa.select(users.c.user_id).where(users.c.email == email)).first():
            raise AuthError(
                "An account with this e-mail exists: sign in, then open the link again."
            )
        conn.execute(snapshot_tables.raters.insert().values(rater_id=rater_id))
        conn.execute(
            platform_tables.users.insert().values(
                user_id=user_id,
                email=email,
                rater_id=rater_id,
                password_hash=password_hash,
                created_at=now(),
            )
        )
        _join(conn, invitation, user_id)
    return user_id


def join(engine: sa.Engine, token: str, user_id: str) -> str:
    """A signed-in user accepts an invitation; returns the study id."""
    with db.writing(engine) as conn:
        invitation = open_invitation(conn, token)
        record(conn, "joined", user_id=user_id, study_id=invitation.study_id)
        _join(conn, invitation, user_id)
    return invitation.study_id


def _for_address(invitation: sa.Row, email: str) -> sa.Row:
    """The invitation, if it admits ``email`` (one made without an address
    admits anyone holding the link)."""
    if invitation.email is not None and invitation.email != email.strip().lower():
        raise AuthError("This invitation was made for another e-mail address; ask the study's"
                        " admin for one for yours.")
    return invitation


def _join(conn: sa.Connection, invitation: sa.Row, user_id: str) -> None:
    """The account joins the invitation's study (registering or signed in), if
    the invitation admits its address and no later revocation stands in the way."""
    # The account's row is locked first, as a revocation locks it (PostgreSQL; SQLite's
    # writers take turns anyway): a revocation committed meanwhile is seen below, and
    # one coming later waits for this membership and removes it.
    users = platform_tables.users
    email = conn.execute(sa.select(users.c.email).where(users.c.user_id == user_id)
                         .with_for_update()).scalar()
    _for_address(invitation, email or "")
    revoked = platform_tables.audit_events
    rater_id = sa.select(users.c.rater_id).where(users.c.user_id == user_id)
    if conn.execute(sa.select(revoked.c.at).where(
            revoked.c.kind == "access_revoked", revoked.c.study_id == invitation.study_id,
            revoked.c.subject == rater_id.scalar_subquery(),
            revoked.c.at >= invitation.created_at).limit(1)).first() is not None:
        # An invitation made before the revocation (a second link the same admin
        # sent, say) must not undo it; one made afterwards is the admin's new decision.
        raise AuthError("Your access to this study was revoked after this invitation was"
                        " made; ask the study's admin for a new one.")
    used = conn.execute(
        platform_tables.invitations.update()
        .where(
            platform_tables.invitations.c.token_hash == invitation.token_hash,
            platform_tables.invitations.c.used_at.is_(None),
            # a revocation may have expired it just now
            platform_tables.invitations.c.expires_at > now(),
        )
        .values(used_at=now(), used_by=user_id)
    )
    if used.rowcount != 1:
        raise AuthError("This invitation link has already been used or has expired.")
    membership = platform_tables.memberships
    existing = conn.execute(
        sa.select(membership.c.role).where(
            membership.c.study_id == invitation.study_id, membership.c.user_id == user_id
        )
    ).first()
    if existing is None:
        conn.execute(
            membership.insert().values(
                study_id=invitation.study_id, user_id=user_id, role=invitation.role
            )
        )


# --- one-time sign-in links ------------------------------------------------------


def create_signin_link(engine: sa.Engine, user_id: str,
                       minutes: int = SIGNIN_LINK_MINUTES) -> str:
    """A single-use token that signs ``user_id`` in within ``minutes``."""
    token = new_token()
    with db.writing(engine) as conn:
        conn.execute(platform_tables.signin_links.insert().values(
            token_hash=digest(token), user_id=user_id, created_at=now(),
            expires_at=now() + timedelta(minutes=minutes)))
    return token


def open_signin_link(conn: sa.Connection, token: str) -> sa.Row:
    """The link's row, or AuthError when unknown, used or expired."""
    row = conn.execute(sa.select(platform_tables.signin_links).where(
        platform_tables.signin_links.c.token_hash == digest(token))).first()
    if row is None:
        raise AuthError("This sign-in link is not valid.")
    if row.used_at is not None:
        raise AuthError("This sign-in link has already been used.")
    if aware(row.expires_at) < now():
        raise AuthError("This sign-in link has expired; ask for a new one.")
    return row


def use_signin_link(engine: sa.Engine, token: str) -> str:
    """Spend a sign-in link (once: a concurrent second use finds it used);
    returns the user id to open a session for."""
    with db.writing(engine) as conn:
        row = open_signin_link(conn, token)
        used = conn.execute(platform_tables.signin_links.update().where(
            platform_tables.signin_links.c.token_hash == row.token_hash,
            platform_tables.signin_links.c.used_at.is_(None)).values(used_at=now()))
        if used.rowcount != 1:
            raise AuthError("This sign-in link has already been used.")
        record(conn, "signin_link_used", user_id=row.user_id)
    return row.user_id


# --- sessions ----------------------------------------------------------------


def sign_in(engine: sa.Engine, email: str, password: str, client: str | None = None) -> str:
    """Check the password and open a session; returns the session token.

    Failures are throttled, not locked out (OWASP's authentication cheat sheet):
    past LOGIN_MAX_FAILURES for this address from this ``client`` (its network
    address), past LOGIN_ADDRESS_FAILURES for the address from any client, or
    past LOGIN_CLIENT_FAILURES from the client for any address, the next attempt
    waits LOGIN_DELAY after the last one, doubled for each failure beyond the
    limit. So one client's guesses do not keep the owner out from another, and
    each refusal is logged (``login_throttled``). An attempt counts as failed
    from the moment it is let through until its password is found right:
    guesses sent at once (each password check takes a while, outside any lock)
    cannot all pass the count before any of them has failed. Letting one through
    is one transaction per address at a time, across server processes (SQLite's
    write lock; on PostgreSQL an advisory lock).
    """
    email, client = email.strip().lower(), client or "unknown"
    with db.writing(engine) as conn:
        db.one_at_a_time(conn, "sign-in " + email)
        throttled = _throttled(conn, email, client)
        if throttled is None:
            record(conn, "login_attempt", subject=email, client=client)
            user = conn.execute(sa.select(platform_tables.users)
                                .where(platform_tables.users.c.email == email)).first()
        else:
            record(conn, "login_throttled", subject=email, client=client, detail=throttled)
    if throttled is not None:
        minutes = -(-throttled["wait_seconds"] // 60)
        raise RateLimited(f"Too many failed sign-in attempts; try again in {minutes} minute(s),"
                          " or use a one-time sign-in link.")
    # An unknown address costs the same hashing as a wrong password, so the
    # time of the answer does not tell which addresses have an account.
    if not _verify(_decoy_hash() if user is None else user.password_hash, password) \
            or user is None:
        with db.writing(engine) as conn:
            record(conn, "login_failed", subject=email, client=client)
        raise AuthError("Wrong e-mail address or password.")
    with db.writing(engine) as conn:
        record(conn, "login_succeeded", subject=email, client=client)
    return open_session(engine, user.user_id)


@functools.cache
def _decoy_hash() -> str:
    """The hash of a random password no one knows, made once per process."""
    return _hasher.hash(secrets.token_urlsafe(32))


def _verify(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _throttled(conn: sa.Connection, email: str, client: str) -> dict | None:
    """Which limit holds the attempt back and for how many seconds, or None."""
    events = platform_tables.audit_events
    by_address, by_client = events.c.subject == email, events.c.client == client
    tiers = (("address and client", sa.and_(by_address, by_client), LOGIN_MAX_FAILURES),
             ("address", by_address, LOGIN_ADDRESS_FAILURES),
             ("client", by_client, LOGIN_CLIENT_FAILURES))
    for name, where, limit in tiers:
        count, last = _recent_attempts(conn, where)
        wait = _wait(count, last, limit)
        if wait > 0:
            return {"limit": name, "failures": count, "wait_seconds": wait}
    return None


def _recent_attempts(conn: sa.Connection, where) -> tuple[int, datetime | None]:
    """How many attempts matching ``where`` within LOGIN_MEMORY and after the
    last successful sign-in matching it, and when the latest was: the failed
    ones and those still checking a password (the successful one was let
    through before it succeeded)."""
    events = platform_tables.audit_events
    since = now() - LOGIN_MEMORY
    last_ok = conn.execute(sa.select(sa.func.max(events.c.at)).where(
        events.c.kind == "login_succeeded", where, events.c.at > since)).scalar()
    count, last = conn.execute(sa.select(sa.func.count(), sa.func.max(events.c.at)).where(
        events.c.kind == "login_attempt", where,
        events.c.at > (since if last_ok is None else aware(last_ok)))).one()
    return count, None if last is None else aware(last)


def _wait(failures: int, last: datetime | None, limit: int) -> int:
    """Whole seconds still to wait after ``failures`` (the latest at ``last``)."""
    if failures < limit or last is None:
        return 0
    delay = LOGIN_DELAY * 2 ** min(failures - limit, 20)  # 2**20 minutes outlasts LOGIN_MEMORY
    return max(0, math.ceil((last + delay - now()).total_seconds()))


def open_session(engine: sa.Engine, user_id: str) -> str:
    token = new_token()
    with db.writing(engine) as conn:
        record(conn, "signed_in", user_id=user_id)
        conn.execute(
            platform_tables.sessions.insert().values(
                token_hash=digest(token),
                user_id=user_id,
                created_at=now(),
                expires_at=now() + timedelta(days=SESSION_DAYS),
            )
        )
    return token


def sign_out(engine: sa.Engine, token: str) -> None:
    with db.writing(engine) as conn:
        record(conn, "signed_out")
        conn.execute(
            platform_tables.sessions.update()
            .where(platform_tables.sessions.c.token_hash == digest(token))
            .values(revoked_at=now())
        )
