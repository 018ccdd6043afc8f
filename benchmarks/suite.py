"""The benchmark suite: which workloads run at which sizes, and the report.

``python -m benchmarks [--quick] [--only NAME[,NAME]] [--json FILE] [--profile NAME]``.
Names: ``limits``, ``w1``, ``w2``, ``w2-sqlite``, ``w2-pg``, ``w3``, ``w4``, ``w5``, ``w6``,
``r1``, ``q1`` (``w2`` selects the three W2 rows). LangGraph columns are filled when
``langgraph`` is importable (``--no-langgraph`` skips them).
"""

from __future__ import annotations

import argparse
import atexit
import cProfile
import importlib
import json
import os
import pstats
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import ModuleType
from typing import Any

from benchmarks import limits, workloads
from benchmarks.harness import (
    GcMonitor,
    Prepare,
    Row,
    Series,
    Stat,
    environment,
    measure,
    peak_rss_mib,
    render_environment,
    render_table,
)
from engine import RunStore

NAMES = ("limits", "w1", "w2", "w2-sqlite", "w2-pg", "w3", "r1", "q1", "w4", "w5", "w6")
GC_PAUSE_REPORTED = 0.100  # seconds: pauses over this are named in the note


@dataclass(frozen=True, slots=True)
class Sizes:
    """Sizes and repetitions of one suite run (full or ``--quick``)."""

    runs: int
    max_series: int
    limit_n: int
    chain: tuple[int, ...]
    lg_chain: tuple[int, ...]
    w2: tuple[int, int, int]  # suggestors, facts per execution, cycles
    w2_store: tuple[int, int, int]  # the same, with an audit store
    lg_w2: tuple[int, int, int]
    wide: tuple[int, ...]
    wide_cycles: int
    lg_wide: tuple[int, ...]
    lg_wide_cycles: int
    resume: tuple[int, ...]
    query_runs: tuple[int, ...]


FULL = Sizes(
    runs=5,
    max_series=3,
    limit_n=100_000,
    chain=(250, 500, 1000),
    lg_chain=(250, 500, 1000),
    w2=(100, 100, 10),
    w2_store=(100, 100, 10),
    lg_w2=(100, 100, 10),
    wide=(500, 2000, 8000),
    wide_cycles=2000,
    lg_wide=(500, 2000, 8000),
    lg_wide_cycles=100,
    resume=(1_000, 10_000, 100_000),
    query_runs=(10_000, 100_000),
)
QUICK = Sizes(
    runs=3,
    max_series=2,
    limit_n=20_000,
    chain=(250, 1000),
    lg_chain=(250,),
    w2=(100, 100, 10),
    w2_store=(100, 100, 2),
    lg_w2=(100, 100, 2),
    wide=(500, 8000),
    wide_cycles=500,
    lg_wide=(500,),
    lg_wide_cycles=30,
    resume=(1_000, 10_000),
    query_runs=(10_000,),
)


@dataclass(slots=True)
class Suite:
    """One invocation: its sizes, selection, and the rows produced so far."""

    sizes: Sizes
    only: frozenset[str] | None = None
    langgraph: ModuleType | None = None
    workdir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="converge-bench-"))
    rows: list[Row] = field(default_factory=list)
    limit_cost: dict[str, float] = field(default_factory=dict)  # seconds per item

    def wants(self, name: str) -> bool:
        """True when ``name`` is selected (``w2`` selects ``w2-sqlite`` and ``w2-pg`` too)."""
        if self.only is None:
            return True
        return any(name == o or name.startswith(o + "-") for o in self.only)

    def time(self, prepare: Prepare) -> Series:
        """Measure with this suite's repetitions."""
        return measure(prepare, runs=self.sizes.runs, max_series=self.sizes.max_series)

    def maybe_lg(self, build: Callable[[ModuleType], Prepare], size_ok: bool) -> Series | None:
        """Measure the LangGraph version when available and ``size_ok``; never fatal."""
        if self.langgraph is None or not size_ok:
            return None
        try:
            return self.time(build(self.langgraph))
        except Exception as exc:  # a LangGraph API change must not lose our own figures
            _log(f"  LangGraph failed: {type(exc).__name__}: {exc}")
            return None


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _gc_note(mon: GcMonitor) -> str:
    long = mon.pauses_over(GC_PAUSE_REPORTED)
    note = f"GC max pause {mon.longest() * 1000:.0f} ms"
    if long:
        note += f"; {len(long)} pauses > 100 ms"
    return note


