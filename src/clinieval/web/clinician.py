"""The clinician-facing routes: signing in, invitations, the profile, and
tasks. Each declares its access level through
:func:`clinieval.web.kernel.gate`; tasks are found by (token, user, study), so
a token alone opens nothing."""

from __future__ import annotations

import asyncio
import json
import secrets
from datetime import UTC, datetime
from functools import lru_cache
from types import SimpleNamespace
from typing import Annotated

import sqlalchemy as sa
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from markupsafe import Markup

from clinieval.contract.validate import first_unencodable
from clinieval.errors import InputError
from clinieval.platform import accounts, drafts, submissions
from clinieval.platform.assignment import next_task, skip
from clinieval.platform.events import aware, record
from clinieval.platform.read_models import TaskView, task_view
from clinieval.storage import db
from clinieval.storage.prepared import Prepared, run
from clinieval.storage.schema import platform as platform_tables
from clinieval.storage.schema import snapshot as snapshot_tables
from clinieval.web.kernel import (
    HERE,
    PRE_COOKIE,
    SESSION_COOKIE,
    Ctx,
    blocking,
    gate,
    on_connection,
    page,
    session_token,
    set_cookie,
    templates,
    wants_json,
)

router = APIRouter(include_in_schema=False)
Public = Annotated[Ctx, Depends(gate("public"))]
User = Annotated[Ctx, Depends(gate("user"))]
Member = Annotated[Ctx, Depends(gate("member"))]
Clinician = Annotated[Ctx, Depends(gate("clinician"))]

PROFESSIONS = ("specialist", "resident", "general practitioner", "nurse or midwife", "pharmacist",
               "other")
"""The professional role a clinician gives in their profile (not a platform role)."""


async def _form(request: Request) -> dict[str, str]:
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


async def _json(request: Request, source: str) -> object:
    """The JSON body; one that does not parse (broken syntax or encoding, or
    nesting too deep for the parser), or holds text no database can store (a
    lone surrogate, ``"\\ud800"``), is refused as input, not a server error."""
    try:
        value = json.loads(await request.body())
    except (ValueError, RecursionError):
        raise InputError(source, "the body is not valid JSON", field="body") from None
    # Walked whatever the bytes: json.loads(bytes) lets surrogates through from escapes,
    # from UTF-8 encoded surrogates and from UTF-16 alike.
    if (field := first_unencodable(value)) is not None:
        raise InputError(source, "holds a lone surrogate, not text", field=field)
    return value


def _local(url: str | None) -> str:
    """Only same-site paths are followed after sign-in (no open redirect)."""
    return url if url and url.startswith("/") and not url.startswith("//") else "/studies"


@router.get("/")
async def home(ctx: Public) -> Response:
    return RedirectResponse("/studies" if ctx.user else "/login", status_code=303)


@router.get("/favicon.ico")
async def favicon(ctx: Public) -> Response:
    # Browsers ask for it on every site whatever the page links: answered, it
    # is no 404 in the log and the tab shows the platform's icon.
    return FileResponse(HERE / "static" / "favicon.ico", media_type="image/x-icon",
                        headers={"Cache-Control": "public, max-age=86400"})


@router.get("/login")
async def login_page(ctx: Public, next: str = "/studies") -> Response:
    return page(ctx, "login.html", next=_local(next), error=None)


@router.post("/login")
async def login(ctx: Public) -> Response:
    form = await _form(ctx.request)
    try:
        # In a thread: checking a password (argon2) takes about 0.1 s of CPU
        # (which releases the interpreter); on the event loop it held up every request.
        token = await asyncio.to_thread(accounts.sign_in, ctx.engine, form.get("email", ""),
                                        form.get("password", ""), _client(ctx.request))
    except accounts.AuthError as err:
        status = 429 if isinstance(err, accounts.RateLimited) else 401
        return page(ctx, "login.html", status, next=_local(form.get("next")), error=str(err))
    response = RedirectResponse(_local(form.get("next")), status_code=303)
    set_cookie(ctx.request, response, SESSION_COOKIE, token)
    return response


