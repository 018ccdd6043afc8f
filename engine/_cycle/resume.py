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

from engine._cycle.collector import bulk_load
from engine._cycle.recording import emit
from engine._cycle.run import Listener, Run
from engine.budget import Budget
from engine.errors import GateAlreadyDecided, GateExpired, GateNotFound, ResumeError, RunNotFound
from engine.facts import canonical_json
from engine.hitl import GateDecision, iso_utc
from engine.settings import EngineSettings
from engine.status import GateStatus, RunStatus
from engine.store import AuditEvent, GateRecord


def load_paused(
    settings: EngineSettings,
    gate_id: str,
    decision: GateDecision,
    listener: Listener | None = None,
) -> Run:
    """The run paused at ``gate_id``, with ``decision`` applied when it goes on.

    From this engine's memory (no store), or from the store: the gate decided there
    (compare-and-set), the run claimed, its state loaded. Everything is validated
    before the compare-and-set, so bad input changes nothing. Raises
    ``GateNotFound``, ``GateAlreadyDecided``, ``GateExpired``, ``ResumeError``
    (other suggestors, corrupted checkpoint) or ``RunBusy``.
    """
    if not isinstance(decision, GateDecision):
        raise ResumeError(f"decision must be a GateDecision, got {type(decision).__name__}")
    if decision.value is not None:
        try:
            canonical_json(decision.value)
        except (TypeError, ValueError) as exc:
            raise ResumeError(f"the decision's value is not JSON: {exc}") from exc
    runs = settings.runs
    run = runs.paused.get(gate_id)
    store = settings.store
    if store is None:
        run = _decided_in_memory(settings, gate_id, decision, run)
    else:
        gate = store.get_gate(gate_id)
        if gate.status != GateStatus.PENDING:
            raise GateAlreadyDecided(
                gate_id, gate.status, gate.decided_by, iso_utc(gate.decided_at)
            )
        with bulk_load() as load:
            if run is not None:
                expected: int | None = run.recovery.epoch
            else:
                try:
                    checkpoint = store.load_checkpoint(gate.run_id)
                    expected = checkpoint.get("run_epoch")
                    run = Run.from_checkpoint(checkpoint, gate, settings.registry.names)
                except ResumeError:
                    # a racing approver may have decided the gate and finished the run
                    # (its checkpoint dropped or replaced) since we read the gate: say so
                    now = store.get_gate(gate_id)
                    if now.status != GateStatus.PENDING:
                        raise GateAlreadyDecided(
                            gate_id, now.status, now.decided_by, iso_utc(now.decided_at)
                        ) from None
                    raise
            if gate.expires_at is not None and time.time() > gate.expires_at:
                timeout_decision = GateDecision(
                    approved=gate.on_timeout == "approve", by="timeout", reason="gate expired"
                )
                store.decide_gate(gate_id, timeout_decision, GateStatus.EXPIRED)
                raise GateExpired(
                    f"gate {gate_id} expired; decided by on_timeout={gate.on_timeout!r}. "
                    f"Resume the run with `converge resume {gate.run_id}` "
                    f"(Engine.resume_run in Python)"
                )
            status = GateStatus.APPROVED if decision.approved else GateStatus.REJECTED
            store.decide_gate(gate_id, decision, status)
            # the claim expects the epoch the checkpoint was read at: if another process
            # claimed the run since (a resume after this decision), it continues and this
            # one gets RunBusy; the recorded decision (value included) is what it applies
            run.recovery.claimed(store.claim_resume(gate.run_id, expected).epoch)
            # decide_gate chained gate_decided; the engine records run_resumed when it
            # applies it
        run.recovery.loaded(load.froze)
        runs.paused.pop(gate_id, None)
    run.gating.decide(decision)
    if decision.approved and decision.value is not None:
        _take_value(run, decision.value)
    run.spend.start_leg(settings.clock())
    runs.enter(run.run_id)
    if listener is not None:  # its run_resumed is recorded when the decision is applied
        run.stream_to(listener)
    return run


