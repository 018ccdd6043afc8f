"""The sync driver's plain cycles (engine._cycle.plain.run_plain) change nothing but speed.

An engine with no store, gate or HITL policy runs its cycles through the plain
cycle; the same engine with a promotion gate that passes everything runs the
general steps (Prelude, Execute, Collect, Merge, Judge). Every run here
is done both ways and must give the same facts (ids, provenance), stop, signals,
cycles, usage, budget status and run stats.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import (
    Budget,
    Context,
    Continue,
    Effect,
    Engine,
    Proposal,
    RunResult,
    RunStats,
    StopRun,
    Usage,
    suggestor,
)
from engine._cycle.collector import CollectorFreeze
from engine._cycle.plain import plain_engine
from engine.promotion import Rejection
from engine.suggestor import FunctionSuggestor


class PassAll:
    """A promotion gate that lets everything through: it turns the plain cycle off."""

    name = "pass-all"
    on_reject = "stop"

    def check(self, proposal: Proposal, suggestor: str, ctx: Context) -> Rejection | None:
        return None


def _snapshot(r: RunResult, eng: Engine) -> dict[str, Any]:
    status = r.budget_status.model_dump(mode="json")
    status["dimensions"].pop("seconds")
    stats = eng.stats(r)  # kept for resumable stops
    return {
        "facts": [(f.id, f.key, f.content, f.confidence, f.provenance) for f in r.context],
        "stop": r.stop_reason.model_dump(mode="json"),
        "signals": [s.model_dump(mode="json") for s in r.signals],
        "cycles": r.cycles,
        "usage": r.usage,
        "status": status,
        "criteria": r.criteria,
        "continuations": r.continuations,
        "stats": None if stats is None else _stats(stats),
    }


RUNNING: list[Engine] = []
"""The engine of the run in flight (for suggestors that cancel it)."""


class Recorder:
    """A stop policy that never stops: it records what every cycle left behind."""

    id = "recorder"

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def evaluate(self, stats: RunStats) -> None:
        self.seen.append(_stats(stats))


def _stats(stats: RunStats) -> dict[str, Any]:
    out = {f.name: getattr(stats, f.name) for f in fields(stats) if f.name != "elapsed_ms"}
    out["invocation_history"] = list(stats.invocation_history)
    return out


def both_ways(
    build: Callable[[], list[FunctionSuggestor]],
    initial: dict[str, list[Any]] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run the job with the plain cycle and with the general path (each also with a
    policy recording every cycle's stats); the same snapshots."""
    results = []
    for gates in ((), (PassAll(),)):
        for record in (False, True):
            recorder = Recorder()
            policies = [recorder] if record else []
            eng = Engine(gates=gates, stop_policies=policies, **options)
            eng.register(*build())
            RUNNING[:] = [eng]
            r = eng.run(initial)
            results.append({**_snapshot(r, eng), "trace": recorder.seen})
    plain, plain_recorded, general, general_recorded = results
    assert plain == general
    assert plain_recorded == general_recorded
    return plain


def chain(k: int) -> Callable[[], list[FunctionSuggestor]]:
    def build() -> list[FunctionSuggestor]:
        def make(i: int) -> FunctionSuggestor:
            def step(ctx: Context) -> list[Proposal]:
                return [Proposal(f"k{i}", i)]

            return FunctionSuggestor(step, f"s{i}", (f"k{i - 1}",))

        return [make(i) for i in range(1, k + 1)]

    return build


def test_an_engine_with_a_store_gate_or_executor_has_no_plain_cycle() -> None:
    eng = Engine(budget=Budget(max_cycles=3))
    assert plain_engine(eng)
    assert not plain_engine(Engine(gates=[PassAll()]))


def test_a_chain_gives_the_same_run_both_ways() -> None:
    snap = both_ways(chain(30), {"k0": [0]}, budget=Budget(max_cycles=40, max_facts=0))
    assert snap["stop"] == {"kind": "converged"}
    assert len(snap["facts"]) == 31


