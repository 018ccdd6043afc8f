"""Audit store speed: events/s written, W2 with vs without the store, and queries.

``python -m benchmarks.audit_bench`` prints a markdown table (median of 5 runs):

- E1 events/s appended in batches of 1,000 (one transaction per batch, like a
  cycle) to a SQLite WAL file and to PostgreSQL (``CONVERGE_TEST_PG_URL``);
- W2 100 suggestors x 100 facts x 10 cycles (100k facts) without a store and with
  the SQLite store (every fact an event), facts/s and the slowdown;
- Q1 ``runs(category="budget")`` over 100k runs inserted in bulk;
- C1 ``load_checkpoint`` + ``Run.from_checkpoint`` of a 10k-fact run.

In ``python -m benchmarks``, :func:`run_q1` adds the Q1 rows, measured with
``build_runs_query(n, directory)``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from audit import SqlRunStore, open_store
from audit.tables import runs as runs_table
from benchmarks.harness import Row
from benchmarks.session import Suite
from engine import AuditEvent, Budget, Fact, Provenance, RunHeader, fact_to_dict

REPEATS = 5
CATEGORIES = ("success", "cancelled", "budget", "validation", "error", "policy", "hitl", "human")
KINDS = {
    "success": "converged",
    "cancelled": "user_cancelled",
    "budget": "cycle_budget_exhausted",
    "validation": "criteria_unmet",
    "error": "error",
    "policy": "loop_detected",
    "hitl": "hitl_gate_pending",
    "human": "human_intervention_required",
}
REASONS = {
    "converged": '{"kind":"converged"}',
    "user_cancelled": '{"kind":"user_cancelled"}',
    "cycle_budget_exhausted": '{"cycles_executed":10,"kind":"cycle_budget_exhausted","limit":10}',
    "criteria_unmet": '{"criteria":["c"],"kind":"criteria_unmet"}',
    "error": '{"error_category":"suggestor","kind":"error","message":"boom"}',
    "loop_detected": '{"kind":"loop_detected","pattern":["a"],"window":4}',
    "hitl_gate_pending": (
        '{"agent_id":"a","cycle":1,"gate_id":"g","kind":"hitl_gate_pending",'
        '"proposal_id":"p","summary":"s"}'
    ),
    "human_intervention_required": (
        '{"approval_refs":[],"criteria":["c"],"kind":"human_intervention_required"}'
    ),
}

Prepare = Callable[[], Callable[[], object]]


def median_s(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    """Median wall time (seconds) of ``repeats`` calls after one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# -- Q1 ---------------------------------------------------------------------------------
def populate_runs(store: SqlRunStore, n: int, batch: int = 20_000) -> None:
    """Insert ``n`` finished runs in bulk (Core executemany), a category each in turn."""
    now = time.time() - n
    rows: list[dict[str, Any]] = []
    with store.transaction() as conn:
        for i in range(n):
            cat = CATEGORIES[i % len(CATEGORIES)]
            kind = KINDS[cat]
            rows.append(
                {
                    "run_id": f"bulk-{i:07d}",
                    "job": f"job-{i % 10}",
                    "job_spec": None,
                    "suggestors": '["a"]',
                    "status": "stopped",
                    "pid": None,
                    "hostname": None,
                    "started_at": now + i,
                    "ended_at": now + i + 0.5,
                    "stop_kind": kind,
                    "category": cat,
                    "reason": REASONS[kind],
                    "cycles": 10,
                    "facts_count": 100,
                    "facts_root": "0" * 64,
                    "usage": '{"cost_usd":0.0,"input_tokens":0,"output_tokens":0}',
                    "duration_ms": 500,
                    "chain": "sha256",
                    "head_hash": "0" * 64,
                    "last_seq": 0,
                    "parent_run_id": None,
                }
            )
            if len(rows) == batch:
                conn.execute(insert(runs_table), rows)
                rows = []
        if rows:
            conn.execute(insert(runs_table), rows)


_POPULATED: dict[tuple[int, str], SqlRunStore] = {}