def _add(suite: Suite, row: Row, series: Series | None) -> None:
    if series is not None:
        row.series_run = series.series_run
        row.runs = len(series.times)
    suite.rows.append(row)
    _log(f"  {row.workload} {row.size}: {row.ours} {row.unit}")


# -- the workloads -----------------------------------------------------------------
def run_limits(suite: Suite) -> None:
    """The raw limits: plain loop, sqlite3 executemany, sha256 chain (per item)."""
    n = suite.sizes.limit_n
    cases: list[tuple[str, str, Prepare]] = [
        ("plain loop", "facts/s", limits.build_plain_loop(n)),
        ("sqlite3 executemany", "rows/s", limits.build_sqlite_executemany(n, suite.workdir)),
        ("sha256 chain", "events/s", limits.build_sha256_chain(n)),
    ]
    for name, unit, prepare in cases:
        series = suite.time(prepare)
        suite.limit_cost[name] = series.median / n
        row = Row(
            f"limit: {name}",
            f"{n:,} items",
            unit,
            True,
            Stat.of(series, lambda t: n / t),
        )
        _add(suite, row, series)


def _limit(
    suite: Suite, names: Sequence[str], per_item_unit: Callable[[float], float]
) -> Stat | None:
    if not all(n in suite.limit_cost for n in names):
        return None
    v = per_item_unit(sum(suite.limit_cost[n] for n in names))
    return Stat(v, v, v)


def _scaled(factor: float) -> Callable[[float], float]:
    """Seconds to the unit: ``t * factor``."""

    def convert(t: float) -> float:
        return t * factor

    return convert


def _builder(name: str, *args: int) -> Callable[[ModuleType], Prepare]:
    """Call ``module.name(*args)`` on the LangGraph workloads module."""

    def build(module: ModuleType) -> Prepare:
        fn: Callable[..., Prepare] = getattr(module, name)
        return fn(*args)

    return build


def run_w1(suite: Suite) -> None:
    """W1 chain: µs per suggestor invocation (total run time / invocations)."""
    lg_sizes = suite.sizes.lg_chain
    for k in suite.sizes.chain:
        with GcMonitor() as mon:
            series = suite.time(workloads.build_chain(k))
        body = measure(partial(workloads.chain_body_seconds, k), runs=3).median / k * 1e6
        lg = suite.maybe_lg(_builder("build_chain", k), k in lg_sizes)
        us_per = _scaled(1e6 / k)
        row = Row(
            "W1 chain",
            f"K={k}",
            "µs/invocation",
            False,
            Stat.of(series, us_per),
            target=("<=", 10.0),
            langgraph=None if lg is None else Stat.of(lg, us_per),
            limit=_limit(suite, ["plain loop"], lambda s: s * 1e6),
            limit_name="plain loop, per fact",
            note=f"bodies {body:.2f} µs of it; {_gc_note(mon)}",
        )
        _add(suite, row, series)


def _sqlite_factory(suite: Suite) -> Callable[[], RunStore]:
    from audit import open_store

    path = os.path.join(tempfile.mkdtemp(dir=suite.workdir), "w2.db")
    store = open_store(path)
    return lambda: store


def _pg_factory() -> tuple[Callable[[], RunStore] | None, str]:
    """A store in a throwaway schema of ``$CONVERGE_TEST_PG_URL``, dropped at exit."""
    try:
        from audit import open_store
        from audit.testing import pg_schema

        schema = pg_schema("converge_bench")
        url = schema.__enter__()
        atexit.register(schema.__exit__, None, None, None)
        store = open_store(url)
        atexit.register(store.close)
    except Exception as exc:
        return None, f"skipped: PostgreSQL unreachable ({type(exc).__name__})"
    return (lambda: store), ""


