"""Study administration in the browser: create a study, invite and revoke,
progress, the live safety view, the leak guard's queue, API tokens, the
audit log, export and the full report. The work is done by the services of
:mod:`clinieval.platform` (the API calls the same functions)."""

from __future__ import annotations

import asyncio
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.datastructures import UploadFile

from clinieval.errors import InputError
from clinieval.platform import (
    closing,
    decision_view,
    events,
    live,
    membership,
    screening,
    studies,
    study_export,
    targeting,
    uploads,
)
from clinieval.platform.config import ASSIGNMENTS
from clinieval.web.kernel import Ctx, blocking, gate, page, wants_json

router = APIRouter(include_in_schema=False)
Creator = Annotated[Ctx, Depends(gate("creator"))]
Viewer = Annotated[Ctx, Depends(gate("viewer"))]
Admin = Annotated[Ctx, Depends(gate("admin"))]

REPORT_CSP = ("sandbox allow-scripts; default-src 'none'; script-src 'self';"
              " style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none';"
              " frame-ancestors 'none'")
"""The audit report carries its own inline styles and runs only the app's
/static/report.js (no inline script, no eval). Sandboxed without
allow-same-origin, its origin is opaque: no cookies of the app, no
same-origin requests (and connect-src is 'none' anyway)."""


async def _fields(request: Request) -> tuple[dict[str, str], dict[str, uploads.Upload]]:
    form = await request.form()
    fields, files = {}, {}
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            if value.filename:
                files[key] = uploads.Upload(value.filename, await value.read())
        else:
            fields[key] = value
    return fields, files


def _home(ctx: Ctx, tab: str = "progress") -> str:
    return f"/s/{ctx.study.study_id}/{tab}"


# --- creating a study ---------------------------------------------------------------

@router.get("/admin/new")
async def new_study_page(ctx: Creator) -> Response:
    return page(ctx, "admin_new.html", values={}, error=None)


@router.post("/admin/new")
async def new_study(ctx: Creator) -> Response:
    fields, files = await _fields(ctx.request)
    try:
        if "source" not in files:
            raise InputError("study form", "upload the cases and answers", field="source")
        # Checking and parsing in a thread; the write as every write (on SQLite on
        # the event loop, holding the write lock for its transaction).
        plan, source = await asyncio.to_thread(studies.prepare_study, ctx.engine, fields,
                                               files["source"], files.get("rubric"))
        made = await blocking(ctx.request, studies.write_study, ctx.engine, ctx.user.user_id,
                              plan, source)
    except InputError as err:
        return page(ctx, "admin_new.html", 422, values=fields, error=str(err))
    return RedirectResponse(f"/s/{made['study_id']}/progress?created=1", status_code=303)


# --- progress and the live safety view ----------------------------------------------

@router.get("/s/{study}/progress")
async def progress_page(ctx: Viewer, created: int = 0) -> Response:
    data = await blocking(ctx.request, live.progress, ctx.engine, ctx.study,
                          ctx.role == "admin")
    # A new study's banner says how many answers the leak guard held back: they
    # reach no clinician until an admin releases them.
    held = len(await blocking(ctx.request, screening.flagged_answers, ctx.engine,
                              ctx.study.study_id)) if created else 0
    found = await blocking(ctx.request, decision_view.study_decisions, ctx.engine, ctx.study) \
        if ctx.study.gates else None
    return page(ctx, "admin_progress.html", progress=data, created=created, held=held,
                grid=live.coverage_grid(data["coverage"]), decisions=found)


@router.get("/s/{study}/safety")
async def safety_page(ctx: Viewer) -> Response:
    view = await blocking(ctx.request, live.safety_view, ctx.engine, ctx.study.study_id)
    return page(ctx, "admin_safety.html", view=view, fmt=live.fmt_ci,
                crits=live.fail_columns(view), calibrated=live.calibrated_fails(view))


# --- cases, answers and rubric versions -------------------------------------------------

def _content_data(engine, study: str) -> dict:
    return {"content": studies.content_counts(engine, study),
            "versions": studies.rubric_versions(engine, study)}


async def _content(ctx: Ctx, status: int = 200, **extra) -> Response:
    data = await blocking(ctx.request, _content_data, ctx.engine, ctx.study.study_id)
    return page(ctx, "admin_content.html", status, **data, assignments=ASSIGNMENTS,
                **{"added": None, "version": None, "error": None, "assigned": False,
                   "assignment": ctx.study.assignment_settings(), "entered": {}, **extra})


