"""Executing one cycle's eligible suggestors (docs/concepts.md (step 4)).

Sync suggestors run in registration order on the caller's thread (the fast path:
no event loop, no ``Effect`` for a plain list). When a cycle has async suggestors
they run concurrently (at most ``max_concurrency`` in flight) while the sync ones
run inline; in-flight async work is cut at the time budget or by
``Engine.cancel()``. With ``Engine(executor=...)`` the cycle goes to that
:class:`engine.executor.Executor` instead (:func:`execute_elsewhere`). An
*outcome* per admitted suggestor is handed to :mod:`engine._cycle.collect`: what it
returned, the exception it raised, or a marker (timed out, cancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine._cycle.accounting import elapsed_ms
from engine._cycle.collect import Collect, Outcome
from engine._cycle.cycling import Cycling
from engine._cycle.run import Run
from engine.context import Context
from engine.effect import Effect
from engine.errors import ConfigurationError, ExecutorUnavailable, StopRun
from engine.executor import CANCELLED, NOT_DONE, TIMED_OUT, CycleWork
from engine.facts import Proposal
from engine.settings import EngineSettings
from engine.stop import Error, ErrorCategory, InvocationBudgetExhausted

__all__ = [
    "CANCELLED",
    "CANCEL_POLL_S",
    "NOT_DONE",
    "TIMED_OUT",
    "Execute",
    "admit",
    "execute_async",
    "execute_elsewhere",
    "execute_in_order",
    "execute_sorting",
]

CANCEL_POLL_S = 0.05
"""How often (seconds) in-flight async work checks for ``Engine.cancel()``."""


def execute_in_order(
    execute: Sequence[Callable[[Context], Any]],
    ctx: Context,
    eligible: Iterable[int],
    stop_on_error: bool,
) -> list[Outcome]:
    """Run the sync suggestors ``execute[i]`` of ``eligible`` on ``ctx``, in order, on
    this thread: an outcome each (what it returned, or the exception it raised), up to
    the first refusal, ``StopRun`` or (``stop_on_error``) exception.
    ``KeyboardInterrupt`` and ``SystemExit`` propagate."""
    return execute_sorting(execute, ctx, eligible, stop_on_error)[0]


def execute_sorting(
    execute: Sequence[Callable[[Context], Any]],
    ctx: Context,
    eligible: Iterable[int],
    stop_on_error: bool,
) -> tuple[list[Outcome], bool]:
    """:func:`execute_in_order`, and whether every outcome is plain: a list of plain
    :class:`Proposal` (not a subclass) or None, which the plain loop merges as it is.
    Told apart as they come, so the plain loop's cycle calls nothing else."""
    outcomes: list[Outcome] = []
    plain = True
    for i in eligible:
        try:
            out = execute[i](ctx)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            outcomes.append(exc)
            plain = False
            if stop_on_error or isinstance(exc, StopRun):
                break
            continue
        outcomes.append(out)
        if type(out) is list:
            if plain:
                for p in out:
                    if type(p) is not Proposal:
                        plain = False
                        break
        elif out is not None:
            plain = False
            if type(out) is Effect and out.refusal is not None:
                break
    return outcomes, plain


@dataclass(slots=True)
class Execute:
    """The step that runs the ``eligible`` suggestors: on the executor's workers
    (:func:`execute_elsewhere`), on an event loop when async ones are among them
    (:func:`execute_async`), else in registration order on this thread (the fast
    path)."""

    eligible: list[int]

    def run(self, cycle: Cycling) -> Collect:
        """Execute on the sync driver (an async suggestor gets the leg's own loop).

        Sync suggestors run in order and stop at the first error (``on_error="stop"``),
        ``StopRun`` or refusal; outcomes pair with ``eligible`` (or
        ``run.cursor.admitted``, the prefix the invocation budget admits)."""
        settings, run, eligible = cycle.settings, cycle.run, self.eligible
        if settings.executor is not None:
            return Collect(eligible, execute_elsewhere(settings, run, eligible))
        if settings.registry.any_async and settings.registry.any_async_in(eligible):
            if cycle.runner is None:
                cycle.runner = asyncio.Runner()
            return Collect(eligible, cycle.runner.run(execute_async(settings, run, eligible)))
        ctx = run.context
        stop_on_error = settings.on_error == "stop"
        execute = settings.registry.execute
        budget = run.budget
        if budget.max_invocations or budget.per_suggestor:
            # a prefix: outcomes still pair by slot; collection keeps the rest as cut
            eligible = admit(settings, run, eligible)
            run.cursor.admit(eligible)
        return Collect(self.eligible, execute_in_order(execute, ctx, eligible, stop_on_error))

    async def arun(self, cycle: Cycling) -> Collect:
        """Execute inside the caller's event loop (blocking work off it)."""
        settings, run, eligible = cycle.settings, cycle.run, self.eligible
        if settings.executor is not None:
            outcomes = await asyncio.to_thread(execute_elsewhere, settings, run, eligible)
        elif settings.registry.any_async_in(eligible):
            outcomes = await execute_async(settings, run, eligible)
        else:
            return self.run(cycle)  # sync suggestors only: this thread, as the sync driver
        return Collect(eligible, outcomes)


