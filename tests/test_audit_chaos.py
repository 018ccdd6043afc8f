"""The audit trail survives crashes and concurrent writers.

A writer killed with SIGKILL mid-run leaves every committed cycle intact and a
chain that verifies; four processes writing to one database (SQLite file or
PostgreSQL) lose and interleave nothing. The worker processes run this module
(``python -c "from tests.test_audit_chaos import worker_main; worker_main()"``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from audit import SqlRunStore, open_store
from engine import AuditEvent, Budget, Context, Engine, Proposal, RunHeader, suggestor

ROOT = Path(__file__).resolve().parent.parent
FACTS_PER_CYCLE = 200


def make_engine(store: SqlRunStore, cycles: int, facts: int = FACTS_PER_CYCLE) -> Engine:
    @suggestor(name="burst")
    def burst(ctx: Context) -> list[Proposal]:
        base = ctx.cycle * facts
        return [Proposal("x", base + i) for i in range(facts)]

    return Engine(budget=Budget(max_cycles=cycles, max_facts=0), store=store).register(burst)


def worker_main() -> None:
    """``MODE URL ARG...``: ``runs URL PREFIX N CYCLES FACTS`` records N runs;
    ``append URL RUN_ID BATCHES SIZE TAG`` appends batches to one shared run;
    ``forever URL RUN_ID`` runs until killed, printing each cycle."""
    mode, url, *args = sys.argv[1:]
    store = open_store(url)
    if mode == "runs":
        prefix, n, cycles, facts = args[0], int(args[1]), int(args[2]), int(args[3])
        for i in range(n):
            make_engine(store, cycles, facts).run(run_id=f"{prefix}-{i}")
    elif mode == "append":
        run_id, batches, size, tag = args[0], int(args[1]), int(args[2]), args[3]
        for b in range(batches):
            events = [
                AuditEvent("cycle_started", b, {"tag": tag, "batch": b, "i": i}, float(b))
                for i in range(size)
            ]
            store.append_events(run_id, events)
    elif mode == "forever":

        def progress(cycle: int, _percent: float) -> None:
            print(cycle, flush=True)

        engine = make_engine(store, 1_000_000)
        engine.progress = progress
        engine.run(run_id=args[0])


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from tests.test_audit_chaos import worker_main; worker_main()",
            *args,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_all(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def test_a_writer_killed_mid_run_leaves_every_committed_cycle_intact(tmp_path: Path) -> None:
    db = str(tmp_path / "crash.db")
    open_store(db).close()
    proc = spawn("forever", db, "doomed")
    assert proc.stdout is not None
    for line in proc.stdout:
        if int(line) >= 5:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    store = open_store(db)
    report = store.verify("doomed")
    assert report.ok, report
    row = store.run("doomed")
    assert row.status == "crashed"
    events = store.events("doomed")
    assert row.last_seq == len(events) == events[-1].seq
    cycles = sorted({e.cycle for e in events if e.cycle > 0})
    assert len(cycles) >= 5 and cycles == list(range(1, len(cycles) + 1))
    promoted = Counter(e.cycle for e in events if e.kind == "fact_promoted")
    # every committed cycle is whole: its start, its execution and all its facts
    for c in cycles:
        assert promoted[c] == FACTS_PER_CYCLE, (c, promoted[c])
    assert len(store.facts("doomed")) == FACTS_PER_CYCLE * len(cycles)
    assert [r.run_id for r in store.runs(status="crashed")] == ["doomed"]


def test_four_processes_recording_runs_lose_and_interleave_nothing(store_url: str) -> None:
    open_store(store_url).close()
    procs = [spawn("runs", store_url, f"p{i}", "2", "6", "50") for i in range(4)]
    wait_all(procs)
    store = open_store(store_url)
    rows = store.runs(limit=0)
    assert sorted(r.run_id for r in rows) == sorted(f"p{i}-{j}" for i in range(4) for j in range(2))
    for row in rows:
        assert row.status == "stopped" and row.kind == "cycle_budget_exhausted"
        events = store.events(row.run_id)
        assert [e.seq for e in events] == list(range(1, row.last_seq + 1))
        assert [e.cycle for e in events] == sorted(e.cycle for e in events)
        assert len(store.facts(row.run_id)) == row.facts_count == 6 * 50
    assert all(r.ok for r in store.verify_all())


def test_four_processes_appending_to_one_run_keep_one_chain(store_url: str) -> None:
    store = open_store(store_url)
    store.start_run(RunHeader("shared", None, None, ("a",), 0.0), [])
    procs = [spawn("append", store_url, "shared", "10", "20", f"w{i}") for i in range(4)]
    wait_all(procs)
    report = store.verify("shared")
    assert report.ok, report
    events = store.events("shared")
    assert [e.seq for e in events] == list(range(1, 4 * 10 * 20 + 1))
    # each batch stays contiguous: no writer's batch is split by another's
    for start in range(0, len(events), 20):
        batch = events[start : start + 20]
        assert len({(e.payload["tag"], e.payload["batch"]) for e in batch}) == 1
        assert [e.payload["i"] for e in batch] == list(range(20))
    per_writer = Counter(e.payload["tag"] for e in events)
    assert per_writer == {f"w{i}": 200 for i in range(4)}
