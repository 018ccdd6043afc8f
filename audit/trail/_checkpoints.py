"""Checkpoints: a run's latest state as one JSON text, and the fact chunks it refers to.

A checkpoint is upserted per run (``checkpoints``; text longer than one value
continues in ``checkpoint_parts``). One whose ``facts`` is ``{"count", "chunks"}``
refers to the run's ``fact_chunks`` rows: ``chunks`` is the sha256 chain of their
digests, checked before any resume reads them. The checkpoint's own sha256 is
chained by a ``checkpoint_saved`` / ``run_stopped`` / ``run_paused`` event and
checked by :func:`load_checkpoint` (docs/audit.md).

A fork refers to its parent's facts up to the fork point instead of copying them
(``forked_from.facts.count`` of its ``run_started``, :mod:`engine.fork`): its own
chunks start at that fact number (:func:`chunk_base`), the digest chain folds
them from there, and :func:`load_checkpoint` puts the parent's facts (read and
checked by the caller's ``inherited``) before them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from audit.cells import loads as _loads
from audit.core import PENDING_FOLDS, StoreCore, json_compact
from audit.tables import audit_events, checkpoint_parts, checkpoints, fact_chunks, runs
from audit.trail._kinds import CHECKPOINTED, TERMINAL
from audit.trail._run_header import read_header
from engine.errors import ResumeError, RunFinished, StoreError
from engine.hashing.chain import GENESIS
from engine.hashing.checkpoint import fold_digest
from engine.hashing.commitment import checkpoint_sha256, chunk_sha256
from engine.status import RunStatus
from engine.stop_categories import RESUMABLE
from engine.store import AuditEvent, BatchItem

_GOES_ON = frozenset(c.value for c in RESUMABLE)  # stops a run can resume from


def checkpoint_text(run_id: str, data: dict[str, Any] | None) -> str | None:
    """The text a checkpoint is stored and hashed as (None for no checkpoint);
    ``StoreError`` when it is not JSON."""
    if data is None:
        return None
    try:
        text: str = json_compact(data)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"checkpoint of run {run_id} is not JSON: {exc}") from exc
    return text


def checkpoint_blob(run_id: str, checkpoint: dict[str, Any], chunks: str) -> str:
    """The text of a checkpoint that refers to the run's fact chunks."""
    count = int(checkpoint.get("facts_count", 0))
    blob = checkpoint_text(run_id, {**checkpoint, "facts": {"count": count, "chunks": chunks}})
    assert blob is not None
    return blob


def inherited_count(started: dict[str, Any]) -> int:
    """How many facts a ``run_started`` payload refers to in a parent (a fork's
    ``forked_from.facts.count``; 0 for a run that is no fork, or a fork recorded
    before issue 46, which copied them as ``initial_facts``)."""
    if started.get("initial_facts"):
        return 0
    link = started.get("forked_from")
    facts = link.get("facts") if isinstance(link, dict) else None
    count = facts.get("count") if isinstance(facts, dict) else None
    return count if type(count) is int and count > 0 else 0


def chunk_base(conn: Connection, run_id: str) -> int:
    """The fact number the run's own chunks start at: 0, or for a fork its
    :func:`inherited_count` (one small read: a fork's ``run_started`` holds no facts)."""
    parent = conn.execute(select(runs.c.parent_run_id).where(runs.c.run_id == run_id)).scalar()
    if parent is None:
        return 0
    try:
        started = json.loads(_started_payload(conn, run_id))
    except ValueError:
        return 0
    return inherited_count(started) if isinstance(started, dict) else 0


