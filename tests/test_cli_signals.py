"""Ctrl-C (SIGINT) and SIGTERM on a real ``converge run``: the run ends with
``UserCancelled``, is recorded with a checkpoint, exits 130, and ``converge resume``
goes on from where it stopped (issue: reliability, item 3)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from audit import open_store
from engine import UserCancelled

ROOT = Path(__file__).resolve().parent.parent
CONVERGE = str(Path(sys.executable).parent / "converge")
JOB = """\
name: forever
suggestors: [tests.jobfixtures:signal_tick]
budget: {max_cycles: 0, max_facts: 0}
initial: {n: [0]}
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signalled_run_is_cancelled_recorded_and_resumable(
    signum: signal.Signals, tmp_path: Path
) -> None:
    job = tmp_path / "forever.yaml"
    job.write_text(JOB, encoding="utf-8")
    db = str(tmp_path / "audit.db")
    proc = subprocess.Popen(
        [CONVERGE, "run", str(job), "--db", db, "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # blocks until the run is in cycle 3
            if line.strip() == "cycle 3":
                break
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    store = open_store(db)
    (row,) = store.runs()
    assert row.status == "stopped" and isinstance(row.stop_reason, UserCancelled)
    assert row.cycles >= 3 and row.facts_count == row.cycles + 1
    assert store.verify(row.run_id).ok
    checkpoint = store.load_checkpoint(row.run_id)
    assert checkpoint["cycle"] == row.cycles

    more = subprocess.run(
        [CONVERGE, "resume", row.run_id, "--max-cycles", str(row.cycles + 5), "--db", db],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert more.returncode == 3, more.stderr  # the cycle budget, after 5 more cycles
    after = store.run(row.run_id)
    assert after.cycles == row.cycles + 5
    assert after.facts_count == row.facts_count + 5
    assert store.verify(row.run_id).ok
