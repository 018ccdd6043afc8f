"""One invocation of the benchmark suite: its sizes, its selection, its rows so far.

Every workload's ``run_*`` function takes the :class:`Suite` and adds its rows
with :meth:`Suite.add`; the sizes are :data:`FULL` or, with ``--quick``,
:data:`QUICK`. The suite itself (``python -m benchmarks``) is
:mod:`benchmarks.suite`; the workloads it runs are listed in
:mod:`benchmarks.registry`.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

from benchmarks.harness import GcMonitor, Prepare, Row, Series, Stat, measure

__all__ = ["FULL", "GC_PAUSE_REPORTED", "QUICK", "Sizes", "Suite", "gc_note", "log"]

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


def log(msg: str) -> None:
    """Progress on stderr (the report goes to stdout)."""
    print(msg, file=sys.stderr, flush=True)


def gc_note(mon: GcMonitor) -> str:
    """The note on a measurement's GC pauses: the longest, and how many were long."""
    long = mon.pauses_over(GC_PAUSE_REPORTED)
    note = f"GC max pause {mon.longest() * 1000:.0f} ms"
    if long:
        note += f"; {len(long)} pauses > 100 ms"
    return note


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
            log(f"  LangGraph failed: {type(exc).__name__}: {exc}")
            return None

    def add(self, row: Row, series: Series | None) -> None:
        """Append ``row``, with the runs and series count of ``series``, and log it."""
        if series is not None:
            row.series_run = series.series_run
            row.runs = len(series.times)
        self.rows.append(row)
        log(f"  {row.workload} {row.size}: {row.ours} {row.unit}")

    def limit(self, names: Sequence[str], per_item_unit: Callable[[float], float]) -> Stat | None:
        """The raw limits ``names`` measured so far, summed per item, in the row's unit
        (None unless every one of them ran: ``--only limits`` runs them)."""
        if not all(n in self.limit_cost for n in names):
            return None
        v = per_item_unit(sum(self.limit_cost[n] for n in names))
        return Stat(v, v, v)
