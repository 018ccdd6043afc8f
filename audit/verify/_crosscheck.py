"""What a query or a resume reads, checked against the chain (docs/audit.md).

The ``runs`` columns (stop kind, category, reason, cycles, facts count, facts root)
must equal the run's last chained ``run_stopped`` / ``run_paused`` event; every
gate row must equal its chained ``gate_opened`` and ``gate_decided`` events; the
stored checkpoint's sha256 must equal the one chained with the stop or pause that
wrote it (:func:`engine.hashing.checkpoint.checkpoint_digest`). Each check returns
why it fails (and at which seq), or None.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from audit.cells import same_json
from audit.trail import CHECKPOINTED, TERMINAL, ChainRow, inherited_count
from engine.hashing.checkpoint import checkpoint_digest as checkpoint_digest
from engine.hashing.commitment import checkpoint_sha256
from engine.status import GateStatus

Problem = tuple[int, str] | None
"""(seq, reason) of the first disagreement, or None."""


def last_terminal(
    rows: Sequence[ChainRow], kinds: tuple[str, ...] = TERMINAL
) -> tuple[int, dict[str, Any]] | None:
    """(seq, payload) of the run's last event of ``kinds`` (stop or pause)."""
    for row in reversed(rows):
        if row.kind in kinds:
            payload: dict[str, Any] = json.loads(row.payload)
            return row.seq, payload
    return None


def check_outcome(run: Any, rows: Sequence[ChainRow]) -> Problem:
    """The ``runs`` row's outcome columns against the last terminal event."""
    cycles, facts = proven_counts(rows)
    if (run.cycles, run.facts_count) != (cycles, facts):
        column = "cycles" if run.cycles != cycles else "facts_count"
        return run.last_seq or 1, f"runs row differs from the chain ({column})"
    terminal = last_terminal(rows)
    if terminal is None:
        # no stop recorded yet: no outcome column may hold one
        for column in OUTCOME_COLUMNS:
            if getattr(run, column) is not None:
                return run.last_seq or 1, f"runs row differs from the chain ({column})"
        return None
    seq, p = terminal
    if "reason" not in p or "facts_root" not in p:
        return None  # written before outcomes were chained (older store)
    recorded = {
        "stop_kind": p.get("kind"),
        "category": p.get("category"),
        "reason": p.get("reason"),
        "facts_root": p.get("facts_root"),
    }
    for column, value in recorded.items():
        cell = getattr(run, column)
        same = same_json(cell, value) if column == "reason" else cell == value
        if not same:
            return seq, f"runs row differs from the chain ({column})"
    return None


OUTCOME_COLUMNS = (
    "stop_kind",
    "category",
    "reason",
    "facts_root",
    "usage",
    "ended_at",
    "duration_ms",
)
"""The ``runs`` columns a stop or pause fills (empty until the run's first one)."""


def proven_counts(rows: Sequence[ChainRow]) -> tuple[int, int]:
    """(cycles, facts) that the chained events prove: the highest cycle, and the
    initial facts (a fork's: those it refers to in its parent) plus every
    ``fact_promoted``."""
    cycles = facts = 0
    for row in rows:
        cycles = max(cycles, row.cycle)
        if row.kind == "fact_promoted":
            facts += 1
        elif row.kind == "run_started":
            started = json.loads(row.payload)
            facts += len(started.get("initial_facts") or ()) or inherited_count(started)
    return cycles, facts


def check_checkpoint(blob: str | None, rows: Sequence[ChainRow]) -> Problem:
    """The stored checkpoint against the digest chained with the stop, pause or
    periodic save that wrote it."""
    if blob is None:
        return None
    terminal = last_terminal(rows, CHECKPOINTED)
    if terminal is None or "checkpoint_sha256" not in terminal[1]:
        return (terminal[0] if terminal else 1), "checkpoint not recorded in the chain"
    seq, p = terminal
    if checkpoint_sha256(blob) != p["checkpoint_sha256"]:
        return seq, "checkpoint differs from the chain"
    return None


def check_gates(gate_rows: Sequence[Any], rows: Sequence[ChainRow]) -> Problem:
    """Every gate row against its chained ``gate_opened`` / ``gate_decided`` events."""
    opened: dict[str, tuple[int, dict[str, Any]]] = {}
    decided: dict[str, tuple[int, dict[str, Any]]] = {}
    for row in rows:
        if row.kind == "gate_opened":
            p = json.loads(row.payload)
            opened[p.get("gate_id")] = (row.seq, p)
        elif row.kind == "gate_decided":
            p = json.loads(row.payload)
            decided[p.get("gate_id")] = (row.seq, p)
    for g in gate_rows:
        if g.gate_id not in opened:
            return 1, f"gate {g.gate_id} was never opened in the chain"
        seq, p = opened[g.gate_id]
        for column in ("proposal_id", "suggestor", "summary", "policy"):
            if getattr(g, column) != p.get(column):
                return seq, f"gate {g.gate_id} differs from the chain ({column})"
        if not same_json(g.proposal, p.get("proposal")):
            return seq, f"gate {g.gate_id} differs from the chain (proposal)"
        decision = decided.get(g.gate_id)
        if g.status == GateStatus.PENDING:
            if decision is not None:
                return decision[0], f"gate {g.gate_id} differs from the chain (status)"
            continue
        if decision is None:
            return seq, f"gate {g.gate_id} differs from the chain (status)"
        seq, p = decision
        if "status" not in p:
            continue  # decided before decisions were chained by the store
        stored = {"status": g.status, "by": g.decided_by, "reason": g.reason}
        for column, value in stored.items():
            if p.get(column) != value:
                name = "decided_by" if column == "by" else column
                return seq, f"gate {g.gate_id} differs from the chain ({name})"
        if p.get("decided_at") != g.decided_at:
            return seq, f"gate {g.gate_id} differs from the chain (decided_at)"
    return None