def _decided_in_memory(
    settings: EngineSettings, gate_id: str, decision: GateDecision, run: Run | None
) -> Run:
    """(no store) The run paused at ``gate_id`` in this engine, its gate decided
    here; raises ``GateAlreadyDecided`` or ``GateNotFound``."""
    runs = settings.runs
    if run is None:
        done = runs.decided.get(gate_id)
        if done is not None:
            raise GateAlreadyDecided(gate_id, done[0], done[1], iso_utc(done[2]))
        raise GateNotFound(f"no pending gate {gate_id!r} in this engine (and no store)")
    del runs.paused[gate_id]
    status = GateStatus.APPROVED if decision.approved else GateStatus.REJECTED
    runs.decided[gate_id] = (status, decision.by, time.time())
    return run


def load_stopped(
    settings: EngineSettings,
    run_id: str,
    budget: Budget | None,
    listener: Listener | None = None,
) -> Run:
    """A run stopped resumably (or crashed), to go on with ``budget`` (None: its own).

    With a store, the ``run_resumed`` event (the leg's budget) is written in the
    claim's own transaction: a process killed right after its claim leaves the
    budget it was resuming with for the recovery. Raises ``RunNotFound``,
    ``RunFinished``, ``ResumeError`` or ``RunBusy``.
    """
    run = settings.runs.stopped.pop(run_id, None)
    if run is not None and settings.store is not None:
        # stopped in this process: still claim it, so a resume racing in another
        # process cannot continue it too (the epoch is the one this process wrote)
        if budget is not None:
            run.adopt_budget(budget)
        try:
            run.recovery.claimed(
                settings.store.claim_resume(run_id, run.recovery.epoch, None, [_resumed(run)]).epoch
            )
        except ResumeError:
            settings.runs.stopped[run_id] = run
            raise
    elif run is None and settings.store is not None:
        with bulk_load() as load:
            run = load_stopped_from_store(settings, run_id, budget)
        run.recovery.loaded(load.froze)
    if run is None:
        raise RunNotFound(f"no resumable run {run_id!r} in this engine or its store")
    if budget is not None:
        run.adopt_budget(budget)
    run.spend.forget_overrides()
    run.cursor.judged(())
    run.spend.start_leg(settings.clock())
    settings.runs.enter(run_id, clear_cancel=True)
    if listener is not None:  # the run_resumed the claim chained (or none: no store)
        run.stream_to(listener)
        emit(settings, run, _leg_started(run, budget))
    return run


def _resumed(run: Run) -> AuditEvent:
    """The ``run_resumed`` event of a leg that goes on with ``run.budget``."""
    return AuditEvent(
        "run_resumed",
        run.cursor.cycle,
        {"budget": run.budget.model_dump(mode="json"), "from": run.recovery.resumed_from},
        time.time(),
    )


def _leg_started(run: Run, budget: Budget | None) -> list[AuditEvent]:
    """What a leg of :func:`load_stopped` records as it claims the run: its
    ``run_resumed`` with the budget it goes on with; nothing for a run paused at a
    gate decided elsewhere that goes on with its own budget (a worker's resume after
    ``converge serve`` or ``approve --detach`` decided it): its ``run_resumed``
    (``gate_id``) is recorded when the decision is applied, as after
    ``Engine.resume``, so the run reads the same whoever resumed it (and replays)."""
    pg = run.gating.pending_gate
    gate_leg = pg is not None and pg.decision is not None
    if gate_leg and budget is None and run.recovery.resumed_from == "stop":
        return []
    return [_resumed(run)]


def _take_value(run: Run, value: Any) -> None:
    """The approved proposal's content becomes the decision's ``value`` (a human answer)."""
    pg = run.gating.pending_gate
    assert pg is not None
    run.cursor.answer(pg.effect_index, pg.proposal_index, value)


def recorded_decision(gate: GateRecord, value: Any = None) -> GateDecision:
    """The decision stored on a decided gate (an expired one: its ``on_timeout``),
    with ``value``, the human answer its chained ``gate_decided`` event carries."""
    if gate.status == GateStatus.EXPIRED:
        return GateDecision(
            approved=gate.on_timeout == "approve", by=gate.decided_by or "timeout", reason=None
        )
    return GateDecision(
        approved=gate.status == GateStatus.APPROVED,
        by=gate.decided_by or "?",
        reason=gate.reason,
        value=value if gate.status == GateStatus.APPROVED else None,
    )


