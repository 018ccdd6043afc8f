"""``SqlRunStore``: the :class:`engine.store.RunStore` protocol on SQLAlchemy (docs/audit.md).

Every method runs in one transaction and raises ``StoreError`` when the database
fails. Event batches (one per cycle) are written with one Core ``executemany``
after the run's ``runs`` row is locked (SQLite ``BEGIN IMMEDIATE``, PostgreSQL
``SELECT ... FOR UPDATE``): the previous hash and ``seq`` come from that row, so
several writer processes can share one database and a crash never leaves half a
cycle behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import networkx as nx
from orjson import loads as _loads
from sqlalchemy import Connection, Engine, delete, func, insert, inspect, select, text, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from audit import ledger as ledger_log
from audit.chain import (
    GENESIS,
    KEYED,
    PLAIN,
    ChainRow,
    VerifyReport,
    hasher,
    verify_chain,
)
from audit.crosscheck import (
    CHECKPOINTED,
    TERMINAL,
    check_checkpoint,
    check_gates,
    check_outcome,
    checkpoint_digest,
)
from audit.ledger import (
    KEY_FINGERPRINT,
    LEDGER_HEAD,
    LEDGER_ID,
    LEDGER_SINCE,
    key_fingerprint,
    parse_anchor,
    verify_ledger,
)
from audit.lineage import lineage_graph
from audit.queries import (
    CRASHED,
    DEFAULT_LIMIT,
    RunRow,
    StoredEvent,
    run_row,
    runs_query,
    this_writer,
    writer_alive,
)
from audit.tables import (
    CHECKPOINT_PART_CHARS,
    SCHEMA_VERSION,
    TABLES,
    audit_events,
    checkpoint_parts,
    checkpoints,
    fact_chunks,
    gates,
    ledger,
    meta,
    runs,
)
from audit.url import WRITE, display_url, make_engine, read_only_sqlite, resolve_url
from audit.writer import (
    BackgroundWriter,
    BulkInserter,
    ChainedBatch,
    Prediction,
    QueuedBatch,
    chain_batch,
    fold_digest,
)
from engine.errors import (
    ConvergeError,
    GateAlreadyDecided,
    GateNotFound,
    ResumeError,
    RunBusy,
    RunNotFound,
    SchemaVersionError,
    StoreError,
)
from engine.facts import Fact, canonical_json, fact_from_dict
from engine.hitl import GateDecision
from engine.stop import stop_reason_to_dict
from engine.store import AuditEvent, BatchItem, GateRecord, PromotedFacts, RunHeader, RunOutcome

WRITE_BEHIND_EVENTS = 1000
"""A cycle's batch this large is committed while the engine computes the next cycle:
the commit (bulk insert, WAL or network I/O) runs without the GIL on another core,
which pays for large batches; a small batch's commit costs less than a thread hop."""

KEY_ENV = "CONVERGE_AUDIT_KEY"
"""Environment variable holding the HMAC key of the chain (unset = plain sha256)."""

