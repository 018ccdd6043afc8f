"""What the parts of the audit store share: the database, the chain's key, the
writer thread and the chain heads its queued batches will leave.

:class:`StoreCore` holds that state, and runs one transaction at a time
(``transaction``). :class:`audit.store.SqlRunStore` is built on it; the functions of the
concept packages (``audit.trail``, ``audit.ledger``, ``audit.queries``, ``audit.verify``...)
take it as their first argument, so none of them imports the façade.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, Table, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from audit.testing import after_write_commit
from audit.url import WRITE, display_url, make_engine
from audit.writing import (
    BackgroundWriter,
    BulkInserter,
    LeaseKeeper,
    Prediction,
    QueuedBatch,
    lease_seconds,
    ledger_timing,
)
from engine.errors import ConvergeError, StoreError
from engine.hashing.chain import KEYED, PLAIN, hasher

json_compact: Callable[[Any], str] = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False
).encode
"""Compact JSON text (no spaces, non-ASCII kept) of the values the store keeps as text."""

PENDING_FOLDS = "converge_chunk_folds"
"""The key of ``Connection.info`` under which a transaction keeps the chunk folds it
computed (run id -> facts count, digest chain), kept by the store once it commits."""


CHAIN_FORMAT_ENV = "CONVERGE_CHAIN_FORMAT"
"""The chain format (``1``, ``2``) of new runs in a store whose setting was never set."""

SIGNING_KEY_ENV = "CONVERGE_SIGNING_KEY"
"""Environment variable naming the Ed25519 private key file (unset: nothing is signed);
:mod:`audit.signing` reads it, here so that naming it imports no signing room."""

CHAIN_FORMAT_KEY = "setting:chain-format"
"""The ``converge_meta`` key of the store's chain format for new runs (``1``, ``2``)."""


