"""Work cut by a budget or a cancel is never a fixed point (issue 28).

A cycle whose eligible executions did not all complete (an async suggestor cut by
the time budget or ``cancel()``, an invocation the invocation budget refused)
ends with that stop only: no ``Converged``, no criterion judged on it. The cut
suggestors are kept in the run's state and its checkpoint, and run again in the
first cycle after a resume. The worker case is ``tests/test_workers_cut_work.py``.

Time is an injected clock: the hanging suggestor's ``accepts`` (called as its
cycle starts, after the time check) uses up what is left of the time budget, so
the cycle's deadline has passed when its execution is awaited and it is cut at
once, whatever the budget.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from audit import open_store
from criteria import KeyPresent
from engine import (
    Budget,
    Context,
    Engine,
    InvocationBudgetExhausted,
    Proposal,
    ResumeError,
    RunResult,
    TimeBudgetExhausted,
    UserCancelled,
    suggestor,
)
from engine._cycle.run import Run
from tests.stopfixtures import FakeClock


def _job(clock: FakeClock, started: list[int], cancel: Any = None) -> list[Any]:
    """``first`` (cycle 1: a ``step`` per input), then ``hang``: an async suggestor
    that never finishes (it awaits an event nobody sets), so the job never converges.
    As its cycle starts, ``hang`` uses up the time budget (or, given ``cancel``,
    cancels the run once it runs); ``started`` gets the cycle of each execution."""

    @suggestor(name="first", dependencies=["input"])
    def first(ctx: Context) -> list[Proposal]:
        return [Proposal("step", f.content) for f in ctx.get("input")]

    def out_of_time(ctx: Context) -> bool:
        left = ctx.remaining_budget()
        if cancel is None and left is not None and left.seconds is not None:
            clock.now += left.seconds + 1.0  # the deadline passes as the cycle starts
        return True

    @suggestor(name="hang", dependencies=["step"], accepts=out_of_time)
    async def hang(ctx: Context) -> list[Proposal]:
        started.append(ctx.cycle)
        if cancel is not None:
            cancel()
        await asyncio.Event().wait()  # never set
        return [Proposal("late", 1)]

    return [first, hang]


def _stop_kinds(store: Any, run_id: str) -> list[str]:
    return [e.payload["kind"] for e in store.events(run_id, kinds=["stop_signal"])]


def _start(engine: Engine, driver: str, run_id: str) -> RunResult:
    if driver == "arun":
        return asyncio.run(engine.arun({"input": ["a"]}, run_id=run_id))
    return engine.run({"input": ["a"]}, run_id=run_id)


@pytest.mark.parametrize("driver", ["run", "arun"])
def test_a_suggestor_cut_by_the_time_budget_is_no_fixed_point_and_runs_again_after_a_resume(
    driver: str, tmp_path: Path
) -> None:
    clock = FakeClock(0.0)
    started: list[int] = []
    job = _job(clock, started)
    store = open_store(str(tmp_path / "audit.db"))
    engine = Engine(budget=Budget(max_seconds=10), store=store, clock=clock).register(*job)
    first = _start(engine, driver, "cut")
    assert isinstance(first.stop_reason, TimeBudgetExhausted)
    assert first.signals == (first.stop_reason,)  # the budget's stop only: no converged
    assert (first.cycles, started) == (2, [2])  # cut in cycle 2
    assert [f.key for f in first.context] == ["input", "step"]
    assert _stop_kinds(store, "cut") == ["time_budget_exhausted"]
    checkpoint = store.load_checkpoint("cut")
    assert checkpoint["cut"] == ["hang"] and checkpoint["dirty"] == []

    # another process resumes with more budget: the cut work runs again, first thing
    resumer = Engine(store=open_store(str(tmp_path / "audit.db")), clock=clock).register(*job)
    again = resumer.resume_run("cut", Budget(max_seconds=20))
    assert started == [2, 3]  # executed in the first cycle after the resume
    assert isinstance(again.stop_reason, TimeBudgetExhausted)
    assert again.signals == (again.stop_reason,) and again.cycles == 3
    assert _stop_kinds(store, "cut") == ["time_budget_exhausted"] * 2  # never converged
    cycles = store.events("cut", kinds=["cycle_started"])
    assert [(e.cycle, e.payload["eligible"]) for e in cycles] == [
        (1, ["first"]),
        (2, ["hang"]),
        (3, ["hang"]),
    ]
    assert store.verify("cut").ok


def test_a_cycle_cut_by_the_time_budget_judges_no_criterion() -> None:
    clock = FakeClock(0.0)
    started: list[int] = []
    # "late" is never there: judged on the cut cycle as a fixed point, this criterion
    # would end the run criteria_unmet (validation, not resumable)
    engine = Engine(budget=Budget(max_seconds=10), criteria=[KeyPresent("late")], clock=clock)
    result = engine.register(*_job(clock, started)).run({"input": ["a"]})
    assert isinstance(result.stop_reason, TimeBudgetExhausted)
    assert result.signals == (result.stop_reason,)
    assert result.stop_reason.is_resumable() and started == [2]


def test_a_suggestor_cut_by_a_cancel_runs_again_when_the_run_is_resumed() -> None:
    clock = FakeClock(0.0)
    started: list[int] = []
    holder: list[Engine] = []
    engine = Engine(clock=clock).register(*_job(clock, started, lambda: holder[0].cancel()))
    holder.append(engine)
    first = engine.run({"input": ["a"]}, run_id="cancelled")
    assert first.signals == (UserCancelled(),) and started == [2]
    again = engine.resume_run("cancelled")
    assert started == [2, 3]  # hang runs again (and is cancelled again)
    assert again.signals == (UserCancelled(),) and again.cycles == 3


def test_suggestors_the_invocation_budget_refused_run_once_it_is_raised() -> None:
    @suggestor(name="quiet", dependencies=["x"])
    def quiet(ctx: Context) -> list[Proposal]:
        return []

    @suggestor(name="answer", dependencies=["x"])
    def answer(ctx: Context) -> list[Proposal]:
        return [Proposal("y", 42)]

    engine = Engine(budget=Budget(max_invocations=1)).register(quiet, answer)
    first = engine.run({"x": [0]}, run_id="refused")
    # quiet ran, answer was refused: no fact, yet no fixed point
    assert first.signals == (InvocationBudgetExhausted(invocations=1, limit=1),)
    again = engine.resume_run("refused", Budget(max_invocations=10))
    assert [(f.key, f.content, f.provenance[:2]) for f in again.context.get("y")] == [
        ("y", 42, ("answer", 2))
    ]
    assert again.stop_reason.kind == "converged" and again.cycles == 2


def test_the_cut_suggestors_travel_in_the_checkpoint_and_older_checkpoints_still_load() -> None:
    run = Run("r", Budget())
    run.cursor.put_back_wakers(set(run.cursor.dirty), ["hang", "slow"])
    data = run.to_checkpoint(["first", "hang", "slow"])
    assert Run.from_checkpoint(data).cursor.cut == ["hang", "slow"]
    with pytest.raises(ResumeError, match="cut"):
        Run.from_checkpoint({**data, "cut": "hang"})
    del data["cut"]  # as written before cut work was kept
    assert Run.from_checkpoint(data).cursor.cut == []
