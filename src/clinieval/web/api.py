"""The JSON API: every admin action of the study pages, for scripts, with
bearer tokens that an admin creates and revokes (``Authorization: Bearer
ce_...``). A token carries a role (admin or viewer) and either one study or,
when created without one, every study its owner administers (and may create
studies). Its owner must still hold the role in the study: revoking the
owner's access ends the token's access too. Cookies open nothing on these
routes, so they need no CSRF token.

The adjudicator's routes (``/api/studies/{study}/adjudication``) are the
exception: no token carries that role, so they take the adjudicator's
signed-in session, as the adjudication pages do, and every write sends the
session's CSRF token in an ``X-CSRF-Token`` header (the task list returns
it). What they return is the pages' blinded view: no model, provider or
answer id.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Annotated, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Depends, File, Form, HTTPException, Request, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from clinieval.contract import vocabulary
from clinieval.errors import InputError
from clinieval.platform import (
    adjudication,
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
from clinieval.platform.accounts import digest
from clinieval.platform.config import StudyConfig, study_config
from clinieval.storage import db
from clinieval.storage.schema import platform as platform_tables
from clinieval.web.kernel import STUDY_ROLES, Ctx, blocking, gate

router = APIRouter(tags=["studies"])

API_LEVELS = ("api_creator", "api_viewer", "api_admin")


@dataclass(frozen=True)
class ApiCtx:
    engine: sa.Engine
    user_id: str
    role: str
    study: StudyConfig | None
    request: Request

    async def run(self, fn, /, *args):
        """``fn(*args)`` through :func:`~clinieval.web.kernel.blocking` (a database
        worker thread on PostgreSQL)."""
        return await blocking(self.request, fn, *args)


def _token_row(conn: sa.Connection, header: str) -> sa.Row:
    if not header.lower().startswith("bearer "):
        raise HTTPException(401, "Send an API token: Authorization: Bearer <token>.")
    row = conn.execute(sa.select(platform_tables.api_tokens).where(
        platform_tables.api_tokens.c.token_hash == digest(header[7:].strip()))).first()
    if row is None or row.revoked_at is not None:
        raise HTTPException(401, "This API token is not valid or was revoked.")
    return row


def _grant(engine: sa.Engine, header: str, level: str, study_id: str | None
           ) -> tuple[str, str, StudyConfig | None]:
    """The token's owner, role and study for ``level`` (the study's for study
    levels), or the HTTP error refusing it; all reads in one connection."""
    with db.reading(engine) as conn:
        row = _token_row(conn, header)
        if level == "api_creator":
            if row.study_id is not None or row.role != "admin" or \
                    not studies.may_create_studies(conn, row.user_id):
                raise HTTPException(403, "Creating studies needs an admin token without"
                                         " a study scope.")
            return row.user_id, row.role, None
        wanted = STUDY_ROLES["admin" if level == "api_admin" else "viewer"]
        member = conn.execute(sa.select(platform_tables.memberships.c.role).where(
            platform_tables.memberships.c.study_id == study_id,
            platform_tables.memberships.c.user_id == row.user_id)).scalar()
        cfg = study_config(conn, study_id)
    if row.study_id not in (None, study_id) or cfg is None or member not in wanted \
            or row.role not in wanted:
        raise HTTPException(403, "This token does not grant that in this study.")
    # The lesser of the token's role and its owner's role here: an admin
    # token of every study its owner administers reads a study they only
    # view as a viewer (no per-clinician rows).
    return row.user_id, "admin" if row.role == "admin" and member == "admin" else "viewer", cfg


def api_gate(level: str):
    """A dependency enforcing an API level with the request's bearer token. Its
    reads go through blocking() like every other database call: on the event
    loop each API request held up every clinician's for its round trips."""
    assert level in API_LEVELS

    async def dependency(request: Request) -> ApiCtx:
        engine = request.app.state.engine
        study_id = None if level == "api_creator" else request.path_params["study"]
        user_id, role, cfg = await blocking(request, _grant, engine,
                                            request.headers.get("authorization", ""),
                                            level, study_id)
        return ApiCtx(engine, user_id, role, cfg, request)

    dependency.level = level
    return dependency


Creator = Annotated[ApiCtx, Depends(api_gate("api_creator"))]
Viewer = Annotated[ApiCtx, Depends(api_gate("api_viewer"))]
Admin = Annotated[ApiCtx, Depends(api_gate("api_admin"))]


async def _upload(file: UploadFile | None) -> uploads.Upload | None:
    return uploads.Upload(file.filename or "upload", await file.read()) if file else None


