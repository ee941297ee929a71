"""The FastAPI application: every router mounted in one place, behind the
security headers, a bound on request bodies and the error handlers.

Every route declares one access level (:data:`~clinieval.web.kernel.LEVELS`,
or the API's); :data:`ROUTE_LEVELS` reads them off the mounted routes and is
the tests' source of truth: each registered route must say its level. The
routers import only :mod:`clinieval.web.kernel` and the services; nothing
imports this module but the entry points (``clinieval serve``, uvicorn's
factory, tests).
"""

from __future__ import annotations

import gc
import traceback
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from urllib.parse import unquote_plus

import sqlalchemy as sa
from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.formparsers import FormParser, MultiPartException, MultiPartParser

from clinieval.errors import InputError
from clinieval.platform.live import warm
from clinieval.storage import db
from clinieval.web import adjudication, admin, api, clinician
from clinieval.web.kernel import HERE, Redirect, Signer, platform_key, templates, wants_json

OPENAPI_URL = "/api/openapi.json"
TASK_PATHS = ("/s/{study}/t/{token}", "/s/{study}/next")

pages = APIRouter(include_in_schema=False)
"""The HTML pages: the clinician's routes, then the study administration's
and the adjudicators'."""
pages.routes.extend(clinician.router.routes)
pages.include_router(admin.router)
pages.include_router(adjudication.router)
# The router tries its routes in order and a clinician's task requests are
# nearly all requests: they are tried first (no other path can match theirs).
pages.routes.sort(key=lambda route: getattr(route, "path", None) not in TASK_PATHS)


def _flat(routes) -> list:
    """Routes with included routers flattened (they may be kept as a unit)."""
    out = []
    for route in routes:
        out.extend(_flat(route.original_router.routes) if hasattr(route, "original_router")
                   else [route])
    return out


ROUTE_LEVELS = {OPENAPI_URL + " GET,HEAD": "public"} | {
    route.path + " " + ",".join(sorted(route.methods)): dep.call.level
    for route in _flat(pages.routes) + _flat(api.router.routes)
    for dep in route.dependant.dependencies
    if hasattr(dep.call, "level")}
"""Access level of every route, read from its gate (the tests iterate it)."""


CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
       " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")


def db_threads(engine: sa.Engine) -> int:
    """Worker threads that wait on PostgreSQL at once (see :func:`blocking`):
    as many as the pool keeps connections. A request holds one connection at
    a time; more threads would open overflow connections, which the pool
    closes again when they come back (a new backend process per request)."""
    size = getattr(engine.pool, "size", None)
    return max(size() if callable(size) else 5, 1)


