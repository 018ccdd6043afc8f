"""R1: resume latency from a HITL gate with N facts stored (SQLite audit store).

The run is built once per size: ``bulk`` proposes N facts on ``data``, ``ask``
(reading ``data``) proposes ``decision``, which ``gates.require_approval`` gates,
so the run pauses with N facts checkpointed. Each timed run resumes a fresh copy
of that database (``sqlite3`` backup API) with a fresh :class:`engine.Engine`:
``engine.resume(gate_id, GateDecision.approve(by="bench"))`` until the run stops.
The load part is the time until the first cycle after the resume executes
(``after``, reading ``decision``); the total includes the final stop (facts root,
last events). :func:`run_r1` adds the R1 rows of ``python -m benchmarks``.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable

from benchmarks.harness import GcMonitor, Row, Stat
from benchmarks.session import Suite, gc_note
from engine import Budget, Engine, GateDecision, Proposal, RunStore
from engine.context import Context
from engine.suggestor import FunctionSuggestor
from gates.hitl import require_approval

StoreOpener = Callable[[str], RunStore]


def _suggestors(n: int, marks: list[float]) -> list[FunctionSuggestor]:
    def bulk(ctx: Context) -> list[Proposal]:
        return [Proposal("data", i) for i in range(n)]

    def ask(ctx: Context) -> list[Proposal]:
        return [Proposal("decision", "go", parents=(f"data#{n - 1}",))]

    def after(ctx: Context) -> None:
        marks.append(time.perf_counter())

    return [
        FunctionSuggestor(bulk, "bulk", ("start",)),
        FunctionSuggestor(ask, "ask", ("data",)),
        FunctionSuggestor(after, "after", ("decision",)),
    ]


def _engine(store: RunStore, n: int, marks: list[float]) -> Engine:
    engine = Engine(
        budget=Budget(max_cycles=10, max_facts=0),
        gates=[require_approval(keys=["decision"], summary="go on after {content}")],
        store=store,
    )
    engine.register(*_suggestors(n, marks))
    return engine


def build_resume(
    n: int, open_store: StoreOpener, directory: str | None = None
) -> Callable[[], Callable[[], object]]:
    """R1 for ``n`` stored facts; each timed run returns its load part (seconds)."""
    tmp = tempfile.mkdtemp(prefix="converge-resume-", dir=directory)
    template = os.path.join(tmp, "template.db")
    store = open_store(template)
    result = _engine(store, n, []).run({"start": [1]})
    _close(store)
    reason = result.stop_reason
    assert reason.kind == "hitl_gate_pending", reason
    gate_id: str = reason.gate_id
    copies = 0

    def prepare() -> Callable[[], object]:
        nonlocal copies
        copies += 1
        path = os.path.join(tmp, f"copy{copies}.db")
        src, dst = sqlite3.connect(template), sqlite3.connect(path)
        src.backup(dst)
        src.close()
        dst.close()
        marks: list[float] = []
        fresh = open_store(path)
        engine = _engine(fresh, n, marks)

        def run() -> object:
            t0 = time.perf_counter()
            done = engine.resume(gate_id, GateDecision.approve(by="bench"))
            assert done.stop_reason.kind == "converged", done.stop_reason
            assert len(done.context) == n + 2  # start + data + decision
            _close(fresh)
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            return marks[0] - t0

        return run

    return prepare


def _close(store: RunStore) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()


def run_r1(suite: Suite) -> None:
    """R1 resume from a HITL gate with N facts stored in SQLite: load part and total, ms."""
    try:
        from audit import open_store
    except ImportError as exc:
        suite.rows.append(Row("R1 resume", "—", "ms", False, None, note=f"skipped: {exc}"))
        return
    for n in suite.sizes.resume:
        # the template (one run whose suggestor proposes n facts at once) is setup:
        # R1's GC note covers the resumes it times, W6 the GC of large runs
        prepare = build_resume(n, open_store, suite.workdir)
        with GcMonitor() as mon:
            series = suite.time(prepare)
        load = [p * 1000 for p in series.parts]
        # the design's targets: <= 60 ms at 10k facts stored, <= 300 ms at 100k
        target = {10_000: ("<=", 60.0), 100_000: ("<=", 300.0)}.get(n)
        load_row = Row(
            "R1 resume: load to first cycle",
            f"{n:,} facts",
            "ms",
            False,
            Stat(statistics.median(load), min(load), max(load)) if load else None,
        )
        load_row.runs = len(load)
        suite.rows.append(load_row)
        row = Row.in_ms(
            "R1 resume: total to stop", f"{n:,} facts", series, target=target, note=gc_note(mon)
        )
        suite.add(row, series)