def test_a_driver_waking_one_idle_subscriber_a_cycle_gives_the_same_run_both_ways() -> None:
    def build() -> list[FunctionSuggestor]:
        @suggestor(name="driver")
        def driver(ctx: Context) -> list[Proposal]:
            return [Proposal(f"s{ctx.cycle % 7}", ctx.cycle)]

        def idle(ctx: Context) -> None:
            return None

        return [driver, *(FunctionSuggestor(idle, f"sub{i}", (f"s{i}",)) for i in range(7))]

    snap = both_ways(build, budget=Budget(max_cycles=25, max_facts=0))
    assert snap["stop"]["kind"] == "cycle_budget_exhausted"


@pytest.mark.parametrize(
    "proposal",
    [
        Proposal("x", 1, parents=("a#0",)),
        Proposal("x", 1, id="given"),
        Proposal("x", 1, confidence=1),
        Proposal("x", {"b": 1, "a": [2]}),
        Proposal("x", "naïve"),
        Proposal("x", True),
        Proposal("x", None),
        Proposal("x", 2.5, confidence=0.25),
        Proposal("", 1),
        Proposal("x", float("nan")),
        Proposal("x", 1, confidence=2.0),
        Proposal("x", 1, parents=["a#0"]),  # type: ignore[arg-type]
        Proposal("x", 1, id=""),
        Proposal("x", "\ud800"),
        Proposal("x", 10**4000),
        Proposal("a", 0),  # a duplicate of the input
    ],
)
def test_a_proposal_the_plain_cycle_does_not_specialise_is_merged_as_merge_does(
    proposal: Proposal,
) -> None:
    def build() -> list[FunctionSuggestor]:
        def first(ctx: Context) -> list[Proposal]:
            return [Proposal("y", 1), Proposal("y", 2)]

        def odd(ctx: Context) -> list[Proposal]:
            return [Proposal("z", 1), proposal, Proposal("z", 2)]

        def last(ctx: Context) -> list[Proposal]:
            return [Proposal("w", ctx.cycle)]

        return [
            FunctionSuggestor(first, "first", ("a",)),
            FunctionSuggestor(odd, "odd", ("a",)),
            FunctionSuggestor(last, "last", ("a",)),
        ]

    both_ways(build, {"a": [0]}, budget=Budget(max_cycles=5))


@pytest.mark.parametrize("on_error", ["stop", "continue"])
@pytest.mark.parametrize(
    "outcome",
    [
        "none",
        "effect",
        "tuple",
        "proposal",
        "raise",
        "stop_run",
        "refuse",
        "not_a_proposal",
        "garbage",
        "usage",
    ],
)
def test_every_kind_of_outcome_gives_the_same_run_both_ways(on_error: str, outcome: str) -> None:
    def out(ctx: Context) -> Any:
        p = Proposal("b", ctx.cycle)
        if outcome == "none":
            return None
        if outcome == "effect":
            return Effect([p])
        if outcome == "tuple":
            return (p,)
        if outcome == "proposal":
            return p
        if outcome == "raise":
            raise ValueError("boom")
        if outcome == "stop_run":
            raise StopRun("enough", context={"at": ctx.cycle})
        if outcome == "refuse":
            return Effect.refuse("no")
        if outcome == "not_a_proposal":
            return [p, "nope"]
        if outcome == "usage":
            return Effect([p], Usage(3, 4, 0.5))
        return 42

    def build() -> list[FunctionSuggestor]:
        def ticker(ctx: Context) -> list[Proposal]:
            return [Proposal("a", ctx.cycle)]

        def plain(ctx: Context) -> list[Proposal]:
            return [Proposal("c", ctx.cycle)]

        # alone in its cycles, then together with the others
        return [
            FunctionSuggestor(ticker, "ticker", ("a",)),
            FunctionSuggestor(out, "odd", ("a",)),
            FunctionSuggestor(plain, "plain", ("a",)),
            FunctionSuggestor(out, "alone", ("c",)),
        ]

    both_ways(build, {"a": [0]}, budget=Budget(max_cycles=6, max_tokens=20), on_error=on_error)


