"""The runs being streamed: one reader per run, woken by the store's commits.

:class:`LiveRuns` (``app.state.live``) keeps a :class:`RunFeed` per run while it has
a stream. A feed reads the run's new events and hands them to every stream of the
run (each event encoded once for them all); between reads it sleeps until the run's
head moves. One follower per server learns which heads moved from the store itself
(:mod:`converge.web.commits`: PostgreSQL's ``LISTEN``/``NOTIFY``, SQLite's
``PRAGMA data_version``), then asks one query for the heads of the runs being
streamed: a hundred streams of paused runs cost the server next to nothing, and a
run promoting a hundred facts a second is read once per commit, however many
people watch it (docs/inbox.md, docs/performance.md's L1).

Streams are capped per token and in all (:class:`StreamCaps`): one more is answered
429 (that token's) or 503 (the server's), each with ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from functools import partial

from starlette.concurrency import run_in_threadpool

from audit.queries import StoredEvent, run_heads
from audit.store import SqlRunStore
from converge.errors import TooManyStreams
from converge.web.commits import CommitWatch, commit_watch
from engine import ConvergeError
from engine.status import RunStatus

__all__ = [
    "BATCH",
    "POLL_S",
    "LiveEvent",
    "LiveRuns",
    "RunFeed",
    "Sent",
    "StreamCaps",
    "Subscriber",
    "sse_bytes",
]

POLL_S = 0.025
"""How often (seconds) SQLite's change counter is looked at (PostgreSQL notifies)."""
SAFETY_S = 30.0
"""A feed reads its run at least this often (seconds) even when told of no commit
(the store tells of every commit: this is only a net)."""
BATCH = 500
"""Events read per query at most (a long run's backlog comes in several)."""
log = logging.getLogger("converge.web")


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """One event of a run as the streams send it: the stored event and its JSON
    (``StoredEvent.to_dict``), encoded once for every stream of the run."""

    event: StoredEvent
    text: str


class Sent:
    """What one read handed out, and its Server-Sent Events encoded once (bytes) for
    every stream that sees all of it: a stream sends a read as one write."""

    def __init__(self, events: list[LiveEvent]) -> None:
        self.events = events
        self._wire: dict[int, bytes] = {}

    def wire(self, after: int) -> bytes:
        """The events after seq ``after``, encoded (cached per ``after``: the streams
        of a run mostly stand at the same seq)."""
        found = self._wire.get(after)
        if found is None:
            found = self._wire[after] = b"".join(
                sse_bytes(e) for e in self.events if e.event.seq > after
            )
        return found


def sse_bytes(live: LiveEvent, text: str | None = None) -> bytes:
    """One event on the wire: ``id:`` its seq, ``event:`` its kind, ``data:`` its JSON
    (``text`` in place of the stored one: as a person who may not read a gate sees it)."""
    data = live.text if text is None else text
    return f"id: {live.event.seq}\r\nevent: {live.event.kind}\r\ndata: {data}\r\n\r\n".encode()


@dataclass(eq=False)
class Subscriber:
    """One stream of a run: the seq it has sent up to, and its queue of batches
    (``None``: the run stopped, the stream ends; a string: an error to send)."""

    last: int
    digest: str = ""
    queue: asyncio.Queue[tuple[int, Sent] | str | None] = field(default_factory=asyncio.Queue)


@dataclass(frozen=True, slots=True)
class StreamCaps:
    """At most ``per_token`` streams open with one token (or session), and
    ``total`` in all; ``retry_after_s``: what a refused client is told to wait."""

    per_token: int = 32
    total: int = 2000
    retry_after_s: int = 5


_ENDS = ("run_stopped", "fact_redacted")
"""The kinds that may be a stopped run's last event: its stop, or a redaction
chained after it (audit.redaction), which a stream ends after as well."""


