"""Redact a fact: erase its content from a run of chain format 2, keep its commitment.

In a run of chain format 2 (``runs.chain`` ``sha256/2`` or ``hmac-sha256/2``) the
chain, the facts tree and the checkpoints commit to each fact through
``C = SHA-256(salt ‖ canonical JSON)`` (:mod:`engine.hashing.commitment`), so its
content can go while every hash stays. :func:`redact_fact`, in one transaction
under the run's lock:

- the fact's ``fact_promoted`` payload (or, for an initial fact, its entry in the
  ``run_started`` payload's ``initial_facts``) keeps its id, key, confidence and
  provenance, loses its ``salt``, gains its ``commitment``, and its content becomes
  the marker ``{"redacted": {"at", "by", "reason"}}`` (chained, it is
  ``{"commitment": C}`` as before: the fields kept are no longer proven);
- its rows in the run's ``fact_chunks`` and in the stored checkpoint (with
  ``checkpoint_parts``) keep its id, key, confidence and provenance, their content
  becomes the marker ``{"redacted": {...}}`` and their salt ``{"commitment": C}``
  (the chunks' digests and the checkpoint's are of the commitments: unchanged), so
  the run still resumes, the fact's content then being the marker;
- a ``fact_redacted`` event (``fact_id``, ``commitment``, ``by``, ``at``,
  ``reason``) is chained on the run, which moves its head and the ledger.

- the rows outside the chain that may quote the content as text, about this run
  or its gates: ``access_log.detail`` and ``notification_deliveries.answer``, the
  content (a string of at least :data:`~audit.redaction._scrub.MIN_CHARS`
  characters, or its canonical JSON) replaced by ``[redacted]``
  (:mod:`audit.redaction._scrub`).

Not erased (docs/audit.md, "Redaction"): the content quoted by other chained
events (a non-deterministic suggestor's recorded ``effect``, a HITL gate's
proposal and its ``gate_opened``, a person's reason in ``gate_decided`` /
``gate_vote``), by the rows that mirror those events (a gate row's ``proposal``,
which ``verify`` compares with its ``gate_opened``; ``gate_votes.reason``), by a
paused run's pending proposal in its checkpoint (hashed whole), or by bundles
exported before.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, select, update

from audit.cells import loads
from audit.core import StoreCore, json_compact
from audit.redaction._scrub import quoted_forms, scrub_copies
from audit.tables import audit_events, fact_chunks, runs
from audit.trail import append, locked_run_row, put_checkpoint, read_checkpoint
from engine.errors import FactNotFound, RedactionError
from engine.facts import canonical_json
from engine.hashing.commitment import (
    chain_parts,
    fact_commitment,
    redaction_note,
    text_commitment,
)
from engine.status import RunStatus
from engine.store import AuditEvent

__all__ = ["REDACTED", "Redaction", "redact_fact", "redaction_note"]

REDACTED = "fact_redacted"
"""The kind of the event that chains a redaction."""

_quote = json.encoder.encode_basestring


@dataclass(frozen=True, slots=True)
class Redaction:
    """A redaction done: the run, the fact, its commitment ``C`` (hex), who (``by``),
    when (``at``, unix seconds), why, and the seq of its ``fact_redacted`` event."""

    run_id: str
    fact_id: str
    commitment: str
    by: str
    at: float
    reason: str
    seq: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def redact_fact(
    store: StoreCore,
    run_id: str,
    fact_id: str,
    *,
    by: str,
    reason: str,
    at: float | None = None,
) -> Redaction:
    """Erase fact ``fact_id``'s content from run ``run_id``, chain who (``by``), when
    and why (``reason``, not empty), and return the :class:`Redaction`.

    Raises ``RunNotFound``; ``FactNotFound`` (naming the fact); ``RedactionError``
    when the run is not stopped or paused (it would write the content again), when
    its chain format is 1 (its chain commits to the content: erasing it would break
    every proof), when the fact was redacted already, or for an empty reason.
    """
    why = reason.strip()
    if not why:
        raise RedactionError("a redaction needs a reason (--reason)")
    if not by:
        raise RedactionError("a redaction needs who redacts")
    when = time.time() if at is None else at
    mark = {"at": when, "by": by, "reason": why}
    store.wait_written(run_id)
    with store.transaction() as conn:
        row = locked_run_row(store, conn, run_id, runs.c.status, runs.c.chain, runs.c.cycles)
        if not chain_parts(row.chain)[1]:
            raise RedactionError(
                f"run {run_id} is of chain format 1 ({row.chain}): its chain and facts tree "
                "commit to each fact's content, which cannot be erased without breaking "
                "them; runs started after `converge config set chain-format 2` can be redacted"
            )
        if row.status not in (RunStatus.STOPPED.value, RunStatus.PAUSED.value):
            raise RedactionError(
                f"run {run_id} is {row.status}: only a stopped or paused run can be redacted"
            )
        c, content = _redact_event(conn, run_id, fact_id, mark)
        _redact_rows(store, conn, run_id, fact_id, mark, c)
        scrub_copies(store, conn, run_id, quoted_forms(content))
        payload = {"at": when, "by": by, "commitment": c, "fact_id": fact_id, "reason": why}
        append(store, conn, run_id, [AuditEvent(REDACTED, int(row.cycles), payload, when)])
        seq = conn.execute(select(runs.c.last_seq).where(runs.c.run_id == run_id)).scalar()
    from audit.ledger import integrate_own  # here: importing audit imports no ledger room

    integrate_own(store)  # its new head in the ledger before this returns, as a stop's
    return Redaction(run_id, fact_id, c, by, when, why, int(seq or 0))


def _redact_event(
    conn: Connection, run_id: str, fact_id: str, mark: dict[str, Any]
) -> tuple[str, Any]:
    """Replace the fact in its chained event's payload; its commitment and the
    content erased."""
    ev = audit_events.c
    found = conn.execute(
        select(ev.seq, ev.payload).where(
            ev.run_id == run_id, ev.kind == "fact_promoted", ev.fact_id == _quote(fact_id)
        )
    ).one_or_none()
    if found is not None:
        data = loads(found.payload)
        _not_yet(run_id, fact_id, data)
        c = text_commitment(found.payload)
        new = canonical_json(_redacted(data, c, mark))
        conn.execute(
            update(audit_events).where(ev.run_id == run_id, ev.seq == found.seq).values(payload=new)
        )
        return c, data.get("content")
    started = conn.execute(
        select(ev.payload).where(ev.run_id == run_id, ev.seq == 1, ev.kind == "run_started")
    ).scalar()
    data = loads(started) if started is not None else {}
    initial = data.get("initial_facts") or []
    for i, fact in enumerate(initial):
        if isinstance(fact, dict) and fact.get("id") == fact_id:
            _not_yet(run_id, fact_id, fact)
            c = fact_commitment(fact)
            content = fact.get("content")
            initial[i] = _redacted(fact, c, mark)
            conn.execute(
                update(audit_events)
                .where(ev.run_id == run_id, ev.seq == 1)
                .values(payload=canonical_json(data))
            )
            return c, content
    link = data.get("forked_from")
    if isinstance(link, dict) and link.get("run"):
        # a fork refers to its parent's facts up to the fork point: they are the parent's
        raise FactNotFound(
            f"no fact {fact_id!r} recorded by run {run_id}, a fork of run {link['run']}: "
            f"if the fork took it from its parent, redact it in run {link['run']} "
            "(every fork then shows it redacted)",
            fact_id,
        )
    raise FactNotFound(f"no fact {fact_id!r} in run {run_id}", fact_id)


def _redacted(fact: dict[str, Any], c: str, mark: dict[str, Any]) -> dict[str, Any]:
    """A fact's stored dict once redacted: no salt, its commitment, the marker."""
    out = {k: v for k, v in fact.items() if k != "salt"}
    out["commitment"] = c
    out["content"] = {"redacted": mark}
    return out