def admit(settings: EngineSettings, run: Run, eligible: list[int]) -> list[int]:
    """``eligible`` cut before the first invocation past the invocation budget
    (never exceeded); the budget's signal goes to ``run.cursor.pending_signals``."""
    budget = run.budget
    limit_total = budget.max_invocations
    per = budget.per_suggestor
    if not limit_total and not per:
        return eligible
    names = settings.registry.names
    admitted: list[int] = []
    total = run.spend.invocations
    for i in eligible:
        name = names[i]
        if limit_total and total >= limit_total:
            run.cursor.signal(InvocationBudgetExhausted(invocations=total, limit=limit_total))
            break
        lim = per.get(name)
        used = run.spend.invocations_by.get(name, 0)
        if lim and used >= lim:
            run.cursor.signal(
                InvocationBudgetExhausted(invocations=used, limit=lim, suggestor=name)
            )
            break
        admitted.append(i)
        total += 1
    return admitted


async def execute_async(settings: EngineSettings, run: Run, eligible: list[int]) -> list[Outcome]:
    """Run a cycle with async suggestors: those concurrently, sync ones inline.

    ``max_seconds`` and ``Engine.cancel()`` cut work in flight (polled every
    ``CANCEL_POLL_S``); cut executions get the ``TIMED_OUT`` / ``CANCELLED`` marker.
    """
    admitted = admit(settings, run, eligible)
    ctx = run.context
    reg = settings.registry
    outcomes: list[Outcome] = [NOT_DONE] * len(admitted)
    sem = asyncio.Semaphore(settings.max_concurrency)

    async def one(slot: int, i: int) -> None:
        async with sem:
            try:
                res = reg.suggestors[i].execute(ctx)
                if asyncio.iscoroutine(res) or isinstance(res, asyncio.Future):
                    res = await res
                outcomes[slot] = res
            except asyncio.CancelledError:
                outcomes[slot] = TIMED_OUT
                raise
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:  # a suggestor's own BaseException is its failure
                outcomes[slot] = exc

    # sync suggestors run inline in registration order; async ones concurrently
    tasks: list[asyncio.Task[None]] = []
    for slot, i in enumerate(admitted):
        if reg.is_async[i]:
            tasks.append(asyncio.ensure_future(one(slot, i)))
    for slot, i in enumerate(admitted):
        if not reg.is_async[i]:
            try:
                outcomes[slot] = reg.suggestors[i].execute(ctx)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as exc:
                outcomes[slot] = exc
    if tasks:
        await _wait(settings, run, tasks, outcomes)
    # keep the admitted order so collection pairs outcomes with suggestors
    run.cursor.admit(admitted)
    return outcomes


async def _wait(
    settings: EngineSettings, run: Run, tasks: list[asyncio.Task[None]], outcomes: list[Outcome]
) -> None:
    """Wait for ``tasks``, waking now and then so that cancel() interrupts them."""
    loop = asyncio.get_running_loop()
    end = None
    if run.budget.max_seconds:
        end = loop.time() + max(0.0, run.budget.max_seconds - elapsed_ms(settings, run) / 1000)
    pending: set[asyncio.Task[None]] = set(tasks)
    cancelled = False
    while pending:
        wait_s = CANCEL_POLL_S if end is None else min(CANCEL_POLL_S, end - loop.time())
        _, pending = await asyncio.wait(pending, timeout=max(0.0, wait_s))
        if not pending:
            break
        if run.run_id in settings.runs.cancelled:
            cancelled = True
            break
        if end is not None and loop.time() >= end:
            break
    if pending:
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        cut = CANCELLED if cancelled else TIMED_OUT
        for slot in range(len(outcomes)):
            if outcomes[slot] is NOT_DONE or outcomes[slot] is TIMED_OUT:
                outcomes[slot] = cut


def execute_elsewhere(settings: EngineSettings, run: Run, eligible: list[int]) -> list[Outcome]:
    """Hand the admitted suggestors to ``settings.executor``; their outcomes, in order.

    An executor that cannot reach its workers (``ExecutorUnavailable``) or cannot
    ship a suggestor (``ConfigurationError``) ends the run with ``Error`` of
    category ``external`` / ``configuration`` (any other exception: ``internal``);
    the facts promoted before are kept.
    """
    executor = settings.executor
    assert executor is not None
    admitted = admit(settings, run, eligible)
    run.cursor.admit(admitted)
    if not admitted:
        return []
    remaining: float | None = None
    if run.budget.max_seconds:
        remaining = max(0.0, run.budget.max_seconds - elapsed_ms(settings, run) / 1000)
    run_id = run.run_id
    cancelled = settings.runs.cancelled
    suggestors = settings.registry.suggestors
    work = CycleWork(
        run_id,
        run.cursor.cycle,
        run.context,
        [suggestors[i] for i in admitted],
        remaining,
        settings.on_error == "stop",
        lambda: run_id in cancelled,
    )
    try:
        return executor.execute(work)
    except ExecutorUnavailable as exc:
        category = ErrorCategory.EXTERNAL
        message = str(exc)
    except ConfigurationError as exc:
        category = ErrorCategory.CONFIGURATION
        message = str(exc)
    except Exception as exc:  # a defect of the executor still ends the run typed
        category = ErrorCategory.INTERNAL
        message = f"executor {type(executor).__name__} failed: {type(exc).__name__}: {exc}"
    run.cursor.signal(Error(message=message, error_category=category))
    return []