def test_budgets_continuations_criteria_and_invariants_give_the_same_run_both_ways() -> None:
    from criteria import KeyPresent, MaxFactsPerKey

    def on_stop(signals: Any, stats: Any) -> Continue | None:
        if stats.cycle < 8:
            return Continue(budget=Budget(max_cycles=12, max_facts=stats.facts_count + 3))
        return None

    for options in (
        {"budget": Budget(max_cycles=4), "on_stop": on_stop},
        {"budget": Budget(max_cycles=30, max_facts=9), "on_stop": on_stop},
        {"budget": Budget(max_cycles=30, max_invocations=7)},
        {"budget": Budget(max_cycles=30, per_suggestor={"s3": 0})},
        {"budget": Budget(max_cycles=30), "criteria": [KeyPresent("k5")]},
        {"budget": Budget(max_cycles=30), "invariants": [MaxFactsPerKey(1)]},
        {"budget": Budget(max_cycles=30), "progress": lambda c, p: None},
    ):
        both_ways(chain(10), {"k0": [0]}, **options)


def test_accepts_and_cancel_give_the_same_run_both_ways() -> None:
    def build() -> list[FunctionSuggestor]:
        def make(i: int) -> FunctionSuggestor:
            def step(ctx: Context) -> list[Proposal]:
                return [Proposal(f"k{i}", i)]

            def accepts(ctx: Context) -> bool:
                if i == 4:
                    raise RuntimeError("accepts failed")
                return i != 6

            return FunctionSuggestor(step, f"s{i}", (f"k{i - 1}",), accepts if i > 3 else None)

        return [make(i) for i in range(1, 9)]

    for on_error in ("stop", "continue"):
        both_ways(build, {"k0": [0], "k5": [5]}, budget=Budget(max_cycles=20), on_error=on_error)

    def cancelling() -> list[FunctionSuggestor]:
        @suggestor(name="canceller", dependencies=["k2"])
        def canceller(ctx: Context) -> list[Proposal]:
            RUNNING[0].cancel()
            return [Proposal("x", 1)]

        return [*chain(6)(), canceller]

    snap = both_ways(cancelling, {"k0": [0]}, budget=Budget(max_cycles=20))
    assert snap["stop"] == {"kind": "user_cancelled"}


# -- random jobs ---------------------------------------------------------------------
MODES = ("plain", "plain", "plain", "none", "parents", "id", "dict", "effect", "raise", "dup")


@st.composite
def jobs(draw: st.DrawFn) -> tuple[list[tuple[list[str], str, str, int]], dict[str, Any]]:
    n = draw(st.integers(1, 7))
    keys = [f"k{i}" for i in range(4)]
    nodes = []
    for _ in range(n):
        deps = draw(st.lists(st.sampled_from(keys), max_size=2, unique=True))
        nodes.append(
            (
                deps,
                draw(st.sampled_from(keys)),
                draw(st.sampled_from(MODES)),
                draw(st.integers(1, 3)),
            )
        )
    options: dict[str, Any] = {
        "budget": Budget(
            max_cycles=draw(st.integers(1, 12)),
            max_facts=draw(st.sampled_from([0, 5, 20])),
            max_invocations=draw(st.sampled_from([None, None, 9])),
        ),
        "on_error": draw(st.sampled_from(["stop", "continue"])),
    }
    return nodes, options


