"""The engine: a façade over the steps of the cycle (docs/concepts.md).

A run alternates *cycles*: find the eligible suggestors (:mod:`engine._cycle.prelude`),
execute them (:mod:`engine._cycle.execute`), collect their outcomes
(:mod:`engine._cycle.collect`), merge their proposals into facts (:mod:`engine._cycle.merge`),
then judge the stop (:mod:`engine._cycle.judge`); :mod:`engine._cycle.steps` drives it,
:mod:`engine._cycle.recording` writes the audit trail and :mod:`engine._cycle.resume` loads
paused and stopped runs back. Every end is one ``StopReason``; whatever ends the
run, the facts promoted so far are returned.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any

from engine._cycle.accounting import run_stats
from engine._cycle.resume import load_paused, load_stopped
from engine._cycle.start import start
from engine._cycle.steps import drive_async, drive_sync
from engine._cycle.streaming import EventBuffer, stream_async, stream_sync
from engine.budget import Budget
from engine.events import RunEvent
from engine.fork import load_fork
from engine.hitl import GateDecision
from engine.policy import RunStats
from engine.result import RunResult
from engine.settings import EngineSettings, OnStop
from engine.suggestor import Suggestor

__all__ = ["Engine", "OnStop"]


class Engine(EngineSettings):
    """Runs registered suggestors over a shared context until a typed stop.

    ``Engine(budget=None, criteria=(), invariants=(), gates=(), stop_policies=(),
    store=None, on_error="stop", on_stop=None, *, max_concurrency=64, clock=None,
    job_name=None, job_spec=None, progress=None, executor=None)``: see
    :class:`engine.settings.EngineSettings` for each argument. Raises
    :class:`ConfigurationError` for bad arguments.
    """

    def register(self, *suggestors: Suggestor) -> Engine:
        """Add suggestors; their order of registration is the merge order.

        Raises :class:`ConfigurationError` for a duplicate name or an object that
        is not a suggestor. Returns the engine, for chaining.
        """
        self.registry.add(*suggestors)
        return self

    def cancel(self, run_id: str | None = None) -> None:
        """Ask a run (or every run of this engine in flight) to stop.

        Thread-safe. Sync work finishes its cycle; in-flight async suggestors are
        cancelled within ``engine._cycle.execute.CANCEL_POLL_S`` (50 ms). The run ends
        with ``UserCancelled`` and keeps the facts promoted before.
        """
        self.runs.cancel(run_id)

    def run(
        self, initial: Mapping[str, Iterable[Any]] | None = None, run_id: str | None = None
    ) -> RunResult:
        """Run to a stop. ``initial`` maps keys to lists of contents (provenance "input").

        Async suggestors run on a private event loop; sync ones take a fast path
        with none. Never raises for a suggestor's failure (the run stops instead);
        raises :class:`ConfigurationError` for bad ``initial`` input, and its
        ``InvalidRunId`` for a ``run_id`` that is no run id (``engine.run_ids``:
        letters, digits, ``.``, ``_``, ``:``, ``-``; None: a new one).
        """
        return drive_sync(self, start(self, initial, run_id))

    async def arun(
        self, initial: Mapping[str, Iterable[Any]] | None = None, run_id: str | None = None
    ) -> RunResult:
        """Like :meth:`run`, inside the caller's event loop.

        ``max_seconds`` is enforced by cancelling in-flight async executions.
        """
        return await drive_async(self, start(self, initial, run_id))

    def stream(
        self, initial: Mapping[str, Iterable[Any]] | None = None, run_id: str | None = None
    ) -> Iterator[RunEvent | RunResult]:
        """Like :meth:`run`, yielding the run's events as they are recorded
        (:mod:`engine.events`: ``RunStarted``, ``CycleStarted``, ``SuggestorExecuted``,
        ``FactPromoted``, ``GateOpened``, ``RunPaused``, ``RunStopped``...; ``seq``
        None without a store), then its :class:`RunResult` last (docs/streaming.md).

        The run starts at the first ``next()``; it runs on the caller's thread,
        between the events. Closing the iterator early (``break``) cancels the run:
        it stops ``UserCancelled``, recorded, before the close returns.
        """
        buffer = EventBuffer()
        yield from stream_sync(self, start(self, initial, run_id, buffer), buffer)

    async def astream(
        self, initial: Mapping[str, Iterable[Any]] | None = None, run_id: str | None = None
    ) -> AsyncIterator[RunEvent | RunResult]:
        """Like :meth:`stream`, inside the caller's event loop (as :meth:`arun`)."""
        buffer = EventBuffer()
        async for item in stream_async(self, start(self, initial, run_id, buffer), buffer):
            yield item

    def stream_resume(self, gate_id: str, decision: GateDecision) -> Iterator[RunEvent | RunResult]:
        """Like :meth:`resume`, yielding the leg's events (its ``RunResumed`` first: the
        store chained the ``gate_decided`` before it) as :meth:`stream` does, then
        its result. Raises as :meth:`resume`, at the first ``next()``."""
        buffer = EventBuffer()
        yield from stream_sync(self, load_paused(self, gate_id, decision, buffer), buffer)

    async def astream_resume(
        self, gate_id: str, decision: GateDecision
    ) -> AsyncIterator[RunEvent | RunResult]:
        """Async form of :meth:`stream_resume`."""
        buffer = EventBuffer()
        async for item in stream_async(self, load_paused(self, gate_id, decision, buffer), buffer):
            yield item

    def stream_resume_run(
        self, run_id: str, budget: Budget | None = None
    ) -> Iterator[RunEvent | RunResult]:
        """Like :meth:`resume_run`, yielding the leg's events (``RunResumed`` first)
        then its result, as :meth:`stream` does."""
        buffer = EventBuffer()
        yield from stream_sync(self, load_stopped(self, run_id, budget, buffer), buffer)

    def resume(self, gate_id: str, decision: GateDecision) -> RunResult:
        """Decide a pending HITL gate and continue its run to the next stop.

        Approve → the proposal is promoted; reject → it is dropped and recorded
        (a ``hitl.rejected`` diagnostic fact). Works in this process without a
        store, or from the store in another process. Raises ``GateNotFound``,
        ``GateAlreadyDecided``, ``GateExpired``, ``ResumeError`` or ``RunBusy``.
        """
        return drive_sync(self, load_paused(self, gate_id, decision))

    async def aresume(self, gate_id: str, decision: GateDecision) -> RunResult:
        """Async form of :meth:`resume`."""
        return await drive_async(self, load_paused(self, gate_id, decision))

    def resume_run(self, run_id: str, budget: Budget | None = None) -> RunResult:
        """Continue a run stopped by a budget, a policy or a cancel, with ``budget``.

        The answer to "I hit the limit, keep what was done and go on": the facts,
        counters and usage carry over; only the budget changes. Raises
        ``RunNotFound`` or ``ResumeError`` (run not resumable, other suggestors).
        """
        return drive_sync(self, load_stopped(self, run_id, budget))

    def fork(self, run_id: str, cycle: int, budget: Budget | None = None) -> RunResult:
        """Start a new run from the state after ``cycle`` of the stored run ``run_id``
        (its facts, ids and provenance, counters, dirty keys: :mod:`engine.fork`),
        with this engine's suggestors and ``budget`` (None: the engine's), to its stop.

        The fork has its own run id; its ``run_started`` carries ``forked_from:
        {run, cycle, facts_root, facts: {count, frontier}, parent_head}``: a
        reference to the parent's facts up to ``cycle``, not a copy (O(1) in the
        parent's size); the parent is only read, its chain verified up to ``cycle``
        first. Raises ``engine.fork.ForkError`` (no store, a
        cycle the store cannot rebuild; ``UnverifiedParent`` for a parent whose
        chain fails up to there: nothing is recorded) or ``RunNotFound``.
        """
        return drive_sync(self, load_fork(self, run_id, cycle, budget))

    def record_fork(self, run_id: str, cycle: int, budget: Budget | None = None) -> str:
        """Record a fork of ``run_id`` at ``cycle`` (as :meth:`fork`) without driving
        it: its ``run_started`` and a checkpoint at the fork point, the run left
        ``queued`` for a worker (``converge.service.execute_run``) or
        :meth:`resume_run` to drive to its stop. Returns the new run id. Raises as
        :meth:`fork`, and ``StoreError`` when the store cannot record it.
        """
        return load_fork(self, run_id, cycle, budget, queued=True).run_id

    def stats(self, result: RunResult) -> RunStats | None:
        """The last :class:`RunStats` of a run kept by this engine (stopped or paused)."""
        run = self.runs.stopped.get(result.run_id)
        if run is None:
            run = next((s for s in self.runs.paused.values() if s.run_id == result.run_id), None)
        return run_stats(self, run) if run is not None else None
