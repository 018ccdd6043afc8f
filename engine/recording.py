"""Recording a run in its store: batched audit events, checkpoints, the facts root.

Events gather in ``RunState.events`` during a cycle and are written in one batch
when the cycle goes on, the run stops or it pauses (docs/audit.md). With no store
nothing is built. A failing store never crashes a run: the run stops with
``Error(error_category="storage")`` and keeps its facts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine.accounting import run_result
from engine.errors import StoreError
from engine.facts import fact_to_dict
from engine.integrity import fact_leaf
from engine.result import RunResult
from engine.run_state import RunState, drop_replayed
from engine.settings import EngineSettings
from engine.stop import Error, ErrorCategory, HitlGatePending, StopReason, stop_reason_to_dict
from engine.store import AuditEvent, BatchItem, RunHeader, RunOutcome, RunStore, expand_events


def record_start(eng: EngineSettings, st: RunState) -> None:
    """``run_started`` with the budget and the initial facts; the run's header row."""
    st.events.append(
        AuditEvent(
            "run_started",
            0,
            {
                "run_id": st.run_id,
                "job": eng.job_name,
                "suggestors": list(eng.suggestor_names),
                "budget": st.budget.model_dump(mode="json"),
                "initial_facts": [fact_to_dict(f) for f in st.context],
                "facts_merkle": st.frontier.scheme,
            },
            time.time(),
        )
    )
    header = RunHeader(st.run_id, eng.job_name, eng.job_spec, eng.suggestor_names, st.wall_started)
    events = take_events(eng, st)
    if eng.checkpoint_at_start and getattr(eng.store, "save_checkpoint", None) is not None:
        data = checkpoint_of(eng, st)
        store_call(eng, st, lambda s: s.start_run(header, events, data))
    else:
        store_call(eng, st, lambda s: s.start_run(header, events))


def record_stop(
    eng: EngineSettings, st: RunState, ordered: list[StopReason], result: RunResult
) -> RunResult:
    """Write the stop (signals, ``run_stopped``, the outcome, a checkpoint when the
    run is resumable); ``result``, or an ``Error(storage)`` result if the write failed."""
    assert eng.store is not None
    reason = result.stop_reason
    for s in ordered:
        st.events.append(AuditEvent("stop_signal", st.cycle, stop_reason_to_dict(s), time.time()))
    outcome = run_outcome(st, "stopped", reason, result)
    st.events.append(
        AuditEvent(
            "run_stopped",
            st.cycle,
            {
                **outcome_payload(outcome),
                "budget_status": result.budget_status.model_dump(mode="json"),
            },
            time.time(),
        )
    )
    checkpoint = checkpoint_of(eng, st) if reason.is_resumable() else None
    events = take_events(eng, st)
    try:
        eng.store.finish_run(st.run_id, events, outcome, checkpoint)
    except StoreError as exc:
        failed = _storage_failed(eng, st, exc, tuple(ordered))
        _record_failed_stop(eng, st, failed)
        return failed
    return result


def _record_failed_stop(eng: EngineSettings, st: RunState, failed: RunResult) -> None:
    """After a final write failed (a checkpoint too large, an event the store refused),
    record at least the stop: the storage error, with no checkpoint and none of the
    events that failed, so that the run is not left ``running``."""
    assert eng.store is not None
    outcome = run_outcome(st, "stopped", failed.stop_reason, failed)
    event = AuditEvent(
        "run_stopped",
        st.cycle,
        {**outcome_payload(outcome), "budget_status": failed.budget_status.model_dump(mode="json")},
        time.time(),
    )
    # if the store is gone too, the result returned still says why
    with contextlib.suppress(StoreError):
        eng.store.finish_run(st.run_id, [event], outcome, None)


def record_pause(
    eng: EngineSettings, st: RunState, reason: HitlGatePending, result: RunResult
) -> RunResult:
    """Write ``gate_opened``, ``run_paused``, the gate row and the checkpoint."""
    assert eng.store is not None and st.pending_gate is not None
    rec = st.pending_gate.record
    st.events.append(
        AuditEvent(
            "gate_opened",
            st.cycle,
            {
                "gate_id": rec.gate_id,
                "proposal_id": rec.proposal_id,
                "proposal": rec.proposal,
                "suggestor": rec.suggestor,
                "summary": rec.summary,
                "policy": rec.policy,
                # what the gate row keeps and a deadline reads: verify checks it
                "opened_at": rec.opened_at,
                "expires_at": rec.expires_at,
                "on_timeout": rec.on_timeout,
                **rec.extra,
            },
            time.time(),
        )
    )
    outcome = run_outcome(st, "paused", reason, result)
    st.events.append(AuditEvent("run_paused", st.cycle, outcome_payload(outcome), time.time()))
    checkpoint = checkpoint_of(eng, st)
    events = take_events(eng, st)
    try:
        eng.store.pause_run(st.run_id, events, outcome, rec, checkpoint)
    except StoreError as exc:
        return _storage_failed(eng, st, exc, (reason,))
    return result