_DECIDED = ("approved", "rejected", "expired")
_json_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _iso(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _key_bytes(key: bytes | str | None) -> bytes | None:
    if key is None:
        key = os.environ.get(KEY_ENV) or None
    if key is None:
        return None
    return key.encode() if isinstance(key, str) else key


class SqlRunStore:
    """The audit store on any SQLAlchemy database (SQLite WAL file by default).

    Build it with :func:`open_store`. ``url`` is a SQLAlchemy URL; ``key`` the HMAC
    key of the chain (None = plain sha256). Implements :class:`engine.RunStore`
    plus queries (``runs``, ``run``, ``events``, ``facts``, ``lineage``, ``gates``)
    and ``verify``/``verify_all``. Promoted facts reach it as
    :class:`engine.store.PromotedFacts` batches (``promoted_facts_batches``), written
    in bulk by :mod:`audit.writer`.
    """

    promoted_facts_batches = True
    keeps_fact_chunks = True
    write_behind_events: int | None = WRITE_BEHIND_EVENTS
    """Batches of this many events or more are committed by a writer thread (None: never)."""

    def __init__(self, url: str, *, key: bytes | None = None, engine: Engine | None = None):
        self.url = url
        self.shown = display_url(url)
        self._engine = engine if engine is not None else make_engine(url)
        self._key = key
        self._hash = hasher(key)
        self._chain = KEYED if key is not None else PLAIN
        self._pg = self._engine.dialect.name == "postgresql"
        self._inserter = BulkInserter(self._engine)
        file_sqlite = self._engine.dialect.name == "sqlite" and self._engine.url.database not in (
            None,
            "",
            ":memory:",
        )
        self._writer = BackgroundWriter(
            "converge-audit", self._commit, self._checkpoint_wal if file_sqlite else None
        )
        # per run, what the queued batches will leave: chain head, seq, facts and the
        # digest chain of its fact chunks (None: they do not tile); a prediction the
        # writer checks under the run's lock
        self._heads: dict[str, Prediction] = {}
        self._fingerprint: str | None = None

    # -- plumbing ----------------------------------------------------------------
    @contextmanager
    def _tx(self, *, write: bool = True, settle: bool = True) -> Iterator[Connection]:
        """One transaction, after the batch in flight (unless ``settle`` is false: the
        writer thread's own); database failures become ``StoreError``."""
        if settle:
            self._writer.settle()
        try:
            with self._engine.connect() as conn:
                if write:
                    conn.execution_options(**{WRITE: True})
                elif self._pg:
                    # a consistent snapshot across the statements of a read
                    conn.execution_options(isolation_level="REPEATABLE READ")
                with conn.begin():
                    yield conn
        except ConvergeError:
            raise
        except SQLAlchemyError as exc:
            cause = getattr(exc, "orig", None) or exc
            raise StoreError(f"audit store {self.shown}: {cause}".strip()) from exc

    def close(self) -> None:
        """Finish the batch in flight and release the database connections."""
        self._writer.close()
        self._engine.dispose()

    def _checkpoint_wal(self) -> None:
        """(writer thread, once its queue is empty) Copy the SQLite WAL into the
        database file with a passive checkpoint, which runs beside other writers: the
        commit that crosses ``wal_autocheckpoint`` would otherwise do it while a run
        waits (~35 ms per 100k facts, measured on W2's last commit)."""
        raw = self._engine.raw_connection()
        try:
            # on the DBAPI connection: autocommit, so no transaction pins the snapshot
            raw.driver_connection.execute("PRAGMA wal_checkpoint(PASSIVE)")  # type: ignore[union-attr]
        finally:
            raw.close()

    def _written(self, run_id: str) -> None:
        """Wait for the queued batches; raise the failure of a batch of ``run_id``
        (``StoreError``). The run's next write reads its chain head from the database."""
        self._heads.pop(run_id, None)
        self._writer.wait(run_id)

    def ensure_schema(self) -> None:
        """Create the tables on first use; refuse a foreign or newer schema.

        Raises ``SchemaVersionError`` (another schema version) or ``StoreError``
        (tables of another application, database unreachable).
        """
        try:
            # fast path: an up-to-date store answers one query (no inspection, no lock)
            with self._tx(write=False) as conn:
                if conn.execute(
                    select(meta.c.value).where(meta.c.key == "schema_version")
                ).scalar() == str(SCHEMA_VERSION):
                    return
        except StoreError:
            pass
        try:
            with self._tx() as conn:
                if self._pg:
                    conn.execute(text("SELECT pg_advisory_xact_lock(714522)"))
                self._check_and_create(conn)
        except StoreError as exc:
            if isinstance(exc, SchemaVersionError) or str(exc).startswith("cannot open"):
                raise
            msg = str(exc).removeprefix(f"audit store {self.shown}: ")
            raise StoreError(f"cannot open audit store {self.shown}: {msg}") from exc

    def _check_and_create(self, conn: Connection) -> None:
        insp = inspect(conn)
        existing = set(insp.get_table_names())
        version: str | None = None
        if meta.name in existing:
            version = conn.execute(
                select(meta.c.value).where(meta.c.key == "schema_version")
            ).scalar()
            if version == "1":
                version = self._upgrade_from_1(conn, existing)
            if version == "2":
                # version 3 adds fact_chunks (created below); checkpoints written by
                # version 2 carry their facts inline and still load
                conn.execute(
                    update(meta)
                    .where(meta.c.key == "schema_version")
                    .values(value=str(SCHEMA_VERSION))
                )
                version = str(SCHEMA_VERSION)
            if version is not None and version != str(SCHEMA_VERSION):
                raise SchemaVersionError(
                    f"audit store {self.shown} has schema version {version}; "
                    f"this converge understands version {SCHEMA_VERSION}"
                )
        for table in TABLES:
            if table.name not in existing:
                continue
            have = {c["name"] for c in insp.get_columns(table.name)}
            want = {c.name for c in table.columns}
            if have != want:
                missing = sorted(want - have)
                extra = sorted(have - want)
                raise StoreError(
                    f"cannot open audit store {self.shown}: its table {table.name!r} belongs "
                    f"to another schema (missing columns {missing or 'none'}, "
                    f"unknown columns {extra or 'none'})"
                )
        for table in TABLES:
            if table.name not in existing:
                table.create(conn)
        if version is None:
            conn.execute(insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
            conn.execute(insert(meta).values(key=LEDGER_HEAD, value=f"0:{GENESIS}"))

    def _upgrade_from_1(self, conn: Connection, existing: set[str]) -> str:
        """Version 1 had no ledger: add it; runs recorded before are not checked against it."""
        for table in (ledger, checkpoint_parts):
            if table.name not in existing:
                table.create(conn)
                existing.add(table.name)
        conn.execute(insert(meta).values(key=LEDGER_HEAD, value=f"0:{GENESIS}"))
        conn.execute(insert(meta).values(key=LEDGER_SINCE, value="1"))
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="2"))
        return "2"

    def check_key(self) -> None:
        """Record the key's fingerprint in a store that has none; note a wrong or
        missing key (``verify`` then says so; a wrong key refuses to write)."""
        with self._tx(write=False) as conn:
            stored = conn.execute(
                select(meta.c.value).where(meta.c.key == KEY_FINGERPRINT)
            ).scalar()
        self._fingerprint = stored
        if self._key is None or stored is not None:
            return
        mine = key_fingerprint(self._key)
        try:
            with self._tx() as conn:
                conn.execute(insert(meta).values(key=KEY_FINGERPRINT, value=mine))
            self._fingerprint = mine
        except StoreError:
            pass  # a read-only copy, or a racing writer recorded it first

    def _key_problem(self) -> str | None:
        """``wrong key`` / ``key required`` when the verifier's key does not fit the store."""
        stored = self._fingerprint
        if stored is None:
            return None
        if self._key is None:
            return "key required"
        if key_fingerprint(self._key) != stored:
            return "wrong key"
        return None

    # -- the write path --------------------------------------------------------------
    def _lock_run(self, conn: Connection, run_id: str) -> tuple[str, int, int, int]:
        row = conn.execute(
            select(runs.c.head_hash, runs.c.last_seq, runs.c.cycles, runs.c.facts_count)
            .where(runs.c.run_id == run_id)
            .with_for_update()
        ).one_or_none()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in audit store {self.shown}")
        return row[0], row[1], row[2], row[3]

    def _append(self, conn: Connection, run_id: str, events: Sequence[BatchItem]) -> None:
        head, seq, cycles, facts = self._lock_run(conn, run_id)
        if not events:
            return
        batch = chain_batch(run_id, events, head, seq, self._key)
        self._inserter.insert(conn, batch, facts)
        self._move_head(
            conn, run_id, batch.head, batch.seq, max(cycles, batch.top), facts + batch.promoted
        )

    def _move_head(
        self, conn: Connection, run_id: str, head: str, seq: int, cycles: int, facts: int
    ) -> None:
        """The run's new head, and what its committed events prove (so that a crashed
        run's row tells the truth); the ledger entry of the commit."""
        conn.execute(
            update(runs)
            .where(runs.c.run_id == run_id)
            .values(head_hash=head, last_seq=seq, cycles=cycles, facts_count=facts)
        )
        ledger_log.append(conn, self._hash, run_id, seq, head)

    def _outcome_values(self, outcome: RunOutcome) -> dict[str, Any]:
        """The outcome columns of a stopped or paused run. ``cycles`` and
        ``facts_count`` are left as the committed events prove them (equal to the
        outcome's, unless a failed write lost events: then the row still verifies)."""
        reason = outcome.stop_reason
        u = outcome.usage
        return {
            "status": outcome.status,
            "ended_at": outcome.ended_at,
            "stop_kind": reason.kind_code(),
            "category": reason.category.value,
            "reason": canonical_json(stop_reason_to_dict(reason)),
            "facts_root": outcome.facts_root,
            "usage": canonical_json(
                {
                    "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens,
                    "cost_usd": u.cost_usd,
                }
            ),
            "duration_ms": outcome.duration_ms,
        }

    def _checkpoint_text(self, run_id: str, data: dict[str, Any] | None) -> str | None:
        if data is None:
            return None
        try:
            text: str = _json_compact(data)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"checkpoint of run {run_id} is not JSON: {exc}") from exc
        return text

    def _append_checkpointed(
        self,
        conn: Connection,
        run_id: str,
        events: Sequence[BatchItem],
        checkpoint: dict[str, Any] | None,
    ) -> str | None:
        """Append ``events`` and return the checkpoint's text; its sha256 goes on the
        terminal event (``run_stopped`` / ``run_paused``), if ``events`` ends with one.

        A checkpoint whose ``facts`` is None refers to the run's fact chunks: the
        events are appended first (their chunk with them), then ``facts`` becomes
        ``{"count": n, "chunks": sha256 chain of the chunks' digests}``.
        """
        if checkpoint is None or checkpoint.get("facts") is not None:
            blob = self._checkpoint_text(run_id, checkpoint)
            self._append(conn, run_id, _with_digest(events, blob))
            return blob
        last = events[-1] if events else None
        terminal = isinstance(last, AuditEvent) and last.kind in TERMINAL
        self._append(conn, run_id, events[:-1] if terminal else events)
        count = int(checkpoint.get("facts_count", 0))
        blob = self._checkpoint_blob(run_id, checkpoint, self._chunks_digest(conn, run_id, count))
        if terminal:
            self._append(conn, run_id, _with_digest([last], blob))  # type: ignore[list-item]
        return blob

    def _checkpoint_blob(self, run_id: str, checkpoint: dict[str, Any], chunks: str) -> str:
        """The text of a checkpoint that refers to the run's fact chunks."""
        count = int(checkpoint.get("facts_count", 0))
        blob = self._checkpoint_text(
            run_id, {**checkpoint, "facts": {"count": count, "chunks": chunks}}
        )
        assert blob is not None
        return blob

    def _chunks_digest(self, conn: Connection, run_id: str, count: int) -> str:
        """The sha256 chain of the digests of the chunks holding facts 0..count-1;
        ``StoreError`` when they do not hold exactly those."""
        digest, at = GENESIS, 0
        rows = conn.execute(
            select(fact_chunks.c.first, fact_chunks.c.count, fact_chunks.c.digest)
            .where(fact_chunks.c.run_id == run_id, fact_chunks.c.first < count)
            .order_by(fact_chunks.c.first)
        )
        for first, n, chunk_digest in rows:
            if first != at:
                break
            digest = fold_digest(digest, chunk_digest)
            at += n
        if at != count:
            raise StoreError(
                f"audit store {self.shown}: the fact chunks of run {run_id} hold {at} of "
                f"its {count} facts; cannot checkpoint it by reference"
            )
        return digest

    def _read_chunks(self, conn: Connection, run_id: str, facts: Any) -> list[Any]:
        """The facts a checkpoint refers to (``{"count", "chunks"}``), as dicts, after
        checking the chunks against the checkpoint's digest; ``ResumeError`` if not."""
        if not isinstance(facts, dict) or not isinstance(facts.get("count"), int):
            raise ResumeError(f"corrupted checkpoint of run {run_id}: bad facts reference")
        count: int = facts["count"]
        digest, at = GENESIS, 0
        out: list[Any] = []
        rows = conn.execute(
            select(fact_chunks.c.first, fact_chunks.c.data)
            .where(fact_chunks.c.run_id == run_id, fact_chunks.c.first < count)
            .order_by(fact_chunks.c.first)
        )
        for first, data in rows:
            if first != at:
                break
            digest = fold_digest(digest, hashlib.sha256(data.encode()).hexdigest())
            out.extend(_loads(data))
            at = len(out)
        if at != count or digest != facts.get("chunks"):
            raise ResumeError(
                f"checkpoint of run {run_id} differs from the one its chain recorded (its "
                "fact chunks changed): refusing to resume from it (run `converge verify`)"
            )
        return out

    def _chunks_problem(self, conn: Connection, run_id: str, blob: str | None) -> str | None:
        """Why the fact chunks a checkpoint refers to fail its digest (None: they pass,
        or the checkpoint carries its facts)."""
        if blob is None or '"facts":{' not in blob:
            return None
        try:
            self._read_chunks(conn, run_id, json.loads(blob).get("facts"))
        except ResumeError:
            return "fact chunks differ from the checkpoint"
        return None

    def _put_checkpoint(
        self,
        conn: Connection,
        run_id: str,
        data: dict[str, Any] | None,
        blob: str | None = None,
    ) -> None:
        conn.execute(delete(checkpoints).where(checkpoints.c.run_id == run_id))
        conn.execute(delete(checkpoint_parts).where(checkpoint_parts.c.run_id == run_id))
        if data is None:
            return
        if blob is None:
            blob = self._checkpoint_text(run_id, data)
        assert blob is not None
        size = CHECKPOINT_PART_CHARS
        conn.execute(
            insert(checkpoints).values(
                run_id=run_id,
                cycle=int(data.get("cycle", 0)),
                created_at=time.time(),
                data=blob[:size],
            )
        )
        rest = [
            {"run_id": run_id, "part": i // size, "data": blob[i : i + size]}
            for i in range(size, len(blob), size)
        ]
        if rest:
            conn.execute(insert(checkpoint_parts), rest)

    def _read_checkpoint(self, conn: Connection, run_id: str) -> str | None:
        first = conn.execute(
            select(checkpoints.c.data).where(checkpoints.c.run_id == run_id)
        ).scalar()
        if first is None:
            return None
        rest = conn.execute(
            select(checkpoint_parts.c.data)
            .where(checkpoint_parts.c.run_id == run_id)
            .order_by(checkpoint_parts.c.part)
        ).scalars()
        return "".join([first, *rest])

    # -- RunStore --------------------------------------------------------------------
    def start_run(self, header: RunHeader, events: Sequence[BatchItem]) -> None:
        """Create the ``runs`` row (status ``running``, this pid/host) and write the first events.

        Raises ``StoreError`` when the run id exists already or the database fails.
        """
        if self._key is not None and self._fingerprint not in (None, key_fingerprint(self._key)):
            raise StoreError(
                f"audit store {self.shown}: wrong key (CONVERGE_AUDIT_KEY is not the key "
                "this store was written with)"
            )
        self._written(header.run_id)
        batch = chain_batch(header.run_id, events, GENESIS, 0, self._key)
        head, seq = batch.head, batch.seq
        pid, host = this_writer()
        try:
            spec = None if header.job_spec is None else _json_compact(header.job_spec)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"job spec of run {header.run_id} is not JSON: {exc}") from exc
        try:
            with self._tx() as conn:
                conn.execute(
                    insert(runs).values(
                        run_id=header.run_id,
                        job=header.job,
                        job_spec=spec,
                        suggestors=_json_compact(list(header.suggestors)),
                        status="running",
                        pid=pid,
                        hostname=host,
                        started_at=header.started_at,
                        cycles=0,
                        facts_count=_initial_facts(events),
                        chain=self._chain,
                        head_hash=head,
                        last_seq=seq,
                        parent_run_id=header.parent_run_id,
                    )
                )
                if len(batch):
                    self._inserter.insert(conn, batch, 0)
                ledger_log.append(conn, self._hash, header.run_id, seq, head)
            chunks = GENESIS if not batch.chunk else fold_digest(GENESIS, batch.chunk_row()[1])
            self._heads[header.run_id] = (head, seq, len(batch.chunk), chunks)
        except StoreError as exc:
            if isinstance(exc.__cause__, IntegrityError):
                raise StoreError(
                    f"run {header.run_id!r} already exists in audit store {self.shown}"
                ) from exc
            raise

    def append_events(self, run_id: str, events: Sequence[BatchItem]) -> None:
        """Append one cycle's events to the run's chain, in one transaction.

        A batch of :attr:`write_behind_events` events or more is chained here and
        queued for the writer thread, which commits it while the engine computes the
        next cycles (:class:`audit.writer.BackgroundWriter`): a failure is raised by
        the run's next call that writes (``StoreError``), every other method waits
        for the queue first, and a crash can lose the batches still queued (crash
        recovery replays their cycles). A smaller batch is committed before this
        returns.
        """
        if not events:
            return
        limit = self.write_behind_events
        if limit is None or sum(len(e) if type(e) is PromotedFacts else 1 for e in events) < limit:
            self._written(run_id)
            with self._tx() as conn:
                self._append(conn, run_id, events)
            return
        known = self._predict(run_id)
        batch = chain_batch(run_id, events, known[0], known[1], self._key)
        self._queue(run_id, QueuedBatch(events, batch, known[:3]), _after(known, batch))

    def _predict(self, run_id: str) -> Prediction:
        """What the run's queued batches will leave (read after they are committed
        when this process has no prediction yet)."""
        known = self._heads.get(run_id)
        if known is not None:
            return known
        self._written(run_id)
        with self._tx(write=False) as conn:
            row = conn.execute(
                select(runs.c.head_hash, runs.c.last_seq, runs.c.facts_count).where(
                    runs.c.run_id == run_id
                )
            ).one_or_none()
            if row is None:
                raise RunNotFound(f"no run {run_id!r} in audit store {self.shown}")
            try:
                chunks: str | None = self._chunks_digest(conn, run_id, row[2])
            except StoreError:
                chunks = None  # written before fact chunks, or replayed out of order
        return (row[0], row[1], row[2], chunks)

    def _queue(self, run_id: str, item: QueuedBatch, after: Prediction) -> None:
        try:
            self._writer.submit(run_id, item)
        except StoreError:
            self._heads.pop(run_id, None)
            raise
        self._heads[run_id] = after

    def _commit(self, run_id: str, items: list[QueuedBatch]) -> None:
        """(writer thread) Insert queued batches of ``run_id`` in one transaction, each
        chained after the one before (with a checkpoint, its ``checkpoint_saved``
        event and blob); chain them again if another writer moved the run meanwhile."""
        with self._tx(settle=False) as conn:
            head, seq, cycles, facts = self._lock_run(conn, run_id)
            again = (head, seq, facts) != items[0].known
            if again:
                self._heads.pop(run_id, None)
            for item in items:
                batch = item.batch
                if again:
                    batch = chain_batch(run_id, item.events, head, seq, self._key)
                self._inserter.insert(conn, batch, facts)
                head, seq = batch.head, batch.seq
                cycles = max(cycles, batch.top)
                facts += batch.promoted
                if item.checkpoint is None:
                    continue
                blob, saved = item.blob, item.saved
                if again or blob is None or saved is None:
                    count = int(item.checkpoint.get("facts_count", 0))
                    chunks = self._chunks_digest(conn, run_id, count)
                    blob = self._checkpoint_blob(run_id, item.checkpoint, chunks)
                    saved = chain_batch(
                        run_id, [_saved_event(item.checkpoint, blob)], head, seq, self._key
                    )
                self._inserter.insert(conn, saved, facts)
                head, seq = saved.head, saved.seq
                self._put_checkpoint(conn, run_id, item.checkpoint, blob)
            self._move_head(conn, run_id, head, seq, cycles, facts)

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
        self._written(run_id)
        with self._tx() as conn:
            blob = self._append_checkpointed(conn, run_id, events, checkpoint)
            conn.execute(
                update(runs).where(runs.c.run_id == run_id).values(**self._outcome_values(outcome))
            )
            self._put_checkpoint(conn, run_id, checkpoint, blob)
            if checkpoint is None:  # nothing will resume from the chunks
                conn.execute(delete(fact_chunks).where(fact_chunks.c.run_id == run_id))

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
        known = self._predict(run_id) if self.write_behind_events is not None else None
        if known is not None and known[3] is not None and checkpoint.get("facts") is None:
            batch = chain_batch(run_id, events, known[0], known[1], self._key)
            after = _after(known, batch)
            chunks = after[3]
            if int(checkpoint.get("facts_count", -1)) == after[2] and chunks is not None:
                blob = self._checkpoint_blob(run_id, checkpoint, chunks)
                saved = chain_batch(
                    run_id, [_saved_event(checkpoint, blob)], batch.head, batch.seq, self._key
                )
                item = QueuedBatch(events, batch, known[:3], checkpoint, blob, saved)
                self._queue(run_id, item, (saved.head, saved.seq, after[2], chunks))
                return
        self._written(run_id)
        with self._tx() as conn:
            written = self._append_checkpointed(conn, run_id, events, checkpoint)
            assert written is not None
            self._append(conn, run_id, [_saved_event(checkpoint, written)])
            self._put_checkpoint(conn, run_id, checkpoint, written)

    def pause_run(
        self,
        run_id: str,
        events: Sequence[BatchItem],
        outcome: RunOutcome,
        gate: GateRecord,
        checkpoint: dict[str, Any],
    ) -> None:
        """Write the events, the pending gate and the checkpoint; status ``paused``."""
        self._written(run_id)
        with self._tx() as conn:
            blob = self._append_checkpointed(conn, run_id, events, checkpoint)
            conn.execute(
                insert(gates).values(
                    gate_id=gate.gate_id,
                    run_id=gate.run_id,
                    proposal_id=gate.proposal_id,
                    proposal=_json_compact(gate.proposal),
                    suggestor=gate.suggestor,
                    summary=gate.summary,
                    cycle=gate.cycle,
                    policy=gate.policy,
                    status=gate.status,
                    opened_at=gate.opened_at or time.time(),
                    expires_at=gate.expires_at,
                    on_timeout=gate.on_timeout,
                    decided_by=gate.decided_by,
                    decided_at=gate.decided_at,
                    reason=gate.reason,
                    extra=_json_compact(gate.extra),
                )
            )
            self._put_checkpoint(conn, run_id, checkpoint, blob)
            conn.execute(
                update(runs).where(runs.c.run_id == run_id).values(**self._outcome_values(outcome))
            )

    def get_gate(self, gate_id: str) -> GateRecord:
        """The gate (raises ``GateNotFound``)."""
        with self._tx(write=False) as conn:
            row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
        if row is None:
            raise GateNotFound(f"no gate {gate_id!r} in audit store {self.shown}")
        return _gate_record(row._mapping)

    def decide_gate(self, gate_id: str, decision: GateDecision, status: str) -> GateRecord:
        """Compare-and-set the gate from ``pending`` to ``status`` (approved/rejected/expired).

        Exactly one caller wins; the others get ``GateAlreadyDecided`` naming who
        decided it and when (ISO UTC). Raises ``GateNotFound`` for an unknown gate.
        """
        if status not in _DECIDED:
            raise StoreError(f"gate status must be one of {_DECIDED}, got {status!r}")
        now = time.time()
        with self._tx() as conn:
            done = conn.execute(
                update(gates)
                .where(gates.c.gate_id == gate_id, gates.c.status == "pending")
                .values(
                    status=status, decided_by=decision.by, decided_at=now, reason=decision.reason
                )
            )
            row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
            if done.rowcount == 1 and row is not None:
                # the decision enters the run's chain in the compare-and-set's transaction
                decided = AuditEvent(
                    "gate_decided",
                    row.cycle,
                    {
                        "gate_id": gate_id,
                        "approved": decision.approved,
                        "status": status,
                        "by": decision.by,
                        "reason": decision.reason,
                        "decided_at": now,
                        **({"value": decision.value} if decision.value is not None else {}),
                    },
                    now,
                )
                self._append(conn, row.run_id, [decided])
        if row is None:
            raise GateNotFound(f"no gate {gate_id!r} in audit store {self.shown}")
        rec = _gate_record(row._mapping)
        if done.rowcount == 0:
            raise GateAlreadyDecided(gate_id, rec.status, rec.decided_by, _iso(rec.decided_at))
        return rec

    def claim_resume(self, run_id: str) -> None:
        """Compare-and-set the run from paused/stopped (or dead-writer running) to ``running``.

        Raises ``RunBusy`` when another process holds it, ``RunNotFound`` when unknown.
        """
        pid, host = this_writer()
        with self._tx() as conn:
            done = conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id, runs.c.status.in_(("paused", "stopped")))
                .values(status="running", pid=pid, hostname=host)
            )
            if done.rowcount == 0:
                row = conn.execute(
                    select(runs.c.status, runs.c.pid, runs.c.hostname).where(
                        runs.c.run_id == run_id
                    )
                ).one_or_none()
                if row is None:
                    raise RunNotFound(f"no run {run_id!r} in audit store {self.shown}")
                if row.status == "running" and not writer_alive(row.pid, row.hostname):
                    # its writer died (kill -9): take the run over, compare-and-set on the pid
                    taken = conn.execute(
                        update(runs)
                        .where(
                            runs.c.run_id == run_id,
                            runs.c.status == "running",
                            runs.c.pid == row.pid,
                            runs.c.hostname == row.hostname,
                        )
                        .values(pid=pid, hostname=host)
                    )
                    if taken.rowcount == 1:
                        return
                raise RunBusy(f"run {run_id} is {row.status}: another process is resuming it")

    def load_checkpoint(self, run_id: str) -> dict[str, Any]:
        """The latest checkpoint of the run; ``ResumeError`` when missing or corrupted."""
        with self._tx(write=False) as conn:
            blob = self._read_checkpoint(conn, run_id)
            chained = conn.execute(
                select(audit_events.c.payload)
                .where(audit_events.c.run_id == run_id, audit_events.c.kind.in_(CHECKPOINTED))
                .order_by(audit_events.c.seq.desc())
                .limit(1)
            ).scalar()
        if blob is None:
            raise ResumeError(f"run {run_id} has no checkpoint in audit store {self.shown}")
        try:
            data = json.loads(blob)
        except ValueError as exc:
            raise ResumeError(f"checkpoint of run {run_id} is not valid JSON: {exc}") from exc
        digest = None if chained is None else json.loads(chained).get("checkpoint_sha256")
        if digest != checkpoint_digest(blob):
            raise ResumeError(
                f"checkpoint of run {run_id} differs from the one its chain recorded: "
                "refusing to resume from it (run `converge verify`)"
            )
        if not isinstance(data, dict):
            raise ResumeError(f"checkpoint of run {run_id} is not a JSON object")
        if isinstance(data.get("facts"), dict):
            with self._tx(write=False) as conn:
                data["facts"] = self._read_chunks(conn, run_id, data["facts"])
            data["facts_from_chunks"] = True
        return data

    def get_run_header(self, run_id: str) -> RunHeader:
        """The header the run was started with (raises ``RunNotFound``)."""
        with self._tx(write=False) as conn:
            row = conn.execute(
                select(
                    runs.c.run_id,
                    runs.c.job,
                    runs.c.job_spec,
                    runs.c.suggestors,
                    runs.c.started_at,
                    runs.c.parent_run_id,
                ).where(runs.c.run_id == run_id)
            ).one_or_none()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in audit store {self.shown}")
        return RunHeader(
            run_id=row.run_id,
            job=row.job,
            job_spec=None if row.job_spec is None else json.loads(row.job_spec),
            suggestors=tuple(json.loads(row.suggestors)),
            started_at=row.started_at,
            parent_run_id=row.parent_run_id,
        )

    # -- queries ----------------------------------------------------------------------
    def gates(self, pending: bool = False) -> list[GateRecord]:
        """HITL gates, newest first (only ``pending`` ones when asked)."""
        q = select(gates)
        if pending:
            q = q.where(gates.c.status == "pending")
        q = q.order_by(gates.c.opened_at.desc(), gates.c.gate_id.desc())
        with self._tx(write=False) as conn:
            return [_gate_record(r._mapping) for r in conn.execute(q)]

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
        q = runs_query(
            category=category,
            kind=kind,
            since=since,
            job=job,
            status=status,
            limit=None if status in (CRASHED, "running") else limit,
        )
        with self._tx(write=False) as conn:
            rows = [run_row(r) for r in conn.execute(q)]
        if status in (CRASHED, "running"):
            rows = [r for r in rows if r.status == status]
            if limit:
                rows = rows[:limit]
        return rows

    def run(self, run_id: str) -> RunRow:
        """One recorded run (raises ``RunNotFound``)."""
        with self._tx(write=False) as conn:
            row = conn.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in audit store {self.shown}")
        return run_row(row)

    def events(self, run_id: str, kinds: Sequence[str] | None = None) -> list[StoredEvent]:
        """The run's events in ``seq`` order (only ``kinds`` when given)."""
        q = select(audit_events).where(audit_events.c.run_id == run_id)
        if kinds is not None:
            q = q.where(audit_events.c.kind.in_(list(kinds)))
        q = q.order_by(audit_events.c.seq)
        with self._tx(write=False) as conn:
            result = conn.execute(q)
            return [
                StoredEvent(r.run_id, r.seq, r.kind, r.cycle, r.ts, json.loads(r.payload), r.hash)
                for r in result
            ]

    def facts(self, run_id: str, key: str | None = None) -> list[Fact]:
        """The run's facts in promotion order: the initial ones, then every ``fact_promoted``.

        Raises ``RunNotFound`` for an unknown run.
        """
        self.run(run_id)
        out: list[Fact] = []
        for ev in self.events(run_id, kinds=("run_started", "fact_promoted")):
            if ev.kind == "run_started":
                found = [fact_from_dict(d) for d in ev.payload.get("initial_facts", [])]
            else:
                found = [fact_from_dict(ev.payload)]
            out.extend(f for f in found if key is None or f.key == key)
        return out

    def lineage(self, run_id: str, fact_id: str) -> nx.DiGraph[str]:
        """The ancestors of ``fact_id`` in the run, edges parent → child (see ``audit.lineage``).

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
        with self._tx(write=False) as conn:
            run = conn.execute(select(runs).where(runs.c.run_id == run_id)).one_or_none()
            if run is None:
                raise RunNotFound(f"no run {run_id!r} in audit store {self.shown}")
            rows = [
                ChainRow(r[0], r[1], r[2], r[3], r[4], r[5])
                for r in conn.execute(
                    select(
                        audit_events.c.seq,
                        audit_events.c.kind,
                        audit_events.c.cycle,
                        audit_events.c.ts,
                        audit_events.c.payload,
                        audit_events.c.hash,
                    )
                    .where(audit_events.c.run_id == run_id)
                    .order_by(audit_events.c.seq)
                )
            ]
            gate_rows = conn.execute(select(gates).where(gates.c.run_id == run_id)).all()
            blob = self._read_checkpoint(conn, run_id)
            in_ledger = ledger_log.check_run(conn, self._hash, run_id, run.last_seq, run.head_hash)
            chunks = self._chunks_problem(conn, run_id, blob)
        problem = self._key_problem()
        if problem is not None:
            return VerifyReport(run_id, False, len(rows), 1, problem)
        if self._fingerprint is not None and run.chain != KEYED:
            return VerifyReport(run_id, False, len(rows), 1, "chain not keyed")
        report = verify_chain(
            run_id,
            rows,
            head_hash=run.head_hash,
            last_seq=run.last_seq,
            chain=run.chain,
            key=self._key,
        )
        if not report.ok:
            return report
        for found in (
            check_outcome(run, rows),
            check_gates(gate_rows, rows),
            check_checkpoint(blob, rows),
            None if chunks is None else (run.last_seq or 1, chunks),
            None if in_ledger is None else (run.last_seq or 1, in_ledger),
        ):
            if found is not None:
                return VerifyReport(run_id, False, len(rows), found[0], found[1])
        return report

    def verify_all(self) -> list[VerifyReport]:
        """Verify every run (oldest first) and the ledger: a run the ledger names but
        the store lost is reported ``run deleted``; events of no known run count as
        inserted rows; a broken ledger adds a report for ``(ledger)``."""
        with self._tx(write=False) as conn:
            ids = list(conn.execute(select(runs.c.run_id).order_by(runs.c.started_at)).scalars())
            orphans = conn.execute(
                select(audit_events.c.run_id, func.min(audit_events.c.seq), func.count())
                .where(audit_events.c.run_id.not_in(select(runs.c.run_id)))
                .group_by(audit_events.c.run_id)
            ).all()
            state = verify_ledger(conn, self._hash)
        reports = [self.verify(run_id) for run_id in ids]
        reports.extend(VerifyReport(r[0], False, r[2], r[1], "row inserted") for r in orphans)
        known = set(ids)
        reports.extend(
            VerifyReport(run_id, False, 0, last_seq or 1, "run deleted (named by the ledger)")
            for run_id, (last_seq, _head) in state.latest.items()
            if run_id not in known
        )
        if not state.report.ok:
            reports.append(state.report)
        return reports

    def anchor(self) -> str:
        """The ledger head, ``seq:hash`` (HMAC-signed when the store is keyed): keep it
        outside the database; ``verify_anchor`` proves nothing before it changed."""
        with self._tx(write=False) as conn:
            seq, digest = ledger_log.read_head(conn)
        return f"{seq}:{digest}"

    def verify_anchor(self, anchor: str) -> list[VerifyReport]:
        """:meth:`verify_all`, plus: the ledger still holds ``anchor``'s entry and its
        history. Catches a store cut back consistently (runs and ledger truncated or
        deleted together), which no chain inside the database can show.

        Raises ``ValueError`` for text that is not an anchor.
        """
        seq, digest = parse_anchor(anchor)
        reports = self.verify_all()
        with self._tx(write=False) as conn:
            state = verify_ledger(conn, self._hash)
        if state.hashes.get(seq) != digest:
            why = (
                "ledger cut short before the anchor"
                if seq > len(state.hashes)
                else ("ledger rewritten before the anchor")
            )
            reports.append(VerifyReport(LEDGER_ID, False, len(state.hashes), seq, why))
        return reports


def _saved_event(checkpoint: dict[str, Any], blob: str) -> AuditEvent:
    """The ``checkpoint_saved`` event that chains a periodic checkpoint's sha256."""
    cycle = checkpoint.get("cycle", 0)
    return AuditEvent(
        "checkpoint_saved",
        int(cycle),
        {"cycle": cycle, "checkpoint_sha256": checkpoint_digest(blob)},
        time.time(),
    )


