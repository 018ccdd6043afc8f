"""Loading paused and stopped runs back from a store (another process's runs).

Three ways back into a stored run (docs/gates.md):

- ``Engine.resume(gate_id, decision)``: decide a pending gate (compare-and-set, so
  exactly one of racing deciders wins), claim the run, go on from its checkpoint.
- ``Engine.resume_run(run_id, budget)``: a run stopped by a budget, a policy or a
  cancel; also a run whose gate was decided without a resume (expired gate,
  decider died before claiming the run).
- crash recovery, by the same ``resume_run``: a run left ``running`` by a dead
  process (kill -9) is claimable (``claim_resume`` takes over a run whose writer
  pid is gone); it restarts from its last checkpoint and the cycles the dead
  process had recorded are replayed without recording their facts twice.
"""

from __future__ import annotations

import time
from typing import Any

from engine.budget import Budget
from engine.collector import bulk_load
from engine.errors import GateAlreadyDecided, GateExpired, GateNotFound, ResumeError, RunNotFound
from engine.facts import canonical_json
from engine.hitl import GateDecision, iso_utc
from engine.run_state import RunState
from engine.settings import EngineSettings
from engine.store import AuditEvent, GateRecord


def load_paused(eng: EngineSettings, gate_id: str, decision: GateDecision) -> RunState:
    """The run paused at ``gate_id``, with ``decision`` applied when it goes on.

    From this engine's memory (no store), or decided and claimed in the store.
    Raises ``GateNotFound``, ``GateAlreadyDecided``, ``GateExpired``,
    ``ResumeError`` or ``RunBusy``.
    """
    if not isinstance(decision, GateDecision):
        raise ResumeError(f"decision must be a GateDecision, got {type(decision).__name__}")
    if decision.value is not None:
        try:
            canonical_json(decision.value)
        except (TypeError, ValueError) as exc:
            raise ResumeError(f"the decision's value is not JSON: {exc}") from exc
    runs = eng.runs
    st = runs.paused.get(gate_id)
    if eng.store is None:
        if st is None:
            done = runs.decided.get(gate_id)
            if done is not None:
                raise GateAlreadyDecided(gate_id, done[0], done[1], iso_utc(done[2]))
            raise GateNotFound(f"no pending gate {gate_id!r} in this engine (and no store)")
        del runs.paused[gate_id]
        status = "approved" if decision.approved else "rejected"
        runs.decided[gate_id] = (status, decision.by, time.time())
    else:
        with bulk_load() as load:
            st = load_paused_from_store(eng, gate_id, decision, st)
        st.frozen_on_load = load.froze
        runs.paused.pop(gate_id, None)
    assert st.pending_gate is not None
    st.pending_gate.decision = decision
    if decision.approved and decision.value is not None:
        _take_value(st, decision.value)
    st.leg_started = eng.clock()
    runs.enter(st.run_id)
    return st


def load_stopped(eng: EngineSettings, run_id: str, budget: Budget | None) -> RunState:
    """A run stopped resumably (or crashed), to go on with ``budget`` (None: its own).

    With a store, the ``run_resumed`` event (the leg's budget) is written in the
    claim's own transaction: a process killed right after its claim leaves the
    budget it was resuming with for the recovery. Raises ``RunNotFound``,
    ``RunFinished``, ``ResumeError`` or ``RunBusy``.
    """
    st = eng.runs.stopped.pop(run_id, None)
    if st is not None and eng.store is not None:
        # stopped in this process: still claim it, so a resume racing in another
        # process cannot continue it too (the epoch is the one this process wrote)
        if budget is not None:
            st.budget = budget
        try:
            st.epoch = eng.store.claim_resume(run_id, st.epoch, None, [_resumed(st)]).epoch
        except ResumeError:
            eng.runs.stopped[run_id] = st
            raise
    elif st is None and eng.store is not None:
        with bulk_load() as load:
            st = load_stopped_from_store(eng, run_id, budget)
        st.frozen_on_load = load.froze
    if st is None:
        raise RunNotFound(f"no resumable run {run_id!r} in this engine or its store")
    if budget is not None:
        st.budget = budget
    st.exhausted_overrides.clear()
    st.criteria_reports = ()
    st.leg_started = eng.clock()
    eng.runs.enter(run_id, clear_cancel=True)
    return st