class RunFeed:
    """The one reader of a run's new events, for every :class:`Subscriber` of it.

    Each read takes the events after the least seq its subscribers sent (at most
    :data:`BATCH`), hands each subscriber those it has not sent, and after a
    ``run_stopped`` (or a ``fact_redacted`` chained after it) that is the last event
    of a stopped run ends them all; then it waits to be
    woken (:meth:`wake`: the run's head moved), or :data:`SAFETY_S`.
    """

    def __init__(self, store: SqlRunStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.subscribers: set[Subscriber] = set()
        self.task: asyncio.Task[None] | None = None
        self.seen = 0  # the last seq read
        self._woken = asyncio.Event()

    def wake(self) -> None:
        """The run's head moved: read it now."""
        self._woken.set()

    async def read(self) -> None:
        """Read and hand out until no subscriber is left or the run stopped."""
        while self.subscribers:
            after = min(s.last for s in self.subscribers)
            self._woken.clear()
            try:
                events = await run_in_threadpool(
                    partial(self.store.events, self.run_id, after=after, limit=BATCH)
                )
                stopped = bool(events) and events[-1].kind in _ENDS
                if stopped:  # unless it was resumed since
                    row = await run_in_threadpool(self.store.run, self.run_id)
                    stopped = row.status == RunStatus.STOPPED and row.last_seq == events[-1].seq
            except ConvergeError as exc:
                self._end(f"cannot read the events of run {self.run_id}: {exc}")
                return
            if events:
                self.seen = max(self.seen, events[-1].seq)
            self._hand_out(after, Sent([LiveEvent(e, _json(e)) for e in events]))
            if stopped:
                last = events[-1].seq
                for sub in [s for s in self.subscribers if s.last >= last]:
                    sub.queue.put_nowait(None)
                    self.subscribers.discard(sub)
                continue
            if len(events) < BATCH and self.subscribers:
                with contextlib.suppress(TimeoutError):  # read at least every SAFETY_S
                    await asyncio.wait_for(self._woken.wait(), SAFETY_S)

    def _hand_out(self, after: int, sent: Sent) -> None:
        """Each subscriber gets ``(its last seq before, sent)``: the events of ``sent``
        after that seq are its to send."""
        if not sent.events:
            return
        top = sent.events[-1].event.seq
        for sub in list(self.subscribers):
            if sub.last < after or sub.last >= top:  # joined during the read / has them
                continue
            sub.queue.put_nowait((sub.last, sent))
            sub.last = top

    def _end(self, message: str | None) -> None:
        for sub in self.subscribers:
            if message is not None:
                sub.queue.put_nowait(message)
            sub.queue.put_nowait(None)
        self.subscribers.clear()


def _json(event: StoredEvent) -> str:
    return json.dumps(event.to_dict(), separators=(",", ":"))


class LiveRuns:
    """The feeds of the runs being streamed (``app.state.live``): one per run while
    it has a stream, woken by one follower of the store's commits."""

    def __init__(
        self,
        store: SqlRunStore,
        poll_s: float = POLL_S,
        caps: StreamCaps | None = None,
        watch: CommitWatch | None = None,
    ) -> None:
        self.store = store
        self.poll_s = poll_s
        self.caps = caps or StreamCaps()
        self.feeds: dict[str, RunFeed] = {}
        self._watch = watch
        self._follower: asyncio.Task[None] | None = None
        self._open: dict[str, int] = {}  # streams per token hash

    def subscribe(self, run_id: str, after: int, digest: str = "") -> Subscriber:
        """A new stream of ``run_id`` from after seq ``after`` by the token of hash
        ``digest`` (its feed started if need be), admitted by :meth:`check_room`."""
        feed = self.feeds.get(run_id)
        if feed is None or feed.task is None or feed.task.done():
            feed = self.feeds[run_id] = RunFeed(self.store, run_id)
        sub = Subscriber(after, digest)
        feed.subscribers.add(sub)
        feed.wake()  # its backlog now, not at the run's next commit
        self._open[digest] = self._open.get(digest, 0) + 1
        if feed.task is None:
            feed.task = asyncio.get_running_loop().create_task(feed.read())
            feed.task.add_done_callback(partial(self._gone, run_id, feed))
        if self._follower is None or self._follower.done():
            self._follower = asyncio.get_running_loop().create_task(self._follow())
        return sub

    def check_room(self, digest: str) -> None:
        """Raise :class:`TooManyStreams` when one more stream of the token of hash
        ``digest`` would pass the caps."""
        caps = self.caps
        if sum(self._open.values()) >= caps.total:
            raise TooManyStreams(
                503,
                f"this server streams {caps.total} runs' events already: try again later",
                caps.retry_after_s,
            )
        if self._open.get(digest, 0) >= caps.per_token:
            raise TooManyStreams(
                429,
                f"this token has {caps.per_token} streams open already: close one first",
                caps.retry_after_s,
            )

    def unsubscribe(self, run_id: str, sub: Subscriber) -> None:
        """The stream ended (its run stopped, its client left, the server shuts down)."""
        feed = self.feeds.get(run_id)
        if feed is not None:
            feed.subscribers.discard(sub)
            feed.wake()  # a feed left with nobody ends now, not at its next commit
        left = self._open.get(sub.digest, 0) - 1
        if left > 0:
            self._open[sub.digest] = left
        else:
            self._open.pop(sub.digest, None)

    def _gone(self, run_id: str, feed: RunFeed, _task: asyncio.Task[None]) -> None:
        if self.feeds.get(run_id) is feed:
            del self.feeds[run_id]

    async def _follow(self) -> None:
        """Wake the feeds whose run's head moved, until no feed is left."""
        if self._watch is None:
            self._watch = await run_in_threadpool(commit_watch, self.store, self.poll_s)
        watch = self._watch
        while self.feeds:
            changed = await watch.changed(SAFETY_S)
            feeds = [f for r, f in list(self.feeds.items()) if changed is None or r in changed]
            if not feeds:
                continue
            try:
                heads = await run_in_threadpool(run_heads, self.store, [f.run_id for f in feeds])
            except ConvergeError as exc:  # the store hiccups: the feeds read on their own
                log.warning("live: cannot read the runs' heads: %s", exc)
                continue
            for feed in feeds:
                head = heads.get(feed.run_id)
                if head is None or head > feed.seen:
                    feed.wake()

    def close(self) -> None:
        """Stop following the store (the server shuts down)."""
        if self._watch is not None:
            self._watch.close()
