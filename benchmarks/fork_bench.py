"""F1: the cost of a fork (issues 24 and 46): ``Engine.fork(run, 50)`` of a run of
10k, 100k and 1M facts recorded in SQLite, the fork point in the middle.

Each parent is recorded once: ``grow`` promotes ``per_cycle`` facts a cycle for 100
cycles (plus one ``step`` fact a cycle, which wakes it again); 100, 1,000 and
10,000 a cycle make 10k, 100k and 1M facts. Since issue 46 a fork refers to its
parent's facts up to the fork point (``forked_from``: the parent's verified head
and the facts frontier, O(log n) hashes) instead of copying them. Rows per size:

- ``F1 reference written``: recording the fork's start (its ``run_started`` with
  the reference, its ``runs`` row), the state already rebuilt: what the fork
  writes. Flat in the parent's size (the target: <= 100 ms at every size, and 1M
  within 1.5x of 10k).
- ``F1 fork recorded``: ``Engine.record_fork`` (what ``POST /api/runs/{id}/fork``
  and ``converge.timetravel.record_fork`` wait for): the parent's chain verified
  up to the fork point, the state rebuilt, the reference written, a checkpoint.
- ``F1 fork at cycle 50``: ``Engine.fork``, as before: the same, then the fork
  driven (``max_cycles=50``: it stops at once with ``CycleBudgetExhausted`` and its
  checkpoint). Its raw limit, measured in the same run: reading the parent's
  ``fact_promoted`` payloads up to the fork point (one query) and loading them
  into a ``Context``, no verification, no Merkle tree, nothing written.

Why the fork itself cannot be flat: a fork must not launder a tampered parent,
so before anything is written it recomputes the parent's hash chain over every
event up to the fork point (an edited row is found only by reading it: no check
of O(log n) rows can see it; the ledger's signed heads prove a head, not that
the rows still hash to it), and the fork, like a resume (R1), loads the facts up
to the fork point into memory to run. Both are O(facts at the fork point); what
the fork no longer does is write them again (about 10 MB at 100k).
``--quick``: 10k facts only.

``python -m benchmarks --only f1 --no-langgraph``
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
from sqlalchemy import select

from audit import open_store
from audit.store import SqlRunStore
from audit.tables import audit_events
from benchmarks.harness import Row, Series, Stat
from benchmarks.session import QUICK, Suite, log
from engine import Budget, Context, Engine, Proposal, suggestor
from engine._cycle.run import facts_of_dicts
from engine.context import FactIndex
from engine.store import RunStore

F1_CYCLES = 100
F1_AT = 50
F1_TARGET_MS = 100.0


def wide_engine(store: RunStore | None, per_cycle: int, max_cycles: int) -> Engine:
    """An engine whose run promotes ``per_cycle`` ``item`` facts a cycle and one ``step``
    fact that wakes it again, for ``max_cycles`` cycles (F1's run; the fork tests')."""

    @suggestor(name="grow", dependencies=["step"])
    def grow(ctx: Context) -> list[Proposal]:
        s = int(ctx.get("step")[-1].content)
        items = [Proposal("item", s * per_cycle + k) for k in range(per_cycle)]
        return [*items, Proposal("step", s + 1)]

    engine = Engine(budget=Budget(max_cycles=max_cycles, max_facts=0), store=store)
    engine.register(grow)
    return engine


def run_f1(suite: Suite) -> None:
    """Fork at cycle 50 of a 100-cycle run of 10k, 100k and 1M facts (10k: ``--quick``)."""
    sizes = (100,) if suite.sizes is QUICK else (100, 1_000, 10_000)
    written: dict[int, float] = {}
    for per_cycle in sizes:
        written[per_cycle] = _one_size(suite, per_cycle)
    if len(written) > 1:
        low, high = min(written.values()), max(written.values())
        log(f"  F1: reference written, largest / smallest median: {high / low:.2f}x")


def _one_size(suite: Suite, per_cycle: int) -> float:
    """The rows of one parent size; the median of ``F1 reference written`` (ms)."""
    workdir = os.path.join(suite.workdir, f"f1-{per_cycle}")
    os.makedirs(workdir, exist_ok=True)
    store = open_store(os.path.join(workdir, "audit.db"))
    size = f"{per_cycle * F1_CYCLES // 1000}k facts"
    taken = per_cycle * F1_AT + F1_AT + 1
    try:
        parent = wide_engine(store, per_cycle, F1_CYCLES).run({"step": [0]}).run_id
        log(f"  F1: recorded a run of {per_cycle * F1_CYCLES + F1_CYCLES + 1} facts")
        with _timed_start() as started:
            recorded = suite.time(lambda: _record(store, parent, per_cycle, started))
        forked = suite.time(lambda: _fork(store, parent, per_cycle))
        raw = suite.time(lambda: _raw_limit(store, parent))
    finally:
        store.close()
    write = Series(recorded.parts, recorded.series_run)
    rows = (
        ("F1 reference written", write, "the fork's run_started + runs row", None),
        ("F1 fork recorded", recorded, "verify + rebuild + reference + checkpoint", None),
        ("F1 fork at cycle 50", forked, "recorded + driven (stops at once)", raw),
    )
    for name, series, what, limit in rows:
        suite.add(
            Row(
                name,
                size,
                "ms",
                False,
                Stat.of(series, _ms),
                target=("<=", F1_TARGET_MS),
                limit=None if limit is None else Stat.of(limit, _ms),
                limit_name="" if limit is None else "read + load the facts, no verify",
                note=f"{what}; {taken} facts referred to, SQLite store",
            ),
            series,
        )
    return Stat.of(write, _ms).median


def _ms(seconds: float) -> float:
    return seconds * 1000


@contextmanager
def _timed_start() -> Iterator[list[float]]:
    """While open, each fork's start record (:func:`engine.fork._record_start`: its
    ``run_started`` and ``runs`` row) is timed; the durations (s) are appended."""
    import engine.fork as fork_module

    original = fork_module._record_start
    times: list[float] = []

    def timed(*args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        original(*args, **kwargs)
        times.append(time.perf_counter() - t0)

    fork_module._record_start = timed
    try:
        yield times
    finally:
        fork_module._record_start = original


def _record(
    store: SqlRunStore, parent: str, per_cycle: int, started: list[float]
) -> Callable[[], float]:
    """``Engine.record_fork``; the thunk returns the time its start record took."""
    engine = wide_engine(store, per_cycle, F1_AT)

    def go() -> float:
        engine.record_fork(parent, F1_AT)
        return started[-1]

    return go


def _fork(store: SqlRunStore, parent: str, per_cycle: int) -> Callable[[], object]:
    engine = wide_engine(store, per_cycle, F1_AT)

    def go() -> None:
        result = engine.fork(parent, F1_AT)
        if result.stop_reason.kind_code() != "cycle_budget_exhausted":
            raise AssertionError(f"F1: the fork stopped with {result.stop_reason}")

    return go


def _raw_limit(store: SqlRunStore, parent: str) -> Callable[[], object]:
    """The floor of a fork that loads its state: the parent's facts up to the fork
    point read in one query and loaded into a Context, with no verification."""

    def go() -> None:
        ev = audit_events.c
        with store.transaction(write=False) as conn:
            texts = conn.execute(
                select(ev.payload).where(
                    ev.run_id == parent, ev.kind == "fact_promoted", ev.cycle <= F1_AT
                )
            ).scalars()
            facts = facts_of_dicts([orjson.loads(t) for t in texts])
        Context(FactIndex(facts))

    return go