def _resumed(st: RunState) -> AuditEvent:
    """The ``run_resumed`` event of a leg that goes on with ``st.budget``."""
    return AuditEvent(
        "run_resumed",
        st.cycle,
        {"budget": st.budget.model_dump(mode="json"), "from": st.resumed_from},
        time.time(),
    )


def _take_value(st: RunState, value: Any) -> None:
    """The approved proposal's content becomes the decision's ``value`` (a human answer)."""
    pg = st.pending_gate
    assert pg is not None
    proposals = st.merge_effects[pg.effect_index][1]
    proposals[pg.proposal_index] = proposals[pg.proposal_index]._replace(content=value)


def check_suggestors(engine: EngineSettings, recorded: list[str]) -> None:
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
    engine: EngineSettings, gate_id: str, decision: GateDecision, in_memory: RunState | None
) -> RunState:
    """Decide the gate in the store (compare-and-set), claim the run, load its state.

    Raises ``GateNotFound``, ``GateAlreadyDecided``, ``GateExpired``,
    ``ResumeError`` (other suggestors, corrupted checkpoint) or ``RunBusy``.
    Everything is validated before the compare-and-set, so bad input changes nothing.
    """
    store = engine.store
    assert store is not None
    gate = store.get_gate(gate_id)
    if gate.status != "pending":
        raise GateAlreadyDecided(gate_id, gate.status, gate.decided_by, iso_utc(gate.decided_at))
    if in_memory is not None:
        st = in_memory
        expected: int | None = st.epoch
    else:
        try:
            checkpoint = store.load_checkpoint(gate.run_id)
            expected = checkpoint.get("run_epoch")
            check_suggestors(engine, list(checkpoint.get("suggestors", [])))
            st = RunState.from_checkpoint(checkpoint, gate)
        except ResumeError:
            # a racing approver may have decided the gate and finished the run (its
            # checkpoint dropped or replaced) since we read the gate: say so
            now = store.get_gate(gate_id)
            if now.status != "pending":
                raise GateAlreadyDecided(
                    gate_id, now.status, now.decided_by, iso_utc(now.decided_at)
                ) from None
            raise
    if gate.expires_at is not None and time.time() > gate.expires_at:
        timeout_decision = GateDecision(
            approved=gate.on_timeout == "approve", by="timeout", reason="gate expired"
        )
        store.decide_gate(gate_id, timeout_decision, "expired")
        raise GateExpired(
            f"gate {gate_id} expired; decided by on_timeout={gate.on_timeout!r}. "
            f"Resume the run with `converge resume {gate.run_id}` "
            f"(Engine.resume_run in Python)"
        )
    status = "approved" if decision.approved else "rejected"
    store.decide_gate(gate_id, decision, status)
    # the claim expects the epoch the checkpoint was read at: if another process
    # claimed the run since (a resume after this decision), it continues and this
    # one gets RunBusy; the recorded decision (value included) is what it applies
    st.epoch = store.claim_resume(gate.run_id, expected).epoch
    # decide_gate chained gate_decided; the engine records run_resumed when it applies it
    return st


def recorded_decision(gate: GateRecord, value: Any = None) -> GateDecision:
    """The decision stored on a decided gate (an expired one: its ``on_timeout``),
    with ``value``, the human answer its chained ``gate_decided`` event carries."""
    if gate.status == "expired":
        return GateDecision(
            approved=gate.on_timeout == "approve", by=gate.decided_by or "timeout", reason=None
        )
    return GateDecision(
        approved=gate.status == "approved",
        by=gate.decided_by or "?",
        reason=gate.reason,
        value=value if gate.status == "approved" else None,
    )