def _client(request: Request) -> str | None:
    """The address the request came from, as the server learnt it: the peer's,
    or a trusted proxy's X-Forwarded-For (uvicorn trusts it from
    FORWARDED_ALLOW_IPS, by default 127.0.0.1 only)."""
    return request.client.host if request.client else None


@router.post("/logout")
async def logout(ctx: User) -> Response:
    await blocking(ctx.request, accounts.sign_out, ctx.engine, session_token(ctx.request))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/invite/{token}")
async def invite_page(token: str, ctx: Public) -> Response:
    try:
        invitation, study = await blocking(ctx.request, on_connection, ctx.engine,
                                           _invitation, token)
    except accounts.AuthError as err:
        return page(ctx, "message.html", 404, title="Invitation", message=str(err))
    return page(ctx, "invite.html", role=invitation.role, study_name=study, error=None,
                email=_masked(invitation.email))


def _masked(email: str | None) -> str | None:
    """Which address a link admits, for its page: enough to know (another is
    refused), not enough for whoever the link reached to register under it."""
    if not email:
        return None
    local, _, domain = email.partition("@")
    return f"{local[:1]}…@{domain}"


def _invite_hint(conn: sa.Connection, token: str) -> dict:
    """The role and masked address a refused registration's page shows again."""
    try:
        invitation, study = _invitation(conn, token)
    except accounts.AuthError:
        return {"role": None}
    return {"role": invitation.role, "study_name": study, "email": _masked(invitation.email)}


def _invitation(conn: sa.Connection, token: str) -> tuple[sa.Row, str]:
    """The open invitation and the name of its study (what the invitee joins)."""
    invitation = accounts.open_invitation(conn, token)
    name = conn.execute(sa.select(snapshot_tables.studies.c.name).where(
        snapshot_tables.studies.c.study_id == invitation.study_id)).scalar()
    return invitation, name or invitation.study_id


@router.post("/invite/{token}")
async def invite(token: str, ctx: Public) -> Response:
    form = await _form(ctx.request)
    try:
        if ctx.user:
            study = await blocking(ctx.request, accounts.join, ctx.engine, token, ctx.user.user_id)
            landing = await blocking(ctx.request, _landing, ctx.engine, ctx.user.user_id, study)
            return RedirectResponse(landing, status_code=303)
        if form.get("password") != form.get("password2"):
            raise InputError("registration", "the two passwords differ", field="password2")
        user_id = await asyncio.to_thread(accounts.register, ctx.engine, token,
                                          form.get("email", ""), form.get("password", ""))
    except (accounts.AuthError, InputError) as err:
        # Signed in, a refused link stays refused: the page does not offer it again.
        refused = ctx.user is not None and isinstance(err, accounts.AuthError)
        hint = await blocking(ctx.request, on_connection, ctx.engine, _invite_hint, token)
        return page(ctx, "invite.html", 400, error=str(err), refused=refused, **hint)
    landing, session = await blocking(ctx.request, _first_session, ctx.engine, user_id)
    response = RedirectResponse(landing, status_code=303)
    set_cookie(ctx.request, response, SESSION_COOKIE, session)
    response.delete_cookie(PRE_COOKIE, path="/")
    return response


@router.get("/signin/{token}")
async def signin_link_page(token: str, ctx: Public) -> Response:
    """Opening the link only shows a button: a link preview or a mail scanner
    fetching it does not spend it."""
    try:
        await blocking(ctx.request, on_connection, ctx.engine, accounts.open_signin_link, token)
    except accounts.AuthError as err:
        return page(ctx, "message.html", 404, title="Sign in", message=str(err))
    return page(ctx, "signin.html")


@router.post("/signin/{token}")
async def signin_link(token: str, ctx: Public) -> Response:
    try:
        session = await blocking(ctx.request, _signed_in_by_link, ctx.engine, token)
    except accounts.AuthError as err:
        return page(ctx, "message.html", 400, title="Sign in", message=str(err))
    response = RedirectResponse("/studies", status_code=303)
    set_cookie(ctx.request, response, SESSION_COOKIE, session)
    response.delete_cookie(PRE_COOKIE, path="/")
    return response


