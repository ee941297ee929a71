"""The adjudicator's routes: the study's disputed answers, one task's page
(the case, the answer, every rating and rationale under per-task labels) and
the verdict's submission. Every route is at the ``adjudicator`` level (the
study's adjudicators only); the services are
:mod:`clinieval.platform.adjudication`'s."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import RedirectResponse, Response

from clinieval.errors import InputError
from clinieval.platform import adjudication
from clinieval.web.kernel import Ctx, blocking, gate, page, wants_json

router = APIRouter(include_in_schema=False)
Adjudicator = Annotated[Ctx, Depends(gate("adjudicator"))]


def _key(ctx: Ctx) -> bytes:
    return ctx.request.app.state.signer.key


@router.get("/s/{study}/adjudicate")
async def task_list(ctx: Adjudicator) -> Response:
    found = await blocking(ctx.request, adjudication.tasks, ctx.engine, _key(ctx),
                           ctx.study.study_id)
    return page(ctx, "adjudicate_list.html", tasks=found,
                open=sum(task["open"] for task in found))


@router.get("/s/{study}/adjudicate/{ref}")
async def task_page(ref: str, ctx: Adjudicator, saved: int = 0) -> Response:
    view = await _view(ctx, ref)
    return page(ctx, "adjudicate_task.html", view=view, saved=bool(saved), error=None,
                entered={})


async def _view(ctx: Ctx, ref: str) -> adjudication.TaskView:
    try:
        return await blocking(ctx.request, adjudication.task_view, ctx.engine, _key(ctx),
                              ctx.study.study_id, ctx.user.rater_id, ref)
    except adjudication.NotFound as err:
        raise HTTPException(404, err.reason) from None


@router.post("/s/{study}/adjudicate/{ref}")
async def submit(ref: str, ctx: Adjudicator) -> Response:
    form = {k: v for k, v in (await ctx.request.form()).items() if isinstance(v, str)}
    try:
        await blocking(ctx.request, adjudication.submit, ctx.engine, _key(ctx),
                       ctx.study.study_id, ctx.user.user_id, ref, form)
    except InputError as err:
        if wants_json(ctx.request) or isinstance(err, adjudication.NotFound | adjudication.Refused):
            raise
        return await _refused(ctx, ref, err, form)
    return RedirectResponse(f"/s/{ctx.study.study_id}/adjudicate/{ref}?saved=1",
                            status_code=303)


async def _refused(ctx: Ctx, ref: str, err: InputError, form: dict) -> Response:
    """The task page again with the refusal beside its field and what was
    entered kept (the page's current state: a conflict shows the new verdict)."""
    try:
        view = await _view(ctx, ref)
    except HTTPException:
        raise err from None
    return page(ctx, "adjudicate_task.html", getattr(err, "status", 422), view=view,
                saved=False, error=err, entered=form)
