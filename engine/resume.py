"""Loading paused and stopped runs back from a store (another process's runs)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from engine.errors import GateAlreadyDecided, GateExpired, ResumeError
from engine.hitl import GateDecision
from engine.run_state import RunState
from engine.store import AuditEvent

if TYPE_CHECKING:
    from engine.engine import Engine


def check_suggestors(engine: Engine, recorded: list[str]) -> None:
    """Raise ``ResumeError`` naming missing or extra suggestors."""
    mine = set(engine.suggestor_names)
    theirs = set(recorded)
    if mine != theirs:
        missing = sorted(theirs - mine)
        extra = sorted(mine - theirs)
        raise ResumeError(
            "the engine's suggestors differ from the run's: "
            f"missing {missing or 'none'}, extra {extra or 'none'}"
        )


def load_paused_from_store(
    engine: Engine, gate_id: str, decision: GateDecision, in_memory: RunState | None
) -> RunState:
    """Decide the gate in the store (compare-and-set), claim the run, load its state.

    Raises ``GateNotFound``, ``GateAlreadyDecided``, ``GateExpired``,
    ``ResumeError`` (other suggestors, corrupted checkpoint) or ``RunBusy``.
    """
    store = engine.store
    assert store is not None
    gate = store.get_gate(gate_id)
    if gate.status != "pending":
        raise GateAlreadyDecided(
            gate_id,
            gate.status,
            gate.decided_by,
            None
            if gate.decided_at is None
            else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(gate.decided_at)),
        )
    # validate everything before the compare-and-set, so bad input changes nothing
    if in_memory is not None:
        st = in_memory
    else:
        checkpoint = store.load_checkpoint(gate.run_id)
        check_suggestors(engine, list(checkpoint.get("suggestors", [])))
        st = RunState.from_checkpoint(checkpoint, gate)
    if gate.expires_at is not None and time.time() > gate.expires_at:
        timeout_decision = GateDecision(
            approved=gate.on_timeout == "approve", by="timeout", reason="gate expired"
        )
        store.decide_gate(gate_id, timeout_decision, "expired")
        raise GateExpired(
            f"gate {gate_id} expired; decided by on_timeout={gate.on_timeout!r}. "
            f"Resume the run with resume_run({gate.run_id!r})"
        )
    status = "approved" if decision.approved else "rejected"
    store.decide_gate(gate_id, decision, status)
    store.claim_resume(gate.run_id)
    st.events.append(
        AuditEvent("run_resumed", st.cycle, {"gate_id": gate_id, "from": "gate"}, time.time())
    )
    return st


def load_stopped_from_store(engine: Engine, run_id: str) -> RunState:
    """Load a run stopped by a budget, policy or cancel, and claim it for resuming."""
    store = engine.store
    assert store is not None
    checkpoint = store.load_checkpoint(run_id)
    check_suggestors(engine, list(checkpoint.get("suggestors", [])))
    if checkpoint.get("pending_gate") is not None:
        raise ResumeError(f"run {run_id} waits on a gate; decide it with resume(gate_id, ...)")
    st = RunState.from_checkpoint(checkpoint)
    store.claim_resume(run_id)
    return st