def _first_session(engine: sa.Engine, user_id: str) -> tuple[str, str]:
    """Where a newly registered user goes first (:func:`_landing_page`), and a
    session for them."""
    m = platform_tables.memberships
    with db.reading(engine) as conn:
        study, role = conn.execute(sa.select(m.c.study_id, m.c.role).where(
            m.c.user_id == user_id)).one()
    return _landing_page(study, role), accounts.open_session(engine, user_id)


def _landing(engine: sa.Engine, user_id: str, study: str) -> str:
    """:func:`_landing_page` of a member who joined ``study``."""
    m = platform_tables.memberships
    with db.reading(engine) as conn:
        role = conn.execute(sa.select(m.c.role).where(m.c.study_id == study,
                                                      m.c.user_id == user_id)).scalar()
    return _landing_page(study, role)


def _landing_page(study: str, role: str | None) -> str:
    """The page after accepting an invitation: a clinician's profile (specialty
    and consent come before rating); an adjudicator's list of disputed
    answers; a viewer or admin, who rates nothing, the study's progress page."""
    if role == "adjudicator":
        return f"/s/{study}/adjudicate"
    return f"/s/{study}/profile" if role == "clinician" else f"/s/{study}/progress"


def _signed_in_by_link(engine: sa.Engine, token: str) -> str:
    """Spend the sign-in link; a session for its user."""
    return accounts.open_session(engine, accounts.use_signin_link(engine, token))


@router.get("/studies")
async def studies(ctx: User) -> Response:
    return page(ctx, "studies.html", studies=await blocking(ctx.request, _studies, ctx))


def _studies(ctx: Ctx) -> list:
    m, s = platform_tables.memberships, snapshot_tables.studies
    with db.reading(ctx.engine) as conn:
        return conn.execute(sa.select(s.c.study_id, s.c.name, m.c.role)
                            .join(m, m.c.study_id == s.c.study_id)
                            .where(m.c.user_id == ctx.user.user_id).order_by(s.c.name)).all()


# --- profile -------------------------------------------------------------------

@router.get("/s/{study}/profile")
async def profile_page(ctx: Member) -> Response:
    if ctx.role != "clinician":  # a viewer or admin rates nothing: no rater profile to give
        return RedirectResponse(f"/s/{ctx.study.study_id}/progress", status_code=303)
    return page(ctx, "profile.html", values=ctx.rater._asdict(), professions=PROFESSIONS,
                error=None)


@router.post("/s/{study}/profile")
async def profile(ctx: Member) -> Response:
    if ctx.role != "clinician":  # nor one sent by hand: nothing is written
        return RedirectResponse(f"/s/{ctx.study.study_id}/progress", status_code=303)
    form = await _form(ctx.request)
    try:
        values = _profile_values(ctx, form)
    except InputError as err:
        return page(ctx, "profile.html", 422, values=form, professions=PROFESSIONS,
                    error=str(err))
    await blocking(ctx.request, _save_profile, ctx, values)
    return RedirectResponse(f"/s/{ctx.study.study_id}", status_code=303)


def _save_profile(ctx: Ctx, values: dict) -> None:
    with db.writing(ctx.engine) as conn:
        record(conn, "profile_saved", user_id=ctx.user.user_id, study_id=ctx.study.study_id)
        conn.execute(snapshot_tables.raters.update()
                     .where(snapshot_tables.raters.c.rater_id
                            == ctx.user.rater_id).values(**values))
        conn.execute(platform_tables.memberships.update().where(
            platform_tables.memberships.c.study_id == ctx.study.study_id,
            platform_tables.memberships.c.user_id == ctx.user.user_id
        ).values(consented_at=datetime.now(UTC)))


def _profile_values(ctx: Ctx, form: dict[str, str]) -> dict:
    where = "profile"
    if form.get("specialty") not in ctx.study.specialties:
        raise InputError(where, "choose a specialty from the list", field="specialty")
    if form.get("role") not in PROFESSIONS:
        raise InputError(where, "choose a role from the list", field="role")
    years = form.get("experience_years", "")
    # isdigit() also admits digits int() refuses ("²") and any length: ASCII, 3 at most.
    if not (years.isascii() and years.isdigit() and len(years) <= 3) or int(years) > 70:
        raise InputError(where, "years of practice, a whole number", field="experience_years",
                         expected="0..70", got=years)
    for name in ("country", "organisation"):
        if not form.get(name, "").strip() or len(form[name]) > 200:
            raise InputError(where, "required (at most 200 characters)", field=name)
    if form.get("consent") != "yes":
        raise InputError(where, "please read and acknowledge the consent text", field="consent")
    return {"specialty": form["specialty"], "role": form["role"],
            "experience_years": int(years), "country": form["country"].strip(),
            "organisation": form["organisation"].strip()}


