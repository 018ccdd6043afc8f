"""C1 (issue 58): each ``converge`` command's CPU against the floor of what it needs.

Every command runs as a whole process (the console script, bytecode written by a
warm-up run), paired with its floor in turn (command, floor, command, floor…): the
CPU (user + system, from the kernel's accounting of the finished child) of each
pair's command divided by its floor's, the median of :data:`RUNS` pairs. The read
commands run on a SQLite store of :data:`STORE_RUNS` runs of a small job (900
converged, 100 paused at a gate); their floor imports the libraries they use::

    python -m benchmarks --only c1 --no-langgraph
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.harness import Row, Stat
from benchmarks.session import Suite, log
from engine import Context, Proposal, suggestor

RUNS = 5
STORE_RUNS = 1_000
ROOT = Path(__file__).resolve().parent.parent
FLOOR_DB = "import sqlalchemy, typer, rich, pydantic"


@suggestor(name="licenses", dependencies=["seed"])
def licenses(ctx: Context) -> list[Proposal]:
    """Five dependencies of a package; every tenth run one of unknown license."""
    seed = ctx.get("seed")[0].content
    found = [Proposal("license.ok", {"name": f"dep-{seed}-{i}", "spdx": "MIT"}) for i in range(5)]
    if seed % 10 == 0:
        found.append(Proposal("license.unknown", {"name": f"pkg-{seed}"}))
    return found


def _store(workdir: str) -> tuple[str, str]:
    """A SQLite store of :data:`STORE_RUNS` runs (built once); its path and last run."""
    from audit import open_store
    from converge.jobs import load_job

    path = Path(workdir) / "c1-store.db"
    job_file = Path(workdir) / "c1-job.yaml"
    job_file.write_text(
        json.dumps(
            {
                "name": "c1-licenses",
                "suggestors": ["benchmarks.cli_bench:licenses"],
                "budget": {"max_cycles": 5},
                "gates": [{"hitl": {"keys": ["license.unknown"], "summary": "Classify"}}],
            }
        )
    )
    job = load_job(job_file)
    store = open_store(str(path))
    try:
        if len(store.runs(limit=0)) < STORE_RUNS:
            for i in range(STORE_RUNS):
                job.build_engine(store).run({"seed": [i]})
        last = store.runs(limit=1)[0].run_id
    finally:
        store.close()
    return str(path), last


def _cpu(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """CPU seconds (user + system) of one whole process, and its exit code."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, proc.returncode


def paired(command: list[str], floor: list[str], runs: int = RUNS) -> tuple[Stat, float, float]:
    """``command``'s CPU over ``floor``'s, pair by pair after one warm-up of each: the
    ratios' median (min-max), and the median CPU seconds of each."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    _cpu(command, env)
    _cpu(floor, env)
    ratios, ours, theirs = [], [], []
    for _ in range(runs):
        a, code = _cpu(command, env)
        if code not in (0, 1):
            raise RuntimeError(f"{' '.join(command)} exited {code}")
        b, _ = _cpu(floor, env)
        ratios.append(a / b)
        ours.append(a)
        theirs.append(b)
    stat = Stat(statistics.median(ratios), min(ratios), max(ratios))
    return stat, statistics.median(ours), statistics.median(theirs)


def cases(db: str, run_id: str) -> list[tuple[str, list[str], str, float]]:
    """(command, its arguments, the floor's Python code, the target ratio) of C1."""
    return [
        ("--version", ["--version"], "pass", 3.0),
        ("--help", ["--help"], "import typer, rich", 1.3),
        ("runs", ["runs", "--db", db], FLOOR_DB, 1.3),
        ("gates", ["gates", "--db", db], FLOOR_DB, 1.3),
        ("show RUN", ["show", run_id, "--db", db], FLOOR_DB, 1.3),
        ("verify RUN", ["verify", run_id, "--db", db], FLOOR_DB, 1.3),
    ]


def run_c1(suite: Suite) -> None:
    """C1: each command's CPU as a multiple of its floor's, in the same run."""
    script = Path(sys.executable).with_name("converge")
    if not script.exists():
        suite.rows.append(Row("C1 commands", "—", "x floor", False, None, note="no console script"))
        return
    db, run_id = _store(suite.workdir)
    for name, args, floor, target in cases(db, run_id):
        stat, ours, theirs = paired([str(script), *args], [sys.executable, "-c", floor])
        note = (
            f"CPU {ours * 1000:.0f} ms vs {theirs * 1000:.0f} ms of "
            f'`python -c "{floor}"`; whole processes, median of {RUNS} pairs'
        )
        size = f"{STORE_RUNS:,} runs" if "--db" in args else "—"
        row = Row(f"C1 converge {name}", size, "x floor CPU", False, stat, target=("<=", target))
        row.note = note
        row.runs = RUNS
        suite.rows.append(row)
        log(f"  C1 {name}: {stat.median:.2f}x ({note})")
