"""Leases of running runs: who holds each one, until when by the database's clock
(docs/scale-out.md).

A process that holds a run (it started it, took it from the queue or claimed it)
keeps a row of ``run_leases``: its holder id (``host/pid/start``,
:func:`audit.writing._liveness.holder_id`), the run's fencing epoch, and
``expires_at``, the database's now plus the lease length. A thread of that process
(:class:`LeaseKeeper`) renews it every third of the lease; the row goes when the
run stops or pauses. Whether a running run is held is judged by the database's
clock (PostgreSQL ``clock_timestamp()``, SQLite's ``julianday('now')``), never by
the holder's: a host whose clock is an hour off holds its leases for their length.

A run whose lease expired (its host died, hung or was cut off) is claimed by
another process: the claim compares-and-sets the lease row it read (a renewal in
between makes it ``RunBusy``) and bumps the run's fencing epoch in the same
transaction, so every later write of the old holder is refused (``RunSuperseded``).
The old holder's keeper, finding its lease gone at its next renewal, stops renewing
it and marks the run :data:`LOST` in ``StoreCore.claim_epochs`` (its writes refused
even before they reach the row). On this host a holder whose process is gone is
judged at once (its pid and start time), as before leases.

The lease length is ``CONVERGE_LEASE_S`` (seconds, default 30) when the store opens.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import weakref
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import Connection, Double, Select, delete, insert, literal_column, select, update
from sqlalchemy.sql.elements import ColumnElement

from audit.cells import unchanged
from audit.tables import run_leases, runs
from audit.writing._liveness import holder_alive, holder_id, writer_alive
from engine.errors import RunBusy, StoreError


class Holding(Protocol):
    """What a :class:`LeaseKeeper` needs of its store (:class:`audit.core.StoreCore`)."""

    claim_epochs: dict[str, int]

    def transaction(
        self, *, write: bool = True, settle: bool = True
    ) -> AbstractContextManager[Connection]: ...


__all__ = [
    "DEFAULT_LEASE_S",
    "LEASE_ENV",
    "LOST",
    "Lease",
    "LeaseKeeper",
    "db_now",
    "grant",
    "lease_seconds",
    "read_lease",
    "release",
    "running_held",
    "with_leases",
]

log = logging.getLogger("converge.leases")

LEASE_ENV = "CONVERGE_LEASE_S"
"""The environment variable giving the lease length in seconds."""
DEFAULT_LEASE_S = 30.0
"""The lease length (seconds) without ``CONVERGE_LEASE_S``."""
LOST = -2
"""``StoreCore.claim_epochs`` of a run whose lease this process lost: its writes are refused."""

_PG_NOW = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)"
_SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"


def lease_seconds(env: Mapping[str, str] = os.environ) -> float:
    """The lease length in seconds: ``CONVERGE_LEASE_S`` or 30. ``StoreError`` when it
    is not a positive number."""
    raw = env.get(LEASE_ENV, "").strip()
    if not raw:
        return DEFAULT_LEASE_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise StoreError(f"{LEASE_ENV}={raw!r}: the lease must be a positive number of seconds")
    return seconds


def db_now(postgres: bool) -> ColumnElement[float]:
    """The database's clock in unix seconds (float), as a SQL expression."""
    return literal_column(_PG_NOW if postgres else _SQLITE_NOW, Double)


@dataclass(frozen=True, slots=True)
class Lease:
    """A lease row as read with the database's ``now`` (unix seconds)."""

    holder: str
    epoch: int
    expires_at: float
    now: float

    @property
    def held(self) -> bool:
        """Its holder still holds it: not expired by the database's clock, and not a
        process of this host that is gone."""
        return running_held(None, None, self.holder, self.expires_at, self.now)


def running_held(
    pid: int | None,
    hostname: str | None,
    holder: str | None,
    expires_at: float | None,
    now: float | None,
) -> bool:
    """Whether the writer of a ``running`` run still holds it: by its lease when it
    has one (unexpired at ``now``, the database's clock, and its holder not a dead
    process of this host), else by its pid (a run of a converge before leases)."""
    # no lease (or a lease cell no one can read, an edited row): by its pid
    if not isinstance(holder, str) or not isinstance(expires_at, int | float) or now is None:
        return writer_alive(pid, hostname)
    return expires_at > now and holder_alive(holder)


def with_leases(q: Select[Any], postgres: bool) -> Select[Any]:
    """``q`` (a select from ``runs``) with each run's lease: ``lease_holder``,
    ``lease_expires`` (None without a lease) and ``db_now``."""
    return q.add_columns(
        run_leases.c.holder.label("lease_holder"),
        run_leases.c.expires_at.label("lease_expires"),
        db_now(postgres).label("db_now"),
    ).outerjoin(run_leases, run_leases.c.run_id == runs.c.run_id)