@router.get("/s/{study}/admin/content")
async def content(ctx: Admin) -> Response:
    return await _content(ctx)


@router.post("/s/{study}/admin/cases")
async def add_cases(ctx: Admin) -> Response:
    _, files = await _fields(ctx.request)
    try:
        if "source" not in files:
            raise InputError("add cases", "upload the cases and answers", field="source")
        source = await asyncio.to_thread(uploads.read_upload, files["source"])
        added = await blocking(ctx.request, studies.add_cases_by, ctx.engine, ctx.user.user_id,
                               ctx.study.study_id, source)
    except InputError as err:
        return await _content(ctx, 422, error=str(err))
    return await _content(ctx, added=added)


@router.post("/s/{study}/admin/rubric")
async def new_rubric_version(ctx: Admin) -> Response:
    _, files = await _fields(ctx.request)
    try:
        made = await blocking(ctx.request, studies.new_rubric_version, ctx.engine,
                              ctx.user.user_id, ctx.study.study_id,
                              files.get("rubric") or uploads.Upload("rubric", b""))
    except InputError as err:
        return await _content(ctx, 422, error=str(err))
    return await _content(ctx, version=made["version"])


ASSIGNMENT_FIELDS = {"assignment": str, "monitor_share": float, "escalation_step": int,
                     "escalation_cap": int}
"""The assignment form's fields and their types (their ranges are checked by
:func:`~clinieval.platform.targeting.set_assignment`)."""


def _assignment_form(fields: dict[str, str]) -> dict:
    """The settings the form changes, typed (a blank field keeps its setting);
    an InputError naming the first that is not a number."""
    extra = sorted(set(fields) - set(ASSIGNMENT_FIELDS) - {"csrf"})
    if extra:
        raise InputError("study assignment", "not a field of this form", field=extra[0][:100])
    given = {}
    for name, kind in ASSIGNMENT_FIELDS.items():
        raw = (fields.get(name) or "").strip()
        if not raw:
            continue
        try:
            given[name] = kind(raw)
        except ValueError:
            raise InputError("study assignment", "a whole number" if kind is int
                             else "a number", field=name, got=raw[:20]) from None
    return given


@router.post("/s/{study}/admin/assignment")
async def set_assignment(ctx: Admin) -> Response:
    """Change how the study assigns (the form's fields; blank ones stay); a bad
    value is shown beside the form, naming its field, and nothing is written."""
    fields, _ = await _fields(ctx.request)
    try:
        given = _assignment_form(fields)
        cfg = ctx.study
        if given:  # the priorities pass runs in the background, not in this request
            cfg = await asyncio.to_thread(lambda: targeting.set_assignment(
                ctx.engine, ctx.user.user_id, ctx.study.study_id, **given, background=True))
    except InputError as err:
        if wants_json(ctx.request):
            raise
        return await _content(ctx, 422, error=str(err), entered=fields)
    return await _content(ctx, assigned=True, assignment=cfg.assignment_settings())


# --- people: invitations, members, API tokens ------------------------------------------

def _people_data(engine, study: str, user_id: str) -> dict:
    return {"members": membership.members(engine, study),
            "pending": membership.pending_invitations(engine, study),
            "tokens": membership.tokens(engine, study, user_id)}


async def _people(ctx: Ctx, status: int = 200, **extra) -> Response:
    data = await blocking(ctx.request, _people_data, ctx.engine, ctx.study.study_id,
                          ctx.user.user_id)
    return page(ctx, "admin_people.html", status, **data,
                base=str(ctx.request.base_url).rstrip("/"),
                **{"links": None, "new_token": None, "error": None, "revoked": None,
                   "withdrawn": None, "of": "address", **extra})


@router.get("/s/{study}/admin/people")
async def people(ctx: Admin, revoked: str = "", withdrawn: int | None = None,
                 of: str = "address") -> Response:
    # What the redirect after a revocation confirms: the member's pseudonymous id, or
    # how many unused invitations (for an address, unnamed, or all) were withdrawn.
    shown = revoked if re.fullmatch(r"[\w.-]{1,100}", revoked) else None
    count = None if withdrawn is None else max(0, min(withdrawn, 10**6))
    return await _people(ctx, revoked=shown, withdrawn=count,
                         of=of if of in membership.WITHDRAWABLE else "address")


