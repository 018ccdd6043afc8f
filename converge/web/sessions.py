"""Open sessions end with their token: a stream or a page session whose token is
revoked (``converge token revoke``) or expires is ended within
:data:`CHECK_S` seconds, whatever it is doing.

One :class:`SessionWatch` per app (``app.state.sessions``) checks every distinct
token of the open streams in one query a tick (``audit.people.still_valid``), so
a thousand streams of ten people cost ten hashes a second, not a thousand queries.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool

from audit.people import still_valid
from audit.store import SqlRunStore

__all__ = ["CHECK_S", "SessionWatch"]

CHECK_S = 1.0
"""Seconds between two checks of the open sessions' tokens."""


class SessionWatch:
    """The tokens of the open streams, checked every ``check_s`` seconds; each
    stream waits on the :class:`asyncio.Event` :meth:`watch` gives it, set once its
    token no longer authenticates."""

    def __init__(
        self, store: SqlRunStore, clock: Callable[[], float], check_s: float = CHECK_S
    ) -> None:
        self.store = store
        self.clock = clock
        self.check_s = check_s
        self._ended: dict[str, set[asyncio.Event]] = {}
        self._task: asyncio.Task[None] | None = None

    def watch(self, digest: str) -> asyncio.Event:
        """An event set when the token of hash ``digest`` is revoked or expires."""
        ended = asyncio.Event()
        self._ended.setdefault(digest, set()).add(ended)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._check())
        return ended

    def unwatch(self, digest: str, ended: asyncio.Event) -> None:
        """The stream of ``ended`` is over."""
        waiting = self._ended.get(digest)
        if waiting is not None:
            waiting.discard(ended)
            if not waiting:
                del self._ended[digest]

    async def _check(self) -> None:
        while self._ended:
            await asyncio.sleep(self.check_s)
            digests = set(self._ended)
            with contextlib.suppress(Exception):  # a store hiccup ends nobody's session
                valid = await run_in_threadpool(still_valid, self.store, digests, self.clock())
                for digest in digests - valid:
                    for ended in self._ended.pop(digest, set()):
                        ended.set()
