"""``SqlRunStore``: the :class:`engine.store.RunStore` protocol on SQLAlchemy (docs/audit.md).

Every method runs in one transaction and raises ``StoreError`` when the database
fails. Event batches (one per cycle) are written with one Core ``executemany``
after the run's ``runs`` row is locked (SQLite ``BEGIN IMMEDIATE``, PostgreSQL
``SELECT ... FOR UPDATE``): the previous hash and ``seq`` come from that row, so
several writer processes can share one database and a crash never leaves half a
cycle behind.

The class is a façade: the work is done by one package per concept, each function
taking the store's shared state (:class:`audit.core.StoreCore`): :mod:`audit.schema`,
the trail (:mod:`audit.trail`: runs, events, the write path, gates, checkpoints),
the ledger and its sequencer (:mod:`audit.ledger`), :mod:`audit.queries` and
:mod:`audit.verify`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, insert, select

from audit import schema as _schema
from audit.core import StoreCore
from audit.ledger import _integration as _integration
from audit.ledger import _sequencer as _sequencer
from audit.ledger._ledger import KEY_FINGERPRINT, key_fingerprint
from audit.ledger._store_key import require_key
from audit.queries import _queries as _queries
from audit.queries._history import inherited_facts, read_history
from audit.queries._lineage import lineage_graph
from audit.queries._queries import DEFAULT_LIMIT, RunRow, StoredEvent
from audit.signing import _statements as _signing
from audit.tables import CHECKPOINT_PART_CHARS, SCHEMA_VERSION, meta
from audit.trail import _checkpoints as _checkpoints
from audit.trail import _events as _events
from audit.trail import _gates as _gates
from audit.trail import _runs as _runs
from audit.trail._chain import VerifyReport
from audit.url import read_only_sqlite, resolve_url
from audit.verify import _verify as _verify
from engine.errors import StoreError
from engine.facts import Fact
from engine.hitl import GateDecision
from engine.store import BatchItem, Claim, GateRecord, RunHeader, RunHistory, RunOutcome

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "CHECKPOINT_PART_CHARS",
    "KEY_ENV",
    "SCHEMA_VERSION",
    "WRITE_BEHIND_EVENTS",
    "SqlRunStore",
    "open_store",
]

WRITE_BEHIND_EVENTS = 1000
"""A cycle's batch this large is committed while the engine computes the next cycle:
the commit (bulk insert, WAL or network I/O) runs without the GIL on another core,
which pays for large batches; a small batch's commit costs less than a thread hop."""

KEY_ENV = "CONVERGE_AUDIT_KEY"
"""Environment variable holding the HMAC key of the chain (unset = plain sha256)."""


def _key_bytes(key: bytes | str | None) -> bytes | None:
    if key is None:
        key = os.environ.get(KEY_ENV) or None
    if key is None:
        return None
    return key.encode() if isinstance(key, str) else key


