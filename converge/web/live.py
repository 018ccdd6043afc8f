"""Live runs: ``GET /api/runs/{id}/events``, a run's events as Server-Sent Events.

Every recorded event of the run from the first (or after ``Last-Event-ID`` /
``?after=SEQ``), then each new one as it is committed, by whichever process
writes the run (a worker, this server's pool, a CLI on the same store): ``id:``
is its seq, ``event:`` its kind, ``data:`` its JSON (``StoredEvent.to_dict``). A
keep-alive comment goes every :data:`KEEP_ALIVE_S`; the stream stays open
across a pause, its decision and the resume, and ends after the run's stop. A
stopped run with nothing left to send after the seq asked for is answered
``204 No Content``: an ``EventSource`` reconnecting after the end of the stream
stops there (WHATWG HTML, server-sent events), rather than every 3 s forever.

New events are read from the store by one reader per run, shared by every stream
of that run and woken by the store's commits (:mod:`converge.web.feeds`); streams
are capped per token (429) and in all (503), with ``Retry-After``.
sse-starlette ends the streams when uvicorn shuts down, so that a stream never holds
``converge serve`` past SIGTERM (docs/inbox.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from audit.people import Principal, token_hash
from audit.store import SqlRunStore
from converge.access import Action, Person, check, event_as_seen, gate_view, person_of, run_view
from converge.errors import TooManyStreams
from converge.web.asking import ask_run
from converge.web.auth import BEARER, SESSION_COOKIE, api_principal, checked_token, store_of
from converge.web.errors import Problem, answers, http_error
from converge.web.feeds import LiveEvent, LiveRuns, Sent, sse_bytes
from converge.web.sessions import SessionWatch
from engine import ConvergeError
from engine.status import RunStatus
from engine.store import EVENT_KINDS

__all__ = ["KEEP_ALIVE_S", "LIVE_KINDS", "router"]

KEEP_ALIVE_S = 15
"""Seconds between the keep-alive comments of an idle stream."""
MAX_SEQ = 2**62
"""The largest seq a client may name (a database integer)."""

LIVE_KINDS = (*EVENT_KINDS, "gate_comment")
"""Every ``event:`` a stream may send (the run page listens to each)."""

router = APIRouter()
log = logging.getLogger("converge.web")


@dataclass(frozen=True)
class Viewer:
    """Who follows a stream: the person (role, groups) and the hash of the token or
    session that authenticated them (the stream ends with it)."""

    person: Person
    digest: str


async def stream_viewer(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Viewer:
    """The bearer token's person, or the page's session (an ``EventSource`` sends
    the cookie, never a header); 401 with neither."""
    cookie = request.cookies.get(SESSION_COOKIE)
    who: Principal
    if (credentials is None or not credentials.credentials.strip()) and cookie:
        token = cookie
        who = await checked_token(request, cookie, "api")
    else:
        token = "" if credentials is None else credentials.credentials.strip()
        who = await api_principal(request, credentials)
    return Viewer(person_of(who), token_hash(token))


class GateReading:
    """Which gates of one run a person may not read, learnt as their events come
    (a gate's rules are recorded when it opens; looked up once per gate)."""

    def __init__(self, store: SqlRunStore, run_id: str, person: Person) -> None:
        self.store = store
        self.run = run_view(store, run_id)
        self.person = person
        self.known: dict[str, bool] = {}

    def new_gates(self, batch: list[LiveEvent]) -> bool:
        """Whether ``batch`` names a gate not looked up yet."""
        return any(
            (g := _named_gate(e.event.payload)) is not None and g not in self.known for e in batch
        )

    def hidden(self, batch: list[LiveEvent]) -> set[str]:
        """The gates named in ``batch`` (and before) this person may not read."""
        if not self.new_gates(batch):
            return self._hidden()
        for live in batch:
            gate_id = _named_gate(live.event.payload)
            if gate_id is not None and gate_id not in self.known:
                try:
                    view = gate_view(self.store.get_gate(gate_id), self.run)
                    self.known[gate_id] = check(self.person, Action.READ_GATE, view).allowed
                except ConvergeError:  # not recorded (yet): nothing of it is shown
                    self.known[gate_id] = False
        return self._hidden()

    def _hidden(self) -> set[str]:
        return {g for g, readable in self.known.items() if not readable}


def _named_gate(payload: Any) -> str | None:
    """The gate an event's payload is about (its own ``gate_id``, or its stop
    reason's), None when it names none."""
    if not isinstance(payload, dict):
        return None
    for place in (payload, payload.get("reason")):
        if isinstance(place, dict) and isinstance(place.get("gate_id"), str):
            return str(place["gate_id"])
    return None


def _wire(after: int, sent: Sent, hidden: set[str]) -> bytes:
    """The events of ``sent`` after seq ``after`` as this stream's person may see
    them: the read's shared bytes when nothing of it is hidden from them."""
    if not hidden:
        return sent.wire(after)
    out = []
    for live in sent.events:
        if live.event.seq > after:
            seen = event_as_seen(live.event.to_dict(), hidden)
            text = json.dumps(seen, separators=(",", ":")) if seen.get("restricted") else None
            out.append(sse_bytes(live, text))
    return b"".join(out)


async def _events(
    live: LiveRuns, sessions: SessionWatch, run_id: str, after: int, viewer: Viewer
) -> AsyncIterator[ServerSentEvent | bytes]:
    sub = live.subscribe(run_id, after, viewer.digest)  # admitted by the route already
    ended = sessions.watch(viewer.digest)
    gates = GateReading(live.store, run_id, viewer.person)
    try:
        while not ended.is_set():
            got = asyncio.ensure_future(sub.queue.get())
            gone = asyncio.ensure_future(ended.wait())
            await asyncio.wait((got, gone), return_when=asyncio.FIRST_COMPLETED)
            gone.cancel()
            if not got.done():
                got.cancel()
                return  # the token was revoked or expired: the stream ends now
            item = got.result()
            if item is None:
                return
            if isinstance(item, str):
                yield ServerSentEvent(data=json.dumps({"detail": item}), event="stream_error")
                continue
            after, sent = item
            if gates.new_gates(sent.events):  # a gate's rules are read once, off the loop
                hidden = await run_in_threadpool(gates.hidden, sent.events)
            else:
                hidden = gates.hidden(sent.events)
            yield _wire(after, sent, hidden)
    finally:
        sessions.unwatch(viewer.digest, ended)
        live.unsubscribe(run_id, sub)
        log.info(
            "stream of run %s closed", run_id,
            extra={"event": "stream_closed", "run_id": run_id, "person": viewer.person.name},
        )  # fmt: skip


RUN_EVENT: dict[str, Any] = {
    "type": "object",
    "title": "RunEvent",
    "description": "A stored event of the run, as `converge events --json` prints it.",
    "properties": {
        "run_id": {"type": "string"},
        "seq": {"type": "integer", "minimum": 1},
        "kind": {"type": "string"},
        "cycle": {"type": "integer", "minimum": 0},
        "ts": {"type": "number"},
        "payload": {"type": "object"},
        "hash": {"type": "string"},
    },
    "required": ["run_id", "seq", "kind", "cycle", "ts", "payload", "hash"],
}
"""The ``data:`` of an event of the stream (:meth:`audit.queries.StoredEvent.to_dict`)."""
STREAM_ERROR: dict[str, Any] = {
    "type": "object",
    "title": "StreamError",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
"""The ``data:`` of a ``stream_error`` event (the run's events cannot be read)."""
SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "title": "ServerSentEvent",
    "description": (
        "One event of the stream (OpenAPI 3.1: the schema of each event, not of the "
        "body): `event` its kind, `id` its seq, `data` its JSON."
    ),
    "properties": {
        "event": {"enum": [*LIVE_KINDS, "stream_error"]},
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"anyOf": [RUN_EVENT, STREAM_ERROR]},
        },
    },
    "required": ["event", "data"],
}
"""What the document says of each event of a stream."""

STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "Server-Sent Events: `id:` the event's seq, `event:` its kind, `data:` its JSON "
            "(run_id, seq, kind, cycle, ts, payload, hash); a keep-alive comment every 15 s; "
            "the stream ends after the run's stop (a reconnect then gets 204)."
        ),
        "content": {"text/event-stream": {"schema": SSE_EVENT}},
    },
    204: {
        "description": (
            "The run stopped and has no event after the seq asked for (`Last-Event-ID` "
            "or `after`): nothing more will come, and an `EventSource` stops reconnecting."
        )
    },
    **answers(401, 403, 404, 422),
    429: {
        "model": Problem,
        "description": "Too many failed sign-ins from this client, or this token has as "
        "many streams open as it may: wait for `Retry-After` seconds.",
        "headers": {"Retry-After": {"description": "Seconds", "schema": {"type": "string"}}},
    },
    503: {
        "model": Problem,
        "description": "This server streams as many runs' events as it may: try again after "
        "`Retry-After` seconds.",
        "headers": {"Retry-After": {"description": "Seconds", "schema": {"type": "string"}}},
    },
}


@router.get("/api/runs/{run_id}/events", response_class=EventSourceResponse, responses=STREAM_DOC)
async def api_run_events(
    request: Request,
    run_id: str,
    viewer: Annotated[Viewer, Depends(stream_viewer)],
    after: Annotated[
        int | None, Query(ge=0, le=MAX_SEQ, description="Only the events after this seq.")
    ] = None,
    last_event_id: Annotated[
        int | None,
        Header(
            alias="Last-Event-ID",
            ge=0,
            le=MAX_SEQ,
            description="A reconnecting EventSource's last seq (wins over `after`).",
        ),
    ] = None,
) -> Response:
    """The run's events as they are committed (404 unknown run; 403 a run its job
    hides from this person), as Server-Sent Events, each as this person may see it
    (a gate they may not read: its events cut to its existence and status); the
    bearer token, or the page's session cookie. 204 for a stopped run with nothing
    after ``start``: the end of its stream was sent already. The stream ends
    within a second or two of its token's revocation or expiry."""
    store = store_of(request)
    start = last_event_id if last_event_id is not None else (after or 0)

    def allowed() -> Any:
        ask_run(request, viewer.person, Action.FOLLOW_RUN, run_id)
        return store.run(run_id)

    try:
        row = await run_in_threadpool(allowed)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    live: LiveRuns = request.app.state.live
    if row.status == RunStatus.STOPPED and start >= row.last_seq:
        return Response(status_code=204)
    try:
        live.check_room(viewer.digest)
    except TooManyStreams as exc:
        raise HTTPException(
            exc.status, str(exc), headers={"Retry-After": str(exc.retry_after_s)}
        ) from exc
    sessions: SessionWatch = request.app.state.sessions
    log.info(
        "stream of run %s opened after seq %d", run_id, start,
        extra={"event": "stream_opened", "person": viewer.person.name},
    )  # fmt: skip
    return EventSourceResponse(_events(live, sessions, run_id, start, viewer), ping=KEEP_ALIVE_S)