async def _only_declared(ctx: ApiCtx, endpoint) -> None:
    """A form field the endpoint does not take is an error, not ignored: a
    misspelt ``specialtys`` made a study of every specialty with the default
    settings. (JSON bodies refuse theirs by their models.) The form is the
    one FastAPI parsed already (Starlette keeps it)."""
    taken = set(inspect.signature(endpoint).parameters) - {"ctx"}
    for name in (await ctx.request.form()).keys():
        if name not in taken:
            raise InputError("API", "not a field of this call", field=name[:100],
                             expected=", ".join(sorted(taken)))


class Created(BaseModel):
    study_id: str
    cases: int
    answers: int
    flagged: int


@router.post("/api/studies", status_code=201)
async def create_study(
    ctx: Creator,
    study_id: Annotated[str, Form()],
    source: Annotated[UploadFile, File(description="Cases and answers, any format"
                                                   " `clinieval import` reads.")],
    name: Annotated[str, Form()] = "",
    description: Annotated[str, Form()] = "",
    consent_text: Annotated[str, Form()] = "",
    criteria: Annotated[str, Form(description="Comma-separated criterion ids shown.")] = "",
    overlap_target: Annotated[int, Form(ge=1)] = 3,
    pairwise_share: Annotated[float, Form(ge=0, le=1)] = 0.2,
    specialties: Annotated[str, Form(description="Comma-separated.")] = "",
    rationale_required: Annotated[bool, Form()] = True,
    rubric: Annotated[UploadFile | None, File()] = None,
    gates: Annotated[str, Form(description="Decision gates, a JSON list of {criterion,"
                                           " threshold, scope, alpha}; empty: the two"
                                           " defaults, []: none.")] = "",
) -> Created:
    """Create a study from an uploaded source; the token's owner becomes its admin."""
    await _only_declared(ctx, create_study)
    form = {"study_id": study_id, "name": name, "description": description,
            "consent_text": consent_text, "criteria": criteria,
            "overlap_target": str(overlap_target), "pairwise_share": str(pairwise_share),
            "specialties": specialties, "rationale_required": "yes" if rationale_required
            else "no", "gates": gates}
    plan, parsed = await asyncio.to_thread(studies.prepare_study, ctx.engine, form,
                                           await _upload(source), await _upload(rubric))
    made = await ctx.run(studies.write_study, ctx.engine, ctx.user_id, plan, parsed)
    return Created(**made)


class Added(BaseModel):
    study_id: str
    cases: int
    answers: int
    flagged: int
    left_out: int = Field(0, description="Cases of specialties the study does not offer,"
                                         " left out with their answers.")


@router.post("/api/studies/{study}/cases", status_code=201)
async def add_cases(
    ctx: Admin,
    source: Annotated[UploadFile, File(description="Cases and answers, any format"
                                                   " `clinieval import` reads.")],
) -> Added:
    """Add cases and answers to the study, all or nothing; new answers are
    screened by the leak guard; ones already in the study are skipped."""
    await _only_declared(ctx, add_cases)
    parsed = await asyncio.to_thread(uploads.read_upload, await _upload(source))
    return Added(**await ctx.run(studies.add_cases_by, ctx.engine, ctx.user_id,
                                 ctx.study.study_id, parsed))


class RubricVersion(BaseModel):
    study_id: str
    version: str


@router.post("/api/studies/{study}/rubric", status_code=201)
async def new_rubric_version(
    ctx: Admin,
    rubric: Annotated[UploadFile, File(description="Rubric JSON: the study's rubric id,"
                                                   " a new version.")],
) -> RubricVersion:
    """A new rubric version for the study: ratings given from now on record it."""
    await _only_declared(ctx, new_rubric_version)
    return RubricVersion(**await ctx.run(studies.new_rubric_version, ctx.engine, ctx.user_id,
                                         ctx.study.study_id, await _upload(rubric)))


@router.get("/api/studies/{study}/progress")
async def progress(ctx: Viewer) -> dict:
    """Coverage per model x specialty, open tasks, ratings still needed (and,
    for admin tokens, counts per clinician under pseudonymous ids)."""
    return await ctx.run(live.progress, ctx.engine, ctx.study, ctx.role == "admin")


@router.get("/api/studies/{study}/safety")
async def safety(ctx: Viewer) -> dict:
    """The live safety view: the audit's sections on the study's data so far."""
    return await ctx.run(live.safety_view, ctx.engine, ctx.study.study_id)


class GateList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    gates: list[dict] = Field(max_length=200, description="Each {criterion, threshold, scope,"
                                                          " alpha}; [] removes every gate.")


@router.post("/api/studies/{study}/gates")
async def set_gates(ctx: Admin, body: GateList) -> list[dict]:
    """Replace the study's decision gates; a bad gate is a 422 naming its field."""
    return await ctx.run(studies.set_gates, ctx.engine, ctx.user_id, ctx.study.study_id,
                         body.gates)