def _after(known: Prediction, batch: ChainedBatch) -> Prediction:
    """The prediction once ``batch`` is committed after ``known``."""
    chunks = known[3]
    if batch.chunk and chunks is not None:
        chunks = fold_digest(chunks, batch.chunk_row()[1])
    return (batch.head, batch.seq, known[2] + len(batch.chunk), chunks)


def _initial_facts(events: Sequence[BatchItem]) -> int:
    for ev in events:
        if isinstance(ev, AuditEvent) and ev.kind == "run_started":
            return len(ev.payload.get("initial_facts", ()))
    return 0


def _with_digest(events: Sequence[BatchItem], blob: str | None) -> Sequence[BatchItem]:
    """``events`` with the checkpoint's sha256 on the terminal event (the last one)."""
    last = events[-1] if events else None
    if blob is None or not isinstance(last, AuditEvent) or last.kind not in TERMINAL:
        return events
    payload = {**last.payload, "checkpoint_sha256": checkpoint_digest(blob)}
    return [*events[:-1], AuditEvent(last.kind, last.cycle, payload, last.ts)]


def _gate_record(m: Any) -> GateRecord:
    return GateRecord(
        gate_id=m["gate_id"],
        run_id=m["run_id"],
        proposal_id=m["proposal_id"],
        proposal=json.loads(m["proposal"]),
        suggestor=m["suggestor"],
        summary=m["summary"],
        cycle=m["cycle"],
        policy=m["policy"],
        status=m["status"],
        opened_at=m["opened_at"],
        expires_at=m["expires_at"],
        on_timeout=m["on_timeout"],
        decided_by=m["decided_by"],
        decided_at=m["decided_at"],
        reason=m["reason"],
        extra=json.loads(m["extra"]) if m["extra"] else {},
    )


def open_store(
    url: str | None = None, *, key: bytes | str | None = None, read_only: bool = False
) -> SqlRunStore:
    """Open (and on first use create) the audit store.

    ``url``: None → ``$CONVERGE_DB`` → ``converge.db`` in the current directory; a
    plain path is a SQLite file; otherwise any SQLAlchemy URL (PostgreSQL via
    ``postgresql+psycopg://``). ``key`` (or ``$CONVERGE_AUDIT_KEY``) switches the
    chain to HMAC-SHA256. Raises ``StoreError`` (bad URL, unwritable path,
    unreachable server, tables of another schema) or ``SchemaVersionError``.

    ``read_only``: for commands that only read; an existing SQLite file is opened
    read-only, so a write-protected copy (an auditor's archive) can be queried.
    """
    resolved = resolve_url(url)
    if read_only:
        resolved = read_only_sqlite(resolved) or resolved
    store = SqlRunStore(resolved, key=_key_bytes(key))
    try:
        store.ensure_schema()
        store.check_key()
    except BaseException:
        store.close()
        raise
    return store
