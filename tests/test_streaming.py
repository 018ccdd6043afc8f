"""Engine.stream, astream and stream_resume: a run's events as they are recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit import SqlRunStore, open_store
from engine import (
    Budget,
    Context,
    Engine,
    GateDecision,
    HitlGatePending,
    Proposal,
    RunResult,
    UserCancelled,
    suggestor,
)
from engine.events import (
    CycleStarted,
    FactPromoted,
    GateOpened,
    RunEvent,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopped,
    SuggestorExecuted,
)
from tests.hitlfixtures import INITIAL, make_engine


@suggestor(name="count", dependencies=["n"])
def count(ctx: Context) -> list[Proposal]:
    """One more number each cycle, up to 5."""
    top = max(f.content for f in ctx.get("n"))
    return [Proposal("n", top + 1)] if top < 5 else []


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    s = open_store(f"sqlite:///{tmp_path / 'stream.db'}")
    yield s
    s.close()


def split(items: list[RunEvent | RunResult]) -> tuple[list[RunEvent], RunResult]:
    *events, result = items
    assert isinstance(result, RunResult)
    assert all(isinstance(e, RunEvent) for e in events)
    return events, result  # type: ignore[return-value]


def test_a_streamed_run_yields_its_typed_events_in_order_then_its_result() -> None:
    engine = Engine(budget=Budget(max_cycles=10)).register(count)
    events, result = split(list(engine.stream({"n": [1]})))
    assert isinstance(events[0], RunStarted) and events[0].initial_facts == 1
    assert isinstance(events[1], CycleStarted) and events[1].eligible == ("count",)
    executed = [e for e in events if isinstance(e, SuggestorExecuted)]
    assert [e.suggestor for e in executed] == ["count"] * 5
    assert executed[0].usage.total_tokens == 0 and executed[0].proposals == 1
    promoted = [e.fact.content for e in events if isinstance(e, FactPromoted)]
    assert promoted == [2, 3, 4, 5]
    assert isinstance(events[-1], RunStopped) and events[-1].reason == result.stop_reason
    # no store: nothing numbers the events
    assert {e.seq for e in events} == {None}
    assert {e.run_id for e in events} == {result.run_id}
    assert [f.content for f in result.context.get("n")] == [1, 2, 3, 4, 5]


def test_streamed_events_mirror_the_stored_trail_seq_for_seq(store: SqlRunStore) -> None:
    engine = Engine(budget=Budget(max_cycles=10), store=store, checkpoint_every=2).register(count)
    events, result = split(list(engine.stream({"n": [1]})))
    stored = store.events(result.run_id)
    # the store adds checkpoint_saved events of its own between the engine's
    mirrored = {(s.seq, s.kind) for s in stored}
    assert [(e.seq, e.kind) for e in events] == [
        (s.seq, s.kind) for s in stored if s.kind != "checkpoint_saved"
    ]
    assert all((e.seq, e.kind) in mirrored for e in events)
    assert any(s.kind == "checkpoint_saved" for s in stored)


def test_each_event_reaches_the_caller_before_the_next_cycle_runs() -> None:
    seen: list[RunEvent | RunResult] = []
    promoted_seen_by_cycle: dict[int, int] = {}

    @suggestor(name="look", dependencies=["n"])
    def look(ctx: Context) -> list[Proposal]:
        promoted_seen_by_cycle[ctx.cycle] = sum(isinstance(e, FactPromoted) for e in seen)
        top = max(f.content for f in ctx.get("n"))
        return [Proposal("n", top + 1)] if top < 4 else []

    engine = Engine(budget=Budget(max_cycles=10)).register(look)
    for item in engine.stream({"n": [1]}):
        seen.append(item)
    # cycle k runs after the k-1 facts of the cycles before reached the caller
    assert promoted_seen_by_cycle == {1: 0, 2: 1, 3: 2, 4: 3}


def test_a_paused_run_streams_its_gate_and_its_resume_streams_to_the_stop(
    store: SqlRunStore,
) -> None:
    engine = make_engine(store)
    events, paused = split(list(engine.stream(INITIAL)))
    assert isinstance(paused.stop_reason, HitlGatePending)
    opened = [e for e in events if isinstance(e, GateOpened)]
    assert [g.gate_id for g in opened] == [paused.stop_reason.gate_id]
    assert isinstance(events[-1], RunPaused) and events[-1].reason == paused.stop_reason
    decision = GateDecision.approve(by="alice")
    leg, final = split(list(engine.stream_resume(paused.stop_reason.gate_id, decision)))
    assert isinstance(leg[0], RunResumed) and leg[0].gate_id == paused.stop_reason.gate_id
    assert isinstance(leg[-1], RunStopped) and leg[-1].reason == final.stop_reason
    stored = {(s.seq, s.kind) for s in store.events(final.run_id)}
    assert all((e.seq, e.kind) in stored for e in [*events, *leg])
    # the decision came between the legs
    kinds = [s.kind for s in store.events(final.run_id) if s.seq > (events[-1].seq or 0)]
    assert kinds[0] == "gate_decided" and kinds[1] == "run_resumed"


def test_a_paused_run_without_a_store_resumes_as_a_stream_too() -> None:
    engine = make_engine(None)
    _, paused = split(list(engine.stream(INITIAL)))
    assert isinstance(paused.stop_reason, HitlGatePending)
    leg, final = split(
        list(engine.stream_resume(paused.stop_reason.gate_id, GateDecision.reject(by="bob")))
    )
    assert isinstance(leg[0], RunResumed) and leg[0].seq is None
    assert isinstance(leg[-1], RunStopped) and leg[-1].reason == final.stop_reason


def test_a_stopped_run_resumed_with_more_budget_streams_its_new_leg(store: SqlRunStore) -> None:
    engine = Engine(budget=Budget(max_cycles=2), store=store).register(count)
    first = engine.run({"n": [1]})
    assert first.stop_reason.is_budget_exhausted()
    leg, final = split(list(engine.stream_resume_run(first.run_id, Budget(max_cycles=10))))
    assert isinstance(leg[0], RunResumed) and leg[0].gate_id is None
    assert [e.fact.content for e in leg if isinstance(e, FactPromoted)] == [4, 5]
    assert [(e.seq, e.kind) for e in leg] == [
        (s.seq, s.kind) for s in store.events(final.run_id) if s.seq >= (leg[0].seq or 0)
    ]


def test_astream_yields_the_same_events_as_stream(store: SqlRunStore) -> None:
    engine = Engine(budget=Budget(max_cycles=10), store=store).register(count)

    async def collect() -> list[RunEvent | RunResult]:
        return [item async for item in engine.astream({"n": [1]})]

    events, result = split(asyncio.run(collect()))
    assert [(e.seq, e.kind) for e in events] == [
        (s.seq, s.kind) for s in store.events(result.run_id)
    ]


def test_leaving_a_stream_early_cancels_its_run_and_records_the_stop(store: SqlRunStore) -> None:
    engine = Engine(budget=Budget(max_cycles=10), store=store).register(count)
    stream = engine.stream({"n": [1]}, run_id="left-early")
    for item in stream:
        if isinstance(item, FactPromoted):
            break
    stream.close()
    row = store.run("left-early")
    assert row.status == "stopped" and row.stop_reason == UserCancelled()


def test_astream_hands_each_event_to_the_caller_before_the_next_cycle_runs() -> None:
    seen: list[RunEvent | RunResult] = []
    promoted_seen_by_cycle: dict[int, int] = {}

    @suggestor(name="alook", dependencies=["n"])
    async def alook(ctx: Context) -> list[Proposal]:
        await asyncio.sleep(0)  # a real await: the async path, not the sync fast path
        promoted_seen_by_cycle[ctx.cycle] = sum(isinstance(e, FactPromoted) for e in seen)
        top = max(f.content for f in ctx.get("n"))
        return [Proposal("n", top + 1)] if top < 4 else []

    engine = Engine(budget=Budget(max_cycles=10)).register(alook)

    async def follow() -> None:
        async for item in engine.astream({"n": [1]}):
            seen.append(item)

    asyncio.run(follow())
    assert isinstance(seen[-1], RunResult)
    assert promoted_seen_by_cycle == {1: 0, 2: 1, 3: 2, 4: 3}


def test_astream_resume_streams_the_leg_after_a_decision(store: SqlRunStore) -> None:
    engine = make_engine(store)
    _, paused = split(list(engine.stream(INITIAL)))
    assert isinstance(paused.stop_reason, HitlGatePending)
    gate_id = paused.stop_reason.gate_id

    async def collect() -> list[RunEvent | RunResult]:
        decision = GateDecision.approve(by="alice")
        return [item async for item in engine.astream_resume(gate_id, decision)]

    leg, final = split(asyncio.run(collect()))
    assert isinstance(leg[0], RunResumed) and leg[0].gate_id == gate_id
    assert isinstance(leg[-1], RunStopped) and leg[-1].reason == final.stop_reason
    assert {e.run_id for e in leg} == {paused.run_id}
    stored = [(s.seq, s.kind) for s in store.events(final.run_id)]
    assert [(e.seq, e.kind) for e in leg] == [
        (seq, kind)
        for seq, kind in stored
        if seq >= (leg[0].seq or 0) and kind != "checkpoint_saved"
    ]
