"""The request kernel every router uses: who is asking (:class:`Ctx`), the
access levels and their gate, sessions, signed cookies, CSRF, templates and
page rendering, and :func:`blocking` for database calls. It imports no
router; the routers import it (and the services), and
:mod:`clinieval.web.app` mounts them all.

Every route declares one access level (:data:`LEVELS`); :func:`gate`
enforces it, so a clinician of study X gets 403 on study Y and nobody
reaches another clinician's task.

Cookies carry a token plus an HMAC under the platform key (:class:`Signer`),
so a forged or truncated cookie is refused before the database is asked. The
key lives in the database, so sessions survive a restart of the server.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa
from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates

from clinieval.platform import studies
from clinieval.platform.accounts import digest
from clinieval.platform.config import SETTINGS, StudyConfig, config_from
from clinieval.platform.events import aware, new_token, now
from clinieval.storage import db
from clinieval.storage.prepared import Prepared, run
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables

HERE = Path(__file__).parent
SESSION_COOKIE, PRE_COOKIE = "ce_session", "ce_pre"

LEVELS = ("public", "user", "creator", "member", "viewer", "admin", "clinician", "adjudicator")
"""public: anyone; user: signed in; creator: signed in and admin of some
study (may create studies); member: any role in the study in the URL;
viewer: the viewer or admin role there (aggregates only); admin: the admin
role there; clinician: the clinician role there (with profile and consent);
adjudicator: the adjudicator role there."""

STUDY_ROLES = {"viewer": ("viewer", "admin"), "admin": ("admin",),
               "adjudicator": ("adjudicator",)}
"""Roles of the study in the URL that pass the viewer and admin levels."""


templates = Jinja2Templates(directory=str(HERE / "templates"))
# The templates ship with the package: no stat() of each file (and of the
# base it extends) on every page to see whether it changed.
templates.env.auto_reload = False


async def blocking(request: Request, fn: Callable, /, *args):
    """``fn(*args)``, which reads or writes the database, without holding up
    the event loop where that pays: on PostgreSQL each statement is a round
    trip to another process, so it runs in a worker thread and other requests
    proceed meanwhile. On SQLite it is called right here: its statements are
    in-process CPU work (a thread would only add a hand-over and contention
    for the interpreter), and one writer at a time holds the lock anyway."""
    executor = getattr(request.app.state, "db_executor", None)
    if executor is None:
        return fn(*args)
    # The event loop's own executor: anyio's hand-off (capacity limiter, cancel
    # scope, worker bookkeeping) costs more server CPU per submission
    # (benchmarks/bench_serve.py measures it).
    return await asyncio.get_running_loop().run_in_executor(executor, partial(fn, *args))


def on_connection(engine: sa.Engine, fn: Callable, /, *args):
    """``fn(conn, *args)``, which only reads, on a connection of its own (for
    :func:`blocking`; :func:`db.reading`: no BEGIN and ROLLBACK on PostgreSQL)."""
    with db.reading(engine) as conn:
        return fn(conn, *args)


class Redirect(Exception):
    def __init__(self, url: str) -> None:
        self.url = url


@dataclass(frozen=True)
class Ctx:
    """Who is asking, in which study, and the CSRF token for their forms."""

    request: Request
    engine: sa.Engine
    user: sa.Row | None
    csrf: str
    study: StudyConfig | None = None
    role: str | None = None
    rater: sa.Row | None = None
    new_pre: str | None = None
    closed: bool = False
    """The study in the URL was closed (:mod:`clinieval.platform.closing`)."""


def wants_json(request: Request) -> bool:
    """A script's request: the JSON API's, or one asking for or sending JSON."""
    return (request.url.path.startswith("/api/")
            or "application/json" in request.headers.get("accept", "")
            or request.headers.get("content-type", "").startswith("application/json"))


# --- sessions and CSRF ---------------------------------------------------------

def session_token(request: Request) -> str | None:
    return request.app.state.signer.unsign(request.cookies.get(SESSION_COOKIE))


def set_cookie(request: Request, response: Response, name: str, token: str) -> None:
    response.set_cookie(name, request.app.state.signer.sign(token), httponly=True,
                        samesite="lax", secure=request.url.scheme == "https", path="/")


def pre_token(request: Request) -> tuple[str, bool]:
    """The pre-session token that CSRF-protects the sign-in and invitation
    forms; returns it and whether it is new (to be set as a cookie)."""
    token = request.app.state.signer.unsign(request.cookies.get(PRE_COOKIE))
    return (token, False) if token else (new_token(), True)


async def sent_csrf(request: Request) -> str | None:
    """The token from the X-CSRF-Token header (scripts) or the form field."""
    if header := request.headers.get("x-csrf-token"):
        return header
    content_type = request.headers.get("content-type", "")
    if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        return (await request.form()).get("csrf")
    return None


async def check_csrf(request: Request, token: str | None) -> None:
    if not request.app.state.signer.csrf_ok(token, await sent_csrf(request)):
        raise HTTPException(403, "The form expired or did not come from this site (CSRF check"
                                 " failed). Reload the page and try again.")


# --- access levels -------------------------------------------------------------

def gate(level: str):
    """A dependency enforcing ``level`` on the route (and CSRF on writes)."""
    assert level in LEVELS

    async def dependency(request: Request) -> Ctx:
        engine = request.app.state.engine
        signer = request.app.state.signer
        token = session_token(request)
        study = request.path_params.get("study") if level in STUDY_LEVELS else None
        user, found = (await blocking(request, _session, engine, token, study) if token
                       else (None, None))
        if level == "public":
            pre, new = pre_token(request)
            if request.method == "POST":
                await check_csrf(request, token if user else pre)
            return Ctx(request, engine, user, signer.csrf(token if user else pre),
                       new_pre=pre if new and not user else None)
        if user is None:
            if request.method == "GET" and not wants_json(request):
                raise Redirect("/login?next=" + quote(request.url.path))
            raise HTTPException(401, "Sign in first.")
        if request.method == "POST":
            await check_csrf(request, token)
        ctx = Ctx(request, engine, user, signer.csrf(token))
        if level == "user":
            return ctx
        if level == "creator":
            if not await blocking(request, on_connection, engine, studies.may_create_studies,
                                  user.user_id):
                raise HTTPException(403, "Only study admins create studies.")
            return ctx
        return _study_ctx(ctx, request.path_params["study"], level, found)

    dependency.level = level
    return dependency


STUDY_LEVELS = ("member", "viewer", "admin", "clinician", "adjudicator")

SessionUser = namedtuple("SessionUser", "user_id email rater_id expires_at")
Rater = namedtuple("Rater", [c.name for c in snapshot_tables.raters.columns])
Membership = namedtuple("Membership", "role consented_at")


def _gate_statement(study: bool) -> sa.Select:
    """The session's user and, for a route of a study, in the same statement:
    their role there, the study's settings and current rubric text, their
    rater row and whether the study was closed. Built once; each request only
    binds ``token`` (and ``study``)."""
    s, u = platform_tables.sessions, platform_tables.users
    columns = [u.c.user_id, u.c.email, u.c.rater_id, s.c.expires_at]
    joined = s.join(u, u.c.user_id == s.c.user_id)
    if study:
        m, st, sr, v, rt = (platform_tables.memberships, platform_tables.study_settings,
                            platform_tables.study_rubrics, platform_tables.study_rubric_versions,
                            snapshot_tables.raters)
        sc = platform_tables.study_closures
        columns += [m.c.role, m.c.consented_at, sr.c.rationale_required,
                    sc.c.closed_at.label("study_closed_at"),
                    v.c.rubric.label("rubric_text"),
                    *(st.c[name].label("st_" + name) for name in SETTINGS),
                    *(c.label("rt_" + c.name) for c in rt.columns)]
        joined = (joined
                  .outerjoin(m, sa.and_(m.c.user_id == u.c.user_id,
                                        m.c.study_id == sa.bindparam("study")))
                  .outerjoin(st, st.c.study_id == m.c.study_id)
                  .outerjoin(sr, sr.c.study_id == m.c.study_id)
                  .outerjoin(v, sa.and_(v.c.study_id == sr.c.study_id,
                                        v.c.version == sr.c.version))
                  .outerjoin(rt, rt.c.rater_id == u.c.rater_id)
                  .outerjoin(sc, sc.c.study_id == m.c.study_id))
    return (sa.select(*columns).select_from(joined)
            .where(s.c.token_hash == sa.bindparam("token"), s.c.revoked_at.is_(None)))


_GATE = {False: Prepared(_gate_statement(False)), True: Prepared(_gate_statement(True))}


def _session(engine: sa.Engine, token: str, study: str | None) -> tuple:
    """The live session's user (or None) and, for a study route, what
    :func:`_study_ctx` needs: (membership or None, StudyConfig or None, rater,
    closed)."""
    params = {"token": digest(token)}
    if study is not None:
        params["study"] = study
    with db.reading(engine) as conn:
        row = run(conn, _GATE[study is not None], params).first()
    if row is None or aware(row.expires_at) < now():
        return None, None
    user = SessionUser(row.user_id, row.email, row.rater_id, row.expires_at)
    if study is None:
        return user, None
    m = row._asdict()
    role = Membership(row.role, row.consented_at) if row.role is not None else None
    cfg = None
    if role is not None and m["st_study_id"] is not None:
        cfg = config_from({name: m["st_" + name] for name in SETTINGS},
                          row.rationale_required, row.rubric_text)
    rater = Rater(*(m["rt_" + name] for name in Rater._fields)) \
        if m["rt_rater_id"] is not None else None
    return user, (role, cfg, rater, row.study_closed_at is not None)


def _study_ctx(ctx: Ctx, study_id: str, level: str, found: tuple) -> Ctx:
    role, cfg, rater, closed = found
    if role is None or cfg is None:
        raise HTTPException(403, "You are not a member of this study.")
    if level in STUDY_ROLES and role.role not in STUDY_ROLES[level]:
        allowed = " and ".join(f"{r}s" for r in STUDY_ROLES[level])
        raise HTTPException(403, f"This page is for the study's {allowed}.")
    if level == "clinician":
        if role.role != "clinician":
            raise HTTPException(403, "Only the study's clinicians rate answers.")
        if role.consented_at is None or rater.specialty not in cfg.specialties:
            raise Redirect(f"/s/{study_id}/profile")
    return Ctx(ctx.request, ctx.engine, ctx.user, ctx.csrf, cfg, role.role, rater,
               closed=closed)


def page(ctx: Ctx, name: str, status: int = 200, **values) -> HTMLResponse:
    response = templates.TemplateResponse(ctx.request, name, {"ctx": ctx, **values},
                                          status_code=status)
    if ctx.new_pre:
        set_cookie(ctx.request, response, PRE_COOKIE, ctx.new_pre)
    return response


# --- signed cookies --------------------------------------------------------------

def platform_key(engine: sa.Engine) -> bytes:
    """The cookie-signing key, created once per database."""
    table = platform_tables.platform_secrets
    with db.writing(engine) as conn:
        value = conn.execute(sa.select(table.c.value).where(table.c.name == "cookie_key")).scalar()
        if value is None:
            value = secrets.token_hex(32)
            conn.execute(table.insert().values(name="cookie_key", value=value))
    return bytes.fromhex(value)


@dataclass(frozen=True)
class Signer:
    key: bytes

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self.key, f"{purpose}\x1f{value}".encode(), hashlib.sha256).hexdigest()

    def sign(self, value: str) -> str:
        return f"{value}.{self._mac('cookie', value)}"

    def unsign(self, signed: str | None) -> str | None:
        if not signed or "." not in signed:
            return None
        value, mac = signed.rsplit(".", 1)
        return value if hmac.compare_digest(mac, self._mac("cookie", value)) else None

    def csrf(self, token: str) -> str:
        """The CSRF token bound to a session (or pre-session) token."""
        return self._mac("csrf", token)

    def csrf_ok(self, token: str | None, sent: object) -> bool:
        """Whether ``sent`` is the session's CSRF token. Anything else a request
        can carry there (a file, non-ASCII text, which compare_digest refuses
        with a TypeError) is simply not it."""
        return (bool(token) and isinstance(sent, str) and sent.isascii() and bool(sent)
                and hmac.compare_digest(self.csrf(token), sent))
