"""Exactly-once gate decisions: eight processes approve the same gate at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from engine import GateAlreadyDecided, GateDecision, HitlGatePending
from tests.faultfixtures import opened
from tests.hitlfixtures import INITIAL, make_engine

ROOT = Path(__file__).resolve().parent.parent
RACERS = 8


def race(store_url: str, gate_id: str, barrier: Path) -> list[dict[str, Any]]:
    """Start the racers together (a file barrier), collect what each one printed."""
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.hitlfixtures",
                "race",
                store_url,
                gate_id,
                str(barrier),
                str(RACERS),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for _ in range(RACERS)
    ]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    return outs


def test_eight_processes_approving_one_gate_decide_it_once_and_resume_the_run_once(
    store_url: str, tmp_path: Path
) -> None:
    with opened(store_url) as store:
        run_id = f"race-{uuid.uuid4().hex[:12]}"
        paused = make_engine(store).run(INITIAL, run_id=run_id)
        assert isinstance(paused.stop_reason, HitlGatePending)
        gate_id = paused.stop_reason.gate_id
        barrier = tmp_path / "barrier"
        barrier.mkdir()

        outs = race(store_url, gate_id, barrier)

        assert Counter(o["outcome"] for o in outs) == {"won": 1, "already": RACERS - 1}
        [winner] = [o for o in outs if o["outcome"] == "won"]
        assert winner["stop"] == "converged"
        gate = store.get_gate(gate_id)
        assert gate.status == "approved" and gate.decided_by is not None
        assert gate.decided_by.startswith("racer-")
        assert len(store.events(run_id, kinds=["gate_decided"])) == 1
        assert len(store.events(run_id, kinds=["run_resumed"])) == 1
        assert len(store.events(run_id, kinds=["run_stopped"])) == 1
        ids = [f.id for f in store.facts(run_id)]
        assert len(ids) == len(set(ids))  # no fact promoted twice
        assert ids == [f["id"] for f in winner["facts"]]
        assert store.run(run_id).status == "stopped"
        assert store.verify(run_id).ok
        with pytest.raises(GateAlreadyDecided) as info:
            make_engine(store).resume(gate_id, GateDecision.reject(by="late"))
        assert info.value.by == gate.decided_by
