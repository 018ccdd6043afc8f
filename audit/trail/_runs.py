"""Runs: start one (its ``runs`` row and first events), finish it with its outcome,
read back the header it was started with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from audit.core import StoreCore, json_compact
from audit.tables import fact_chunks, runs
from audit.trail._checkpoints import inherited_count, put_checkpoint, saved_event
from audit.trail._events import append, append_checkpointed
from audit.trail._run_header import read_header, with_header
from audit.trail._store_key import require_key
from audit.writing import chain_batch, grant, release, this_writer
from engine.errors import RunSuperseded, StoreError
from engine.facts import canonical_json
from engine.hashing.chain import GENESIS
from engine.hashing.checkpoint import fold_digest
from engine.hashing.commitment import FORMAT_2
from engine.hashing.ledger import key_fingerprint
from engine.hashing.merkle import SALTED
from engine.run_ids import check_run_id
from engine.status import RunStatus
from engine.store import AuditEvent, BatchItem, RunHeader, RunOutcome


def start_run(
    store: StoreCore,
    header: RunHeader,
    events: Sequence[BatchItem],
    checkpoint: dict[str, Any] | None = None,
) -> None:
    """Insert the run's row (``running``, this pid/host; ``queued`` with no writer
    for ``header.queued``) with its first events and their ledger entry, and
    ``checkpoint`` when given; the row of a queued run this process took is filled
    instead. ``AuditKeyError`` (nothing written) in a keyed store without its key;
    ``StoreError`` when the run exists or the key is wrong; ``InvalidRunId``
    (nothing written) for a new run whose id is no run id (``engine.run_ids``; a
    queued run was checked when it was queued)."""
    require_key(store, f"starting run {header.run_id}")
    if store.key is not None and store.known_fingerprint not in (None, key_fingerprint(store.key)):
        raise StoreError(
            f"audit store {store.shown}: wrong key (CONVERGE_AUDIT_KEY is not the key "
            "this store was written with)"
        )
    store.wait_written(header.run_id)
    try:
        spec = None if header.job_spec is None else json_compact(header.job_spec)
        canonical_json(header.job_spec)  # as the chain will hash it
    except (TypeError, ValueError) as exc:
        raise StoreError(f"job spec of run {header.run_id} is not JSON: {exc}") from exc
    taken = header.run_id in store.taken_runs
    if not taken:
        check_run_id(header.run_id, "run_id")
    # the header the row gets, chained in run_started (a taken run keeps its submit time)
    started_at = _queued_at(store, header.run_id) if taken else header.started_at
    events = with_header(events, header, started_at)
    batch = chain_batch(header.run_id, events, GENESIS, 0, store.key)
    head, seq = batch.head, batch.seq
    # a queued run (a fork recorded for a worker) has no writer until one claims it
    pid, host = (None, None) if header.queued else this_writer()
    facts = _initial_facts(events)
    values = {
        "job": header.job,
        "job_spec": spec,
        "suggestors": json_compact(list(header.suggestors)),
        "status": RunStatus.QUEUED if header.queued else RunStatus.RUNNING,
        "pid": pid,
        "hostname": host,
        "cycles": 0,
        "facts_count": facts,
        "chain": store.chain_kind + (FORMAT_2 if _salted(events) else ""),
        "head_hash": head,
        "last_seq": seq,
        "parent_run_id": header.parent_run_id,
    }
    try:
        with store.transaction() as conn:
            if taken:
                _fill_taken(store, conn, header.run_id, values)
            else:
                conn.execute(
                    insert(runs).values(
                        run_id=header.run_id, started_at=header.started_at, **values
                    )
                )
                if not header.queued:
                    grant(conn, header.run_id, 0, store.leases.seconds)
            if len(batch):
                store.inserter.insert(conn, batch, facts - len(batch.chunk))
            store.heads.record(store, conn, header.run_id, seq, head)
            if checkpoint is not None:
                _first_checkpoint(store, conn, header.run_id, checkpoint)
        store.taken_runs.discard(header.run_id)
        if header.queued:
            # recorded for a worker (a fork): this process holds no claim on it, and
            # its later writes (a decision, a comment) are nobody's leg to fence
            store.leg_ended(header.run_id)
            return
        chunks = GENESIS if not batch.chunk else fold_digest(GENESIS, batch.chunk_row()[1])
        if checkpoint is None:
            store.predicted_heads[header.run_id] = (head, seq, facts, chunks)
        store.claim_epochs[header.run_id] = 0
        store.leases.hold(header.run_id, 0)
    except StoreError as exc:
        if isinstance(exc.__cause__, IntegrityError):
            # another run holds this id: refuse every later write of this one to it
            store.claim_epochs[header.run_id] = -1
            raise StoreError(
                f"run {header.run_id!r} already exists in audit store {store.shown}"
            ) from exc
        raise


def _queued_at(store: StoreCore, run_id: str) -> float:
    """When the queued run this process took was submitted (its row's ``started_at``)."""
    with store.transaction(write=False) as conn:
        at = conn.execute(select(runs.c.started_at).where(runs.c.run_id == run_id)).scalar()
    if not isinstance(at, int | float):
        raise StoreError(f"run {run_id}: its queued row has no start time")
    return float(at)


def _fill_taken(store: StoreCore, conn: Connection, run_id: str, values: dict[str, Any]) -> None:
    """The row of a queued run this process took: still this process's, no event yet."""
    pid, host = this_writer()
    done = conn.execute(
        update(runs)
        .where(
            runs.c.run_id == run_id,
            runs.c.status == RunStatus.RUNNING,
            runs.c.pid == pid,
            runs.c.hostname == host,
            runs.c.last_seq == 0,
        )
        .values(**values)
    )
    if done.rowcount != 1:
        store.taken_runs.discard(run_id)
        store.claim_epochs[run_id] = -1
        raise RunSuperseded(f"run {run_id} was taken over by another process")


def _first_checkpoint(
    store: StoreCore, conn: Connection, run_id: str, checkpoint: dict[str, Any]
) -> None:
    """A checkpoint of cycle 0, chained by its ``checkpoint_saved`` event."""
    written = append_checkpointed(store, conn, run_id, [], checkpoint)
    assert written is not None
    append(store, conn, run_id, [saved_event(checkpoint, written)])
    put_checkpoint(store, conn, run_id, checkpoint, written)


def _salted(events: Sequence[BatchItem]) -> bool:
    """Whether the run's ``run_started`` names the facts tree of chain format 2."""
    first = events[0] if events else None
    return (
        isinstance(first, AuditEvent)
        and first.kind == "run_started"
        and first.payload.get("facts_merkle") == SALTED
    )


def _initial_facts(events: Sequence[BatchItem]) -> int:
    """The facts a run starts with: its initial facts, or those a fork refers to in
    its parent (``forked_from.facts.count``: its own facts are numbered after them)."""
    for ev in events:
        if isinstance(ev, AuditEvent) and ev.kind == "run_started":
            initial = ev.payload.get("initial_facts")
            if initial:
                return len(initial)
            return inherited_count(ev.payload)
    return 0


def finish_run(
    store: StoreCore,
    run_id: str,
    events: Sequence[BatchItem],
    outcome: RunOutcome,
    checkpoint: dict[str, Any] | None = None,
) -> None:
    """Write the last events (the checkpoint's sha256 on the terminal one), the
    outcome and ``checkpoint``, in one transaction; without a checkpoint, drop the
    stale one and the run's fact chunks. The run's lease goes with it."""
    store.wait_written(run_id)
    store.leases.drop(run_id)  # not renewed while it goes: a failed stop leaves it to expire
    with store.transaction() as conn:
        blob = append_checkpointed(store, conn, run_id, events, checkpoint)
        conn.execute(update(runs).where(runs.c.run_id == run_id).values(**outcome_values(outcome)))
        release(conn, run_id)
        put_checkpoint(store, conn, run_id, checkpoint, blob)
        if checkpoint is None:  # nothing will resume from the chunks
            conn.execute(delete(fact_chunks).where(fact_chunks.c.run_id == run_id))
    store.leg_ended(run_id)  # no more commits of this run's leg here


def outcome_values(outcome: RunOutcome) -> dict[str, Any]:
    """The outcome columns of a stopped or paused run. ``cycles`` and
    ``facts_count`` are left as the committed events prove them (equal to the
    outcome's, unless a failed write lost events: then the row still verifies)."""
    from engine.stop import stop_reason_to_dict  # a writer's: a reader builds no stop model

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


def get_run_header(store: StoreCore, run_id: str) -> RunHeader:
    """The header the run was started with, checked against the one its
    ``run_started`` chained (:func:`audit.trail._run_header.read_header`). Raises
    ``RunNotFound``, ``CorruptRow`` or ``TamperedRow`` (the row was edited)."""
    with store.transaction(write=False) as conn:
        return read_header(store, conn, run_id)
