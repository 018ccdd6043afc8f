"""The write path: append chained event batches to a run, now or through the writer thread.

A batch is appended after the run's ``runs`` row is locked (SQLite ``BEGIN
IMMEDIATE``, PostgreSQL ``SELECT ... FOR UPDATE``): the previous hash and ``seq``
come from that row, so several writer processes can share one database. The
rows are built by :func:`audit.writing._writer.chain_batch` and inserted in bulk by the
store's :class:`audit.writing._writer.BulkInserter`; every commit moves the run's head and
appends a ledger entry. On PostgreSQL a small batch chained after the head this
process last wrote goes in one statement instead (:mod:`audit.trail._head_cas`), the
locking write taking over when the row moved.

A large batch (and a periodic checkpoint referring to the fact chunks) is chained
here against the head the queued batches will leave (a *prediction*) and
committed by the writer thread (:func:`commit`), which chains it again if another
writer moved the run meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Row, select, update

from audit.core import StoreCore
from audit.tables import runs
from audit.trail._checkpoints import (
    checkpoint_blob,
    checkpoint_text,
    chunks_digest,
    put_checkpoint,
    saved_event,
    with_digest,
)
from audit.trail._head_cas import append_known
from audit.trail._kinds import TERMINAL
from audit.writing import LOST, ChainedBatch, Prediction, QueuedBatch, chain_batch
from engine.errors import RunNotFound, RunSuperseded, StoreError
from engine.hashing.checkpoint import fold_digest
from engine.store import AuditEvent, BatchItem, PromotedFacts


def locked_run_row(
    store: StoreCore, conn: Connection, run_id: str, *columns: ColumnElement[Any]
) -> Row[Any]:
    """The run's ``runs`` row (``columns`` of it), locked for this transaction
    (``SELECT ... FOR UPDATE``; SQLite's ``BEGIN IMMEDIATE`` already holds the
    database); ``RunNotFound`` when there is none."""
    row = conn.execute(
        select(*columns).where(runs.c.run_id == run_id).with_for_update()
    ).one_or_none()
    if row is None:
        raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
    return row


def lock_run(store: StoreCore, conn: Connection, run_id: str) -> tuple[str, int, int, int]:
    """Lock the run's row for this transaction: its head hash, last seq, cycles and
    facts (``RunNotFound`` when there is none).

    The fence: when this process holds a claim on the run (``store.claim_epochs``), the
    row's epoch must still be that claim's, else ``RunSuperseded`` and nothing of
    the transaction is written. Every write of a run's events goes through here.
    """
    row = locked_run_row(
        store,
        conn,
        run_id,
        runs.c.head_hash,
        runs.c.last_seq,
        runs.c.cycles,
        runs.c.facts_count,
        runs.c.epoch,
    )
    held = store.claim_epochs.get(run_id)
    if held == -1:
        raise RunSuperseded(
            f"run {run_id!r} already exists in audit store {store.shown} (another run "
            "holds this id): this run's writes to it are refused"
        )
    if held == LOST:
        raise RunSuperseded(
            f"run {run_id}: this process lost its lease (another process claimed the run): "
            "its writes to it are refused"
        )
    if held is not None and row.epoch != held:
        raise RunSuperseded(
            f"run {run_id} was claimed by another process (epoch {row.epoch}, this process "
            f"holds {held}): this process's writes to it are refused"
        )
    return row.head_hash, row.last_seq, row.cycles, row.facts_count


def append(store: StoreCore, conn: Connection, run_id: str, events: Sequence[BatchItem]) -> None:
    """Chain ``events`` after the run's head and insert them, in ``conn``'s transaction."""
    head, seq, cycles, facts = lock_run(store, conn, run_id)
    if not events:
        return
    batch = chain_batch(run_id, events, head, seq, store.key)
    store.inserter.insert(conn, batch, facts)
    move_head(
        store, conn, run_id, batch.head, batch.seq, max(cycles, batch.top), facts + batch.promoted
    )


def move_head(
    store: StoreCore, conn: Connection, run_id: str, head: str, seq: int, cycles: int, facts: int
) -> None:
    """The run's new head, and what its committed events prove (so that a crashed
    run's row tells the truth); the ledger entry of the commit (pending for the
    sequencer, or inline: :func:`audit.ledger._sequencer.record_head`)."""
    conn.execute(
        update(runs)
        .where(runs.c.run_id == run_id)
        .values(head_hash=head, last_seq=seq, cycles=cycles, facts_count=facts)
    )
    store.heads.record(store, conn, run_id, seq, head)
    store.run_heads[run_id] = (head, seq, facts)


def append_checkpointed(
    store: StoreCore,
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
        blob = checkpoint_text(run_id, checkpoint)
        append(store, conn, run_id, with_digest(events, blob))
        return blob
    last = events[-1] if events else None
    terminal = isinstance(last, AuditEvent) and last.kind in TERMINAL
    append(store, conn, run_id, events[:-1] if terminal else events)
    count = int(checkpoint.get("facts_count", 0))
    blob = checkpoint_blob(run_id, checkpoint, chunks_digest(store, conn, run_id, count))
    if terminal:
        append(store, conn, run_id, with_digest([last], blob))  # type: ignore[list-item]
    return blob


def append_events(store: StoreCore, run_id: str, events: Sequence[BatchItem]) -> None:
    """Append one cycle's events to the run's chain, in one transaction.

    A batch of ``store.write_behind_events`` events or more is chained here and
    queued for the writer thread, which commits it while the engine computes the
    next cycles (:class:`audit.writing.BackgroundWriter`): a failure is raised by
    the run's next call that writes (``StoreError``), every other method waits for
    the queue first, and a crash can lose the batches still queued (crash recovery
    replays their cycles). A smaller batch is committed before this returns."""
    if not events:
        return
    limit = store.write_behind_events
    if limit is None or sum(len(e) if type(e) is PromotedFacts else 1 for e in events) < limit:
        store.wait_written(run_id)
        if append_known(store, run_id, events):  # PostgreSQL: one statement, one round trip
            return
        with store.transaction() as conn:
            append(store, conn, run_id, events)
        return
    known = predict(store, run_id)
    batch = chain_batch(run_id, events, known[0], known[1], store.key)
    _queue(store, run_id, QueuedBatch(events, batch, known[:3]), _after(known, batch))


def save_checkpoint(
    store: StoreCore, run_id: str, events: Sequence[BatchItem], checkpoint: dict[str, Any]
) -> None:
    """Append a cycle's events and a periodic checkpoint, chained by a
    ``checkpoint_saved`` event: queued for the writer thread when the checkpoint
    refers to the fact chunks the prediction knows (the engine does not wait for
    it: a crash before it is committed resumes from the checkpoint before), else
    written before this returns."""
    known = predict(store, run_id) if store.write_behind_events is not None else None
    if known is not None and known[3] is not None and checkpoint.get("facts") is None:
        batch = chain_batch(run_id, events, known[0], known[1], store.key)
        after = _after(known, batch)
        chunks = after[3]
        if int(checkpoint.get("facts_count", -1)) == after[2] and chunks is not None:
            blob = checkpoint_blob(run_id, checkpoint, chunks)
            saved = chain_batch(
                run_id, [saved_event(checkpoint, blob)], batch.head, batch.seq, store.key
            )
            item = QueuedBatch(events, batch, known[:3], checkpoint, blob, saved)
            _queue(store, run_id, item, (saved.head, saved.seq, after[2], chunks))
            return
    store.wait_written(run_id)
    with store.transaction() as conn:
        written = append_checkpointed(store, conn, run_id, events, checkpoint)
        assert written is not None
        append(store, conn, run_id, [saved_event(checkpoint, written)])
        put_checkpoint(store, conn, run_id, checkpoint, written)


def predict(store: StoreCore, run_id: str) -> Prediction:
    """What the run's queued batches will leave (read after they are committed
    when this process has no prediction yet)."""
    known = store.predicted_heads.get(run_id)
    if known is not None:
        return known
    store.wait_written(run_id)
    with store.transaction(write=False) as conn:
        row = conn.execute(
            select(runs.c.head_hash, runs.c.last_seq, runs.c.facts_count).where(
                runs.c.run_id == run_id
            )
        ).one_or_none()
        if row is None:
            raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
        try:
            chunks: str | None = chunks_digest(store, conn, run_id, row[2])
        except StoreError:
            chunks = None  # written before fact chunks, or replayed out of order
    return (row[0], row[1], row[2], chunks)


def last_seq(store: StoreCore, run_id: str) -> int:
    """The seq of the run's last event, queued batches included (what a streamed
    run's events are numbered back from). Raises ``RunNotFound`` or ``StoreError``."""
    known = store.predicted_heads.get(run_id)
    if known is not None:
        return known[1]
    with store.transaction(write=False) as conn:
        seq = conn.execute(select(runs.c.last_seq).where(runs.c.run_id == run_id)).scalar()
    if seq is None:
        raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
    return int(seq)


