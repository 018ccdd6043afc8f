"""Who integrates the pending run heads into the ledger, and when (docs/audit.md, "The
ledger's integration delay").

Every commit that moves a run's head calls :func:`record_head` in its own
transaction. Without a delay (SQLite's default) it appends the head to the ledger
there (:func:`audit.ledger._integration.append_inline`). With one (PostgreSQL), it
inserts the head into ``ledger_pending``, locking nothing but the run's row, so
the commits of different runs never wait for each other, and starts this
process's :class:`LedgerSequencer` on its first head.

A :class:`LedgerSequencer` is a daemon thread running passes
(:func:`audit.ledger._integration.integrate`). On PostgreSQL one process leads a store's
sequencing at a time: the one whose sequencer holds a session advisory lock on
``(LEADER_LOCK, hashtext(current_schema()))``. The leader runs a pass every
``delay`` (a read first: nothing pending, nothing written); the others try to
take the lead every :data:`FOLLOW_S`, so that a leader that exits or is killed
is replaced within that. ``converge serve`` and ``converge worker`` start one
(:func:`start_sequencing`, signing each batch's head with the store's key); a
process that commits starts its own, which leads when none does and stops after
:data:`IDLE_S` without a head of its own. The thread holds the store weakly. On SQLite with
a delay every process's sequencer runs its passes. Each process also runs a pass
at the end of a run or pause and when it closes the store
(:func:`audit.ledger._integration.integrate_own`): none exits leaving its heads behind.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from contextlib import suppress

from sqlalchemy import Connection, func, insert, select
from sqlalchemy.exc import SQLAlchemyError

from audit.core import StoreCore
from audit.ledger._integration import append_inline, integrate, integrate_own, pending_count
from audit.signing import Signer
from audit.tables import ledger_pending
from engine.errors import StoreError

__all__ = [
    "FOLLOW_S",
    "IDLE_S",
    "LEADER_LOCK",
    "SEQUENCED_HEADS",
    "LedgerSequencer",
    "SequencedHeads",
    "head_recorded",
    "record_head",
    "start_sequencing",
    "stop_sequencing",
]

log = logging.getLogger("converge.audit")

LEADER_LOCK = 714525
"""The first key of the advisory lock held by the store's leading sequencer."""

FOLLOW_S = 1.0
"""How often (seconds) a sequencer that does not lead tries to take the lead."""

IDLE_S = 30.0
"""A committing process's sequencer stops after this many seconds without a head of
its own (and gives the lead up: another takes it within :data:`FOLLOW_S`)."""


_RECORD = insert(ledger_pending)
"""The one statement a commit adds (built once: a commit compiles nothing new)."""


def record_head(store: StoreCore, conn: Connection, run_id: str, last_seq: int, head: str) -> None:
    """The run's new head (its ``last_seq`` and hash), in the commit's transaction:
    appended to the ledger now (delay 0), or pending for the sequencer."""
    timing = store.ledger_timing
    if timing.inline:
        append_inline(store, conn, run_id, last_seq, head)
        return
    conn.execute(
        _RECORD,
        {"run_id": run_id, "last_seq": last_seq, "head": head, "committed_at": timing.clock()},
    )
    head_recorded(store, run_id, last_seq, head)


def head_recorded(store: StoreCore, run_id: str, last_seq: int, head: str) -> None:
    """The run's new head was inserted into ``ledger_pending`` (by :func:`record_head`,
    or by the commit's own statement: :mod:`audit.trail._head_cas`): this process's
    sequencer is started on its first head and woken after ``timing.batch`` of them
    (the head's run, ``last_seq`` and hash are for whoever watches the heads)."""
    timing = store.ledger_timing
    timing.recorded += 1
    timing.ever_recorded = True
    if not timing.background:
        return
    runner = timing.runner
    if not isinstance(runner, LedgerSequencer) or not runner.running(store):
        start_sequencing(store, getattr(store, "signer", None), idle_s=IDLE_S)
    elif timing.recorded >= timing.batch:
        runner.wake()


def start_sequencing(
    store: StoreCore, signer: Signer | None = None, *, idle_s: float | None = None
) -> LedgerSequencer:
    """This process's sequencer of ``store``, started unless one runs, signing each
    batch's head with ``signer`` when given. With ``idle_s`` it stops once this
    process recorded no head for that long (a committing process's; the next head
    starts it again); without, it runs until stopped (``converge serve``, a worker)."""
    timing = store.ledger_timing
    with timing.lock:
        runner = timing.runner
        if isinstance(runner, LedgerSequencer) and runner.running(store):
            if signer is not None:
                runner.signer = signer
            if idle_s is None:
                runner.idle_s = None
            return runner
        started = LedgerSequencer(store, signer=signer, idle_s=idle_s).start()
        timing.runner, timing.runner_pid = started, os.getpid()
        return started


def stop_sequencing(store: StoreCore, signer: Signer | None = None) -> None:
    """(``close``) Stop this process's sequencer and integrate the heads it left."""
    timing = store.ledger_timing
    with timing.lock:
        runner, timing.runner = timing.runner, None
    if runner is not None and timing.runner_pid == os.getpid():
        runner.stop()
    integrate_own(store, signer)