def build_runs_query(n: int, directory: str | Path) -> Prepare:
    """A prepare whose thunk runs ``store.runs(category="budget")`` over ``n`` runs.

    The database (``directory/q1-<n>.db``) is filled once and reused by later prepares.
    """

    def prepare() -> Callable[[], object]:
        key = (n, str(directory))
        store = _POPULATED.get(key)
        if store is None:
            path = Path(directory) / f"q1-{n}.db"
            path.unlink(missing_ok=True)
            store = open_store(str(path))
            populate_runs(store, n)
            _POPULATED[key] = store
        ready = store

        def query() -> object:
            rows = ready.runs(category="budget")
            assert len(rows) == min(100, n // len(CATEGORIES))
            return None

        return query

    return prepare


def run_q1(suite: Suite) -> None:
    """Q1 ``runs(category="budget")`` over N recorded runs (:func:`build_runs_query`), ms."""
    for n in suite.sizes.query_runs:
        series = suite.time(build_runs_query(n, suite.workdir))
        target = ("<=", 50.0) if n == 100_000 else None
        row = Row.in_ms("Q1 runs --category budget", f"{n:,} runs", series, target=target)
        suite.add(row, series)


# -- E1 ---------------------------------------------------------------------------------
def fact_events(n: int, cycle: int = 1) -> list[AuditEvent]:
    """``n`` ``fact_promoted`` events shaped as the engine writes them."""
    now = time.time()
    return [
        AuditEvent(
            "fact_promoted",
            cycle,
            fact_to_dict(Fact(f"k#{i}", "k", i, 1.0, Provenance("s", cycle, f"s/{cycle}/0.{i}"))),
            now,
        )
        for i in range(n)
    ]


def events_per_second(url: str, total: int = 20_000, batch: int = 1_000) -> float:
    """Median events/s appending ``total`` events in ``batch``-sized transactions."""
    store = open_store(url)
    events = fact_events(batch)
    counter = [0]

    def one() -> None:
        counter[0] += 1
        run_id = f"e1-{time.time_ns()}-{counter[0]}"
        store.start_run(RunHeader(run_id, None, None, ("s",), time.time()), [])
        for _ in range(total // batch):
            store.append_events(run_id, events)

    seconds = median_s(one)
    store.close()
    return total / seconds


# -- W2 ---------------------------------------------------------------------------------
def w2_facts_per_second(directory: Path) -> tuple[float, float]:
    """(facts/s without a store, facts/s with the SQLite store), medians of 5."""
    from benchmarks.workloads import build_throughput

    count = [0]

    def factory() -> SqlRunStore:
        count[0] += 1
        return open_store(str(directory / f"w2-{count[0]}.db"))

    def timed(prepare: Prepare) -> float:
        times = []
        prepare()()  # warm-up
        for _ in range(REPEATS):
            run = prepare()
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        return 100_000 / statistics.median(times)

    return timed(build_throughput(None)), timed(build_throughput(factory))


# -- C1 ---------------------------------------------------------------------------------
def checkpoint_load_ms(directory: Path, facts: int = 10_000) -> float:
    """Median ms to load a 10k-fact checkpoint and rebuild the run state."""
    from engine._cycle.collector import bulk_load
    from engine._cycle.run import Run

    store = open_store(str(directory / "c1.db"))
    state = Run("c1", Budget())
    for i in range(facts):
        f = Fact(f"k#{i}", "k", {"name": f"pkg-{i}", "v": i}, 1.0, Provenance("s", 1, f"p{i}"))
        state.facts.promote(f, ("k", i))
    store.start_run(RunHeader("c1", None, None, ("s",), time.time()), [])
    with store.transaction() as conn:
        store._put_checkpoint(conn, "c1", state.to_checkpoint(["s"]))

    def load() -> None:
        with bulk_load():  # as Engine.resume loads it
            Run.from_checkpoint(store.load_checkpoint("c1"))

    ms = median_s(load) * 1000
    store.close()
    return ms


def main() -> None:
    """Print the markdown table of the audit store's figures."""
    from audit.testing import pg_schema, pg_unreachable_reason

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        rows: list[tuple[str, str, str]] = []
        rows.append(("E1 events/s, SQLite WAL", f"{events_per_second(str(d / 'e1.db')):,.0f}", ""))
        why = pg_unreachable_reason()
        if why is None:
            with pg_schema("converge_bench") as url:
                rows.append(("E1 events/s, PostgreSQL", f"{events_per_second(url):,.0f}", ""))
        else:
            rows.append(("E1 events/s, PostgreSQL", "n/a", why))
        plain, audited = w2_facts_per_second(d)
        rows.append(("W2 facts/s, no store", f"{plain:,.0f}", "target >= 250k"))
        rows.append(
            (
                "W2 facts/s, SQLite store",
                f"{audited:,.0f}",
                f"target >= 100k; slowdown x{plain / audited:.2f}",
            )
        )
        q1 = build_runs_query(100_000, d)
        q1_ms = median_s(q1()) * 1000
        rows.append(('Q1 runs(category="budget"), 100k runs', f"{q1_ms:.2f} ms", "target <= 50 ms"))
        rows.append(("C1 checkpoint load, 10k facts", f"{checkpoint_load_ms(d):.1f} ms", ""))
        for store in _POPULATED.values():
            store.close()
        _POPULATED.clear()
    print("| measure | median of 5 | note |")
    print("|---|---|---|")
    for name, value, note in rows:
        print(f"| {name} | {value} | {note} |")


if __name__ == "__main__":
    main()
