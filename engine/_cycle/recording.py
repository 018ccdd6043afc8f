"""Recording a run in its store: batched audit events, checkpoints, the facts root.

Events gather in ``Run.events`` during a cycle and are written in one batch
when the cycle goes on, the run stops or it pauses (docs/audit.md). With no store
nothing is built. A failing store never crashes a run: the run stops with
``Error(error_category="storage")`` and keeps its facts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from engine._cycle.accounting import run_result
from engine._cycle.run import Run
from engine.errors import StoreError
from engine.facts import fact_to_dict
from engine.hashing.merkle import SALTED
from engine.result import RunResult
from engine.settings import EngineSettings
from engine.status import RunStatus
from engine.stop import Error, ErrorCategory, HitlGatePending, StopReason
from engine.store import AuditEvent, BatchItem, RunHeader, RunOutcome, RunStore, expand_events


def record_start(settings: EngineSettings, run: Run) -> None:
    """``run_started`` with the budget and the initial facts; the run's header row."""
    run.record(
        AuditEvent(
            "run_started",
            0,
            {
                "run_id": run.run_id,
                "job": settings.job_name,
                "suggestors": list(settings.suggestor_names),
                "budget": run.budget.model_dump(mode="json"),
                "initial_facts": _initial_facts(run),
                "facts_merkle": run.integrity.scheme,
            },
            time.time(),
        )
    )
    start_in_store(settings, run)


def _initial_facts(run: Run) -> list[dict[str, Any]]:
    """The ``initial_facts`` of ``run_started``: each fact's dict, with its salt in a
    run of chain format 2 (``engine.hashing.commitment``)."""
    if run.integrity.scheme != SALTED:
        return [fact_to_dict(f) for f in run.context]
    seal = run.integrity.seal
    return [{**fact_to_dict(f), "salt": seal(f)} for f in run.context]


def start_in_store(
    settings: EngineSettings, run: Run, parent_run_id: str | None = None, *, queued: bool = False
) -> None:
    """Write the run's header row (its fork's ``parent_run_id``) with the events
    gathered (its ``run_started``) and, with ``checkpoint_at_start``, a checkpoint of
    cycle 0. ``queued``: recorded for another process to drive, with its checkpoint;
    a ``StoreError`` then reaches the caller (no run goes on here to stop)."""
    header = RunHeader(
        run.run_id,
        settings.job_name,
        settings.job_spec,
        settings.suggestor_names,
        # a queued run's legs have not started: it was recorded now
        time.time() if queued else run.spend.wall_started,
        parent_run_id=parent_run_id,
        queued=queued,
    )
    events = take_events(settings, run)
    if settings.store is None:  # streamed only
        emit(settings, run, events)
        return
    if queued:
        settings.store.start_run(header, events, checkpoint_of(settings, run))
        return
    if (
        settings.checkpoint_at_start
        and getattr(settings.store, "save_checkpoint", None) is not None
    ):
        data = checkpoint_of(settings, run)
        if store_call(settings, run, lambda s: s.start_run(header, events, data)):
            emit(settings, run, events, after=1)  # its checkpoint_saved
    elif store_call(settings, run, lambda s: s.start_run(header, events)):
        emit(settings, run, events)


def record_stop(
    settings: EngineSettings, run: Run, ordered: list[StopReason], result: RunResult
) -> RunResult:
    """Write the stop (signals, ``run_stopped``, the outcome, a checkpoint when the
    run is resumable); ``result``, or an ``Error(storage)`` result if the write failed.
    With no store (a streamed run), the events go to its listener only."""
    reason = result.stop_reason
    for s in ordered:
        run.record(
            AuditEvent("stop_signal", run.cursor.cycle, s.model_dump(mode="json"), time.time())
        )
    outcome, payload = run_outcome(run, RunStatus.STOPPED, reason, result)
    payload["budget_status"] = result.budget_status.model_dump(mode="json")
    run.record(AuditEvent("run_stopped", run.cursor.cycle, payload, time.time()))
    if settings.store is None:
        emit(settings, run, take_events(settings, run))
        return result
    checkpoint = checkpoint_of(settings, run) if reason.is_resumable() else None
    events = take_events(settings, run)
    try:
        settings.store.finish_run(run.run_id, events, outcome, checkpoint)
    except StoreError as exc:
        failed = _storage_failed(settings, run, exc, tuple(ordered))
        _record_failed_stop(settings, run, failed)
        return failed
    if run.listener is not None:
        emit(settings, run, events)
    return result


def _record_failed_stop(settings: EngineSettings, run: Run, failed: RunResult) -> None:
    """After a final write failed (a checkpoint too large, an event the store refused),
    record at least the stop: the storage error, with no checkpoint and none of the
    events that failed, so that the run is not left ``running``."""
    assert settings.store is not None
    outcome, payload = run_outcome(run, RunStatus.STOPPED, failed.stop_reason, failed)
    payload["budget_status"] = failed.budget_status.model_dump(mode="json")
    event = AuditEvent("run_stopped", run.cursor.cycle, payload, time.time())
    # if the store is gone too, the result returned still says why
    with contextlib.suppress(StoreError):
        settings.store.finish_run(run.run_id, [event], outcome, None)
        emit(settings, run, [event])