class SqlRunStore(StoreCore):
    """The audit store on any SQLAlchemy database (SQLite WAL file by default).

    Build it with :func:`open_store`. ``url`` is a SQLAlchemy URL; ``key`` the HMAC
    key of the chain (None = plain sha256). Implements :class:`engine.RunStore`
    plus queries (``runs``, ``run``, ``events``, ``facts``, ``lineage``, ``gates``)
    and ``verify``/``verify_all``. Promoted facts reach it as
    :class:`engine.store.PromotedFacts` batches (``promoted_facts_batches``), written
    in bulk by :mod:`audit.trail._writer`.
    """

    promoted_facts_batches = True
    keeps_fact_chunks = True
    write_behind_events: int | None = WRITE_BEHIND_EVENTS
    """Batches of this many events or more are committed by a writer thread (None: never)."""
    signer: _signing.Signer | None = None
    """Signs each run's final facts root (``open_store``: ``$CONVERGE_SIGNING_KEY``)."""

    def __init__(self, url: str, *, key: bytes | None = None, engine: Engine | None = None):
        # this module's part size, read per store: a test lowers it to get several parts
        super().__init__(
            url,
            key=key,
            engine=engine,
            commit=partial(_events.commit, self),
            part_chars=CHECKPOINT_PART_CHARS,
            heads=_sequencer.SEQUENCED_HEADS,
        )

    # -- the store and its key -----------------------------------------------------
    def close(self) -> None:
        """Finish the batch in flight, integrate this process's pending run heads into
        the ledger, and release the database connections."""
        self.leases.close()
        self.writer.close()
        _sequencer.stop_sequencing(self, self.signer)
        self.sql_engine.dispose()

    def ensure_schema(self) -> None:
        """Create the tables on first use; refuse a foreign or newer schema.

        Raises ``SchemaVersionError`` (another schema version) or ``StoreError``
        (tables of another application, database unreachable).
        """
        _schema.ensure_schema(self)

    def check_key(self) -> None:
        """Record the key's fingerprint in a store that has none; note a wrong or
        missing key (``verify`` then says so; a wrong key refuses to write)."""
        with self.transaction(write=False) as conn:
            stored = conn.execute(
                select(meta.c.value).where(meta.c.key == KEY_FINGERPRINT)
            ).scalar()
        self.known_fingerprint = stored
        if self.key is None or stored is not None or self.read_only:
            return
        mine = key_fingerprint(self.key)
        try:
            with self.transaction() as conn:
                conn.execute(insert(meta).values(key=KEY_FINGERPRINT, value=mine))
            self.known_fingerprint = mine
        except StoreError:
            pass  # a read-only copy, or a racing writer recorded it first

    # benchmarks/audit_bench.py writes a checkpoint directly
    def _put_checkpoint(
        self, conn: Connection, run_id: str, data: dict[str, Any] | None, blob: str | None = None
    ) -> None:
        _checkpoints.put_checkpoint(self, conn, run_id, data, blob)

    # -- RunStore --------------------------------------------------------------------
    def start_run(
        self,
        header: RunHeader,
        events: Sequence[BatchItem],
        checkpoint: dict[str, Any] | None = None,
    ) -> None:
        """Create the ``runs`` row (status ``running``, this pid/host) and write the
        first events, with ``checkpoint`` (cycle 0) in the same transaction when
        given; a queued run this process took (``audit.run_queue._queue.take_queued``)
        keeps its row.

        Raises ``StoreError`` when the run id exists already or the database fails,
        ``AuditKeyError`` (nothing written) in a keyed store without its key.
        """
        require_key(self, f"starting run {header.run_id}")
        _runs.start_run(self, header, events, checkpoint)

    def append_events(self, run_id: str, events: Sequence[BatchItem]) -> None:
        """Append one cycle's events to the run's chain, in one transaction.

        A batch of :attr:`write_behind_events` events or more is chained here and
        queued for the writer thread, which commits it while the engine computes the
        next cycles (:class:`audit.trail._background.BackgroundWriter`): a failure is raised by
        the run's next call that writes (``StoreError``), every other method waits
        for the queue first, and a crash can lose the batches still queued (crash
        recovery replays their cycles). A smaller batch is committed before this
        returns.
        """
        _events.append_events(self, run_id, events)

    def finish_run(
        self,
        run_id: str,
        events: Sequence[BatchItem],
        outcome: RunOutcome,
        checkpoint: dict[str, Any] | None = None,
    ) -> None:
        """Write the last events and the outcome; keep ``checkpoint`` (or drop a stale one).

        The checkpoint's sha256 is chained with the terminal ``run_stopped`` event,
        so that a resume can check what it loads (docs/audit.md).
        """
        _runs.finish_run(self, run_id, events, outcome, checkpoint)
        _integration.integrate_own(self, self.signer)  # the run's heads, before it exits
        if self.signer is not None:  # $CONVERGE_SIGNING_KEY: sign the final facts root
            _signing.sign_facts_root(self, self.signer, run_id)

    def save_checkpoint(
        self, run_id: str, events: Sequence[BatchItem], checkpoint: dict[str, Any]
    ) -> None:
        """Append a cycle's events and a periodic checkpoint of a running run, in one
        transaction; its sha256 is chained by a ``checkpoint_saved`` event.

        A checkpoint that refers to the fact chunks goes through the writer thread
        with its cycle's events (the engine does not wait for it: a crash before it
        is committed resumes from the checkpoint before); any other is written
        before this returns.
        """
        _events.save_checkpoint(self, run_id, events, checkpoint)

    def pause_run(
        self,
        run_id: str,
        events: Sequence[BatchItem],
        outcome: RunOutcome,
        gate: GateRecord,
        checkpoint: dict[str, Any],
    ) -> None:
        """Write the events, the pending gate and the checkpoint; status ``paused``."""
        _gates.pause_run(self, run_id, events, outcome, gate, checkpoint)
        _integration.integrate_own(self, self.signer)  # the run's heads, before it exits

    def get_gate(self, gate_id: str) -> GateRecord:
        """The gate (raises ``GateNotFound``)."""
        return _gates.get_gate(self, gate_id)

    def decide_gate(self, gate_id: str, decision: GateDecision, status: str) -> GateRecord:
        """Compare-and-set the gate from ``pending`` to ``status`` (approved/rejected/expired).

        Exactly one caller wins; the others get ``GateAlreadyDecided`` naming who
        decided it and when (ISO UTC). Raises ``GateNotFound`` for an unknown gate,
        ``AuditKeyError`` (nothing written) in a keyed store without its key.
        """
        require_key(self, f"deciding gate {gate_id}")
        return _gates.decide_gate(self, gate_id, decision, status)

    def claim_resume(
        self,
        run_id: str,
        expected_epoch: int | None = None,
        expected_seq: int | None = None,
        events: Sequence[BatchItem] = (),
    ) -> Claim:
        """Compare-and-set the run from paused/stopped (or dead-writer running) to
        ``running`` by this process with a new fencing epoch (see
        :func:`audit.trail._gates.claim_resume`); from then on this process's writes to the
        run are refused once another claim supersedes it (``RunSuperseded``).

        Raises ``RunBusy`` (another process holds it, or claimed it first),
        ``RunFinished`` (a stop that leaves nothing to do), ``RunNotFound``,
        ``AuditKeyError`` (nothing written) in a keyed store without its key.
        """
        require_key(self, f"resuming run {run_id}")
        return _gates.claim_resume(self, run_id, expected_epoch, expected_seq, events)

    def release_claim(self, claim: Claim) -> None:
        """Give back a claim whose resume could not start (see
        :func:`audit.trail._gates.release_claim`)."""
        _gates.release_claim(self, claim)

    def load_checkpoint(self, run_id: str) -> dict[str, Any]:
        """The latest checkpoint of the run; ``ResumeError`` when missing or corrupted
        (a fork's: ``ParentMissing`` when the parent whose facts it refers to is gone)."""
        return _checkpoints.load_checkpoint(
            self, run_id, lambda started: inherited_facts(self, run_id, started)[0]
        )

    def get_run_header(self, run_id: str) -> RunHeader:
        """The header the run was started with (raises ``RunNotFound``)."""
        return _runs.get_run_header(self, run_id)

    def run_history(self, run_id: str, until_cycle: int) -> RunHistory:
        """The run as recorded up to ``until_cycle``, for a fork (see
        :func:`audit.queries._history.read_history`); ``RunNotFound``, ``ResumeError``."""
        return read_history(self, run_id, until_cycle)

    # -- queries ----------------------------------------------------------------------
    def gates(self, pending: bool = False) -> list[GateRecord]:
        """HITL gates, newest first (only ``pending`` ones when asked)."""
        return _gates.list_gates(self, pending)

    def runs(
        self,
        *,
        category: str | None = None,
        kind: str | None = None,
        since: float | None = None,
        job: str | None = None,
        status: str | None = None,
        limit: int | None = DEFAULT_LIMIT,
    ) -> list[RunRow]:
        """Recorded runs, newest first, filtered by stop ``category``/``kind``, ``job``,
        ``status`` (``crashed`` included) and start time ``since`` (unix seconds).

        ``limit`` (default 100; None or 0 = all) bounds the rows read.
        """
        return _queries.list_runs(
            self, category=category, kind=kind, since=since, job=job, status=status, limit=limit
        )

    def run(self, run_id: str) -> RunRow:
        """One recorded run (raises ``RunNotFound``)."""
        return _queries.get_run(self, run_id)

    def resolve_run_id(self, text: str) -> str:
        """The full id of the run ``text`` names, in full or by a unique prefix.

        Raises ``RunNotFound`` (no such run) or ``audit.queries._queries.AmbiguousRunId``
        (a prefix of several runs' ids; the message lists them).
        """
        return _queries.resolve_run_id(self, text)

    def events(
        self,
        run_id: str,
        kinds: Sequence[str] | None = None,
        *,
        after: int = 0,
        limit: int | None = None,
    ) -> list[StoredEvent]:
        """The run's events in ``seq`` order (only ``kinds`` when given; only those
        after seq ``after``, at most ``limit`` of them)."""
        return _queries.read_events(self, run_id, kinds, after=after, limit=limit)

    def last_seq(self, run_id: str) -> int:
        """The seq of the run's last event, the batches queued for the writer thread
        included (``engine._cycle.recording.emit`` numbers a streamed run's events
        back from it). Raises ``RunNotFound`` or ``StoreError``."""
        return _events.last_seq(self, run_id)

    def facts(self, run_id: str, key: str | None = None) -> list[Fact]:
        """The run's facts in promotion order: the initial ones, then every ``fact_promoted``.

        Raises ``RunNotFound`` for an unknown run.
        """
        return _queries.read_facts(
            self, run_id, key, lambda started: inherited_facts(self, run_id, started)[0]
        )

    def lineage(self, run_id: str, fact_id: str) -> nx.DiGraph[str]:
        """The ancestors of ``fact_id`` in the run, edges parent → child (see ``audit.queries``).

        Raises ``RunNotFound`` or ``ConvergeError`` (unknown fact).
        """
        return lineage_graph(self.facts(run_id), fact_id)

    # -- verify ------------------------------------------------------------------------
    def verify(self, run_id: str) -> VerifyReport:
        """Recompute the run's chain and check against it what queries and resumes
        read: the ``runs`` row's outcome, its gates, its checkpoint and its latest
        ledger entry. The report names the first bad ``seq`` and why (a key that
        does not fit the store: ``wrong key`` / ``key required``).

        Raises ``RunNotFound`` when no ``runs`` row exists.
        """
        return _verify.verify_run(self, run_id)

    def verify_all(self) -> list[VerifyReport]:
        """Verify every run (oldest first) and the ledger: a run the ledger names but
        the store lost is reported ``run deleted``; events of no known run count as
        inserted rows; a broken ledger adds a report for ``(ledger)``."""
        return _verify.verify_all(self)

    def anchor(self) -> str:
        """The ledger head, ``seq:hash`` (HMAC-signed when the store is keyed): keep it
        outside the database; ``verify_anchor`` proves nothing before it changed."""
        return _verify.anchor(self)

    def verify_anchor(self, anchor: str) -> list[VerifyReport]:
        """:meth:`verify_all`, plus: the ledger still holds ``anchor``'s entry and its
        history. Catches a store cut back consistently (runs and ledger truncated or
        deleted together), which no chain inside the database can show.

        Raises ``ValueError`` for text that is not an anchor.
        """
        return _verify.verify_anchor(self, anchor)