class StoreCore:
    """The state of one audit store on a SQLAlchemy engine (see :class:`audit.store.SqlRunStore`).

    ``url`` is shown (password hidden) in every error; ``key`` is the HMAC key of
    the chain (None = plain sha256); ``commit(run_id, batches)`` is what the writer
    thread runs for the batches queued by ``append_events`` / ``save_checkpoint``;
    ``part_chars`` the size of one stored part of a checkpoint's text.
    """

    write_behind_events: int | None
    """Batches of this many events or more are committed by the writer thread (None: never)."""

    def __init__(
        self,
        url: str,
        *,
        key: bytes | None,
        engine: Engine | None,
        commit: Callable[[str, list[QueuedBatch]], None],
        part_chars: int,
        heads: HeadLedger,
    ) -> None:
        self.url = url
        self.shown = display_url(url)
        self.sql_engine = engine if engine is not None else make_engine(url)
        """The SQLAlchemy engine of the database (its pool of connections)."""
        self.key = key
        """The HMAC key of the chain (None: plain sha256). A secret: never logged,
        shown or put in a repr."""
        self.chain_hash = hasher(key)
        """The chain function ``(prev_hash, message) -> hex hash`` of ``key``."""
        self.chain_kind = KEYED if key is not None else PLAIN
        """The chain's label a run row records: ``"hmac-sha256"`` or ``"sha256"``."""
        self.is_postgres = self.sql_engine.dialect.name == "postgresql"
        """Whether the database is PostgreSQL (else SQLite)."""
        self.ledger_timing = ledger_timing(self.is_postgres)
        """When run heads reach the ledger: inline, or pending for a sequencer (a test
        may replace it)."""
        self.part_chars = part_chars
        self.heads = heads
        """Where each commit's new run head goes (the ledger's sequencing)."""
        """Characters in one stored part of a checkpoint's text."""
        self.inserter = BulkInserter(self.sql_engine)
        """Inserts a batch's event rows in bulk."""
        db_url = self.sql_engine.url
        file_sqlite = db_url.get_backend_name() == "sqlite" and db_url.database not in (
            None,
            "",
            ":memory:",
        )
        self.writer = BackgroundWriter(
            "converge-audit", commit, self._checkpoint_wal if file_sqlite else None
        )
        """The thread committing the batches queued by large cycles."""
        self.predicted_heads: dict[str, Prediction] = {}
        """Per run id, what its queued batches will leave: chain head, seq, facts and
        the digest chain of its fact chunks (None: they do not tile); a prediction the
        writer checks under the run's lock."""
        # the feature tables (ensure_tables) known to exist in this store
        self._ready_tables: set[str] = set()
        self.known_fingerprint: str | None = None
        """The key fingerprint the store records, as far as this object knows (None:
        not known to be keyed; ``audit.trail._store_key`` reads it again before refusing)."""
        self.run_heads: dict[str, tuple[str, int, int]] = {}
        """Per run id, the chain head, last seq and facts count this process last wrote
        to its ``runs`` row (maybe in a transaction that rolled back): what
        :mod:`audit.trail._head_cas` compares-and-sets against; dropped when the run stops or
        pauses, so a long-lived process keeps only the runs it is writing."""
        self.chunk_folds: dict[str, tuple[int, str]] = {}
        """Per run id this process writes, the facts count and the digest chain of the
        fact chunks holding them, as a committed transaction last read or wrote them: a
        periodic checkpoint folds only the chunks after it (:func:`audit.trail._checkpoints.
        chunks_digest`); dropped with :attr:`run_heads`."""
        self.claim_epochs: dict[str, int] = {}
        """Per run id this process writes, the fencing epoch of its claim (start_run:
        0); a write finding another epoch in the run's row is refused (RunSuperseded)."""
        self.taken_runs: set[str] = set()
        """Queued run ids this process took (audit.run_queue._queue): start_run fills their row."""
        self.leases = LeaseKeeper(self, lease_seconds())
        """The leases of the runs this process holds, renewed (audit.writing._lease)."""
        self.read_only = False
        """Opened only to read (``open_store(read_only=True)``): the schema is never
        created or upgraded, a missing table is an empty shadow (:mod:`audit.shadows`)."""
        self.read_version = 0
        """The schema version of a store opened to read (0: not read yet)."""
        self.writable = True
        """Whether the store could be written (False, found when opened to read: a
        write-protected SQLite file, a PostgreSQL role that may only ``SELECT``)."""
        self._chain_format: int | None = None

    def reread_settings(self) -> None:
        """Forget the settings this object read (a setting was just changed)."""
        self._chain_format = None

    @property
    def fact_commitments(self) -> bool:
        """Whether runs started on this store chain their facts through salted
        commitments (chain format 2, the ``chain-format`` setting: docs/audit-format.md),
        which redaction needs; a store whose setting was never set takes
        ``$CONVERGE_CHAIN_FORMAT``. Read once per store object; the engine asks at
        each start (``engine._cycle.start``)."""
        if self._chain_format is None:
            self._chain_format = 1
            try:
                with self.transaction(write=False) as conn:
                    value = conn.execute(
                        text("SELECT value FROM converge_meta WHERE key = :k"),
                        {"k": CHAIN_FORMAT_KEY},
                    ).scalar()
            except StoreError:
                value = None
            if value is None:  # never set: $CONVERGE_CHAIN_FORMAT, else format 1
                value = os.environ.get(CHAIN_FORMAT_ENV)
            if value == "2":
                self._chain_format = 2
        return self._chain_format == 2

    def forget_run(self, run_id: str) -> None:
        """Drop what this process kept of the run's writes (its last head, its chunk
        fold): the run stopped or paused here, and its next write, here or elsewhere,
        reads them from the database again."""
        self.run_heads.pop(run_id, None)
        self.chunk_folds.pop(run_id, None)

    def leg_ended(self, run_id: str) -> None:
        """The run stopped or paused here (or was only recorded here, for a worker):
        :meth:`forget_run`, and this process holds no claim on it any more, so its
        later writes to it (a decision, a comment) are not fenced as a stale leg's;
        a resume here claims it again."""
        self.forget_run(run_id)
        self.claim_epochs.pop(run_id, None)

    @contextmanager
    def transaction(
        self, *, write: bool = True, settle: bool = True, single: bool = False
    ) -> Iterator[Connection]:
        """A context manager yielding the ``Connection`` of one transaction, committed
        on exit, begun after the batch in flight (unless ``settle`` is false: the
        writer thread's own). ``write=False`` is a read (on PostgreSQL one REPEATABLE
        READ snapshot). ``single`` (with ``write=False``): a read of one statement,
        which is its own snapshot: on PostgreSQL it runs in autocommit, one round
        trip instead of three (no ``BEGIN``, no ``COMMIT``). Database failures become
        ``StoreError``."""
        if settle:
            self.writer.settle()
        try:
            with self.sql_engine.connect() as conn:
                if write:
                    conn.execution_options(**{WRITE: True})
                elif self.is_postgres and single:
                    # one statement sees one snapshot: nothing to begin or commit
                    conn.execution_options(isolation_level="AUTOCOMMIT")
                elif self.is_postgres:
                    # a consistent snapshot across the statements of a read
                    conn.execution_options(isolation_level="REPEATABLE READ")
                try:
                    with conn.begin():
                        yield conn
                finally:  # conn.info outlives the checkout: never left for the next one
                    folds = conn.info.pop(PENDING_FOLDS, None)
                if folds:  # committed: what the transaction folded holds
                    self.chunk_folds.update(folds)
            if write:
                after_write_commit()
        except ConvergeError:
            raise
        except SQLAlchemyError as exc:
            cause = getattr(exc, "orig", None) or exc
            raise StoreError(f"audit store {self.shown}: {cause}".strip()) from exc

    def ensure_tables(
        self,
        tables: Sequence[Table],
        lock_id: int,
        upgrade: Callable[[Connection], None] | None = None,
        upgraded: Callable[[Connection], bool] | None = None,
    ) -> None:
        """Create the missing ``tables`` of a feature (the inbox, the run service,
        notifications...) on first use, once per store object, then ``upgrade`` (add
        the columns a later converge gave them). They are outside the schema version:
        a store made before the feature gains them when it is first used.
        ``upgraded`` tells, reading, whether ``upgrade`` has nothing left to do: tables
        already there and upgraded are only read, so that a command's first write
        is its own (a read-only store stays readable). ``lock_id`` (a PostgreSQL
        advisory lock) makes two processes creating them at once wait for each other.
        Raises ``StoreError`` when the database fails.
        """
        ready = self._ready_tables
        names = frozenset(t.name for t in tables)
        if names <= ready:
            return
        if self.read_only:  # what the store lacks is shadowed (audit.shadows): nothing to write
            ready |= names
            return
        with self.transaction(write=False) as conn:
            inspector = inspect(conn)
            there = all(inspector.has_table(t.name) for t in tables)
            if there and (upgrade is None or (upgraded is not None and upgraded(conn))):
                ready |= names
                return
        with self.transaction() as conn:
            if self.is_postgres:
                conn.execute(text(f"SELECT pg_advisory_xact_lock({int(lock_id)})"))
            for table in tables:
                table.create(conn, checkfirst=True)
            if upgrade is not None:
                upgrade(conn)
        ready |= names

    def has_table(self, name: str) -> bool:
        """Whether the feature table ``name`` exists (asked once it does)."""
        if name in self._ready_tables:
            return True
        with self.transaction(write=False, single=True) as conn:
            found = inspect(conn).has_table(name)
        if found:
            self._ready_tables.add(name)
        return found

    def _checkpoint_wal(self) -> None:
        """(writer thread, once its queue is empty) Copy the SQLite WAL into the
        database file with a passive checkpoint, which runs beside other writers: the
        commit that crosses ``wal_autocheckpoint`` would otherwise do it while a run
        waits (~35 ms per 100k facts, measured on the last commit of a 100k-fact run)."""
        raw = self.sql_engine.raw_connection()
        try:
            # on the DBAPI connection: autocommit, so no transaction pins the snapshot
            raw.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # type: ignore[union-attr]
        finally:
            raw.close()

    def wait_written(self, run_id: str) -> None:
        """Wait for the queued batches; raise the failure of a batch of ``run_id``
        (``StoreError``). The run's next write reads its chain head from the database."""
        self.predicted_heads.pop(run_id, None)
        self.writer.wait(run_id)


class HeadLedger(Protocol):
    """Where a commit's new run head goes: the ledger's sequencing
    (:class:`audit.ledger.SequencedHeads`), plugged in by the store, so that the
    write path never imports the sequencer."""

    def record(
        self, store: StoreCore, conn: Connection, run_id: str, last_seq: int, head: str
    ) -> None:
        """The run's new head (its ``last_seq`` and hash), in the commit's transaction."""

    def recorded(self, store: StoreCore, run_id: str, last_seq: int, head: str) -> None:
        """The run's new head was inserted by the commit's own statement."""