def chunks_digest(store: StoreCore, conn: Connection, run_id: str, count: int) -> str:
    """The sha256 chain of the digests of the chunks holding facts 0..count-1;
    ``StoreError`` when they do not hold exactly those.

    Folds on from the chunks a committed transaction of this process last folded
    (``StoreCore.chunk_folds``) or this transaction did: a periodic checkpoint reads
    the chunks written since the one before, not all of the run's. Chunks below that
    are taken as they were read then; one changed since no longer matches the
    checkpoint's digest when a resume reads it (:func:`read_chunks`). A fork's
    chunks are folded from its :func:`chunk_base`.
    """
    pending: dict[str, tuple[int, str]] = conn.info.setdefault(PENDING_FOLDS, {})
    known = pending.get(run_id) or store.chunk_folds.get(run_id)
    if known is None or known[0] > count:
        known = (chunk_base(conn, run_id), GENESIS)
    at, digest = known
    rows = conn.execute(
        select(fact_chunks.c.first, fact_chunks.c.count, fact_chunks.c.digest)
        .where(
            fact_chunks.c.run_id == run_id,
            fact_chunks.c.first >= at,
            fact_chunks.c.first < count,
        )
        .order_by(fact_chunks.c.first)
    )
    for first, n, chunk_digest in rows:
        if first != at:
            break
        digest = fold_digest(digest, chunk_digest)
        at += n
    if at != count:
        raise StoreError(
            f"audit store {store.shown}: the fact chunks of run {run_id} hold {at} of "
            f"its {count} facts; cannot checkpoint it by reference"
        )
    pending[run_id] = (count, digest)
    return digest


def read_chunks(conn: Connection, run_id: str, facts: Any) -> list[Any]:
    """The run's own facts a checkpoint refers to (``{"count", "chunks"}``), as
    rows, after checking the chunks against the checkpoint's digest (a fork's from
    its :func:`chunk_base`: the facts before are its parent's); ``ResumeError`` if not."""
    if not isinstance(facts, dict) or not isinstance(facts.get("count"), int):
        raise ResumeError(f"corrupted checkpoint of run {run_id}: bad facts reference")
    count: int = facts["count"]
    base = chunk_base(conn, run_id)
    digest, at = GENESIS, base
    out: list[Any] = []
    rows = conn.execute(
        select(fact_chunks.c.first, fact_chunks.c.data)
        .where(
            fact_chunks.c.run_id == run_id,
            fact_chunks.c.first >= base,
            fact_chunks.c.first < count,
        )
        .order_by(fact_chunks.c.first)
    )
    for first, data in rows:
        if first != at:
            break
        loaded = _loads(data)
        digest = fold_digest(digest, chunk_sha256(loaded, data))
        out.extend(loaded)
        at = base + len(out)
    if at != count or digest != facts.get("chunks"):
        raise ResumeError(
            f"checkpoint of run {run_id} differs from the one its chain recorded (its "
            "fact chunks changed): refusing to resume from it (run `converge verify`)"
        )
    return out


def chunks_problem(conn: Connection, run_id: str, blob: str | None) -> str | None:
    """Why the fact chunks a checkpoint refers to fail its digest (None: they pass,
    or the checkpoint carries its facts)."""
    if blob is None or '"facts":{' not in blob:
        return None
    try:
        refs = json.loads(blob)
    except ValueError:
        return None  # not JSON: its digest fails (verify's "checkpoint differs from the chain")
    try:
        read_chunks(conn, run_id, refs.get("facts") if isinstance(refs, dict) else None)
    except ResumeError:
        return "fact chunks differ from the checkpoint"
    return None


def put_checkpoint(
    store: StoreCore,
    conn: Connection,
    run_id: str,
    data: dict[str, Any] | None,
    blob: str | None = None,
) -> None:
    """Replace the run's checkpoint with ``data`` (its text ``blob`` when already
    built), in parts of the store's part size; None drops it."""
    conn.execute(delete(checkpoints).where(checkpoints.c.run_id == run_id))
    conn.execute(delete(checkpoint_parts).where(checkpoint_parts.c.run_id == run_id))
    if data is None:
        return
    if blob is None:
        blob = checkpoint_text(run_id, data)
    assert blob is not None
    size = store.part_chars
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


def read_checkpoint(conn: Connection, run_id: str) -> str | None:
    """The text of the run's checkpoint, its parts joined (None: it has none)."""
    first = conn.execute(select(checkpoints.c.data).where(checkpoints.c.run_id == run_id)).scalar()
    if first is None:
        return None
    rest = conn.execute(
        select(checkpoint_parts.c.data)
        .where(checkpoint_parts.c.run_id == run_id)
        .order_by(checkpoint_parts.c.part)
    ).scalars()
    return "".join([first, *rest])


def saved_event(checkpoint: dict[str, Any], blob: str) -> AuditEvent:
    """The ``checkpoint_saved`` event that chains a periodic checkpoint's sha256."""
    cycle = checkpoint.get("cycle", 0)
    return AuditEvent(
        "checkpoint_saved",
        int(cycle),
        {"cycle": cycle, "checkpoint_sha256": checkpoint_sha256(blob)},
        time.time(),
    )


