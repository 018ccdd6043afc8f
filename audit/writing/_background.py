"""The writer thread: a run's batches are committed while the engine goes on.

:class:`BackgroundWriter` takes the batches :mod:`audit.writing._writer` chained and
hands them to the store's commit on a thread of its own (SQLite and PostgreSQL do
that work with the GIL released); :class:`SwitchInterval` shortens the
interpreter's switch interval while any writer of the process commits.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from typing import Any

from engine.errors import StoreError

SWITCH_INTERVAL_S = 0.0003
"""The interpreter's switch interval (seconds) while batches are being committed
(measured on 100k facts in 10 cycles: 0.3 ms beat 1 ms by ~6 %, and the default
5 ms by more)."""

MAX_QUEUED = 1
"""Batches waiting for the writer thread before a new one waits for room."""


class SwitchInterval:
    """The interpreter's switch interval, shortened while any writer commits and given
    back when the last one is done: it is process-wide, so writers of several stores
    count themselves in and out (each one saving and restoring it left 0.3 ms behind
    for good when two overlapped)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._users == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved, SWITCH_INTERVAL_S))
            self._users += 1

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                sys.setswitchinterval(self._saved)


_SWITCH = SwitchInterval()


class BackgroundWriter:
    """A thread that commits queued event batches while the engine goes on.

    SQLite and PostgreSQL do the work of a batch (the bulk insert, the commit) with
    the GIL released, so on a second core it overlaps the engine's next cycles.
    Batches queue up to :data:`MAX_QUEUED`; the thread takes every queued batch of
    one run at once and hands them to ``commit(run_id, items)`` as one transaction
    (a group commit: when the database is the slower side, each commit carries more
    events). A group that failed is reported to its run: its next :meth:`submit`
    or :meth:`wait` raises the ``StoreError`` (the batches queued after it are
    dropped: they were chained onto it). Safe to share between threads driving
    different runs.

    ``idle`` (optional) is work the thread does once its queue is empty, after it
    has released the waiters: the SQLite store checkpoints its WAL there, off the
    path of the run's next commit. One thread at a time does it, once more when
    batches were committed meanwhile. :meth:`close` waits for it; :meth:`settle`
    and :meth:`wait` do not.
    """

    def __init__(
        self,
        name: str,
        commit: Callable[[str, list[Any]], None],
        idle: Callable[[], None] | None = None,
    ) -> None:
        self._name = name
        self._commit = commit
        self._idle = idle
        self._queue: list[tuple[str, Any]] = []
        self._busy = False
        self._tidying = False
        self._again = False
        self._failures: dict[str, BaseException] = {}
        self._cond = threading.Condition()
        self._fast = False  # this writer holds the short switch interval (_SWITCH)

    def submit(self, run_id: str, item: Any) -> None:
        """Queue ``item`` (a batch of run ``run_id``), waiting only while the queue is
        full; raises an earlier failure of that run instead (``StoreError``).

        While batches are being committed the interpreter's switch interval is at
        most :data:`SWITCH_INTERVAL_S`: after each database call the writer waits for
        the GIL, and at the default 5 ms those waits made the writer the bottleneck.
        """
        with self._cond:
            self._raise_failure(run_id)
            while len(self._queue) >= MAX_QUEUED:
                self._cond.wait()
                self._raise_failure(run_id)
            self._queue.append((run_id, item))
            if not self._busy:
                self._busy = True
                if not self._fast:
                    self._fast = True
                    _SWITCH.enter()
                threading.Thread(target=self._drain, name=self._name).start()

    def _drain(self) -> None:
        while True:
            with self._cond:
                if not self._queue:
                    self._busy = False
                    if self._fast:
                        self._fast = False
                        _SWITCH.leave()
                    # one thread at a time does the idle work; one busy with it does
                    # it again for what was committed since it began
                    tidy = self._idle is not None and not self._tidying
                    self._again = self._tidying
                    self._tidying = self._tidying or tidy
                    self._cond.notify_all()
                    break
                run_id = self._queue[0][0]
                group: list[Any] = []
                while self._queue and self._queue[0][0] == run_id:
                    group.append(self._queue.pop(0)[1])
                self._cond.notify_all()
            try:
                self._commit(run_id, group)
            except BaseException as exc:  # kept for the run's next call, never lost
                with self._cond:
                    self._failures[run_id] = exc
                    self._queue = [q for q in self._queue if q[0] != run_id]
                    self._cond.notify_all()
        if tidy:
            self._tidy()

    def _tidy(self) -> None:
        """The idle work, after the waiters are released: the engine goes on (a new
        batch starts another thread) while this one does it."""
        assert self._idle is not None
        while True:
            with contextlib.suppress(Exception):  # housekeeping: never a run's failure
                self._idle()
            with self._cond:
                if not self._again:
                    self._tidying = False
                    self._cond.notify_all()
                    return
                self._again = False

    def _raise_failure(self, run_id: str) -> None:
        failure = self._failures.pop(run_id, None)
        if failure is None:
            return
        if isinstance(failure, StoreError):
            raise failure
        raise StoreError(f"audit write failed: {type(failure).__name__}: {failure}")

    def wait(self, run_id: str) -> None:
        """Wait until every queued batch is committed; raise what a batch of
        ``run_id`` failed with."""
        with self._cond:
            while self._busy:
                self._cond.wait()
            self._raise_failure(run_id)

    def settle(self) -> None:
        """Wait until every queued batch is committed (failures kept for their runs)."""
        with self._cond:
            while self._busy:
                self._cond.wait()

    def close(self) -> None:
        """Wait for the queued batches and the idle work (the thread ends when the
        queue is empty)."""
        with self._cond:
            while self._busy or self._tidying:
                self._cond.wait()