def record_pause(
    settings: EngineSettings, run: Run, reason: HitlGatePending, result: RunResult
) -> RunResult:
    """Write ``gate_opened``, ``run_paused``, the gate row and the checkpoint (with no
    store, a streamed run's events go to its listener only)."""
    assert run.gating.pending_gate is not None
    rec = run.gating.pending_gate.record
    run.record(
        AuditEvent(
            "gate_opened",
            run.cursor.cycle,
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
    outcome, payload = run_outcome(run, RunStatus.PAUSED, reason, result)
    run.record(AuditEvent("run_paused", run.cursor.cycle, payload, time.time()))
    if settings.store is None:
        emit(settings, run, take_events(settings, run))
        return result
    checkpoint = checkpoint_of(settings, run)
    events = take_events(settings, run)
    try:
        settings.store.pause_run(run.run_id, events, outcome, rec, checkpoint)
    except StoreError as exc:
        return _storage_failed(settings, run, exc, (reason,))
    if run.listener is not None:
        emit(settings, run, events)
    return result


def _storage_failed(
    settings: EngineSettings, run: Run, exc: StoreError, signals: tuple[StopReason, ...]
) -> RunResult:
    err = Error(message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE)
    return run_result(settings, run, err, (err, *signals))


def run_outcome(
    run: Run, status: str, reason: StopReason, result: RunResult
) -> tuple[RunOutcome, dict[str, Any]]:
    """The row a store keeps for a stopped or paused run, and what its
    ``run_stopped`` / ``run_paused`` event chains of it: the stop (kind, category,
    reason), cycles, facts count, facts root, usage, end time and duration — the
    columns of the ``runs`` row, so that ``verify`` can check them."""
    facts = run.facts.facts
    u = run.spend.usage
    outcome = RunOutcome(
        status=status,
        stop_reason=reason,
        cycles=run.cursor.cycle,
        facts_count=len(facts),
        facts_root=run.integrity.root(facts),
        usage=u,
        duration_ms=result.duration_ms,
        ended_at=time.time(),
    )
    payload = {
        "kind": reason.kind,
        "category": reason.category_.value,
        "reason": reason.model_dump(mode="json"),
        "cycles": outcome.cycles,
        "facts_count": outcome.facts_count,
        "facts_root": outcome.facts_root,
        "usage": [u.input_tokens, u.output_tokens, u.cost_usd],
        "ended_at": outcome.ended_at,
        "duration_ms": outcome.duration_ms,
    }
    return outcome, payload


def take_events(settings: EngineSettings, run: Run) -> Sequence[BatchItem]:
    """The events gathered so far (and no longer in ``run``), minus those a crashed
    process recorded already when this run replays its cycles.

    Promoted facts stay :class:`engine.store.PromotedFacts` batches for a store that
    takes them (``promoted_facts_batches``); any other store gets one event per fact.
    """
    events = run.take_events()
    if run.recovery.replaying:
        kept, differ = run.recovery.drop_replayed(expand_events(events))
        if differ:
            run.cursor.signal(
                Error(
                    message=(
                        f"audit store refused to record a fact id a second time in run "
                        f"{run.run_id}: {', '.join(differ)} recorded with other content "
                        "before the crash this run recovers from (a non-deterministic "
                        "suggestor)"
                    ),
                    error_category=ErrorCategory.STORAGE,
                )
            )
        return kept
    if not getattr(settings.store, "promoted_facts_batches", False):
        return expand_events(events)
    return events


def flush(settings: EngineSettings, run: Run) -> None:
    """Write the events gathered so far (end of a cycle that goes on)."""
    events = take_events(settings, run)
    if events:
        if settings.store is None:  # streamed only
            emit(settings, run, events)
            return
        try:
            settings.store.append_events(run.run_id, events)
        except StoreError as exc:
            run.cursor.signal(
                Error(message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE)
            )
            return
        if run.listener is not None:
            emit(settings, run, events)


def checkpoint(settings: EngineSettings, run: Run) -> None:
    """Write the cycle's events and a checkpoint of the run in flight, so that crash
    recovery replays at most ``checkpoint_every`` cycles (stores without
    ``save_checkpoint`` get the events only)."""
    save = getattr(settings.store, "save_checkpoint", None)
    if save is None:
        flush(settings, run)
        return
    events = take_events(settings, run)
    data = checkpoint_of(settings, run)
    if store_call(settings, run, lambda s: save(run.run_id, events, data)):
        emit(settings, run, events, after=1)  # its checkpoint_saved


def checkpoint_of(settings: EngineSettings, run: Run) -> dict[str, Any]:
    """The run's checkpoint; its facts by reference when the store keeps fact chunks
    (``keeps_fact_chunks``), so that a checkpoint costs the same at any length."""
    chunked = getattr(settings.store, "keeps_fact_chunks", False) and not run.recovery.facts_inline
    return run.to_checkpoint(settings.suggestor_names, with_facts=not chunked)


def store_call(settings: EngineSettings, run: Run, fn: Callable[[RunStore], None]) -> bool:
    """Call the store (True: done); a ``StoreError`` becomes a pending
    ``Error(storage)`` signal (False)."""
    assert settings.store is not None
    try:
        fn(settings.store)
    except StoreError as exc:
        run.cursor.signal(
            Error(message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE)
        )
        return False
    return True


def emit(settings: EngineSettings, run: Run, events: Sequence[BatchItem], after: int = 0) -> None:
    """Hand ``events``, just recorded, to the run's listener (if one streams it), with
    the seq of the last of them: the store's last seq of the run (``last_seq``, a
    store without it: None), less the ``after`` events the store chained after them
    (a ``checkpoint_saved``)."""
    listener = run.listener
    if listener is None or not events:
        return
    last: int | None = None
    seq_of = getattr(settings.store, "last_seq", None)
    if seq_of is not None:
        try:
            last = int(seq_of(run.run_id)) - after
        except StoreError:
            last = None
    listener.recorded(run.run_id, events, last)
