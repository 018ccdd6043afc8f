"""The benchmark suite: which workloads run at which sizes, and the report.

``python -m benchmarks [--quick] [--only NAME[,NAME]] [--json FILE] [--profile NAME]``,
``python -m benchmarks --compare REV [--rounds N] [--compare-audit] [--quick]``.
Names: ``limits``, ``w1``, ``w2``, ``w2-sqlite``, ``w2-pg``, ``w3``, ``w4``, ``w5``, ``w6``,
``r1``, ``q1`` (``w2`` selects the three W2 rows). LangGraph columns are filled when
``langgraph`` is importable (``--no-langgraph`` skips them). ``--compare REV`` runs
W1-W3 of the git revision REV and of this work tree alternately, in fresh
subprocesses, and prints the ratios (:mod:`benchmarks.compare`).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import pstats
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from benchmarks import workloads
from benchmarks.compare import SELECTION, Options, main_compare
from benchmarks.harness import Prepare, environment, render_environment, render_table
from benchmarks.registry import NAMES, RUNNERS, STORE_ROWS
from benchmarks.session import FULL, QUICK, Sizes, Suite, log

__all__ = ["main", "parse_args", "profile"]

ROOT = Path(__file__).resolve().parent.parent
"""The tree this suite runs from: the "new" side of ``--compare``."""


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
    p.add_argument(
        "--compare",
        metavar="REV",
        help="run W1-W3 of git revision REV and of this work tree alternately; print the ratios",
    )
    p.add_argument(
        "--rounds", type=int, default=4, metavar="N", help="--compare: rounds (default 4)"
    )
    p.add_argument(
        "--compare-audit",
        action="store_true",
        help="--compare: also the audited W2 rows (SQLite; PostgreSQL when reachable)",
    )
    return p.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite (or ``--compare``), print the markdown report, optionally write JSON.

    Returns 0 (``--compare``: 2 when the comparison cannot run)."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(args_list)
    if args.compare:
        if args.only or args.profile:
            raise SystemExit(f"--compare runs {SELECTION}: --only and --profile do not apply")
        options = Options(args.compare, args.rounds, args.quick, args.compare_audit, args.json)
        return main_compare(options, args_list, ROOT)
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
        if suite.wants(name) or (name == "w2" and any(suite.wants(n) for n in STORE_ROWS)):
            log(f"{name} …")
            runner(suite)
    report = "\n".join(
        [
            "## converge benchmarks" + (" (--quick)" if args.quick else ""),
            "",
            render_environment(env),
            f"- langgraph comparison: {_lg_said(lg, args.no_langgraph)}",
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


def _lg_said(lg: ModuleType | None, skipped: bool) -> str:
    """Whether the LangGraph columns are filled, and why not."""
    if lg is not None:
        return "yes"
    return "no (--no-langgraph)" if skipped else "no (not importable)"