class LedgerSequencer:
    """A daemon thread running the store's passes every ``every_s`` seconds
    (default: the store's delay; 1 s for a store integrating inline, where only
    heads left by processes with a delay can wait) while it leads (see the module's
    docstring), signing each batch's head with ``signer`` when given. ``tick()``
    does one turn (tests call it); ``start()``/``stop()`` run the thread, as
    :class:`converge.service.DeadlineKeeper`. The thread holds the store weakly: a
    store dropped without ``close()`` is not kept alive by it (nor its connections),
    and its thread ends.
    """

    def __init__(
        self,
        store: StoreCore,
        *,
        signer: Signer | None = None,
        every_s: float | None = None,
        follow_s: float = FOLLOW_S,
        idle_s: float | None = None,
    ) -> None:
        self._store = weakref.ref(store)
        self.idle_s = idle_s
        self._active = time.monotonic()
        self._pid = os.getpid()
        self.signer = signer
        delay = store.ledger_timing.delay
        self.every_s = every_s if every_s is not None else (delay if delay > 0 else 1.0)
        self.follow_s = follow_s
        self._lead: Connection | None = None
        self._tried = -float("inf")
        self._turn = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def store(self) -> StoreCore:
        """The store sequenced; ``StoreError`` once it was dropped."""
        store = self._store()
        if store is None:
            raise StoreError("the store of this ledger sequencer is gone")
        return store

    def leading(self) -> bool:
        """True while this sequencer leads the store's passes (on SQLite, always);
        one that does not tries to take the lead at most every ``follow_s``."""
        if not self.store.is_postgres or self._lead is not None:
            return True
        now = time.monotonic()
        if now - self._tried < self.follow_s:
            return False
        self._tried = now
        conn: Connection | None = None
        try:
            conn = self.store.sql_engine.connect()
            lock = func.pg_try_advisory_lock(LEADER_LOCK, func.hashtext(func.current_schema()))
            got = bool(conn.execute(select(lock)).scalar())
            conn.commit()  # the session keeps the lock, no transaction stays open
        except SQLAlchemyError as exc:
            log.warning("ledger sequencer: cannot take the lead: %s", exc)
            got = False
        if got:
            self._lead = conn
            return True
        if conn is not None:
            conn.close()
        return False

    def resign(self) -> None:
        """Give the lead up (closing its session releases the advisory lock)."""
        conn, self._lead = self._lead, None
        if conn is not None:
            with suppress(SQLAlchemyError):
                conn.invalidate()  # never back to the pool still holding the lock

    def running(self, store: StoreCore) -> bool:
        """True while this sequencer's thread runs, for ``store``, in this process
        (not a forked copy's)."""
        thread = self._thread
        return (
            self._store() is store
            and self._pid == os.getpid()
            and thread is not None
            and thread.is_alive()
            and not self._stop.is_set()
        )

    def tick(self) -> int:
        """One turn: when leading, a pass if a head is pending; the heads integrated."""
        with self._turn:
            timing = self.store.ledger_timing
            if timing.recorded:
                self._active = time.monotonic()
            timing.recorded = 0
            if not self.leading() or not pending_count(self.store):
                return 0
            return integrate(self.store, wait=False, signer=self.signer) or 0

    def wake(self) -> None:
        """Take the next turn now."""
        self._wake.set()

    def _loop(self) -> None:
        # no local reference to the store across a wait: a dropped store ends the loop
        while not self._stop.is_set() and self._store() is not None:
            try:
                wait = self.every_s if self.leading() else self.follow_s
            except StoreError:
                break
            self._wake.wait(wait)
            self._wake.clear()
            if self._stop.is_set() or self._store() is None:
                break
            try:
                self.tick()
            except StoreError as exc:  # a store hiccup: the heads wait for the next turn
                log.warning("ledger sequencer pass failed: %s", exc)
                self.resign()
            if self.idle_s is not None and time.monotonic() - self._active > self.idle_s:
                break  # nothing of this process's for a while: the next head restarts it
        if not self._stop.is_set():
            self._stop.set()
            self.resign()

    def start(self) -> LedgerSequencer:
        """Start the thread (once); returns the sequencer."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="converge-ledger", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread after its current turn, integrate what is pending, and give
        the lead up."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        try:
            if pending_count(self.store):
                integrate(self.store, wait=True, signer=self.signer)
        except StoreError as exc:
            log.warning("ledger sequencer: last pass failed: %s", exc)
        finally:
            self.resign()


class SequencedHeads:
    """The store's :class:`audit.core.HeadLedger`: each head through
    :func:`record_head` / :func:`head_recorded` (looked up when called, so that a
    test may watch them)."""

    def record(
        self, store: StoreCore, conn: Connection, run_id: str, last_seq: int, head: str
    ) -> None:
        record_head(store, conn, run_id, last_seq, head)

    def recorded(self, store: StoreCore, run_id: str, last_seq: int, head: str) -> None:
        head_recorded(store, run_id, last_seq, head)


SEQUENCED_HEADS = SequencedHeads()
"""The one :class:`SequencedHeads` (it keeps no state: the store holds its timing)."""
