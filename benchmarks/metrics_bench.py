"""M1: what Prometheus metrics cost on the write path (issue 57, docs/operations.md).

The W2 workload (``w2_store`` size: suggestors x facts x cycles, every fact an event)
on a SQLite WAL store, metrics off and on (``converge.metrics.instrument``: each
suggestor timed, each batch of events the store writes timed and counted), the
runs alternating off / on so that a loaded machine's drift falls on both. Twice:
in this process (prometheus-client's values in memory, as ``converge serve`` with
an in-memory store), and in a child process in multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR``: values in files, as in a pool process of ``converge
serve`` or a Celery worker; prometheus-client picks its mode when first
imported). Each "on" row gives its cost against the "off" runs it alternated with::

    python -m benchmarks --only m1 --no-langgraph
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from benchmarks.harness import Row, Series, Stat
from benchmarks.session import Suite, log
from benchmarks.workloads import throughput_suggestors
from engine import Budget, Engine

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
__all__ = ["alternated", "run_m1"]


def alternated(workdir: str, size: tuple[int, int, int], pairs: int) -> dict[str, list[float]]:
    """Seconds of each W2 run, metrics ``off`` and ``on`` alternately, ``pairs`` of
    each after one warm-up of each, every run a new engine over its own SQLite store;
    and the CPU seconds of this process each took (``off_cpu``, ``on_cpu``: what a
    loaded machine's other processes do not add)."""
    from audit import open_store
    from converge.metrics import instrument

    workers, facts, cycles = size
    suggestors = throughput_suggestors(workers, facts, cycles)
    budget = Budget(max_cycles=cycles + 5, max_facts=0)
    stores = {k: open_store(os.path.join(workdir, f"m1-{k}.db")) for k in ("off", "on")}
    times: dict[str, list[float]] = {"off": [], "on": [], "off_cpu": [], "on_cpu": []}
    try:
        for i in range(pairs + 1):
            for kind in ("off", "on") if i % 2 == 0 else ("on", "off"):
                engine = Engine(budget=budget, store=stores[kind]).register(*suggestors)
                if kind == "on":
                    instrument(engine)
                gc.collect()
                started, cpu = time.perf_counter(), time.process_time()
                result = engine.run({"tick": [0]})
                took = time.perf_counter() - started
                took_cpu = time.process_time() - cpu
                assert result.stop_reason.kind == "converged", result.stop_reason
                if i:  # the first pair warms up
                    times[kind].append(took)
                    times[f"{kind}_cpu"].append(took_cpu)
    finally:
        for store in stores.values():
            store.close()
    return times


def direct_cost(size: tuple[int, int, int], repeats: int = 20) -> list[float]:
    """Seconds the instrumentation alone adds to one W2 run of ``size``, each of
    ``repeats`` times: per execution a timed suggestor's two clock reads and one
    histogram observation, per cycle the store write's timing and the count of its
    batch (a ``cycle_started``, one ``suggestor_executed`` per suggestor with its
    usage, the cycle's promoted facts as one batch item)."""
    from converge import metrics
    from engine import Fact, Provenance
    from engine.store import AuditEvent, PromotedFacts

    workers, facts, cycles = size
    fact = Fact("f", "k", 1, 1.0, Provenance("s", 1, "p"))
    batch: list[AuditEvent | PromotedFacts] = [AuditEvent("cycle_started", 1, {}, 0.0)]
    batch += [
        AuditEvent("suggestor_executed", 1, {"suggestor": f"s{i}", "usage": [0, 0, 0.0]}, 0.0)
        for i in range(workers)
    ]
    batch.append(PromotedFacts(1, 0.0, [fact] * (workers * facts)))
    timers = [metrics.SUGGESTOR_SECONDS.labels(f"s{i}") for i in range(workers)]
    commit = metrics.STORE_COMMIT_SECONDS.observe
    out = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(cycles):
            for timer in timers:
                t0 = time.perf_counter()
                timer.observe(time.perf_counter() - t0)
            t0 = time.perf_counter()
            commit(time.perf_counter() - t0)
            metrics.count_events(batch)
        out.append(time.perf_counter() - started)
    return out


def _child(workdir: str, size: tuple[int, int, int], pairs: int) -> dict[str, list[float]]:
    """:func:`alternated` in a child process in multiprocess mode (a pool process's)."""
    values = tempfile.mkdtemp(dir=workdir, prefix="multiproc-")
    where = tempfile.mkdtemp(dir=workdir, prefix="m1-child-")
    code = (
        "import json, sys; from benchmarks.metrics_bench import alternated, direct_cost; "
        "size = tuple(map(int, sys.argv[2:5])); "
        "got = alternated(sys.argv[1], size, int(sys.argv[5])); "
        "got['direct'] = direct_cost(size); print(json.dumps(got))"
    )
    args = [sys.executable, "-c", code, where, *map(str, size), str(pairs)]
    env = {**os.environ, "PYTHONPATH": REPO, "PROMETHEUS_MULTIPROC_DIR": values}
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    got: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return got


def run_m1(suite: Suite) -> None:
    """The M1 rows: metrics off and on, in memory and in multiprocess mode."""
    size = suite.sizes.w2_store
    total = size[0] * size[1] * size[2]
    label = f"{size[0]}x{size[1]}x{size[2]}"
    pairs = max(suite.sizes.runs, 3)

    def per_s(t: float) -> float:
        return total / t

    def here() -> dict[str, list[float]]:
        got = alternated(tempfile.mkdtemp(dir=suite.workdir), size, pairs)
        got["direct"] = direct_cost(size)
        return got

    modes: list[tuple[str, Callable[[], dict[str, list[float]]]]] = [
        ("in memory", here),
        ("multiprocess", lambda: _child(suite.workdir, size, pairs)),
    ]
    for mode, measured in modes:
        times = measured()
        stats = {}
        for kind in ("off", "on"):
            series = Series(tuple(times[kind]), 1, ())
            stats[kind] = Stat.of(series, per_s)
            note = ""
            if kind == "on":
                wall = statistics.median(times["on"]) / statistics.median(times["off"]) - 1
                cpu = statistics.median(times["on_cpu"]) / statistics.median(times["off_cpu"]) - 1
                note = f"cost vs off (alternated runs, medians): wall {wall:+.1%}, CPU {cpu:+.1%}"
                log(f"  metrics on, {mode}: {note}")
            row = Row(f"M1 W2 SQLite, metrics {kind} ({mode})", label, "facts/s", True, stats[kind])
            row.note = note
            suite.add(row, series)
        direct = Series(tuple(times["direct"]), 1, ())
        share = statistics.median(times["direct"]) / statistics.median(times["off"])
        row = Row(
            f"M1 instrumentation alone per W2 run ({mode})",
            label,
            "ms",
            False,
            Stat.of(direct, lambda t: t * 1000),
            note=f"{share:.2%} of an off run's median time",
        )
        suite.add(row, direct)
