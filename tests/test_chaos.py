"""Nothing lost: suggestors that raise, refuse, stop, return garbage or get cancelled.

Whatever ends the run, it ends with the right ``StopReason`` and the facts promoted
before it are still in ``result.context`` (DESIGN.md §1 "Nothing lost", §4 step 4).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from engine import (
    AgentRefused,
    Budget,
    Context,
    Converged,
    Effect,
    Engine,
    Error,
    ErrorCategory,
    Proposal,
    StopRequested,
    StopRun,
    UserCancelled,
    suggestor,
)
from gates import require_approval


@suggestor(name="counter", dependencies=["n"])
def counter(ctx: Context) -> list[Proposal]:
    return [Proposal("n", ctx.count("n"))]


def _failing_at(cycle: int, fail: Any) -> Any:
    @suggestor(name="chaos", dependencies=["n"])
    def chaos(ctx: Context) -> Any:
        if ctx.cycle == cycle:
            return fail(ctx)
        return []

    return chaos


def _raise(ctx: Context) -> Any:
    raise RuntimeError("kaboom")


def _contents(result: Any) -> list[Any]:
    return [f.content for f in result.context.get("n")]


def test_a_suggestor_that_raises_stops_the_run_with_a_suggestor_error_and_keeps_the_facts() -> None:
    engine = Engine()
    engine.register(counter, _failing_at(3, _raise))
    r = engine.run({"n": [0]})
    assert r.stop_reason == Error(
        message="chaos: RuntimeError: kaboom", error_category=ErrorCategory.SUGGESTOR
    )
    assert r.stop_reason.exit_code == 5
    # cycles 1 and 2 promoted, and in cycle 3 the counter ran before chaos
    assert _contents(r) == [0, 1, 2, 3]


def test_with_on_error_continue_a_raising_suggestor_is_recorded_and_the_run_goes_on() -> None:
    engine = Engine(on_error="continue", budget=Budget(max_cycles=5))
    engine.register(_failing_at(2, _raise), counter)
    r = engine.run({"n": [0]})
    assert r.stop_reason.kind == "cycle_budget_exhausted"
    assert _contents(r) == [0, 1, 2, 3, 4, 5]
    stats = engine.stats(r)
    assert stats is not None and stats.last_error == "chaos: RuntimeError: kaboom"


def test_a_refusal_stops_the_run_with_agent_refused_and_keeps_the_facts() -> None:
    engine = Engine()
    engine.register(counter, _failing_at(2, lambda ctx: Effect.refuse("not my job")))
    r = engine.run({"n": [0]})
    assert r.stop_reason == AgentRefused(agent_id="chaos", reason="not my job")
    assert r.stop_reason.is_error()
    assert _contents(r) == [0, 1, 2]


def test_stop_run_ends_the_run_with_stop_requested_and_its_context() -> None:
    def stop(ctx: Context) -> Any:
        raise StopRun("enough", context={"seen": ctx.count("n")})

    engine = Engine()
    engine.register(counter, _failing_at(2, stop))
    r = engine.run({"n": [0]})
    assert r.stop_reason == StopRequested(source="chaos", message="enough", context={"seen": 2})
    assert r.stop_reason.is_success() and r.stop_reason.is_cancelled()
    assert _contents(r) == [0, 1, 2]


def test_stop_run_with_a_context_that_is_not_json_still_ends_with_stop_requested() -> None:
    def stop(ctx: Context) -> Any:
        raise StopRun("enough", context={"obj": object()})

    engine = Engine()
    engine.register(counter, _failing_at(1, stop))
    r = engine.run({"n": [0]})
    assert isinstance(r.stop_reason, StopRequested)
    assert "object" in str(r.stop_reason.context["obj"])
    r.stop_reason.model_dump_json()  # the audit trail can serialise it


GARBAGE: list[tuple[str, Any]] = [
    ("an int", lambda ctx: 42),
    ("a string", lambda ctx: "a fact"),
    ("a list of dicts", lambda ctx: [{"key": "n", "content": 1}]),
    ("a plain tuple as proposal", lambda ctx: Effect([("n", 99)])),  # type: ignore[list-item]
    ("an empty key", lambda ctx: [Proposal("", 1)]),
    ("a confidence out of range", lambda ctx: [Proposal("n", 99, confidence=2.0)]),
    ("content that is not JSON", lambda ctx: [Proposal("n", object())]),
    ("usage that is not a Usage", lambda ctx: Effect([], "lots")),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("what", "fail"), GARBAGE, ids=[g[0] for g in GARBAGE])
def test_returning_garbage_is_a_suggestor_error_not_a_crash(what: str, fail: Any) -> None:
    engine = Engine()
    engine.register(counter, _failing_at(2, fail))
    r = engine.run({"n": [0]})
    assert isinstance(r.stop_reason, Error), what
    assert r.stop_reason.error_category == ErrorCategory.SUGGESTOR
    assert r.stop_reason.message.startswith("chaos:")
    assert _contents(r)[:3] == [0, 1, 2]


def test_accepts_that_raises_is_a_suggestor_error_not_a_crash() -> None:
    def bad_accepts(ctx: Context) -> bool:
        if ctx.cycle == 2:
            raise ValueError("cannot decide")
        return True

    @suggestor(name="moody", dependencies=["n"], accepts=bad_accepts)
    def moody(ctx: Context) -> list[Proposal]:
        return []

    engine = Engine()
    engine.register(counter, moody)
    r = engine.run({"n": [0]})
    assert isinstance(r.stop_reason, Error)
    assert r.stop_reason.error_category == ErrorCategory.SUGGESTOR
    assert "moody" in r.stop_reason.message and "cannot decide" in r.stop_reason.message
    assert _contents(r) == [0, 1]

    engine2 = Engine(on_error="continue", budget=Budget(max_cycles=3))
    engine2.register(counter, moody)
    r2 = engine2.run({"n": [0]})
    assert r2.stop_reason.kind == "cycle_budget_exhausted"
    assert _contents(r2) == [0, 1, 2, 3]


def test_a_hitl_policy_that_raises_is_an_error_not_a_crash() -> None:
    def when(p: Proposal, ctx: Context) -> bool:
        raise KeyError("missing field")

    engine = Engine(gates=[require_approval(keys=["n"], when=when)])
    engine.register(counter)
    r = engine.run({"n": [0]})
    assert isinstance(r.stop_reason, Error)
    assert "missing field" in r.stop_reason.message
    assert _contents(r) == [0]


def test_cancel_from_another_thread_ends_with_user_cancelled_and_keeps_the_facts() -> None:
    started = threading.Event()
    cancelled = threading.Event()
    engine = Engine()

    @suggestor(name="slow", dependencies=["n"])
    def slow(ctx: Context) -> list[Proposal]:
        if ctx.cycle == 3:
            started.set()
            assert cancelled.wait(5), "the canceller thread never ran"
        return [Proposal("n", ctx.count("n"))]

    def canceller() -> None:
        started.wait(5)
        engine.cancel("run-1")
        cancelled.set()

    engine.register(slow)
    t = threading.Thread(target=canceller)
    t.start()
    r = engine.run({"n": [0]}, run_id="run-1")
    t.join(5)
    assert r.stop_reason == UserCancelled()
    assert r.stop_reason.exit_code == 130 and r.stop_reason.is_resumable()
    # cycle 3 finished its merge; cycle 4 never started
    assert r.cycles == 3 and _contents(r) == [0, 1, 2, 3]


def test_cancel_without_a_run_id_stops_runs_in_flight_but_not_later_runs() -> None:
    engine = Engine()
    calls: list[int] = []

    @suggestor(name="self_cancel", dependencies=["n"])
    def self_cancel(ctx: Context) -> list[Proposal]:
        calls.append(ctx.cycle)
        if len(calls) == 2:  # once, in the first run's cycle 2
            engine.cancel()
        return [Proposal("n", ctx.count("n"))] if ctx.count("n") < 5 else []

    engine.register(self_cancel)
    first = engine.run({"n": [0]})
    assert first.stop_reason == UserCancelled() and first.cycles == 2
    second = engine.run({"n": [0]})
    assert second.stop_reason == Converged()


def test_a_run_stopped_by_a_cycle_budget_resumes_where_it_stopped() -> None:
    engine = Engine(budget=Budget(max_cycles=2))
    engine.register(_failing_at(99, _raise), counter)
    r = engine.run({"n": [0]}, run_id="r")
    assert r.stop_reason.kind == "cycle_budget_exhausted" and _contents(r) == [0, 1, 2]
    # the key that changed in cycle 2 still wakes its subscribers after the resume
    r2 = engine.resume_run("r", Budget(max_cycles=4))
    assert r2.stop_reason.kind == "cycle_budget_exhausted"
    assert r2.cycles == 4 and _contents(r2) == [0, 1, 2, 3, 4]


def test_a_gate_an_invariant_or_a_criterion_that_raises_ends_in_a_typed_stop() -> None:
    from criteria import criterion, invariant
    from engine import CriteriaUnmet, InvariantViolated, PromotionRejected
    from gates import promotion_gate

    def boom(*args: Any) -> Any:
        raise RuntimeError("broken check")

    runs: list[tuple[dict[str, Any], type]] = [
        ({"gates": [promotion_gate(name="g")(boom)]}, PromotionRejected),
        ({"invariants": [invariant(name="i")(boom)]}, InvariantViolated),
        ({"criteria": [criterion(id="c")(boom)]}, CriteriaUnmet),
    ]

    @suggestor(name="one", dependencies=["n"])
    def one(ctx: Context) -> list[Proposal]:
        return [Proposal("m", 1)]

    for kwargs, expected in runs:
        engine = Engine(**kwargs)
        engine.register(one)
        r = engine.run({"n": [0]})
        assert isinstance(r.stop_reason, expected), kwargs
        assert "broken check" in str(r.stop_reason) or "broken check" in r.explain()
        assert r.context.count("n") >= 1


@pytest.mark.parametrize("mode", ["run", "arun"])
def test_cancel_interrupts_an_async_suggestor_that_hangs_and_keeps_the_facts(mode: str) -> None:
    started = threading.Event()
    engine = Engine()

    @suggestor(name="first", dependencies=["seed"])
    def first(ctx: Context) -> list[Proposal]:
        return [Proposal("n", 1)]

    @suggestor(name="hang", dependencies=["n"])
    async def hang(ctx: Context) -> list[Proposal]:
        started.set()
        await asyncio.sleep(60)  # an LLM call that never answers
        return [Proposal("n", 2)]

    def canceller() -> None:
        assert started.wait(10), "the hanging suggestor never started"
        engine.cancel("run-h")

    engine.register(first, hang)
    t = threading.Thread(target=canceller)
    t.start()
    began = time.monotonic()
    if mode == "run":
        r = engine.run({"seed": [0]}, run_id="run-h")
    else:
        r = asyncio.run(engine.arun({"seed": [0]}, run_id="run-h"))
    t.join(5)
    assert time.monotonic() - began < 5, "cancel() must not wait for the hanging call"
    assert r.stop_reason == UserCancelled()
    assert [f.content for f in r.context.get("n")] == [1]
    assert r.cycles == 2
