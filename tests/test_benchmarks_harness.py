"""The benchmark harness works: it runs, prints its table, and measures as documented.

No timing assertions: these tests check the harness, not the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import workloads
from benchmarks.harness import Row, Stat, measure, render_table
from tests.realserve import captured

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return captured([sys.executable, "-m", "benchmarks", *args], cwd=ROOT)


def test_quick_run_prints_the_markdown_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = _run("--quick", "--only", "w1,w3", "--no-langgraph", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "- command: `" in proc.stdout and "- python: `CPython" in proc.stdout
    assert "| workload | size | unit | converge median (min-max) |" in proc.stdout
    assert "| W1 chain | K=250 | µs/invocation |" in proc.stdout
    assert "| W3 wide-idle | N=8000 | µs/cycle |" in proc.stdout
    data = json.loads(out.read_text())
    names = {(r["workload"], r["size"]) for r in data["rows"]}
    assert ("W1 chain", "K=1000") in names and ("W3 wide-idle", "N=500") in names
    for row in data["rows"]:
        assert row["ours"]["lo"] <= row["ours"]["median"] <= row["ours"]["hi"]
        assert row["runs"] >= 3


def test_an_unknown_benchmark_name_is_refused() -> None:
    proc = _run("--quick", "--only", "w9")
    assert proc.returncode != 0
    assert "unknown benchmark" in proc.stderr


def _fake_timer(durations: list[float]) -> Callable[[], float]:
    """A clock whose successive start/stop pairs are ``durations`` apart."""
    ticks: list[float] = []
    now = 0.0
    for d in durations:
        ticks += [now, now + d]
        now += d + 1.0
    it = iter(ticks)
    return lambda: next(it)


def _noop() -> Callable[[], object]:
    return lambda: None


def test_a_series_spread_over_30_percent_is_repeated_and_the_tightest_kept() -> None:
    noisy = [1.0, 1.0, 2.0, 1.0, 1.0]  # spread 100%
    calm = [1.0, 1.1, 1.0, 1.05, 1.0]  # spread 10%
    series = measure(_noop, runs=5, warmup=0, timer=_fake_timer(noisy + calm))
    assert series.series_run == 2
    assert series.times == pytest.approx(tuple(calm))
    assert series.median == pytest.approx(1.0)


def test_a_calm_series_is_not_repeated() -> None:
    series = measure(_noop, runs=5, warmup=0, timer=_fake_timer([2.0, 2.1, 2.0, 2.2, 2.0]))
    assert series.series_run == 1
    assert series.median == pytest.approx(2.0)


def test_a_run_returning_a_float_reports_its_part() -> None:
    series = measure(lambda: lambda: 0.25, runs=5, warmup=1)
    assert series.parts == (0.25,) * 5


def test_the_table_states_whether_each_target_is_met_and_the_ratios() -> None:
    fast = Row("W1 chain", "K=250", "µs/invocation", False, Stat(5.0, 4.0, 6.0), ("<=", 10.0))
    fast.langgraph = Stat(500.0, 450.0, 550.0)
    fast.limit, fast.limit_name = Stat(1.0, 1.0, 1.0), "plain loop"
    slow = Row("W2 throughput", "100x100x10", "facts/s", True, Stat(50.0, 40.0, 60.0))
    slow.target = (">=", 100.0)
    table = render_table([fast, slow])
    assert "| W1 chain | K=250 | µs/invocation | 5.00 (4.00-6.00) | <= 10.0 | yes " in table
    assert "| 100x (" not in table and "| 100.0x |" in table  # LangGraph costs 100x ours
    assert "| 1.00 (plain loop) | 5.0x |" in table
    assert "| >= 100 | **no** |" in table
    assert fast.as_dict()["met"] is True and slow.as_dict()["met"] is False


def test_the_workloads_produce_the_facts_they_promise() -> None:
    chain = workloads.build_chain(20)()()
    assert chain.stop_reason.kind == "converged" and len(chain.context) == 21
    wide = workloads.build_wide_idle(50, 30)()()
    assert wide.cycles == 30 and len(wide.context) == 30
    w2 = workloads.build_throughput(None, 5, 4, 3)()()
    assert len(w2.context) == 5 * 4 * 3 + 3  # plus one tick per cycle


def test_the_langgraph_workloads_run_when_langgraph_is_installed() -> None:
    pytest.importorskip("langgraph")
    from benchmarks import langgraph_workloads as lg

    lg.build_chain(5)()()
    lg.build_throughput(3, 4, 2)()()
    lg.build_wide_idle(10, 5)()()


def test_resume_bench_resumes_a_paused_run_from_a_copy_of_its_database(tmp_path: Path) -> None:
    audit = pytest.importorskip("audit")
    from benchmarks.resume_bench import build_resume

    prepare = build_resume(50, audit.open_store, str(tmp_path))
    series = measure(prepare, runs=2, warmup=1, max_series=1)
    assert len(series.parts) == 2
    assert all(0 < part <= total for part, total in zip(series.parts, series.times, strict=True))
