"""W6: one run of 1,000,000 facts through the SQLite audit store, cost kept flat.

``SUGGESTORS`` dependency-free suggestors each propose ``FACTS_PER_EXECUTION``
new facts every cycle for ``CYCLES`` cycles (W2's shape, 100 times longer), with
every fact an audit event in a SQLite WAL store. The engine's ``progress``
callback stamps the end of each cycle, so the throughput of the first and of the
last 100,000 facts come from the same run: flat means the store does not slow as
it grows. Also reported: peak RSS per fact and the longest cyclic-GC pause.

``python -m benchmarks --only w6`` (three runs per variant, medians: a minute or so).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.harness import GcMonitor, Row, Stat
from benchmarks.session import Suite, log

SUGGESTORS = 100
FACTS_PER_EXECUTION = 100
CYCLES = 100
WINDOW = 100_000  # facts: the first and the last window are compared
FLAT_WITHIN = 0.15  # the last window within 15% of the first


def scale_run(directory: str | None = None, checkpoint_every: int | None = 100) -> dict[str, Any]:
    """Run W6 once; the figures (facts/s of the first and last window, RSS, GC).

    The run ends at a fixed point (cycle ``CYCLES + 1`` adds nothing), so no final
    checkpoint is written; ``checkpoint_every`` is the engine's (None: none in flight).
    """
    from audit import open_store
    from engine import Budget, Context, Engine, FunctionSuggestor, Proposal

    def make(j: int) -> FunctionSuggestor:
        base = j * FACTS_PER_EXECUTION

        def work(ctx: Context) -> list[Proposal]:
            if ctx.cycle > CYCLES:
                return []
            offset = (ctx.cycle - 1) * SUGGESTORS * FACTS_PER_EXECUTION + base
            return [Proposal("n", offset + i) for i in range(FACTS_PER_EXECUTION)]

        return FunctionSuggestor(work, f"s{j}")

    tmp = tempfile.mkdtemp(prefix="converge-w6-", dir=directory)
    store = open_store(os.path.join(tmp, "w6.db"))
    stamps: list[float] = []
    engine = Engine(
        budget=Budget(max_cycles=CYCLES + 1, max_facts=0),
        store=store,
        checkpoint_every=checkpoint_every,
        progress=lambda cycle, percent: stamps.append(time.perf_counter()),
    )
    engine.register(*(make(j) for j in range(SUGGESTORS)))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    resident_before = resident_bytes()
    with GcMonitor() as gc_monitor:
        started = time.perf_counter()
        result = engine.run()
        ended = time.perf_counter()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    resident_after = resident_bytes()  # the run's result still holds every fact
    facts = len(result.context)
    per_cycle = SUGGESTORS * FACTS_PER_EXECUTION
    window_cycles = WINDOW // per_cycle
    ticks = [started, *stamps]  # ticks[c]: the end of cycle c
    first = WINDOW / (ticks[window_cycles] - ticks[0])
    last = WINDOW / (ticks[CYCLES] - ticks[CYCLES - window_cycles])
    store.close()
    # its ~300 MB would otherwise be written back to disk during the next run's windows
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "facts": facts,
        "seconds": ended - started,
        "first_window_facts_per_s": first,
        "last_window_facts_per_s": last,
        "last_over_first": last / first,
        "peak_rss_mib": rss_after / 1024,
        "rss_growth_bytes_per_fact": (rss_after - rss_before) * 1024 / max(facts, 1),
        "resident_bytes_per_fact": (resident_after - resident_before) / max(facts, 1),
        "longest_gc_pause_ms": gc_monitor.longest() * 1000,
        "gc_pauses_over_100ms": len(gc_monitor.pauses_over(0.1)),
        "stop": result.stop_reason.kind_code(),
    }


def resident_bytes() -> int:
    """The process's resident set now (bytes; Linux ``/proc/self/statm``), else its peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


RUNS = 3
"""W6 runs per variant, each in a fresh process: one 100k-fact window lasts under a
second on this VM, so the figures are the medians of three runs."""


def run_w6(suite: Suite) -> None:
    """The W6 rows of ``python -m benchmarks``."""
    for every in (100, None):
        runs = [_scale_run_in_a_fresh_process(suite.workdir, every) for _ in range(RUNS)]
        for figures in runs:
            log(f"  W6 ({every}): {figures}")
        _rows(
            suite,
            _median_figures(runs),
            "checkpoint_every=100" if every else "no checkpoints in flight",
        )


def _scale_run_in_a_fresh_process(directory: str | None, every: int | None) -> dict[str, Any]:
    """:func:`scale_run` in a new interpreter (no heap left by earlier runs)."""
    code = (
        "import json, sys; from benchmarks.scale_bench import scale_run; "
        f"print(json.dumps(scale_run({directory!r}, checkpoint_every={every!r})))"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _median_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over ``runs`` (the worst GC pause of any run); the rates
    also as (min, max) under ``"<key>_range"``."""
    out: dict[str, Any] = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, float | int) and not isinstance(value, bool):
            values = sorted(r[key] for r in runs)
            out[key] = statistics.median(values)
            out[f"{key}_range"] = (values[0], values[-1])
    out["longest_gc_pause_ms"] = max(r["longest_gc_pause_ms"] for r in runs)
    out["gc_pauses_over_100ms"] = sum(r["gc_pauses_over_100ms"] for r in runs)
    out["runs"] = len(runs)
    return out


def _rows(suite: Suite, figures: dict[str, Any], how: str) -> None:
    size = f"{figures['facts']:,} facts, {how}"
    note = (
        f"{figures['seconds']:.1f} s; RSS {figures['resident_bytes_per_fact']:.0f} B per fact "
        f"held (peak {figures['peak_rss_mib']:.0f} MiB); longest GC pause "
        f"{figures['longest_gc_pause_ms']:.0f} ms ({figures['gc_pauses_over_100ms']} > 100 ms)"
    )
    for label, key in (
        ("W6 scale: first 100k facts", "first_window_facts_per_s"),
        ("W6 scale: last 100k facts", "last_window_facts_per_s"),
    ):
        value = figures[key]
        lo, hi = figures.get(f"{key}_range", (value, value))
        suite.rows.append(Row(label, size, "facts/s", True, Stat(value, lo, hi), note=note))
    ratio = figures["last_over_first"]
    lo, hi = figures.get("last_over_first_range", (ratio, ratio))
    suite.rows.append(
        Row(
            "W6 scale: last / first",
            size,
            "ratio",
            True,
            Stat(ratio, lo, hi),
            target=(">=", 1 - FLAT_WITHIN),
            note="flat = the store does not slow as it grows",
        )
    )
