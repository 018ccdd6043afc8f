"""Handing run messages over off the caller's path: :class:`BackgroundQueue`.

A decision answered through ``converge serve`` sends its run's resume to a broker.
Publishing there takes a round trip to the broker at best, and a connection (or a
wait for a broker that is down) at worst: none of it belongs to the answer. A
:class:`BackgroundQueue` takes the message at once and a thread of its own hands
it to the real queue (:class:`converge.workers.CeleryRunQueue`), in order, trying
again while the broker refuses. Nothing is lost with the process: the store
recorded the decision before the message was taken, and a paused run whose gate
is decided is a resume that ``converge.service.recover_runs`` sends again
(``converge worker`` at start, ``converge worker --recover``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from converge.run_queue import Action, RunQueue
from engine import ConvergeError

log = logging.getLogger("converge.service")

RETRY_S = (0.05, 5.0)
"""First and longest wait (seconds) before sending again a message the queue refused."""


class BackgroundQueue:
    """A :class:`RunQueue` whose ``send`` returns at once: a daemon thread sends each
    message to ``inner``, in the order given, waiting 0.05 s, then twice as long up
    to 5 s (``retry_s``) before trying again a message ``inner`` refused.

    ``connect`` (e.g. ``CeleryRunQueue.connect``) is called first in that thread,
    so the broker connection is made before any message, not by the first one.
    ``flush(timeout)`` waits until every message taken so far was sent (tests);
    ``close(timeout)`` sends what it can within ``timeout`` seconds, then stops and
    returns the ``(run_id, action)`` left unsent (logged: the store still has them,
    for ``converge worker --recover``).
    """

    def __init__(
        self,
        inner: RunQueue,
        *,
        connect: Callable[[], None] | None = None,
        retry_s: tuple[float, float] = RETRY_S,
    ) -> None:
        self.inner = inner
        self.retry_s = retry_s
        self._connect = connect
        self._messages: deque[tuple[str, Action]] = deque()
        self._changed = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="converge-handover", daemon=True)
        self._thread.start()

    def send(self, run_id: str, action: Action = "run") -> None:
        """Take ``(run_id, action)`` to be sent (returns at once). Raises
        ``ConvergeError`` once the queue is closed (the run stays as recorded)."""
        with self._changed:
            if self._stopping:
                raise ConvergeError(f"cannot send run {run_id}: the run queue is closed")
            self._messages.append((run_id, action))
            self._changed.notify_all()

    @property
    def pending(self) -> int:
        """Messages taken and not sent yet."""
        with self._changed:
            return len(self._messages)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every message taken so far was sent; False after ``timeout`` s."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._messages, timeout)

    def close(self, timeout: float = 3.0) -> list[tuple[str, Action]]:
        """Send what can be within ``timeout`` seconds, then stop the thread; the
        messages left unsent, oldest first."""
        self.flush(timeout)
        with self._changed:
            self._stopping = True
            left = list(self._messages)
            self._messages.clear()
            self._changed.notify_all()
        self._thread.join(timeout)
        for run_id, action in left:
            log.warning(
                "run %s (%s): not sent before stopping; `converge worker --recover` sends it",
                run_id,
                action,
            )
        return left

    def _loop(self) -> None:
        if self._connect is not None:
            try:
                self._connect()
            except Exception as exc:  # the first send tries again, with its retries
                log.warning("run queue not connected at start: %s", exc)
        wait = self.retry_s[0]
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._messages or self._stopping)
                if self._stopping:
                    return
                run_id, action = self._messages[0]
            try:
                self.inner.send(run_id, action)
            except Exception as exc:  # ConvergeError from the queue; never let the thread die
                log.warning("run %s (%s) not sent, again in %.2f s: %s", run_id, action, wait, exc)
                with self._changed:
                    self._changed.wait_for(lambda: self._stopping, wait)
                wait = min(wait * 2, self.retry_s[1])
                continue
            wait = self.retry_s[0]
            with self._changed:
                if self._messages and self._messages[0] == (run_id, action):
                    self._messages.popleft()
                self._changed.notify_all()