@router.post("/s/{study}/admin/invite")
async def invite(ctx: Admin) -> Response:
    fields, files = await _fields(ctx.request)
    try:
        text = fields.get("emails", "")
        if "csv" in files:
            text += "\n" + _text(files["csv"])
        count = _count(fields.get("count", ""))
        links = await blocking(ctx.request, membership.invite_many, ctx.engine, ctx.user.user_id,
                               ctx.study.study_id, fields.get("role", "clinician"),
                               membership.parse_emails(text), count)
    except InputError as err:
        return await _people(ctx, 422, error=str(err))
    return await _people(ctx, links=links)


def _text(upload: uploads.Upload) -> str:
    try:
        return upload.content.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InputError(upload.filename, f"not UTF-8 text (byte {err.start})",
                         field="csv") from None


def _count(raw: str) -> int:
    raw = raw.strip()
    if not raw:
        return 0
    if not (len(raw) <= 4 and raw.isascii() and raw.isdigit()
            and int(raw) <= membership.MAX_INVITES):
        raise InputError("invitations", "not a number of links", field="count",
                         expected=f"0..{membership.MAX_INVITES}", got=raw[:20])
    return int(raw)


@router.post("/s/{study}/admin/revoke")
async def revoke(ctx: Admin) -> Response:
    fields, _ = await _fields(ctx.request)
    try:
        rater_id, withdrawn = fields.get("rater_id", ""), 0
        if rater_id or not fields.get("email", "").strip():
            await blocking(ctx.request, membership.revoke, ctx.engine, ctx.user.user_id,
                           ctx.study.study_id, rater_id)
        else:  # the address the admin invited: its member, or its unused invitations
            rater_id, withdrawn = await blocking(ctx.request, membership.revoke_address,
                                                 ctx.engine, ctx.user.user_id,
                                                 ctx.study.study_id, fields["email"])
    except InputError as err:
        return await _people(ctx, 422, error=str(err))
    done = f"revoked={quote(rater_id)}" if rater_id else f"withdrawn={withdrawn}"
    return RedirectResponse(_home(ctx, "admin/people") + "?" + done, status_code=303)


@router.post("/s/{study}/admin/invitations/withdraw")
async def withdraw_invitations(ctx: Admin) -> Response:
    fields, _ = await _fields(ctx.request)
    which = fields.get("which", "")
    try:
        n = await blocking(ctx.request, membership.withdraw_invitations, ctx.engine,
                           ctx.user.user_id, ctx.study.study_id, which)
    except InputError as err:
        return await _people(ctx, 422, error=str(err))
    return RedirectResponse(_home(ctx, "admin/people") + f"?withdrawn={n}&of={which}",
                            status_code=303)


@router.post("/s/{study}/admin/tokens")
async def new_token(ctx: Admin) -> Response:
    fields, _ = await _fields(ctx.request)
    try:
        scope = None if fields.get("scope") == "all" else ctx.study.study_id
        token = await blocking(ctx.request, membership.create_token, ctx.engine,
                               ctx.user.user_id, scope, fields.get("role", "viewer"),
                               fields.get("label", ""))
    except InputError as err:
        return await _people(ctx, 422, error=str(err))
    return await _people(ctx, new_token=token)


@router.post("/s/{study}/admin/tokens/revoke")
async def revoke_token(ctx: Admin) -> Response:
    fields, _ = await _fields(ctx.request)
    try:
        await blocking(ctx.request, membership.revoke_token, ctx.engine, ctx.user.user_id,
                       ctx.study.study_id, fields.get("token_id", ""))
    except InputError as err:
        return await _people(ctx, 422, error=str(err))
    return RedirectResponse(_home(ctx, "admin/people"), status_code=303)


# --- the leak guard's queue and the audit log ------------------------------------------

@router.get("/s/{study}/admin/flagged")
async def flagged(ctx: Admin, done: str = "") -> Response:
    items = await blocking(ctx.request, screening.flagged_queue, ctx.engine, ctx.study.study_id)
    return page(ctx, "admin_flagged.html", items=items, done=done, error=None)