# --- tasks ---------------------------------------------------------------------

@router.get("/s/{study}")
async def feed(ctx: Clinician, saved: int = 0, empty: int = 0) -> Response:
    done, open_task = await blocking(ctx.request, _done, ctx)
    return page(ctx, "feed.html", done=done, open_task=open_task, saved=saved, empty=empty,
                closed=ctx.closed)


def _done(ctx: Ctx) -> tuple[dict[str, int], sa.Row | None]:
    """The clinician's submitted tasks in this study, by kind, and the task they
    have open (every button takes it up first: the page says so)."""
    tl = platform_tables.task_leases
    mine = (tl.c.user_id == ctx.user.user_id, tl.c.study_id == ctx.study.study_id)
    with db.reading(ctx.engine) as conn:
        done = dict(conn.execute(sa.select(tl.c.kind, sa.func.count()).where(
            *mine, tl.c.status == "submitted").group_by(tl.c.kind)).all())
        open_task = conn.execute(sa.select(tl.c.token, tl.c.kind).where(
            *mine, tl.c.status == "open").order_by(tl.c.created_at).limit(1)).first()
    return done, open_task


@router.post("/s/{study}/next")
async def take_next(ctx: Clinician) -> Response:
    kind = (await _form(ctx.request)).get("kind", "auto")
    if kind not in ("auto", *platform_tables.TASK_KINDS):
        raise HTTPException(422, f"unknown task kind {kind!r}")
    if ctx.closed:  # every decision was settled: no new task
        return RedirectResponse(f"/s/{ctx.study.study_id}?closed=1", status_code=303)
    token = await blocking(ctx.request, next_task, ctx.engine, ctx.study, ctx.user,
                           ctx.rater.specialty, kind)
    if token is None:
        return RedirectResponse(f"/s/{ctx.study.study_id}?empty=1", status_code=303)
    response = RedirectResponse(f"/s/{ctx.study.study_id}/t/{token}", status_code=303)
    set_cookie(ctx.request, response, KIND_COOKIE, kind)
    return response


KIND_COOKIE = "ce_kind"
"""The kind of task the clinician last chose on the task list: a task page's
"Submit and take the next task" (next=auto) takes one of that kind."""


def _then(ctx: Ctx, then: str | None) -> str | None:
    """The kind of the next task a submission asks for: ``auto`` follows the
    clinician's choice on the task list (after "Rate one answer", ratings)."""
    if then != "auto":
        return then
    chosen = ctx.request.app.state.signer.unsign(ctx.request.cookies.get(KIND_COOKIE))
    return chosen if chosen in platform_tables.TASK_KINDS else then


_LEASE = Prepared(sa.select(platform_tables.task_leases).where(
    platform_tables.task_leases.c.token == sa.bindparam("token"),
    platform_tables.task_leases.c.user_id == sa.bindparam("user"),
    platform_tables.task_leases.c.study_id == sa.bindparam("study")))


def _lease(ctx: Ctx, token: str, conn: sa.Connection | None = None) -> sa.Row:
    if conn is None:
        with db.reading(ctx.engine) as conn:
            return _lease(ctx, token, conn)
    lease = run(conn, _LEASE, {"token": token, "user": ctx.user.user_id,
                                  "study": ctx.study.study_id}).first()
    if lease is None:
        raise HTTPException(404, "No such task.")
    return lease


def _task_page(ctx: Ctx, lease: sa.Row, status: int = 200, error: InputError | None = None,
               entered: dict[str, str] | None = None, conn: sa.Connection | None = None,
               saved: int = 0) -> Response:
    if conn is None:
        with db.reading(ctx.engine) as conn:
            return _task_page(ctx, lease, status, error, entered, conn, saved)
    view = task_view(conn, ctx.study, lease, ctx.user.rater_id)
    values = entered if entered is not None else view.values
    choice = entered.get("choice") if entered is not None else view.choice
    return page(ctx, "task.html", status, view=view, values=values, choice=choice, error=error,
                idempotency_key=secrets.token_urlsafe(16), saved=saved,
                blank_rubric=None if values else blank_rubric(view))


