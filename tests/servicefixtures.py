"""Shared pieces of the run-service tests (issue 22): job files, reference runs,
real ``converge worker`` processes over a test's store, waiting for runs.

- Job files (JSON, which is YAML) of :mod:`tests.servicejobs`, :mod:`tests.exactlyoncejobs`
  and :mod:`tests.hitlfixtures`: :func:`beat_job` (one cycle of ``sleep_ms`` each,
  ``steps`` cycles, converges), :func:`gated_beat_job` (pauses at a HITL gate in
  cycle 2, then ``steps`` such cycles), :func:`held_job` (its leg after the
  approval blocks until the test releases it), :func:`chain_job` (converges in a
  few cycles); ``faultfixtures.ticking_job`` and ``faultfixtures.gated_job`` give
  a budget stop and a quick pause.
- :func:`reference` / :func:`reference_resumed`: the same job run in-process on a
  store of its own (uninterrupted), as a :class:`~tests.faultfixtures.RunSnapshot`.
- :func:`workers_on`: ``count`` workers on their own queue, executing whole runs over
  the store ``db`` (RabbitMQ required under CI), stopped and their queue deleted after.
- :func:`until` / :func:`stopped`: wait (polling the store) for a condition or a stop.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from audit import open_store
from audit.queries import RunRow
from audit.store import SqlRunStore
from converge.cli.service import follow
from converge.decisions import decide
from converge.jobs import load_job
from engine import GateDecision
from tests.faultfixtures import RunSnapshot, snapshot
from tests.workerfixtures import Workers, started_workers

__all__ = [
    "beat_job",
    "chain_job",
    "gated_beat_job",
    "held_job",
    "kill_quietly",
    "reference",
    "reference_resumed",
    "state",
    "stopped",
    "suggestors_job",
    "until",
    "workers_on",
    "write_job",
]

WAIT_S = 120.0
"""No run of these tests takes longer than this to reach its stop: past it, it hangs."""
HITL = {
    "keys": ["license.unknown"],
    "summary": "Classify the license of {content[name]} {content[version]}",
    "validate_value": "tests.exactlyoncejobs:license_value",
}
"""The gate of the gated jobs: on the unknown license ``tests.exactlyoncejobs:classify`` finds."""


def write_job(path: Path, job: dict[str, Any]) -> Path:
    """Write ``job`` (a job file's mapping) to ``path``; the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(job, indent=2))  # JSON is YAML
    return path


def suggestors_job(
    path: Path,
    name: str,
    suggestors: list[str],
    initial: dict[str, list[Any]],
    *,
    max_cycles: int = 10,
    gates: list[dict[str, Any]] | None = None,
) -> Path:
    """The job ``name`` of ``suggestors`` (``module:name`` references) from ``initial``
    within ``max_cycles``, with ``gates`` (a job file's gate mappings) if any, written
    to ``path``; the path."""
    job: dict[str, Any] = {
        "name": name,
        "suggestors": suggestors,
        "budget": {"max_cycles": max_cycles},
    }
    if gates:
        job["gates"] = gates
    return write_job(path, {**job, "initial": initial})


def beat_job(path: Path, *, steps: int, sleep_ms: int) -> Path:
    """A job of ``steps`` cycles of ``sleep_ms`` each, then converged."""
    return write_job(
        path,
        {
            "name": "service-beat",
            "suggestors": ["tests.servicejobs:beat"],
            "budget": {"max_cycles": steps + 10, "max_facts": 100_000},
            "initial": {"seed": [{"steps": steps, "sleep_ms": sleep_ms}]},
        },
    )


def gated_beat_job(path: Path, *, steps: int, sleep_ms: int) -> Path:
    """Pauses at a HITL gate in cycle 2; approved, ``steps`` cycles of ``sleep_ms``."""
    return suggestors_job(
        path,
        "service-gated-beat",
        [
            "tests.exactlyoncejobs:scan",
            "tests.exactlyoncejobs:classify",
            "tests.servicejobs:gated_beat",
        ],
        {"seed": [{"steps": steps, "sleep_ms": sleep_ms}]},
        max_cycles=steps + 10,
        gates=[{"hitl": HITL}],
    )


def held_job(path: Path) -> Path:
    """Pauses at a HITL gate in cycle 2; approved, its next leg waits for
    ``tests.servicejobs.RELEASE`` (a file: in-process runs and worker processes)."""
    return suggestors_job(
        path,
        "service-held",
        [
            "tests.exactlyoncejobs:scan",
            "tests.exactlyoncejobs:classify",
            "tests.servicejobs:held",
        ],
        {"seed": [1]},
        gates=[{"hitl": HITL}],
    )


def chain_job(path: Path) -> Path:
    """scan, count, finish of :mod:`tests.hitlfixtures` without a gate: converges."""
    chain = [f"tests.hitlfixtures:{s}" for s in ("scan", "count", "finish")]
    return suggestors_job(path, "service-chain", chain, {"seed": [1]})


# -- reference runs -------------------------------------------------------------------
def _run_here(job_file: Path, url: str) -> str:
    """Run ``job_file`` in this process on the store at ``url``; its run id."""
    job = load_job(job_file)
    store = open_store(url)
    try:
        return job.build_engine(store).run(job.spec.initial or None).run_id
    finally:
        store.close()


def reference(job_file: Path, workdir: Path) -> RunSnapshot:
    """An uninterrupted in-process run of ``job_file`` (to its first stop or pause)."""
    url = str(workdir / f"reference-{job_file.stem}.db")
    return snapshot(url, _run_here(job_file, url))


def reference_resumed(job_file: Path, workdir: Path) -> RunSnapshot:
    """An in-process run of a gated ``job_file``, approved by ``reference`` and
    resumed in-process to its stop, uninterrupted."""
    url = str(workdir / f"reference-resumed-{job_file.stem}.db")
    run_id = _run_here(job_file, url)
    store = open_store(url)
    try:
        [gate] = store.gates(pending=True)
        decide(store, gate.gate_id, GateDecision.approve(by="reference"))
    finally:
        store.close()
    return snapshot(url, run_id)


# -- workers and waiting ------------------------------------------------------------------
@contextmanager
def workers_on(db: str, count: int, concurrency: int = 1) -> Iterator[Workers]:
    """``count`` ``converge worker --db DB`` nodes (``concurrency`` processes each) on a
    queue of their own; RabbitMQ and Redis required under CI. Stopped afterwards
    (killed when they do not stop), their queue deleted."""
    with contextmanager(started_workers)(count, concurrency=concurrency, db=db) as workers:
        yield workers


def kill_quietly(pid: int | None) -> None:
    """``kill -9`` a process the test started indirectly (a detached ``converge worker
    --run``), if it is still there."""
    if pid is not None and pid != os.getpid():
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def until(
    check: Callable[[], Any],
    *,
    timeout: float = WAIT_S,
    every: float = 0.01,
    what: str | Callable[[], str] = "",
) -> Any:
    """Poll ``check()`` every ``every`` seconds until it returns something truthy
    (returned); AssertionError naming ``what`` (or what ``what()`` says then) after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"gave up after {timeout} s waiting for {said or check}")
        time.sleep(every)


def state(store: SqlRunStore, run_id: str) -> Callable[[], str]:
    """For :func:`until`: the run's status, pid, cycle and last seq when it gives up."""

    def say() -> str:
        row = store.run(run_id)
        return f"run {run_id} ({row.status}, pid {row.pid}, cycle {row.cycles}, seq {row.last_seq})"

    return say


def stopped(store: SqlRunStore, run_id: str, timeout: float = WAIT_S) -> RunRow:
    """The run's row once it stopped (or paused at a pending gate); AssertionError
    after ``timeout`` seconds."""
    row = follow(store, run_id, timeout=timeout)
    if row is None:
        now = store.run(run_id)
        raise AssertionError(
            f"run {run_id} did not stop in {timeout} s: {now.status}, cycle {now.cycles}"
        )
    return row