@router.post("/s/{study}/admin/flagged")
async def decide(ctx: Admin) -> Response:
    fields, _ = await _fields(ctx.request)
    try:
        # Released, an answer reaches clinicians for good: the page asks the admin to
        # confirm they read it (the API's decision is explicit already).
        if fields.get("decision") == "release" and fields.get("confirm") != "yes":
            raise InputError("flagged", "tick the box to confirm you read the answer and it"
                             " does not give away its model", field="confirm")
        await blocking(ctx.request, screening.decide, ctx.engine, ctx.user.user_id,
                       ctx.study.study_id, fields.get("answer_id", ""),
                       fields.get("decision", ""))
    except InputError as err:
        items = await blocking(ctx.request, screening.flagged_queue, ctx.engine,
                               ctx.study.study_id)
        return page(ctx, "admin_flagged.html", 422, items=items, done="", error=str(err))
    return RedirectResponse(_home(ctx, f"admin/flagged?done={fields['decision']}"),
                            status_code=303)


@router.get("/s/{study}/admin/log")
async def log(ctx: Admin) -> Response:
    logged = await blocking(ctx.request, events.audit_log, ctx.engine, ctx.study.study_id)
    return page(ctx, "admin_log.html", events=[_log_row(e, ctx.study.study_id) for e in logged])


SELF_EVENTS = ("signed_in", "joined", "registered")
"""Events whose subject is the person who acted (the others without one act
on the study itself)."""


def _log_row(event: dict, study_id: str) -> dict:
    """An audit event as the log page reads: what happened in words, what it
    happened to, and its detail as "name: value" pairs, not a Python dict."""
    subject = event["subject"] or (event["who"] if event["kind"] in SELF_EVENTS else study_id)
    detail = event["detail"] or {}
    return {**event, "subject": subject,
            "detail": "; ".join(f"{k.replace('_', ' ')}: {_detail_value(v)}"
                                for k, v in detail.items())}


def _detail_value(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


# --- export and report -------------------------------------------------------------------

# Export and report are POSTs (a button with the CSRF token): each writes to the
# audit log and the report runs the whole audit, which a link from another site
# could otherwise set off with the admin's cookie (SameSite=Lax lets top-level
# GETs through). Both take seconds at paper scale and run in a thread of their
# own: on the event loop they held up every clinician's request meanwhile.
@router.post("/s/{study}/admin/export")
async def export(ctx: Admin) -> Response:
    data = await asyncio.to_thread(study_export.export_zip, ctx.engine, ctx.user.user_id,
                                   ctx.study.study_id)
    return Response(data, media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{ctx.study.study_id}-export.zip"'})


@router.post("/s/{study}/admin/close")
async def close(ctx: Admin) -> Response:
    """Close the study once every decision is settled (recomputed here, in a
    thread: it reads the study's data); refused naming the field otherwise."""
    try:
        await asyncio.to_thread(closing.close_study, ctx.engine, ctx.user.user_id, ctx.study)
    except InputError as err:
        if wants_json(ctx.request):
            raise
        return page(ctx, "message.html", err.status, title="Close the study", message=str(err))
    return RedirectResponse(_home(ctx, "progress"), status_code=303)


@router.post("/s/{study}/admin/report")
async def report(ctx: Admin) -> Response:
    """The full audit on the study's current data, rendered as the report
    ``clinieval audit`` writes (figures are inline SVG)."""
    from clinieval.report.render import with_script_file

    html = with_script_file(await asyncio.to_thread(full_report, ctx), "/static/report.js")
    return HTMLResponse(html, headers={"Content-Security-Policy": REPORT_CSP})


_ONE_REPORT = threading.Lock()
"""Reports are made one at a time in a server process. Two at once in threads
deadlocked: drawing the figures forks worker processes, and a fork taken
while the other thread was drawing gave its worker matplotlib's figure lock
held by a thread the worker does not have (it waited for ever, and so did
the request). matplotlib's style settings are process-wide too. One at a
time also bounds the memory: each report reads the study whole."""


def full_report(ctx: Ctx) -> str:
    from clinieval.audit import audit
    from clinieval.report import render
    from clinieval.storage import db

    with _ONE_REPORT:
        result = audit(study_export.study_snapshot(ctx.engine, ctx.study.study_id))
        folder = Path(tempfile.mkdtemp(prefix="clinieval-report-"))
        try:
            html = render.render_report(result, folder)["html"].read_text(encoding="utf-8")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    with db.writing(ctx.engine) as conn:
        events.record(conn, "report_run", user_id=ctx.user.user_id, study_id=ctx.study.study_id)
    return html
