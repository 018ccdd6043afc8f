"""The measurement method and the report table (docs/performance.md).

Method: one warm-up run, then ``runs`` timed runs (≥ 5 by default) on a fresh
set-up each; the figure is the median, shown with the min-max range. When the
spread ``(max - min) / median`` of the times exceeds ``max_spread`` (30%) the
series is repeated, up to ``max_series`` times, and the tightest series is kept.
Times are seconds from :func:`time.perf_counter` (injectable for tests).
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

_EXPLICIT_COLLECT = [False]  # True while measure() runs its own gc.collect()

Prepare = Callable[[], Callable[[], object]]
"""Builds one run (not timed) and returns the thunk that performs it (timed)."""


@dataclass(frozen=True, slots=True)
class Series:
    """The kept series of one measurement: times in seconds, and how many series ran.

    ``parts`` are the sub-durations (seconds) the runs returned, if they returned a
    float (e.g. the load part of a resume), in the same order as ``times``.
    """

    times: tuple[float, ...]
    series_run: int
    parts: tuple[float, ...] = ()

    @property
    def median(self) -> float:
        """Median time, seconds."""
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """``(max - min) / median`` of the times (0.3 = 30%)."""
        med = self.median
        return (max(self.times) - min(self.times)) / med if med > 0 else 0.0


def measure(
    prepare: Prepare,
    *,
    runs: int = 5,
    warmup: int = 1,
    max_spread: float = 0.30,
    max_series: int = 3,
    timer: Callable[[], float] = time.perf_counter,
) -> Series:
    """Time ``runs`` runs after ``warmup`` untimed ones; repeat noisy series.

    ``prepare()`` is called before each run and is not timed; a thunk returning a
    float reports a sub-duration (seconds, kept in ``Series.parts``). A full
    collection runs before each timed run so that garbage left by the previous run
    is not charged to the next one. Returns the series with the smallest spread.
    """
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    for _ in range(warmup):
        prepare()()
    best: Series | None = None
    for n in range(1, max_series + 1):
        times: list[float] = []
        parts: list[float] = []
        for _ in range(runs):
            thunk = prepare()
            _EXPLICIT_COLLECT[0] = True
            try:
                gc.collect()
            finally:
                _EXPLICIT_COLLECT[0] = False
            t0 = timer()
            out = thunk()
            times.append(timer() - t0)
            if isinstance(out, float):
                parts.append(out)
        series = Series(tuple(times), n, tuple(parts))
        if best is None or series.spread < best.spread:
            best = series
        if series.spread <= max_spread:
            break
    assert best is not None
    return Series(best.times, n, best.parts)


@dataclass(frozen=True, slots=True)
class Stat:
    """A figure in its unit: ``median`` and the ``lo``-``hi`` range over the runs."""

    median: float
    lo: float
    hi: float

    @staticmethod
    def of(series: Series, convert: Callable[[float], float]) -> Stat:
        """Convert run times (seconds) to the unit; the range is sorted in the unit."""
        a, b = convert(min(series.times)), convert(max(series.times))
        return Stat(convert(series.median), min(a, b), max(a, b))


@dataclass(slots=True)
class Row:
    """One line of the report.

    ``unit`` is the unit of ``ours``/``langgraph``/``limit``; ``higher_is_better``
    says how to read it (facts/s: yes; µs: no). ``target`` is the §9 target as a
    (comparison, value) pair, e.g. ``("<=", 10.0)``. ``limit_name`` names the raw
    limit ``limit`` is measured on.
    """

    workload: str
    size: str
    unit: str
    higher_is_better: bool
    ours: Stat | None
    target: tuple[str, float] | None = None
    langgraph: Stat | None = None
    limit: Stat | None = None
    limit_name: str = ""
    note: str = ""
    series_run: int = 1
    runs: int = 0

    @staticmethod
    def in_ms(workload: str, size: str, series: Series, **more: Any) -> Row:
        """A row of ``series``' run times in milliseconds (lower is better); ``more``:
        the other fields (``target``, ``note``...)."""
        return Row(workload, size, "ms", False, Stat.of(series, lambda t: t * 1000), **more)

    @property
    def met(self) -> bool | None:
        """Whether the median meets the target (None without a target or a figure)."""
        if self.target is None or self.ours is None:
            return None
        op, value = self.target
        return self.ours.median <= value if op == "<=" else self.ours.median >= value

    def cost_ratio(self, other: Stat | None) -> float | None:
        """``other``'s cost divided by ours (2.0 = we cost half as much)."""
        if other is None or self.ours is None or self.ours.median <= 0 or other.median <= 0:
            return None
        if self.higher_is_better:
            return self.ours.median / other.median
        return other.median / self.ours.median

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form, with the derived ``met`` and ratios."""
        data = asdict(self)
        data["met"] = self.met
        data["langgraph_ratio"] = self.cost_ratio(self.langgraph)
        limit_ratio = self.cost_ratio(self.limit)
        data["limit_multiple"] = None if limit_ratio is None else 1 / limit_ratio
        return data


def fmt(value: float) -> str:
    """A figure with 3 significant digits, thousands grouped (``231k`` style avoided)."""
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def fmt_stat(stat: Stat | None) -> str:
    """``median (lo-hi)`` or an em dash."""
    if stat is None:
        return "—"
    return f"{fmt(stat.median)} ({fmt(stat.lo)}-{fmt(stat.hi)})"


def render_table(rows: Sequence[Row]) -> str:
    """The markdown table of the report, one row per workload and size."""
    head = (
        "| workload | size | unit | converge median (min-max) | target | met "
        "| LangGraph median (min-max) | LangGraph cost / ours "
        "| raw limit | ours / limit | note |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        target = "—" if r.target is None else f"{r.target[0]} {fmt(r.target[1])}"
        met = {None: "—", True: "yes", False: "**no**"}[r.met]
        lg_ratio = r.cost_ratio(r.langgraph)
        lim_ratio = r.cost_ratio(r.limit)
        lim = "—" if r.limit is None else f"{fmt(r.limit.median)} ({r.limit_name})"
        lines.append(
            f"| {r.workload} | {r.size} | {r.unit} | {fmt_stat(r.ours)} | {target} | {met} "
            f"| {fmt_stat(r.langgraph)} | {'—' if lg_ratio is None else f'{lg_ratio:.1f}x'} "
            f"| {lim} | {'—' if lim_ratio is None else f'{1 / lim_ratio:.1f}x'} | {r.note} |"
        )
    return "\n".join(lines)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment(argv: Sequence[str]) -> dict[str, str]:
    """The exact command, Python, platform and library versions of this run."""
    libs = ("langgraph", "pydantic", "sqlalchemy", "psycopg")
    return {
        "command": " ".join([os.path.basename(sys.executable), "-m", "benchmarks", *argv]),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "cpus": str(os.cpu_count()),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "converge": _version("converge-engine"),
        **{lib: _version(lib) for lib in libs},
    }


def render_environment(env: dict[str, str]) -> str:
    """The environment as markdown bullet lines."""
    return "\n".join(f"- {k}: `{v}`" for k, v in env.items())


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, MiB (``ru_maxrss`` is KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@dataclass(slots=True)
class GcMonitor:
    """Records cyclic-GC pauses through :data:`gc.callbacks` (seconds).

    The collections :func:`measure` forces between runs are not recorded. Use as a
    context manager; ``pauses_over(0.1)`` lists the pauses over 100 ms.
    """

    pauses: list[tuple[int, float]] = field(default_factory=list)
    _started: float = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if _EXPLICIT_COLLECT[0]:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append((int(info["generation"]), time.perf_counter() - self._started))

    def __enter__(self) -> GcMonitor:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def pauses_over(self, seconds: float) -> list[float]:
        """The pauses longer than ``seconds``."""
        return [p for _, p in self.pauses if p > seconds]

    def longest(self) -> float:
        """The longest pause, seconds (0.0 when none)."""
        return max((p for _, p in self.pauses), default=0.0)