def _queue(store: StoreCore, run_id: str, item: QueuedBatch, after: Prediction) -> None:
    try:
        store.writer.submit(run_id, item)
    except StoreError:
        store.predicted_heads.pop(run_id, None)
        raise
    store.predicted_heads[run_id] = after


def _after(known: Prediction, batch: ChainedBatch) -> Prediction:
    """The prediction once ``batch`` is committed after ``known``."""
    chunks = known[3]
    if batch.chunk and chunks is not None:
        chunks = fold_digest(chunks, batch.chunk_row()[1])
    return (batch.head, batch.seq, known[2] + len(batch.chunk), chunks)


def commit(store: StoreCore, run_id: str, items: list[QueuedBatch]) -> None:
    """(writer thread) Insert queued batches of ``run_id`` in one transaction, each
    chained after the one before (with a checkpoint, its ``checkpoint_saved``
    event and blob); chain them again if another writer moved the run meanwhile."""
    with store.transaction(settle=False) as conn:
        head, seq, cycles, facts = lock_run(store, conn, run_id)
        again = (head, seq, facts) != items[0].known
        if again:
            store.predicted_heads.pop(run_id, None)
        for item in items:
            batch = item.batch
            if again:
                batch = chain_batch(run_id, item.events, head, seq, store.key)
            store.inserter.insert(conn, batch, facts)
            head, seq = batch.head, batch.seq
            cycles = max(cycles, batch.top)
            facts += batch.promoted
            if item.checkpoint is None:
                continue
            blob, saved = item.blob, item.saved
            if again or blob is None or saved is None:
                count = int(item.checkpoint.get("facts_count", 0))
                chunks = chunks_digest(store, conn, run_id, count)
                blob = checkpoint_blob(run_id, item.checkpoint, chunks)
                saved = chain_batch(
                    run_id, [saved_event(item.checkpoint, blob)], head, seq, store.key
                )
            store.inserter.insert(conn, saved, facts)
            head, seq = saved.head, saved.seq
            put_checkpoint(store, conn, run_id, item.checkpoint, blob)
        move_head(store, conn, run_id, head, seq, cycles, facts)
