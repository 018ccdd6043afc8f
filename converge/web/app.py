"""The app factory: :func:`create_app` (routers, templates, limits, error answers)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from audit.store import SqlRunStore
from converge import metrics
from converge.access import MetricsAccess
from converge.errors import LoginRequired
from converge.service import LocalRunPool, RunQueue
from converge.service.queues import reachable_by_processes
from converge.service.readiness import Readiness, store_current
from converge.web import gates, live, operations, runs, session, signed
from converge.web.auth import csrf_token, shared_secret
from converge.web.feeds import LiveRuns, StreamCaps
from converge.web.limits import FailureLimiter
from converge.web.logged import LogContext
from converge.web.sessions import SessionWatch

TEMPLATES = Path(__file__).parent / "templates"
MAX_BODY_BYTES = 64 * 1024
"""The largest request body accepted (bytes); larger ones are answered 413."""
DEFAULT_422 = "#/components/schemas/HTTPValidationError"
"""FastAPI's default 422 body, which this app never answers (see :func:`create_app`)."""


class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, whether announced or streamed."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _too_large(scope, receive, send, self.limit)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"request body over {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


async def _too_large(scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    response = JSONResponse(
        {"detail": f"request body over {limit} bytes: nothing was recorded"}, status_code=413
    )
    await response(scope, receive, send)


def _age(seconds: float) -> str:
    s = int(seconds)
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h"
    return f"{s // 86400} d"


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))
    except (OverflowError, OSError, ValueError, TypeError):  # no date (an edited cell)
        return str(ts)


def _wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/api/")


def _openapi_of(app: FastAPI) -> Callable[[], dict[str, Any]]:
    """The OpenAPI document of the JSON API (``/api/...``; the pages are for a browser).

    Each route lists the refusals it can answer with their bodies
    (``responses=answers(...)``, :mod:`converge.web.errors`): a 422 has the shape of
    :class:`~converge.web.errors.InvalidRequest`. FastAPI's default 422 (an array of
    validation errors, which this app never answers) is left out, also on routes that
    cannot answer 422 at all (a path taking any string). An optional parameter is
    documented as its type alone: a query or header is absent, never ``null``
    (``Last-Event-ID`` is an integer, not "an integer or null").
    """

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
            doc["paths"] = {p: ops for p, ops in doc["paths"].items() if p.startswith("/api/")}
            schemas = doc.get("components", {}).get("schemas", {})
            for default in ("HTTPValidationError", "ValidationError"):
                schemas.pop(default, None)
            for operation in (op for path in doc["paths"].values() for op in path.values()):
                for parameter in operation.get("parameters", []):
                    parameter["schema"] = _not_null(parameter.get("schema", {}))
                responses = operation.get("responses", {})
                body = responses.get("422", {}).get("content", {}).get("application/json", {})
                if body.get("schema") == {"$ref": DEFAULT_422}:
                    del responses["422"]
            app.openapi_schema = doc
        return app.openapi_schema

    return openapi


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` without its ``null`` alternative (``anyOf: [X, null]`` is ``X``)."""
    options = schema.get("anyOf")
    if not isinstance(options, list):
        return schema
    kept = [o for o in options if o != {"type": "null"}]
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **rest} if len(kept) == 1 else {**rest, "anyOf": kept}


def create_app(
    store: SqlRunStore,
    *,
    secret: bytes | None = None,
    clock: Callable[[], float] = time.time,
    run_queue: RunQueue | None = None,
    stream_caps: StreamCaps | None = None,
    readiness: Readiness | None = None,
    metrics_access: MetricsAccess = MetricsAccess.TOKEN,
) -> FastAPI:
    """The inbox over ``store``: pages, ``/api`` and ``/login``.

    ``secret`` keys the CSRF tokens of the forms (default: ``$CONVERGE_WEB_SECRET``,
    which the servers of one store behind a proxy share, else random per app, so
    a restart invalidates open forms); ``clock`` gives unix seconds for ages and
    deadlines (tests inject one). Bodies over 64 KiB are refused with 413.
    ``run_queue`` is where a decision sends the resume of its run (a Celery queue,
    :class:`converge.workers.CeleryRunQueue`); default: a
    :class:`converge.service.LocalRunPool` of two worker processes (threads of this
    process for an in-memory store), so a request never runs a job
    (``app.state.run_queue``). ``stream_caps``: the event streams open at once, per
    token and in all (:class:`converge.web.feeds.StreamCaps`, its defaults when None).
    ``readiness``: what ``GET /readyz`` checks (default: the store answers with the
    current schema); ``metrics_access``: who reads ``GET /metrics`` without a token
    (:mod:`converge.web.operations`).
    """
    # no Swagger UI: it loads its assets from a CDN; the schema stays at /api/openapi.json
    app = FastAPI(
        title="converge approval inbox",
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.store = store
    if run_queue is None:
        run_queue = LocalRunPool(store, in_process=not reachable_by_processes(store))
    app.state.run_queue = run_queue
    app.state.secret = secret or shared_secret() or secrets.token_bytes(32)
    app.state.limiter = FailureLimiter(store)
    app.state.clock = clock
    app.state.live = LiveRuns(store, caps=stream_caps)  # GET /api/runs/{id}/events
    app.state.sessions = SessionWatch(store, clock)  # streams end with their token
    app.state.readiness = readiness or Readiness({"store": store_current(store)})
    app.state.metrics_access = metrics_access
    app.state.queue_depth = metrics.QueueDepth(store)  # read at each scrape
    templates = Jinja2Templates(directory=str(TEMPLATES))
    templates.env.filters["age"] = _age
    templates.env.filters["when"] = _when

    def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        context.setdefault("csrf", csrf_token(request))
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    app.state.render = render

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, _exc: LoginRequired) -> Response:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target)}", status_code=303)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in exc.errors()
        ]
        message = "invalid request: " + "; ".join(problems)
        if _wants_html(request):
            return _error_page(request, 422, message)
        return JSONResponse({"detail": message, "errors": problems}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if _wants_html(request) and exc.status_code != 401:
            return _error_page(request, exc.status_code, str(exc.detail))
        body: dict[str, Any] = {"detail": exc.detail}
        if exc.status_code == 422:  # the shape of every 422 (converge.web.errors)
            body["errors"] = getattr(exc, "errors", [str(exc.detail)])
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    def _error_page(request: Request, status: int, message: str) -> Response:
        response: Response = render(
            request, "error.html", status_code=status, who=None, status=status, message=message
        )
        return response

    app.include_router(session.router)
    app.include_router(gates.router)
    app.include_router(signed.router)  # CLI-signed decisions (converge.web.signed)
    app.include_router(runs.router)
    app.include_router(live.router)
    app.include_router(operations.router)  # /healthz, /readyz, /metrics
    app.add_middleware(BodyLimit)
    app.add_middleware(LogContext)  # run, gate and person on each line (converge.logs)
    app.openapi = _openapi_of(app)  # type: ignore[method-assign]
    return app


__all__ = ["MAX_BODY_BYTES", "create_app"]
