"""Comments on a gate: ``gate_comment`` events in its run's hash chain.

Anyone who may see a gate can comment on it (``converge comment``, the gate page,
``POST /api/gates/{id}/comments``); a comment is appended to the run's chain (who,
when, the text), so ``converge verify`` detects an edited or deleted one, like
every decision and vote.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import select

from audit.queries import RunRow, StoredEvent, events_in, run_in
from audit.store import SqlRunStore
from audit.tables import gates
from audit.trail import append, gate_record, require_key
from engine.errors import ConfigurationError, GateNotFound
from engine.store import AuditEvent

MAX_COMMENT_CHARS = 10_000
"""The longest comment (characters)."""

KIND = "gate_comment"

UNREADABLE = "(this comment cannot be read: its event was altered; see converge verify)"


@dataclass(frozen=True, slots=True)
class Comment:
    """One comment: its gate, who wrote it, when (unix seconds), the text."""

    gate_id: str
    by: str
    ts: float
    text: str


def add_comment(store: SqlRunStore, gate_id: str, by: str, text: str) -> Comment:
    """Append a comment on ``gate_id`` to its run's chain. Raises ``GateNotFound``,
    ``ConfigurationError`` (empty or too long, or no author), ``AuditKeyError`` (a
    keyed store without its key: nothing written)."""
    body = (text or "").strip()
    if not body or len(body) > MAX_COMMENT_CHARS:
        raise ConfigurationError(f"a comment has 1 to {MAX_COMMENT_CHARS} characters")
    if not (by or "").strip():
        raise ConfigurationError("a comment needs the name of who writes it")
    require_key(store, f"commenting on gate {gate_id}")  # a comment is chained
    at = time.time()
    with store.transaction() as conn:
        row = conn.execute(select(gates).where(gates.c.gate_id == gate_id)).one_or_none()
        if row is None:
            raise GateNotFound(f"no gate {gate_id!r} in audit store {store.shown}")
        gate = gate_record(row._mapping)
        payload = {"gate_id": gate_id, "by": by, "text": body}
        append(store, conn, gate.run_id, [AuditEvent(KIND, gate.cycle, payload, at)])
    return Comment(gate_id, by, at, body)


def run_with_comments(store: SqlRunStore, run_id: str) -> tuple[RunRow, list[Comment]]:
    """Run ``run_id`` and the comments on its gates (as :func:`run_comments`), read in
    one transaction: what the answer to a decision shows besides what it recorded.
    Raises ``RunNotFound``, ``CorruptRow`` (an event's cell)."""
    with store.transaction(write=False) as conn:
        run = run_in(store, conn, run_id)
        found = [_comment(e) for e in events_in(conn, run_id, [KIND])]
    return run, found


def comments(store: SqlRunStore, gate: str, run_id: str) -> list[Comment]:
    """The comments on ``gate`` (of run ``run_id``), oldest first, as chained."""
    return [c for c in run_comments(store, run_id) if c.gate_id == gate]


def run_comments(store: SqlRunStore, run_id: str) -> list[Comment]:
    """The comments on every gate of run ``run_id``, oldest first, as chained (one
    read for a page that shows several of its gates)."""
    return [_comment(e) for e in store.events(run_id, kinds=[KIND])]


def _comment(event: StoredEvent) -> Comment:
    """The comment of a ``gate_comment`` event; one whose payload is not a comment's
    (an edited cell: ``converge verify`` names it) is shown as unreadable."""
    p = event.payload
    gate_id, by, body = p.get("gate_id"), p.get("by"), p.get("text")
    if isinstance(gate_id, str) and isinstance(by, str) and isinstance(body, str):
        return Comment(gate_id, by, event.ts, body)
    return Comment(str(gate_id), "?", event.ts, UNREADABLE)