def blank_rubric(view: TaskView) -> Markup:
    """The rubric section of a task page before anything is entered: the same
    for every task of the study of this kind, rendered once (rendering it
    was most of a task page's CPU)."""
    return _rubric_html(view.criteria, view.kind, tuple((p.panel, p.label) for p in view.panels))


@lru_cache(maxsize=64)
def _rubric_html(criteria: tuple, kind: str, panels: tuple) -> Markup:
    view = SimpleNamespace(criteria=criteria, kind=kind,
                           panels=[SimpleNamespace(panel=n, label=label) for n, label in panels])
    return Markup(templates.get_template("task_rubric.html").render(view=view, values={}))


@router.get("/s/{study}/t/{token}")
async def task(token: str, ctx: Clinician, saved: int = 0) -> Response:
    return await blocking(ctx.request, _task, ctx, token, saved)


def _task(ctx: Ctx, token: str, saved: int) -> Response:
    with db.reading(ctx.engine) as conn:  # one checkout for the lease and the page
        return _task_page(ctx, _lease(ctx, token, conn), conn=conn, saved=saved)


@router.post("/s/{study}/t/{token}")
async def submit_task(token: str, ctx: Clinician) -> Response:
    """Store a submission. With ``next`` (a task kind, or ``auto``) the
    clinician's next task is leased in the same request and transaction: the
    browser is sent straight to it (two requests fewer per task than by the
    task list and its "Next task") and a script gets its address in the
    result (one fewer than asking for it)."""
    as_json = ctx.request.headers.get("content-type", "").startswith("application/json")
    data = await _json(ctx.request, "submission") if as_json else await _form(ctx.request)
    then = _then(ctx, (data.pop("next", None) or None) if isinstance(data, dict) else None)
    if ctx.closed:  # a task leased before the close is still taken; no next one
        then = None
    try:
        outcome = await blocking(ctx.request, submissions.submit, ctx.engine, ctx.study, token,
                                 ctx.user, ctx.rater.specialty, data, then)
    except submissions.NoSuchTask:
        raise HTTPException(404, "No such task.") from None
    except InputError as err:
        if wants_json(ctx.request):
            raise
        return await blocking(ctx.request, _refused_page, ctx, token, err, data)
    return _submitted(ctx, outcome, then)


def _submitted(ctx: Ctx, outcome: submissions.Outcome, then: str | None) -> Response:
    """The answer to a stored submission: where the page goes next (the next
    task, the task list, or the history for a revision), as a redirect or,
    for a script, in the JSON result."""
    study, following, result = ctx.study.study_id, outcome.next_token, outcome.result
    # saved=2: the task had been submitted already (from another tab, say), and this
    # submission became a new revision of it; the page says so.
    saved = 2 if outcome.revised else 1
    if following:
        then_page = f"/s/{study}/t/{following}?saved={saved}"
    elif then:
        then_page = f"/s/{study}?saved={saved}&empty=1"
    else:
        then_page = f"/s/{study}/history?saved=1" if outcome.revised else f"/s/{study}?saved=1"
    if wants_json(ctx.request):
        if then:
            result["next"] = following and f"/s/{study}/t/{following}"
        # Where the page goes next: the task page sends its form by script (it keeps
        # the answers on the page when the network or the server fails).
        result["page"] = then_page
        return JSONResponse(result)
    return RedirectResponse(then_page, status_code=303)


def _refused_page(ctx: Ctx, token: str, error: InputError, entered: dict) -> Response:
    """The task page again with what was entered and why it was refused."""
    with db.reading(ctx.engine) as conn:
        status = getattr(error, "status", 422)  # a reused key's conflict is a 409
        return _task_page(ctx, _lease(ctx, token, conn), status, error, entered, conn)


