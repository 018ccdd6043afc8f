"""Each request's log lines carry what it is about: :class:`LogContext`, the ASGI
middleware binding the run and gate of its path (and, once authenticated, its
person: :func:`converge.logs.note`) to every line logged while it is handled,
uvicorn's access line included (:mod:`converge.logs`)."""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from converge.logs import bound

__all__ = ["LogContext"]

_RUN = re.compile(r"^/(?:api/)?runs/([^/]+)")
_GATE = re.compile(r"^/(?:api/)?gates/([^/]+)")


class LogContext:
    """ASGI middleware: ``run_id`` / ``gate_id`` of ``/runs/ID...`` and ``/gates/ID...``
    (with or without ``/api``) bound to the request's log lines."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        run, gate = _RUN.match(path), _GATE.match(path)
        with bound(
            run_id=run.group(1)[:64] if run else None, gate_id=gate.group(1)[:64] if gate else None
        ):
            await self.app(scope, receive, send)
