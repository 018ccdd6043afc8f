"""Gate deadlines applied on time: :class:`DeadlineKeeper` (and, with
``expired``, the runs whose lease expired sent again: :class:`converge.service.
submission.ExpiredLeases`).

A pending gate past its deadline is decided by its ``on_timeout`` (a
compare-and-set: of several keepers exactly one decides it) and its run's resume
is sent to a run queue. ``converge serve`` and ``converge worker`` keep the
deadlines of their store; with neither running, ``converge gates --expire`` from
cron does the same.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import KW_ONLY, dataclass, field

from audit.store import SqlRunStore
from converge.decisions import Clock, expire_due
from converge.notifications import notify_due
from converge.service.metering import recording
from converge.service.queues import RunQueue
from converge.service.submission import ExpiredLeases
from engine import ConvergeError

log = logging.getLogger("converge.service")

KEEP_EVERY_S = 1.0
"""How often (seconds) a keeper looks for gates past their deadline."""


@dataclass(eq=False)
class DeadlineKeeper:
    """A daemon thread applying ``store``'s gate deadlines every ``every_s`` seconds,
    sending the resumes to ``queue``; with ``expired``, each pass also sends again
    the runs whose lease expired. ``tick()`` does one pass (tests call it with
    an injected ``clock``); ``start()``/``stop()`` run the thread."""

    store: SqlRunStore
    queue: RunQueue
    _: KW_ONLY
    every_s: float = KEEP_EVERY_S
    clock: Clock = time.time
    expired: ExpiredLeases | None = None
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    def tick(self) -> list[str]:
        """Decide the gates past their deadline now, then send the gate notifications
        due (:func:`converge.notifications.notify_due`); the expired gates' ids."""
        expired = expire_due(self.store, clock=self.clock, queue=self.queue)
        metrics = recording()  # the waits of the gates decided by their deadline
        for gate_id in expired:
            log.info("gate %s expired: decided by its on_timeout, run resume sent", gate_id)
            if metrics is not None:
                metrics.gate_decided(self.store.get_gate(gate_id))
        notify_due(self.store, clock=self.clock)  # gates opened, decided, expired, escalated
        return expired

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.tick()
            except ConvergeError as exc:  # a store hiccup: try again next time
                log.warning("cannot apply gate deadlines: %s", exc)
            if self.expired is not None:
                try:
                    self.expired.tick()
                except ConvergeError as exc:  # the store or the broker away: next time
                    log.warning("cannot send the runs whose lease expired: %s", exc)

    def start(self) -> DeadlineKeeper:
        """Start the thread (once); returns the keeper."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name="converge-deadlines", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread after its current pass."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