@router.post("/s/{study}/t/{token}/draft")
async def draft(token: str, ctx: Clinician) -> Response:
    data = await _json(ctx.request, "draft")
    try:
        outcome = await blocking(ctx.request, drafts.save_draft, ctx.engine, ctx.study, token,
                                 ctx.user, data)
    except submissions.NoSuchTask:
        raise HTTPException(404, "No such task.") from None
    return JSONResponse(outcome.result)


@router.post("/s/{study}/t/{token}/skip")
async def skip_task(token: str, ctx: Clinician) -> Response:
    await blocking(ctx.request, lambda: skip(ctx.engine, _lease(ctx, token)))
    return RedirectResponse(f"/s/{ctx.study.study_id}", status_code=303)


@router.get("/s/{study}/history")
async def history(ctx: Clinician, saved: int = 0) -> Response:
    return page(ctx, "history.html", items=await blocking(ctx.request, _history, ctx),
                saved=saved)


def _history_statement() -> sa.Select:
    """A clinician's submitted tasks, newest first, each with its question and
    the latest revision and time of its ratings (of either answer) and of its
    vote: one statement, where there was one per task before (a clinician of
    a paper-scale study has a hundred tasks)."""
    tl, r, a, c, p = (platform_tables.task_leases, snapshot_tables.ratings, snapshot_tables.answers,
                      snapshot_tables.cases, snapshot_tables.preferences)
    mine = (sa.select(r.c.answer_id, sa.func.max(r.c.revision).label("revision"),
                      sa.func.max(r.c.created_at).label("at"))
            .where(r.c.rater_id == sa.bindparam("rater")).group_by(r.c.answer_id).cte("mine"))
    first, second = mine.alias("first"), mine.alias("second")
    b = a.alias("b")
    return (sa.select(tl.c.token, tl.c.kind, tl.c.shown_left, c.c.prompt,
                      sa.func.substr(a.c.text, 1, EXCERPT + 1).label("text_a"),
                      sa.func.substr(b.c.text, 1, EXCERPT + 1).label("text_b"),
                      first.c.revision.label("rev_a"), first.c.at.label("at_a"),
                      second.c.revision.label("rev_b"), second.c.at.label("at_b"),
                      p.c.revision.label("rev_vote"), p.c.created_at.label("at_vote"))
            .join(a, a.c.answer_id == tl.c.answer_id).join(c, c.c.case_id == a.c.case_id)
            .outerjoin(b, b.c.answer_id == tl.c.answer_b_id)
            .outerjoin(first, first.c.answer_id == tl.c.answer_id)
            .outerjoin(second, second.c.answer_id == tl.c.answer_b_id)
            .outerjoin(p, p.c.preference_id == tl.c.preference_id)
            .where(tl.c.user_id == sa.bindparam("user"), tl.c.study_id == sa.bindparam("study"),
                   tl.c.status == "submitted")
            .order_by(tl.c.created_at.desc(), tl.c.token))


EXCERPT = 90
"""Characters of each answer History shows: tasks on one question differ by
their answers, which the question column alone does not tell apart."""
_HISTORY = _history_statement()


def _excerpt(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= EXCERPT else text[:EXCERPT].rstrip() + "…"


def _excerpts(row) -> list[str]:
    """The answers' openings in the order the task page shows them."""
    texts = [row.text_a] if row.kind == "rating" else (
        [row.text_a, row.text_b] if row.shown_left == "A" else [row.text_b, row.text_a])
    return [_excerpt(t) for t in texts]


def _history(ctx: Ctx) -> list[dict]:
    with db.reading(ctx.engine) as conn:
        rows = conn.execute(_HISTORY, {"rater": ctx.user.rater_id, "user": ctx.user.user_id,
                                       "study": ctx.study.study_id}).all()
    items = []
    for row in rows:
        # The vote's own revisions count too (an edited vote is a new row).
        revision = max((x for x in (row.rev_a, row.rev_b, row.rev_vote) if x is not None),
                       default=0)
        times = [aware(x) for x in (row.at_a, row.at_b, row.at_vote) if x is not None]
        items.append({"token": row.token, "kind": row.kind, "revision": revision,
                      "when": max(times).strftime("%Y-%m-%d %H:%M UTC") if times else "",
                      "prompt": (row.prompt or "")[:120], "excerpts": _excerpts(row)})
    return items