@settings(max_examples=150, deadline=None)
@given(jobs())
def test_random_jobs_give_the_same_run_both_ways(
    job: tuple[list[tuple[list[str], str, str, int]], dict[str, Any]],
) -> None:
    nodes, options = job

    def build() -> list[FunctionSuggestor]:
        def make(index: int, key: str, mode: str, count: int) -> Callable[[Context], Any]:
            def run(ctx: Context) -> Any:
                c = ctx.cycle
                base = (c * 7 + index) % 5
                props = [Proposal(key, base + j) for j in range(count)]
                if mode == "none" and c % 2:
                    return None
                if mode == "parents":
                    props.append(
                        Proposal(key, base + 10, parents=tuple(f.id for f in ctx.get(key)[-1:]))
                    )
                elif mode == "id":
                    props.append(Proposal(key, base + 20, id=f"p{index}-{c}"))
                elif mode == "dict":
                    props.insert(0, Proposal(key, {"v": base}))
                elif mode == "effect":
                    return Effect(props, Usage(1, 1, 0.0))
                elif mode == "raise" and c % 3 == 0:
                    raise ValueError(f"node {index} fails in cycle {c}")
                elif mode == "dup":
                    props.append(props[0])
                return props

            return run

        return [
            FunctionSuggestor(make(i, key, mode, count), f"n{i}", deps)
            for i, (deps, key, mode, count) in enumerate(nodes)
        ]

    both_ways(build, {"k0": [0]}, **options)


def test_the_collector_is_frozen_after_the_same_facts_both_ways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import engine._cycle.steps

    freezes: list[list[int]] = []

    class Spy(CollectorFreeze):
        """Records how many facts were promoted when each freeze happened."""

        def __init__(self, adopt: bool = False) -> None:
            super().__init__(adopt)
            self.total = 0
            freezes.append([])

        def promoted(self, facts: int) -> None:
            super().promoted(facts)
            self.total += facts
            if facts and self._pending == 0:
                freezes[-1].append(self.total)

    monkeypatch.setattr(engine._cycle.steps, "CollectorFreeze", Spy)

    def build() -> list[FunctionSuggestor]:
        @suggestor(name="driver", dependencies=["tick"])
        def driver(ctx: Context) -> list[Proposal]:
            return [Proposal("tick", ctx.cycle)] if ctx.cycle < 8 else []

        def make(j: int) -> FunctionSuggestor:
            def work(ctx: Context) -> list[Proposal]:
                return [Proposal(f"w{j}", ctx.cycle * 1000 + n) for n in range(700)]

            return FunctionSuggestor(work, f"w{j}", ("tick",))

        return [driver, *(make(j) for j in range(3))]

    both_ways(build, {"tick": [0]}, budget=Budget(max_cycles=20, max_facts=0))
    if Spy().owned:  # the collector is on and nothing else froze objects
        assert freezes[0] == freezes[2] != []


def test_an_async_suggestor_registered_during_a_run_runs_as_before() -> None:
    def build() -> list[FunctionSuggestor]:
        async def late(ctx: Context) -> list[Proposal]:
            return [Proposal("late", ctx.cycle)]

        def registering(ctx: Context) -> list[Proposal]:
            if "late" not in RUNNING[0].suggestor_names:
                RUNNING[0].register(FunctionSuggestor(late, "late", ("k3",)))
            return [Proposal("r", 1)]

        return [*chain(6)(), FunctionSuggestor(registering, "registering", ("k2",))]

    snap = both_ways(build, {"k0": [0]}, budget=Budget(max_cycles=20))
    assert ("late#0", "late") in [(f[0], f[1]) for f in snap["facts"]]


def test_a_suggestor_registered_during_a_cycle_runs_from_the_next_one() -> None:
    def build() -> list[FunctionSuggestor]:
        def late(ctx: Context) -> list[Proposal]:
            return [Proposal("late", ctx.cycle)]

        def registering(ctx: Context) -> list[Proposal]:
            if "late" not in RUNNING[0].suggestor_names:
                RUNNING[0].register(FunctionSuggestor(late, "late", ("a",)))
            return [Proposal("a", ctx.cycle)]

        def other(ctx: Context) -> list[Proposal]:
            return [Proposal("b", ctx.cycle)]

        return [
            FunctionSuggestor(registering, "registering", ("a",)),
            FunctionSuggestor(other, "other", ("a",)),
        ]

    snap = both_ways(build, {"a": [0]}, budget=Budget(max_cycles=4))
    assert [f[4].cycle for f in snap["facts"] if f[1] == "late"] == [2, 3, 4]