def recorded_value(store: Any, gate: GateRecord) -> Any:
    """The ``value`` of the gate's chained ``gate_decided`` event (None when it has none)."""
    events = getattr(store, "events", None)
    if events is None or gate.status != GateStatus.APPROVED:
        return None
    for ev in reversed(events(gate.run_id, kinds=("gate_decided",))):
        if ev.payload.get("gate_id") == gate.gate_id:
            return ev.payload.get("value")
    return None


def load_stopped_from_store(
    engine: EngineSettings, run_id: str, budget: Budget | None = None
) -> Run:
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
    pending = checkpoint.get("pending_gate")
    gate: GateRecord | None = None
    if pending is not None:
        gate_id = pending.get("gate_id") if isinstance(pending, dict) else None
        if not isinstance(gate_id, str):
            raise ResumeError(f"corrupted checkpoint of run {run_id}: bad pending_gate")
        gate = store.get_gate(gate_id)
        if gate.status == GateStatus.PENDING:
            raise ResumeError(
                f"run {run_id} waits on gate {gate_id}; decide it with "
                f"`converge approve {gate_id} --by NAME` or "
                f"`converge reject {gate_id} --by NAME --reason WHY`"
            )
    run = Run.from_checkpoint(checkpoint, gate, engine.registry.names)
    if run.gating.pending_gate is not None and gate is not None:
        decision = recorded_decision(gate, recorded_value(store, gate))
        run.gating.decide(decision)
        if decision.approved and decision.value is not None:
            _take_value(run, decision.value)
    if checkpoint.get("run_status") == RunStatus.RUNNING:
        # left running: crashed if its writer is gone (else the claim says RunBusy)
        run.recovery.after_crash()
        _load_replayed(store, run)
    elif checkpoint.get("run_status") == RunStatus.QUEUED:
        run.recovery.from_queue()  # a recorded fork: this leg is its first
    if budget is not None:
        run.adopt_budget(budget)
    limit = run.budget.max_cycles
    if (
        limit is not None
        and run.cursor.cycle >= limit
        and run.gating.pending_gate is None
        and run.recovery.resumed_from == "stop"
    ):
        # checked on the state this resume read: a resume that raced another one
        # and read the run after that one went on finds its budget already used
        raise ResumeError(
            f"run {run_id} has done {run.cursor.cycle} cycles already: max_cycles {limit} leaves "
            "nothing to continue (budgets are totals: give a larger one)"
        )
    expected = (checkpoint.get("run_epoch"), checkpoint.get("run_seq"))
    run.recovery.claimed(store.claim_resume(run_id, *expected, _leg_started(run, budget)).epoch)
    return run


def _load_replayed(store: Any, run: Run) -> None:
    """What the dead process recorded after the checkpoint: facts, decisions, the
    executions of the cycles after it, and the budget its leg ran with (the last
    ``run_resumed``'s), which the recovery goes on with unless its caller gives
    another: a leg resumed with more budget and killed is recovered to where it
    would have stopped."""
    events = getattr(store, "events", None)
    if events is None:
        return
    known = {f.id for f in run.context}
    checkpointed = run.cursor.cycle  # cycles are never run twice but in a recovery
    kinds = ("fact_promoted", "run_resumed", "suggestor_executed")
    for ev in events(run.run_id, kinds=kinds):
        if ev.kind == "suggestor_executed":
            name = ev.payload.get("suggestor")
            if ev.cycle > checkpointed and isinstance(name, str):
                run.recovery.replays_execution(ev.cycle, name, ev.payload)
        elif ev.kind == "fact_promoted":
            if ev.payload["id"] not in known:
                run.recovery.replays_fact(ev.payload["id"], ev.payload)
        elif "gate_id" in ev.payload:
            run.recovery.replays_gate(ev.payload["gate_id"])
        elif isinstance(ev.payload.get("budget"), dict):
            run.adopt_budget(Budget.model_validate(ev.payload["budget"]))