def open_store(
    url: str | None = None, *, key: bytes | str | None = None, read_only: bool = False
) -> SqlRunStore:
    """Open (and on first use create) the audit store.

    ``url``: None → ``$CONVERGE_DB`` → ``converge.db`` in the current directory; a
    plain path is a SQLite file; otherwise any SQLAlchemy URL (PostgreSQL via
    ``postgresql+psycopg://``). ``key`` (or ``$CONVERGE_AUDIT_KEY``) switches the
    chain to HMAC-SHA256. Raises ``StoreError`` (bad URL, unwritable path,
    unreachable server, tables of another schema) or ``SchemaVersionError``.

    ``$CONVERGE_SIGNING_KEY`` (a writable store) signs each run's final facts root
    (``SigningKeyError`` when the file is not an Ed25519 private key).

    ``read_only``: for commands that only read; nothing is written (an existing
    SQLite file is opened read-only, so a write-protected copy, an auditor's
    archive, can be queried), and a store of an earlier schema version is read as
    it is, not upgraded (:mod:`audit.shadows`).
    """
    resolved = resolve_url(url)
    if read_only:
        resolved = read_only_sqlite(resolved) or resolved
    store = SqlRunStore(resolved, key=_key_bytes(key))
    store.read_only = read_only
    try:
        store.ensure_schema()
        store.check_key()
        store.signer = None if read_only else _signing.signer_from_env()
    except BaseException:
        store.close()
        raise
    return store
