"""F1: the cost of a fork (issue 24): ``Engine.fork(run, 50)`` of a run of 100,000
facts recorded in SQLite (target: <= 500 ms).

The run is recorded once: ``grow`` promotes 1,000 facts a cycle for 100 cycles
(plus one ``step`` fact a cycle, which wakes it again). Each timed fork reads the
parent's events up to cycle 50 (50,051 facts), rebuilds the state, records the
fork's ``run_started`` (its facts and ``forked_from``) and, with ``max_cycles=50``,
stops at once (``CycleBudgetExhausted``, with its checkpoint): the fork's own cost,
no cycle after it. ``--quick``: 10,000 facts (fork at cycle 50 of 100 cycles of 100).

``python -m benchmarks --only f1 --no-langgraph``
"""

from __future__ import annotations

import os
from collections.abc import Callable

from audit import open_store
from benchmarks.harness import Row, Stat
from benchmarks.session import QUICK, Suite, log
from engine import Budget, Context, Engine, Proposal, suggestor
from engine.store import RunStore

F1_CYCLES = 100
F1_AT = 50
F1_TARGET_MS = 500.0


def _engine(store: RunStore, per_cycle: int, max_cycles: int) -> Engine:
    @suggestor(name="grow", dependencies=["step"])
    def grow(ctx: Context) -> list[Proposal]:
        s = int(ctx.get("step")[-1].content)
        items = [Proposal("item", s * per_cycle + k) for k in range(per_cycle)]
        return [*items, Proposal("step", s + 1)]

    engine = Engine(budget=Budget(max_cycles=max_cycles, max_facts=0), store=store)
    engine.register(grow)
    return engine


def run_f1(suite: Suite) -> None:
    """Fork at cycle 50 of a 100-cycle run of 100k facts (10k with ``--quick``)."""
    per_cycle = 100 if suite.sizes is QUICK else 1_000
    workdir = os.path.join(suite.workdir, "f1")
    os.makedirs(workdir, exist_ok=True)
    store = open_store(os.path.join(workdir, "audit.db"))
    try:
        parent = _engine(store, per_cycle, F1_CYCLES).run({"step": [0]})
        log(f"  F1: recorded a run of {len(parent.context)} facts in {F1_CYCLES} cycles")

        def fork() -> Callable[[], object]:
            engine = _engine(store, per_cycle, F1_AT)

            def go() -> None:
                result = engine.fork(parent.run_id, F1_AT)
                if result.stop_reason.kind_code() != "cycle_budget_exhausted":
                    raise AssertionError(f"F1: the fork stopped with {result.stop_reason}")

            return go

        series = suite.time(fork)
    finally:
        store.close()
    suite.add(
        Row(
            f"F1 fork at cycle {F1_AT}",
            f"{per_cycle * F1_CYCLES // 1000}k facts",
            "ms",
            False,
            Stat.of(series, lambda s: s * 1000),
            target=("<=", F1_TARGET_MS),
            note=f"{per_cycle * F1_AT + F1_AT + 1} facts taken, SQLite store",
        ),
        series,
    )