@router.get("/api/studies/{study}/decisions")
async def study_decisions(ctx: Viewer) -> dict:
    """Every gate's decision per cell (pass, fail or open by an anytime-valid
    confidence sequence), with its robustness certificate, and the study's line."""
    return await ctx.run(decision_view.study_decisions, ctx.engine, ctx.study)


class Assignment(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt or unknown field is an error
    assignment: str | None = Field(None, description="even or targeted.")
    monitor_share: float | None = Field(None, description="Share of a specialty's picks kept"
                                                          " on settled cells, 0 <= share < 1.")
    escalation_step: int | None = Field(None, description="Raters added per clinician"
                                                          " scoring a safety-critical"
                                                          " criterion <= -1, 0..20.")
    escalation_cap: int | None = Field(None, description="Most raters escalation adds to"
                                                         " one answer, 0..50.")


@router.get("/api/studies/{study}/assignment")
async def assignment(ctx: Admin) -> dict:
    """How the study assigns its next tasks (defaults filled in)."""
    return ctx.study.assignment_settings()


@router.post("/api/studies/{study}/assignment")
async def set_assignment(ctx: Admin, body: Assignment) -> dict:
    """Change the settings given (the others stay); returns the settings in
    force. A bad value is a 422 naming its field, and nothing is written."""
    given = body.model_dump(exclude_none=True)
    if not given:
        raise InputError("study assignment", "give at least one setting to change",
                         field="assignment", expected=", ".join(Assignment.model_fields))
    # The priorities pass (seconds of CPU in a large study) runs in the background.
    cfg = await asyncio.to_thread(lambda: targeting.set_assignment(
        ctx.engine, ctx.user_id, ctx.study.study_id, **given, background=True))
    return cfg.assignment_settings()


@router.post("/api/studies/{study}/close")
async def close_study(ctx: Admin) -> dict:
    """Close the study once every decision of its gates is settled: no new
    task is handed out, and the verdicts it closed on are kept. Refused (409)
    naming ``decisions`` while one is open or none exists, ``study`` when
    closed already; nothing is written then."""
    return await asyncio.to_thread(closing.close_study, ctx.engine, ctx.user_id, ctx.study)


class Invitations(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt or unknown field is an error
    role: Literal[vocabulary.ROLES] = "clinician"  # type: ignore[valid-type]
    emails: list[str] = Field(default_factory=list, max_length=membership.MAX_INVITES)
    count: int = Field(0, ge=0, le=membership.MAX_INVITES)


@router.post("/api/studies/{study}/invitations", status_code=201)
async def invite(ctx: Admin, body: Invitations) -> list[dict]:
    """Single-use invitation links (one per e-mail address, or ``count``)."""
    # A list of addresses is all addresses: an entry without "@" is refused, not dropped
    # (pasted text on the People page may hold names beside the addresses).
    if (bad := next((e for e in body.emails if "@" not in e), None)) is not None:
        raise InputError("invitations", "not an e-mail address", field="emails", got=bad[:80])
    emails = membership.parse_emails("\n".join(body.emails))
    links = await ctx.run(membership.invite_many, ctx.engine, ctx.user_id, ctx.study.study_id,
                          body.role, emails, body.count)
    base = str(ctx.request.base_url).rstrip("/")
    return [{"email": x["email"], "link": f"{base}/invite/{x['token']}"} for x in links]


@router.get("/api/studies/{study}/invitations")
async def pending_invitations(ctx: Admin) -> list[dict]:
    """Unused links that still work, counted per role and kind (made for an
    address, or unnamed); neither tokens nor addresses."""
    return await ctx.run(membership.pending_invitations, ctx.engine, ctx.study.study_id)


class Withdrawal(BaseModel):
    model_config = ConfigDict(extra="forbid")
    which: Literal[membership.WITHDRAWABLE]  # type: ignore[valid-type]


@router.post("/api/studies/{study}/invitations/withdraw")
async def withdraw_invitations(ctx: Admin, body: Withdrawal) -> dict:
    """Expire the unused unnamed links, or every unused link; returns how many."""
    n = await ctx.run(membership.withdraw_invitations, ctx.engine, ctx.user_id,
                      ctx.study.study_id, body.which)
    return {"withdrawn": n}


@router.get("/api/studies/{study}/members")
async def members(ctx: Admin) -> list[dict]:
    return await ctx.run(membership.members, ctx.engine, ctx.study.study_id)


@router.post("/api/studies/{study}/members/{rater_id}/revoke", status_code=204)
async def revoke(ctx: Admin, rater_id: str) -> Response:
    await ctx.run(membership.revoke, ctx.engine, ctx.user_id, ctx.study.study_id, rater_id)
    return Response(status_code=204)


@router.get("/api/studies/{study}/flagged")
async def flagged(ctx: Admin) -> list[dict]:
    return await ctx.run(screening.flagged_queue, ctx.engine, ctx.study.study_id)


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt or unknown field is an error
    decision: Literal[platform_tables.SCREEN_DECISIONS]  # type: ignore[valid-type]


@router.post("/api/studies/{study}/flagged/{answer_id}", status_code=204)
async def decide(ctx: Admin, answer_id: str, body: Decision) -> Response:
    await ctx.run(screening.decide, ctx.engine, ctx.user_id, ctx.study.study_id, answer_id,
                  body.decision)
    return Response(status_code=204)


@router.get("/api/studies/{study}/log")
async def log(ctx: Admin) -> list[dict]:
    return await ctx.run(events.audit_log, ctx.engine, ctx.study.study_id)


class TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt or unknown field is an error
    role: Literal[platform_tables.API_TOKEN_ROLES] = "viewer"  # type: ignore[valid-type]
    label: str = Field("token", max_length=100)


@router.post("/api/studies/{study}/tokens", status_code=201)
async def new_token(ctx: Admin, body: TokenRequest) -> dict:
    """A token scoped to this study (shown once)."""
    return {"token": await ctx.run(membership.create_token, ctx.engine, ctx.user_id,
                                   ctx.study.study_id, body.role, body.label)}


@router.post("/api/studies/{study}/tokens/{token_id}/revoke", status_code=204)
async def revoke_token(ctx: Admin, token_id: str) -> Response:
    await ctx.run(membership.revoke_token, ctx.engine, ctx.user_id, ctx.study.study_id,
                  token_id)
    return Response(status_code=204)


@router.get("/api/studies/{study}/export", response_class=Response,
            responses={200: {"content": {"application/zip": {}}}})
async def export(ctx: Admin) -> Response:
    """The pseudonymous bundle (what ``clinieval audit`` reads) as a zip."""
    data = await asyncio.to_thread(study_export.export_zip, ctx.engine, ctx.user_id,
                                   ctx.study.study_id)
    return Response(data, media_type="application/zip", headers={
        "Content-Disposition": f'attachment; filename="{ctx.study.study_id}-export.zip"'})


# --- adjudication (the adjudicator's session; see the module's docstring) --------------

Adjudicator = Annotated[Ctx, Depends(gate("adjudicator"))]


def _key(ctx: Ctx) -> bytes:
    return ctx.request.app.state.signer.key


@router.get("/api/studies/{study}/adjudication")
async def adjudication_tasks(ctx: Adjudicator) -> dict:
    """The study's disputed answers (open first), each by its opaque
    reference, and the CSRF token that verdicts send as ``X-CSRF-Token``."""
    found = await blocking(ctx.request, adjudication.tasks, ctx.engine, _key(ctx),
                           ctx.study.study_id)
    return {"tasks": found, "open": sum(t["open"] for t in found), "csrf": ctx.csrf}


@router.get("/api/studies/{study}/adjudication/{ref}")
async def adjudication_task(ref: str, ctx: Adjudicator) -> adjudication.TaskView:
    """One task as its page shows it: the case, the answer's text, every
    current rating and rationale under per-task labels, the verdicts so far
    and ``supersedes`` (the newest verdict's id, which a verdict sends back)."""
    return await blocking(ctx.request, adjudication.task_view, ctx.engine, _key(ctx),
                          ctx.study.study_id, ctx.user.rater_id, ref)


class Verdicts(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt or unknown field is an error
    verdict: dict[str, str] = Field(default_factory=dict, max_length=100,
                                    description="fail or pass per disputed criterion id.")
    reason: str | None = None
    supersedes: int | str | None = Field(None, description="The task's supersedes when it"
                                                           " was read (0: no verdict yet).")

    def form(self) -> dict[str, str]:
        """As the page's form sends it, for the same checks."""
        fields = {f"verdict.{k}": v for k, v in self.verdict.items()}
        for name in ("reason", "supersedes"):
            if (value := getattr(self, name)) is not None:
                fields[name] = str(value)
        return fields


@router.post("/api/studies/{study}/adjudication/{ref}")
async def adjudicate(ref: str, ctx: Adjudicator, body: Verdicts) -> dict:
    """Record verdicts on every disputed criterion, with a reason, in one
    transaction. Sent again unchanged it writes nothing (``written``: false);
    refused, writing nothing, for a bad field (422), an unknown task (404),
    an answer no longer disputed or a verdict recorded after ``supersedes``
    (409)."""
    done = await blocking(ctx.request, adjudication.submit, ctx.engine, _key(ctx),
                          ctx.study.study_id, ctx.user.user_id, ref, body.form())
    return {"verdicts": list(done.ids), "written": done.written}