def create_app(engine: sa.Engine) -> FastAPI:
    """The platform on ``engine``: pages, the JSON API (schema at /api/openapi.json)
    and static files, behind the security headers."""
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        warm(engine)  # large studies' live views start computing in the background
        # The imported libraries are long-lived: keep them out of the cyclic
        # collector, whose full passes over them cost milliseconds per request.
        gc.collect()
        gc.freeze()
        with db.checkpoints_in_background(engine):
            yield

    # Only the JSON API is in the schema; the HTML pages are not an interface.
    app = FastAPI(title="clinieval", docs_url=None, redoc_url=None, openapi_url=OPENAPI_URL,
                  lifespan=lifespan)
    app.state.engine = engine
    # PostgreSQL's worker threads (see blocking()): they start with the first call
    # and, idle, end with the interpreter (uvicorn lets requests finish first).
    app.state.db_executor = ThreadPoolExecutor(db_threads(engine), "clinieval-db") \
        if engine.dialect.name == "postgresql" else None
    app.state.signer = Signer(platform_key(engine))
    app.mount("/static", StaticFiles(directory=str(HERE / "static")), name="static")
    app.include_router(pages)
    app.include_router(api.router)
    app.add_middleware(SecurityHeaders)
    app.add_exception_handler(Redirect, _redirect)
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(StarletteHTTPException, _starlette_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    return app


class SecurityHeaders:
    """Security headers on every response, and a bound on request bodies
    (:data:`MAX_BODY`), as plain ASGI middleware (the
    ``@app.middleware`` kind runs each request through an extra task and
    memory streams, a measurable cost per request)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        static = path.startswith("/static/")

        async def with_headers(message) -> None:
            if message["type"] == "http.response.start":
                scope["clinieval.answering"] = True
                headers = MutableHeaders(scope=message)
                # A route may tighten or adapt the policy (the sandboxed audit report does).
                headers.setdefault("Content-Security-Policy", CSP)
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "no-referrer"  # task tokens stay out of Referer
                headers["X-Frame-Options"] = "DENY"
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        if "\x00" in path:  # no id holds a NUL (PostgreSQL cannot even compare one)
            await JSONResponse({"error": {"message": "Not found."}}, 404)(
                scope, receive, with_headers)
            return
        # Static files read no body (and keep listening while they send).
        await self.app(scope, receive if static else _limited(scope, receive), with_headers)


MAX_BODY = 54 * 2**20
"""The largest request body: an upload's 50 MiB and the form around it. A
larger one is refused while it arrives (413), before it fills memory or disk."""


def _limited(scope, receive):
    """``receive`` refusing a body past :data:`MAX_BODY`: by its declared length
    at once, else when the bytes arrive; the route answers 413. A route that
    has begun its answer without reading the body hears a disconnect instead."""
    declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
    refuse = declared is not None and (not declared.isdigit() or len(declared) > 12
                                       or int(declared) > MAX_BODY)
    seen = 0

    async def counted():
        nonlocal seen
        if not refuse:
            message = await receive()
            seen += len(message.get("body", b""))
            if seen <= MAX_BODY:
                return message
        if scope.get("clinieval.answering"):
            return {"type": "http.disconnect"}
        raise HTTPException(413, f"The request is larger than {MAX_BODY // 2**20} MiB.")

    return counted


async def _redirect(_request: Request, exc: Redirect) -> Response:
    return RedirectResponse(exc.url, status_code=303)


async def _input_error(request: Request, exc: InputError) -> Response:
    """422, or the status the error's class names (a conflict's 409)."""
    return JSONResponse({"error": {"field": exc.field, "message": str(exc),
                                   "reason": exc.reason}},
                        status_code=getattr(exc, "status", 422))


async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    """FastAPI's 422 without the values sent: its own handler echoes them, and
    one that JSON cannot hold (NaN in a body) made it fail with a 500."""
    detail = [{k: e[k] for k in ("type", "loc", "msg") if k in e} for e in exc.errors()]
    return JSONResponse({"detail": detail}, status_code=422)


async def _starlette_error(request: Request, exc: StarletteHTTPException) -> Response:
    """Starlette's own errors (an unknown path, its form parser's refusals) as
    FastAPI answers them, but a form field over the parser's size limit,
    refused as every bad field is, naming it (only a script sends one)."""
    if (field := _oversized_field(exc)) is None:
        return await http_exception_handler(request, exc)
    return JSONResponse({"error": {"field": field, "message": f"field {field!r}: {exc.detail}",
                                   "reason": exc.detail}}, status_code=413)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    if wants_json(request):
        return JSONResponse({"error": {"message": exc.detail}}, status_code=exc.status_code)
    return templates.TemplateResponse(request, "message.html", {
        "title": "Not available", "message": exc.detail, "ctx": None}, status_code=exc.status_code)


def _oversized_field(exc: StarletteHTTPException) -> str | None:
    """The form field Starlette's parser refused as too large, or None for
    any other error. Its refusal names no field, so the name is read off the
    parser that raised it (the innermost parser on the traceback)."""
    cause = exc.__context__
    if not isinstance(cause, MultiPartException) or "maximum size" not in cause.message:
        return None
    field = "body"
    for frame, _ in traceback.walk_tb(cause.__traceback__):
        parser = frame.f_locals.get("self")
        if isinstance(parser, FormParser):
            field = unquote_plus(bytes(parser._field_name).decode("latin-1"))
        elif isinstance(parser, MultiPartParser) and hasattr(parser, "_current_part"):
            field = parser._current_part.field_name
    return field


def from_environment() -> FastAPI:
    """The platform on ``DATABASE_URL`` (migrated), for running several worker
    processes: ``uvicorn --factory --workers 2 clinieval.web.app:from_environment``."""
    from clinieval.settings import get_settings

    engine = db.make_engine(get_settings().database_url)
    db.upgrade(engine)
    return create_app(engine)