def read_lease(conn: Connection, run_id: str) -> Lease | None:
    """The run's lease with the database's now, in ``conn``'s transaction (None: none)."""
    row = conn.execute(
        select(
            run_leases.c.holder,
            run_leases.c.epoch,
            run_leases.c.expires_at,
            db_now(conn.dialect.name == "postgresql"),
        ).where(run_leases.c.run_id == run_id)
    ).one_or_none()
    return None if row is None else Lease(row[0], int(row[1]), float(row[2]), float(row[3]))


def grant(
    conn: Connection, run_id: str, epoch: int, seconds: float, before: Lease | None = None
) -> None:
    """Take the run's lease for this process at ``epoch`` for ``seconds``, in
    ``conn``'s transaction (the caller then calls ``store.leases.hold`` once it
    committed). With
    ``before``, the lease read in this transaction, a compare-and-set: ``RunBusy``
    when it changed since (its holder renewed it), and nothing is taken."""
    now = db_now(conn.dialect.name == "postgresql")
    values = {
        "holder": holder_id(),
        "epoch": epoch,
        "expires_at": now + seconds,
        "renewed_at": now,
    }
    if before is None:
        conn.execute(delete(run_leases).where(run_leases.c.run_id == run_id))
        conn.execute(insert(run_leases).values(run_id=run_id, **values))
        return
    done = conn.execute(
        update(run_leases)
        .where(
            run_leases.c.run_id == run_id,
            *unchanged(run_leases, before, "holder", "epoch", "expires_at"),
        )
        .values(**values)
    )
    if done.rowcount != 1:
        raise RunBusy(f"run {run_id}: its holder renewed its lease first")


def release(conn: Connection, run_id: str, *, expire_at: int | None = None) -> None:
    """Give up this process's lease of the run, in ``conn``'s transaction: delete it,
    or with ``expire_at`` leave it expired at that epoch (a claim of a crashed run
    given back: another process may claim it at once)."""
    mine = (run_leases.c.run_id == run_id, run_leases.c.holder == holder_id())
    if expire_at is None:
        conn.execute(delete(run_leases).where(*mine))
    else:
        conn.execute(update(run_leases).where(*mine).values(epoch=expire_at, expires_at=0.0))


class LeaseKeeper:
    """Renews the leases this process holds, every third of ``seconds``, in a daemon
    thread started with the first lease; a lease found taken over is dropped and its
    run marked :data:`LOST` (its writes refused). A store that cannot be reached is
    tried again at the next renewal (the lease may expire meanwhile). The keeper
    refers to its store weakly: a store dropped without ``close`` ends the thread."""

    def __init__(self, store: Holding, seconds: float) -> None:
        self.seconds = seconds
        self._store = weakref.ref(store)
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()

    def hold(self, run_id: str, epoch: int) -> None:
        """Renew the lease of ``run_id`` (taken at ``epoch``) from now on."""
        with self._lock:
            self._held[run_id] = epoch
            if self._thread is None or self._pid != os.getpid():  # none yet, or forked
                self._pid = os.getpid()
                self._stop = threading.Event()
                self._thread = threading.Thread(
                    target=self._loop, name="converge-leases", daemon=True
                )
                self._thread.start()

    def drop(self, run_id: str) -> None:
        """Stop renewing the lease of ``run_id`` (it stops, pauses, or is given back)."""
        with self._lock:
            self._held.pop(run_id, None)

    def held(self) -> dict[str, int]:
        """Run id -> epoch of the leases this process renews."""
        with self._lock:
            return dict(self._held)

    def renew(self) -> list[str]:
        """Renew every lease held now; the run ids whose lease was lost (taken over)."""
        lost: list[str] = []
        me = holder_id()
        store = self._store()
        if store is None:
            return lost
        for run_id, epoch in self.held().items():
            try:
                with store.transaction(settle=False) as conn:
                    now = db_now(conn.dialect.name == "postgresql")
                    done = conn.execute(
                        update(run_leases)
                        .where(
                            run_leases.c.run_id == run_id,
                            run_leases.c.holder == me,
                            run_leases.c.epoch == epoch,
                        )
                        .values(expires_at=now + self.seconds, renewed_at=now)
                    )
            except StoreError as exc:
                log.warning("run %s: lease not renewed (%s)", run_id, exc)
                continue
            if done.rowcount == 1:
                continue
            with self._lock:
                if self._held.get(run_id) != epoch:
                    continue  # dropped meanwhile (stopped here)
                del self._held[run_id]
            store.claim_epochs[run_id] = LOST
            lost.append(run_id)
            log.warning("run %s: its lease was taken over; this process gives it up", run_id)
        return lost

    def _loop(self) -> None:
        stop = self._stop
        while not stop.wait(self.seconds / 3) and self._store() is not None:
            self.renew()

    def close(self) -> None:
        """Stop renewing (the leases held expire by themselves)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        self._thread = None