def _not_yet(run_id: str, fact_id: str, data: Any) -> None:
    note = redaction_note(data.get("content")) if isinstance(data, dict) else None
    if note is not None:
        raise RedactionError(f"fact {fact_id} of run {run_id} is already {note}")


def _redact_rows(
    store: StoreCore, conn: Connection, run_id: str, fact_id: str, mark: dict[str, Any], c: str
) -> None:
    """The fact's rows in the run's fact chunks and stored checkpoint: content the
    marker, salt the commitment."""
    needle = _quote(fact_id)
    chunks = conn.execute(
        select(fact_chunks.c.first, fact_chunks.c.data).where(fact_chunks.c.run_id == run_id)
    ).all()
    for first, data in chunks:
        if needle not in data:
            continue
        rows = loads(data)
        if _redact_in(rows, fact_id, mark, c):
            conn.execute(
                update(fact_chunks)
                .where(fact_chunks.c.run_id == run_id, fact_chunks.c.first == first)
                .values(data=json_compact(rows))
            )
    blob = read_checkpoint(conn, run_id)
    if blob is None or needle not in blob:
        return
    checkpoint = loads(blob)
    rows = checkpoint.get("facts") if isinstance(checkpoint, dict) else None
    if isinstance(rows, list) and _redact_in(rows, fact_id, mark, c):
        put_checkpoint(store, conn, run_id, checkpoint, json_compact(checkpoint))


def _redact_in(rows: list[Any], fact_id: str, mark: dict[str, Any], c: str) -> bool:
    """Redact the row of ``fact_id`` among checkpoint ``rows`` (in place): True if found."""
    for i, row in enumerate(rows):
        if isinstance(row, list) and len(row) == 9 and row[0] == fact_id:
            rows[i] = [*row[:2], {"redacted": mark}, *row[3:8], {"commitment": c}]
            return True
    return False
