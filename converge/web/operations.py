"""The operator's routes: ``GET /healthz``, ``GET /readyz`` and ``GET /metrics``
(docs/operations.md).

- ``/healthz``: the process answers (``ok``); a liveness probe;
- ``/readyz``: ``ready``, or 503 ``not ready`` while the store does not answer with
  the current schema, the run pool or broker is unusable, or the server is
  stopping (from SIGTERM on, before it stops taking requests); a readiness probe.
  Both act for nobody (:data:`converge.access.PUBLIC_ROUTES`) and say one word:
  why a check failed goes to the server's log only;
- ``/metrics``: the Prometheus text (:mod:`converge.metrics`), summed over the
  server's pool processes; who reads it is ``converge serve --metrics``'s
  setting (:class:`converge.access.MetricsAccess`): by default an admin's token,
  asked of the access policy (:attr:`~converge.access.Action.READ_METRICS`).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials
from starlette.concurrency import run_in_threadpool

from converge import metrics
from converge.access import STORE, Action, MetricsAccess, metrics_open, person_of
from converge.service.readiness import Readiness
from converge.web.asking import ask_on, client_of
from converge.web.auth import BEARER, SESSION_COOKIE, api_principal, page_principal
from converge.web.errors import http_error
from engine import ConvergeError

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", response_class=PlainTextResponse, include_in_schema=False)
async def healthz() -> PlainTextResponse:
    """Liveness: ``ok`` while the process answers."""
    return PlainTextResponse("ok\n", headers={"Cache-Control": "no-store"})


@router.get("/readyz", response_class=PlainTextResponse, include_in_schema=False)
async def readyz(request: Request) -> PlainTextResponse:
    """Readiness: ``ready`` (200) or ``not ready`` (503), nothing more."""
    readiness: Readiness = request.app.state.readiness
    ready = await run_in_threadpool(readiness.ready)
    return PlainTextResponse(
        "ready\n" if ready else "not ready\n",
        status_code=200 if ready else 503,
        headers={"Cache-Control": "no-store"},
    )


@router.get("/metrics", include_in_schema=False)
async def metrics_text(request: Request) -> Response:
    """The Prometheus text of every family; open to whom ``--metrics`` says, else an
    admin's bearer token or signed-in session (401 without either, 403 another
    role's, in the access log)."""
    access: MetricsAccess = request.app.state.metrics_access
    if not metrics_open(access, client_of(request)):
        credentials: HTTPAuthorizationCredentials | None = await BEARER(request)
        if credentials is None and request.cookies.get(SESSION_COOKIE):
            who = await page_principal(request)  # an admin signed in on the pages
        else:
            who = await api_principal(request, credentials)
        try:
            await run_in_threadpool(ask_on, request, person_of(who), Action.READ_METRICS, STORE)
        except ConvergeError as exc:
            raise http_error(exc) from exc
    body = await run_in_threadpool(metrics.exposition, request.app.state.queue_depth)
    return Response(body, media_type=metrics.CONTENT_TYPE)