def run_w2(suite: Suite) -> None:
    """W2 throughput: facts/s with no store, SQLite WAL and PostgreSQL."""
    w, f, c = suite.sizes.w2
    total = w * f * c
    size = f"{w}x{f}x{c}"

    def per_s(t: float) -> float:
        return total / t

    sw, sf, sc = suite.sizes.w2_store
    store_total = sw * sf * sc

    if suite.wants("w2") and (suite.only is None or "w2" in suite.only or "w2-none" in suite.only):
        with GcMonitor() as mon:
            series = suite.time(workloads.build_throughput(None, w, f, c))
        lw, lf, lc = suite.sizes.lg_w2
        lg = suite.maybe_lg(lambda m: m.build_throughput(lw, lf, lc), True)
        lg_total = lw * lf * lc
        note = _gc_note(mon)
        if (lw, lf, lc) != (w, f, c):
            note += f"; LangGraph at {lw}x{lf}x{lc}"
        row = Row(
            "W2 throughput, no store",
            size,
            "facts/s",
            True,
            Stat.of(series, per_s),
            target=(">=", 250_000.0),
            langgraph=None if lg is None else Stat.of(lg, lambda t: lg_total / t),
            limit=_limit(suite, ["plain loop"], lambda s: 1 / s),
            limit_name="plain loop",
            note=note,
        )
        _add(suite, row, series)
    stores: list[tuple[str, str, float | None]] = [
        ("w2-sqlite", "W2 throughput, SQLite WAL", 150_000.0),
        ("w2-pg", "W2 throughput, PostgreSQL", 100_000.0),
    ]
    for name, label, target in stores:
        if not suite.wants(name):
            continue
        try:
            if name == "w2-sqlite":
                factory: Callable[[], RunStore] | None = _sqlite_factory(suite)
                skip = ""
            else:
                factory, skip = _pg_factory()
        except ImportError as exc:
            factory, skip = None, f"skipped: audit store not importable ({exc})"
        if factory is None:
            suite.rows.append(Row(label, size, "facts/s", True, None, note=skip))
            _log(f"  {label}: {skip}")
            continue
        with GcMonitor() as mon:
            series = suite.time(workloads.build_throughput(factory, sw, sf, sc))
        _close(factory())
        row = Row(
            label,
            f"{sw}x{sf}x{sc}",
            "facts/s",
            True,
            Stat.of(series, lambda t: store_total / t),
            target=None if target is None else (">=", target),
            limit=_limit(
                suite, ["plain loop", "sqlite3 executemany", "sha256 chain"], lambda s: 1 / s
            ),
            limit_name="loop + executemany + sha256",
            note=_gc_note(mon),
        )
        _add(suite, row, series)


def run_w3(suite: Suite) -> None:
    """W3 wide-idle: µs per cycle with N idle subscribers; peak RSS and GC pauses."""
    cycles = suite.sizes.wide_cycles
    lg_cycles = suite.sizes.lg_wide_cycles
    for n in suite.sizes.wide:
        with GcMonitor() as mon:
            series = suite.time(workloads.build_wide_idle(n, cycles))
        rss = peak_rss_mib()
        lg = suite.maybe_lg(_builder("build_wide_idle", n, lg_cycles), n in suite.sizes.lg_wide)
        row = Row(
            "W3 wide-idle",
            f"N={n}",
            "µs/cycle",
            False,
            Stat.of(series, lambda t: t / cycles * 1e6),
            target=("<=", 30.0),
            langgraph=None if lg is None else Stat.of(lg, lambda t: t / lg_cycles * 1e6),
            note=f"{cycles} cycles; peak RSS {rss:.0f} MiB; {_gc_note(mon)}"
            + ("" if lg is None else f"; LangGraph: {lg_cycles} cycles of 2 supersteps"),
        )
        _add(suite, row, series)


def run_r1(suite: Suite) -> None:
    """R1 resume from a HITL gate with N facts stored in SQLite: load part and total, ms."""
    try:
        from audit import open_store
        from benchmarks.resume_bench import build_resume
    except ImportError as exc:
        suite.rows.append(Row("R1 resume", "—", "ms", False, None, note=f"skipped: {exc}"))
        return
    for n in suite.sizes.resume:
        with GcMonitor() as mon:
            series = suite.time(build_resume(n, open_store, suite.workdir))
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
        row = Row(
            "R1 resume: total to stop",
            f"{n:,} facts",
            "ms",
            False,
            Stat.of(series, lambda t: t * 1000),
            target=target,
            note=_gc_note(mon),
        )
        _add(suite, row, series)


def _audit_bench() -> ModuleType | None:
    try:
        return importlib.import_module("benchmarks.audit_bench")
    except ImportError:
        return None