def with_digest(events: Sequence[BatchItem], blob: str | None) -> Sequence[BatchItem]:
    """``events`` with the checkpoint's sha256 on the terminal event (the last one)."""
    last = events[-1] if events else None
    if blob is None or not isinstance(last, AuditEvent) or last.kind not in TERMINAL:
        return events
    payload = {**last.payload, "checkpoint_sha256": checkpoint_sha256(blob)}
    return [*events[:-1], AuditEvent(last.kind, last.cycle, payload, last.ts)]


def load_checkpoint(
    store: StoreCore,
    run_id: str,
    inherited: Callable[[dict[str, Any]], list[Any]] | None = None,
) -> dict[str, Any]:
    """The latest checkpoint of the run, checked against the sha256 its chain
    recorded (and its fact chunks against their digest; a fork's facts taken from
    its parent come first, ``inherited`` of its ``run_started`` payload, read after
    this snapshot: the parent no longer changes); ``ResumeError`` when
    missing or corrupted, ``RunFinished`` when the run finished with nothing left
    to do; ``TamperedRow`` / ``CorruptRow`` when the run's header (its job spec...)
    differs from the one its ``run_started`` chained. Everything is read in one
    transaction (one snapshot), so a run moving on meanwhile is never taken for
    tampering. ``run_epoch`` and ``run_seq`` are the
    run's fencing epoch and last seq in that snapshot: a claim that expects them
    fails if anyone claimed the run, or anything was recorded, since."""
    with store.transaction(write=False) as conn:
        row = conn.execute(
            select(
                runs.c.epoch, runs.c.last_seq, runs.c.status, runs.c.stop_kind, runs.c.category
            ).where(runs.c.run_id == run_id)
        ).one_or_none()
        if row is not None:
            # the job a resume rebuilds its engine from is the one the run chained
            read_header(store, conn, run_id)
        blob = read_checkpoint(conn, run_id)
        chained = conn.execute(
            select(audit_events.c.payload)
            .where(audit_events.c.run_id == run_id, audit_events.c.kind.in_(CHECKPOINTED))
            .order_by(audit_events.c.seq.desc())
            .limit(1)
        ).scalar()
        if blob is None:
            # a run that stopped with nothing left to do keeps no checkpoint: say so
            if row is not None and row.status == RunStatus.STOPPED and row.category not in _GOES_ON:
                raise RunFinished(f"run {run_id} already finished ({row.stop_kind})")
            raise ResumeError(f"run {run_id} has no checkpoint in audit store {store.shown}")
        data = _checked(run_id, blob, chained)
        started = None
        if isinstance(data.get("facts"), dict):
            data["facts"] = read_chunks(conn, run_id, data["facts"])
            data["facts_from_chunks"] = True
            if chunk_base(conn, run_id):
                started = _loads(_started_payload(conn, run_id))
    if started is not None and inherited is not None:
        data["facts"] = [*inherited(started), *data["facts"]]
    data["run_epoch"] = None if row is None else row.epoch
    data["run_seq"] = None if row is None else row.last_seq
    data["run_status"] = None if row is None else row.status
    return data


def _started_payload(conn: Connection, run_id: str) -> str:
    """The chained text of the run's ``run_started`` (its first event)."""
    payload = conn.execute(
        select(audit_events.c.payload).where(
            audit_events.c.run_id == run_id, audit_events.c.seq == 1
        )
    ).scalar()
    return str(payload or "{}")


def _checked(run_id: str, blob: str, chained: str | None) -> dict[str, Any]:
    """The checkpoint's JSON object, once its text matches the digest its chain holds."""
    try:
        data = json.loads(blob)
    except ValueError as exc:
        raise ResumeError(f"checkpoint of run {run_id} is not valid JSON: {exc}") from exc
    digest = None if chained is None else json.loads(chained).get("checkpoint_sha256")
    if digest != checkpoint_sha256(blob):
        raise ResumeError(
            f"checkpoint of run {run_id} differs from the one its chain recorded: "
            "refusing to resume from it (run `converge verify`)"
        )
    if not isinstance(data, dict):
        raise ResumeError(f"checkpoint of run {run_id} is not a JSON object")
    return data
