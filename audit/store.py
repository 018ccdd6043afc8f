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
from collections.abc import Callable, Sequence
from functools import partial, wraps
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec

from sqlalchemy import Connection, Engine, insert, select

from audit import queries, schema, trail
from audit.core import StoreCore
from audit.queries import inherited_facts, lineage_graph
from audit.tables import CHECKPOINT_PART_CHARS, SCHEMA_VERSION, meta
from audit.trail import KEY_FINGERPRINT, VerifyReport
from audit.url import read_only_sqlite, resolve_url
from engine.errors import StoreError
from engine.hashing.ledger import key_fingerprint
from engine.store import BatchItem, RunOutcome

if TYPE_CHECKING:
    import networkx as nx

    from audit.signing import Signer

_P = ParamSpec("_P")
# the ledger, signing and verify rooms are imported by the methods that use them: a
# store opened to list runs never writes a head, signs or verifies

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


def _then_integrated(
    write: Callable[Concatenate[StoreCore, _P], None],
) -> Callable[Concatenate[SqlRunStore, _P], None]:
    """A store method: ``write`` (a function of :mod:`audit.trail`), then the run's
    heads integrated into the ledger before the process exits."""

    @wraps(write)
    def method(store: SqlRunStore, /, *args: _P.args, **kwargs: _P.kwargs) -> None:
        from audit.ledger import integrate_own

        write(store, *args, **kwargs)
        integrate_own(store, store.signer)

    return method


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
    in bulk by :mod:`audit.writing`.

    Each operation is its room's function, taking the store as its first argument
    (its signature and docstring there); a method is written here only where it
    composes rooms (the key checked first, the ledger's heads integrated after).
    """

    promoted_facts_batches = True
    keeps_fact_chunks = True
    write_behind_events: int | None = WRITE_BEHIND_EVENTS
    """Batches of this many events or more are committed by a writer thread (None: never)."""
    signer: Signer | None = None
    """Signs each run's final facts root (``open_store``: ``$CONVERGE_SIGNING_KEY``)."""

    def __init__(self, url: str, *, key: bytes | None = None, engine: Engine | None = None):
        # this module's part size, read per store: a test lowers it to get several parts
        super().__init__(
            url,
            key=key,
            engine=engine,
            commit=partial(trail.commit, self),
            part_chars=CHECKPOINT_PART_CHARS,
            heads=_LEDGER_HEADS,
        )

    # -- the store and its key -----------------------------------------------------
    def close(self) -> None:
        """Finish the batch in flight, integrate this process's pending run heads into
        the ledger, and release the database connections."""
        self.leases.close()
        self.writer.close()
        timing = self.ledger_timing
        if timing.runner is not None or timing.ever_recorded:  # else: nothing to stop or integrate
            from audit.ledger import stop_sequencing

            stop_sequencing(self, self.signer)
        self.sql_engine.dispose()

    ensure_schema = schema.ensure_schema

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
    _put_checkpoint = trail.put_checkpoint

    # -- RunStore (engine/store.py): the ledger's heads integrated after a run's last write
    def finish_run(
        self,
        run_id: str,
        events: Sequence[BatchItem],
        outcome: RunOutcome,
        checkpoint: dict[str, Any] | None = None,
    ) -> None:
        """:func:`audit.trail.finish_run`, then the run's heads integrated into the
        ledger before it exits, and its final facts root signed
        (``$CONVERGE_SIGNING_KEY``)."""
        from audit.ledger import integrate_own

        trail.finish_run(self, run_id, events, outcome, checkpoint)
        integrate_own(self, self.signer)
        if self.signer is not None:
            from audit.signing import sign_facts_root

            sign_facts_root(self, self.signer, run_id)

    def load_checkpoint(self, run_id: str) -> dict[str, Any]:
        """:func:`audit.trail.load_checkpoint`, a fork's inherited facts read from its
        parent (``ParentMissing`` when the parent is gone)."""
        return trail.load_checkpoint(
            self, run_id, lambda started: inherited_facts(self, run_id, started)[0]
        )

    pause_run = _then_integrated(trail.pause_run)
    start_run = trail.start_run
    append_events = trail.append_events
    save_checkpoint = trail.save_checkpoint
    get_gate = trail.get_gate
    decide_gate = trail.decide_gate
    claim_resume = trail.claim_resume
    release_claim = trail.release_claim
    get_run_header = trail.get_run_header
    run_history = queries.read_history
    last_seq = trail.last_seq

    # -- queries ----------------------------------------------------------------------
    gates = trail.list_gates
    runs = queries.list_runs
    run = queries.get_run
    resolve_run_id = queries.resolve_run_id
    events = queries.read_events
    facts = queries.read_facts

    def lineage(self, run_id: str, fact_id: str) -> nx.DiGraph[str]:
        """The ancestors of ``fact_id`` in the run, edges parent → child (see
        :func:`audit.queries.lineage_graph`). Raises ``RunNotFound`` or
        ``ConvergeError`` (unknown fact)."""
        return lineage_graph(self.facts(run_id), fact_id)

    # -- verify ------------------------------------------------------------------------
    def verify(self, run_id: str) -> VerifyReport:
        """:func:`audit.verify.verify_run`: the report of one run (``RunNotFound``)."""
        from audit.verify import verify_run

        return verify_run(self, run_id)

    def verify_all(self) -> list[VerifyReport]:
        """:func:`audit.verify.verify_all`: every run's report, then the rows no run or
        ledger accounts for."""
        from audit.verify import verify_all

        return verify_all(self)

    def anchor(self) -> str:
        """:func:`audit.verify.anchor`: the ledger head, ``seq:hash``."""
        from audit.verify import anchor

        return anchor(self)

    def verify_anchor(self, anchor: str) -> list[VerifyReport]:
        """:func:`audit.verify.verify_anchor`: :meth:`verify_all`, plus what the ledger
        no longer holds of ``anchor`` (``ValueError`` for text that is no anchor)."""
        from audit.verify import verify_anchor

        return verify_anchor(self, anchor)


class _LedgerHeads:
    """The store's :class:`audit.core.HeadLedger`: :data:`audit.ledger.SEQUENCED_HEADS`,
    imported at the first head a commit records (a store that only reads never does)."""

    def record(
        self, store: StoreCore, conn: Connection, run_id: str, last_seq: int, head: str
    ) -> None:
        from audit.ledger import SEQUENCED_HEADS

        SEQUENCED_HEADS.record(store, conn, run_id, last_seq, head)

    def recorded(self, store: StoreCore, run_id: str, last_seq: int, head: str) -> None:
        from audit.ledger import SEQUENCED_HEADS

        SEQUENCED_HEADS.recorded(store, run_id, last_seq, head)


_LEDGER_HEADS = _LedgerHeads()


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
        if not read_only:
            from audit.signing import signer_from_env

            store.signer = signer_from_env()
    except BaseException:
        store.close()
        raise
    return store