def run_q1(suite: Suite) -> None:
    """Q1 ``runs(category="budget")`` over N recorded runs, from ``benchmarks.audit_bench``.

    Hook: ``audit_bench.build_runs_query(n, directory) -> Prepare`` (a prepare whose
    thunk performs one query). Skipped with a note while it does not exist.
    """
    mod = _audit_bench()
    build = getattr(mod, "build_runs_query", None) if mod is not None else None
    if build is None:
        note = "skipped: benchmarks.audit_bench.build_runs_query not available"
        suite.rows.append(Row("Q1 runs --category budget", "—", "ms", False, None, note=note))
        _log(f"  Q1: {note}")
        return
    for n in suite.sizes.query_runs:
        series = suite.time(build(n, suite.workdir))
        row = Row(
            "Q1 runs --category budget",
            f"{n:,} runs",
            "ms",
            False,
            Stat.of(series, lambda t: t * 1000),
            target=("<=", 50.0) if n == 100_000 else None,
        )
        _add(suite, row, series)


RUNNERS: dict[str, Callable[[Suite], None]] = {
    "limits": run_limits,
    "w1": run_w1,
    "w3": run_w3,
    "w2": run_w2,
    "r1": run_r1,
    "q1": run_q1,
    "w4": lambda suite: importlib.import_module("benchmarks.agents_bench").run_w4(suite),
    "w5": lambda suite: importlib.import_module("benchmarks.workers_bench").run_w5(suite),
    "w6": lambda suite: importlib.import_module("benchmarks.scale_bench").run_w6(suite),
}


def _close(store: RunStore) -> None:
    close = getattr(store, "close", None)
    if callable(close):
        close()


# -- profiling ---------------------------------------------------------------------
def profile(name: str, sizes: Sizes, top: int = 25) -> str:
    """cProfile one run of ``name`` (w1, w2, w3) at its largest size; the top functions."""
    builders: dict[str, Prepare] = {
        "w1": workloads.build_chain(max(sizes.chain)),
        "w2": workloads.build_throughput(None, *sizes.w2),
        "w3": workloads.build_wide_idle(max(sizes.wide), sizes.wide_cycles),
    }
    if name not in builders:
        raise SystemExit(f"--profile takes one of {sorted(builders)}, not {name!r}")
    prepare = builders[name]
    prepare()()  # warm-up
    thunk = prepare()
    prof = cProfile.Profile()
    prof.enable()
    thunk()
    prof.disable()
    out = _Capture()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)  # type: ignore[arg-type]
    return "".join(out.parts)


class _Capture:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)


# -- entry point ---------------------------------------------------------------------
def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """The command line of ``python -m benchmarks``."""
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer runs, smaller sizes (< 2 min)")
    p.add_argument(
        "--only",
        action="append",
        default=None,
        help=f"comma-separated names among {', '.join(NAMES)} (repeatable)",
    )
    p.add_argument("--json", metavar="FILE", help="also write the rows and environment as JSON")
    p.add_argument("--no-langgraph", action="store_true", help="skip the LangGraph columns")
    p.add_argument("--profile", metavar="NAME", help="cProfile one workload (w1, w2, w3) only")
    return p.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite, print the markdown report, optionally write JSON. Returns 0."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(args_list)
    sizes = QUICK if args.quick else FULL
    if args.profile:
        print(profile(args.profile, sizes))
        return 0
    only: frozenset[str] | None = None
    if args.only:
        only = frozenset(n.strip() for o in args.only for n in o.split(",") if n.strip())
        unknown = sorted(n for n in only if n not in NAMES)
        if unknown:
            raise SystemExit(f"unknown benchmark(s) {unknown}; choose among {', '.join(NAMES)}")
    lg: ModuleType | None = None
    if not args.no_langgraph:
        try:
            lg = importlib.import_module("benchmarks.langgraph_workloads")
        except ImportError:
            lg = None
    suite = Suite(sizes, only, lg)
    env = environment(args_list)
    for name, runner in RUNNERS.items():
        if suite.wants(name) or (name == "w2" and any(suite.wants(n) for n in NAMES[3:5])):
            _log(f"{name} …")
            runner(suite)
    report = "\n".join(
        [
            "## converge benchmarks" + (" (--quick)" if args.quick else ""),
            "",
            render_environment(env),
            f"- langgraph comparison: {'yes' if lg is not None else 'no (not importable)'}",
            f"- method: 1 warm-up, median of {sizes.runs} runs (min-max); a series whose "
            "spread exceeds 30% is repeated (up to "
            f"{sizes.max_series} series, the tightest kept)",
            "",
            render_table(suite.rows),
        ]
    )
    print(report)
    if args.json:
        data: dict[str, Any] = {
            "environment": env,
            "quick": args.quick,
            "rows": [r.as_dict() for r in suite.rows],
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, ensure_ascii=False)
    return 0