def _storage_failed(
    eng: EngineSettings, st: RunState, exc: StoreError, signals: tuple[StopReason, ...]
) -> RunResult:
    err = Error(message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE)
    return run_result(eng, st, err, (err, *signals))


def run_outcome(st: RunState, status: str, reason: StopReason, result: RunResult) -> RunOutcome:
    """The row a store keeps for a stopped or paused run."""
    return RunOutcome(
        status=status,
        stop_reason=reason,
        cycles=st.cycle,
        facts_count=len(st.context),
        facts_root=facts_root_of(st),
        usage=st.usage,
        duration_ms=result.duration_ms,
        ended_at=time.time(),
    )


def outcome_payload(outcome: RunOutcome) -> dict[str, Any]:
    """What a ``run_stopped`` / ``run_paused`` event chains of the run's outcome: the
    stop (kind, category, reason), cycles, facts count, facts root, usage, end time
    and duration — the columns a store's ``runs`` row holds, so that ``verify`` can
    check them."""
    reason = outcome.stop_reason
    u = outcome.usage
    return {
        "kind": reason.kind_code(),
        "category": reason.category.value,
        "reason": stop_reason_to_dict(reason),
        "cycles": outcome.cycles,
        "facts_count": outcome.facts_count,
        "facts_root": outcome.facts_root,
        "usage": [u.input_tokens, u.output_tokens, u.cost_usd],
        "ended_at": outcome.ended_at,
        "duration_ms": outcome.duration_ms,
    }


def take_events(eng: EngineSettings, st: RunState) -> Sequence[BatchItem]:
    """The events gathered so far (and no longer in ``st``), minus those a crashed
    process recorded already when this run replays its cycles.

    Promoted facts stay :class:`engine.store.PromotedFacts` batches for a store that
    takes them (``promoted_facts_batches``); any other store gets one event per fact.
    """
    events = st.events
    st.events = []
    if st.replayed or st.replayed_gates:
        kept, differ = drop_replayed(st, expand_events(events))
        if differ:
            st.pending_signals.append(
                Error(
                    message=(
                        f"audit store refused to record a fact id a second time in run "
                        f"{st.run_id}: {', '.join(differ)} recorded with other content "
                        "before the crash this run recovers from (a non-deterministic "
                        "suggestor)"
                    ),
                    error_category=ErrorCategory.STORAGE,
                )
            )
        return kept
    if not getattr(eng.store, "promoted_facts_batches", False):
        return expand_events(events)
    return events


def flush(eng: EngineSettings, st: RunState) -> None:
    """Write the events gathered so far (end of a cycle that goes on)."""
    events = take_events(eng, st)
    if events:
        store_call(eng, st, lambda s: s.append_events(st.run_id, events))


def checkpoint(eng: EngineSettings, st: RunState) -> None:
    """Write the cycle's events and a checkpoint of the run in flight, so that crash
    recovery replays at most ``checkpoint_every`` cycles (stores without
    ``save_checkpoint`` get the events only)."""
    save = getattr(eng.store, "save_checkpoint", None)
    if save is None:
        flush(eng, st)
        return
    events = take_events(eng, st)
    data = checkpoint_of(eng, st)
    store_call(eng, st, lambda s: save(st.run_id, events, data))


def checkpoint_of(eng: EngineSettings, st: RunState) -> dict[str, Any]:
    """The run's checkpoint; its facts by reference when the store keeps fact chunks
    (``keeps_fact_chunks``), so that a checkpoint costs the same at any length."""
    chunked = getattr(eng.store, "keeps_fact_chunks", False) and not st.facts_inline
    return st.to_checkpoint(eng.suggestor_names, with_facts=not chunked)


def store_call(eng: EngineSettings, st: RunState, fn: Callable[[RunStore], None]) -> None:
    """Call the store; a ``StoreError`` becomes a pending ``Error(storage)`` signal."""
    assert eng.store is not None
    try:
        fn(eng.store)
    except StoreError as exc:
        st.pending_signals.append(
            Error(message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE)
        )


def facts_root_of(st: RunState) -> str:
    """The Merkle root of the run's facts, kept incrementally: each stop or pause
    hashes only the facts promoted since the previous one."""
    catch_up_leaves(st)
    st.fold_leaves()
    return st.frontier.root()


def catch_up_leaves(st: RunState) -> None:
    """Add the Merkle leaves of facts promoted without one (input, old checkpoints)."""
    leaves = st.leaves
    facts = st.context._facts
    scheme = st.frontier.scheme
    for i in range(st.frontier.count + len(leaves), len(facts)):
        leaves.append(fact_leaf(facts[i], scheme))