def recorded_value(store: Any, gate: GateRecord) -> Any:
    """The ``value`` of the gate's chained ``gate_decided`` event (None when it has none)."""
    events = getattr(store, "events", None)
    if events is None or gate.status != "approved":
        return None
    for ev in reversed(events(gate.run_id, kinds=("gate_decided",))):
        if ev.payload.get("gate_id") == gate.gate_id:
            return ev.payload.get("value")
    return None


def load_stopped_from_store(
    engine: EngineSettings, run_id: str, budget: Budget | None = None
) -> RunState:
    """Load a run to continue, and claim it for this process.

    The run is stopped (budget, policy, cancel), paused on a gate decided without
    a resume (expired gate, decider gone: the recorded decision is applied, its
    value included), or ``crashed`` (left ``running`` by a dead process). Its
    checkpoint is read and checked first, then the run is claimed with a
    compare-and-set expecting the fencing epoch the checkpoint was read at: if any
    process claimed the run since, this one gets ``RunBusy`` and the state it read
    is dropped, so two resumes racing on one run cannot both continue it, and a
    resume that cannot start (other suggestors, a gate still pending) claims
    nothing. Raises ``RunNotFound``, ``RunFinished``, ``RunBusy`` or
    ``ResumeError`` (still waiting on a pending gate, other suggestors, corrupted
    checkpoint).
    """
    store = engine.store
    assert store is not None
    checkpoint = store.load_checkpoint(run_id)
    check_suggestors(engine, list(checkpoint.get("suggestors", [])))
    pending = checkpoint.get("pending_gate")
    gate: GateRecord | None = None
    if pending is not None:
        gate_id = pending.get("gate_id") if isinstance(pending, dict) else None
        if not isinstance(gate_id, str):
            raise ResumeError(f"corrupted checkpoint of run {run_id}: bad pending_gate")
        gate = store.get_gate(gate_id)
        if gate.status == "pending":
            raise ResumeError(
                f"run {run_id} waits on gate {gate_id}; decide it with "
                f"`converge approve {gate_id} --by NAME` or "
                f"`converge reject {gate_id} --by NAME --reason WHY`"
            )
    st = RunState.from_checkpoint(checkpoint, gate)
    if st.pending_gate is not None and gate is not None:
        decision = recorded_decision(gate, recorded_value(store, gate))
        st.pending_gate.decision = decision
        if decision.approved and decision.value is not None:
            _take_value(st, decision.value)
    if checkpoint.get("run_status") == "running":
        # left running: crashed if its writer is gone (else the claim says RunBusy)
        st.resumed_from = "crash"
        st.facts_inline = True  # the replayed cycles' facts are chunked out of order
        _load_replayed(store, st)
    if budget is not None:
        st.budget = budget
    limit = st.budget.max_cycles
    if (
        limit is not None
        and st.cycle >= limit
        and st.pending_gate is None
        and st.resumed_from != "crash"
    ):
        # checked on the state this resume read: a resume that raced another one
        # and read the run after that one went on finds its budget already used
        raise ResumeError(
            f"run {run_id} has done {st.cycle} cycles already: max_cycles {limit} leaves "
            "nothing to continue (budgets are totals: give a larger one)"
        )
    expected = (checkpoint.get("run_epoch"), checkpoint.get("run_seq"))
    st.epoch = store.claim_resume(run_id, *expected, [_resumed(st)]).epoch
    return st


def _load_replayed(store: Any, st: RunState) -> None:
    """What the dead process recorded after the checkpoint: facts, decisions, and
    the budget its leg ran with (the last ``run_resumed``'s), which the recovery
    goes on with unless its caller gives another: a leg resumed with more budget
    and killed is recovered to where it would have stopped."""
    events = getattr(store, "events", None)
    if events is None:
        return
    known = {f.id for f in st.context}
    for ev in events(st.run_id, kinds=("fact_promoted", "run_resumed")):
        if ev.kind == "fact_promoted":
            if ev.payload["id"] not in known:
                st.replayed[ev.payload["id"]] = ev.payload
        elif "gate_id" in ev.payload:
            st.replayed_gates.add(ev.payload["gate_id"])
        elif isinstance(ev.payload.get("budget"), dict):
            st.budget = Budget.model_validate(ev.payload["budget"])
