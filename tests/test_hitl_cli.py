"""The CLI flow of a HITL gate: run → exit 10 → gates → approve / reject → resumed run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from audit import open_store
from converge.cli import app

runner = CliRunner()

JOB = """\
name: hitl-cli
suggestors: [tests.hitlfixtures:scan, tests.hitlfixtures:count, tests.hitlfixtures:finish]
budget: {max_cycles: 10}
gates: [{hitl: {keys: [license.unknown], summary: "Classify {content[name]}"}}]
initial: {seed: [1]}
"""


def start(tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """``converge run`` the job into a fresh SQLite file; (db path, the pending gate)."""
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    db = str(tmp_path / "cli.db")
    res = runner.invoke(app, ["run", str(job), "--db", db])
    assert res.exit_code == 10, res.output
    assert "Classify b" in res.output
    listed = runner.invoke(app, ["gates", "--pending", "--json", "--db", db])
    assert listed.exit_code == 0, listed.output
    [gate] = json.loads(listed.stdout)
    assert gate["status"] == "pending" and gate["summary"] == "Classify b"
    return db, gate


def test_approve_resumes_the_run_from_its_recorded_job_and_exits_with_its_stop(
    tmp_path: Path,
) -> None:
    db, gate = start(tmp_path)

    res = runner.invoke(app, ["approve", gate["gate_id"], "--by", "alice", "--db", db, "--json"])

    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["stop_reason"]["kind"] == "converged"
    store = open_store(db)
    try:
        keys = [f.key for f in store.facts(gate["run_id"])]
        assert keys == ["seed", "package", "license.unknown", "package", "summary", "done"]
        assert store.get_gate(gate["gate_id"]).decided_by == "alice"
        assert store.run(gate["run_id"]).status == "stopped"
        assert store.verify(gate["run_id"]).ok
    finally:
        store.close()
    pending = runner.invoke(app, ["gates", "--pending", "--json", "--db", db])
    assert json.loads(pending.stdout) == []


def test_a_second_approve_is_a_clear_error_with_a_non_zero_exit(tmp_path: Path) -> None:
    db, gate = start(tmp_path)
    assert (
        runner.invoke(app, ["approve", gate["gate_id"], "--by", "alice", "--db", db]).exit_code == 0
    )

    again = runner.invoke(app, ["approve", gate["gate_id"], "--by", "mallory", "--db", db])

    assert again.exit_code == 2
    assert "already decided" in again.stderr and "alice" in again.stderr
    store = open_store(db)
    try:
        assert len(store.events(gate["run_id"], kinds=["gate_decided"])) == 1
    finally:
        store.close()


def test_reject_records_the_reason_drops_the_proposal_and_resumes(tmp_path: Path) -> None:
    db, gate = start(tmp_path)

    res = runner.invoke(
        app, ["reject", gate["gate_id"], "--by", "bob", "--reason", "not ours", "--db", db]
    )

    assert res.exit_code == 0, res.output
    store = open_store(db)
    try:
        recorded = store.get_gate(gate["gate_id"])
        assert recorded.status == "rejected" and recorded.reason == "not ours"
        facts = store.facts(gate["run_id"])
        assert "license.unknown" not in [f.key for f in facts]
        [diag] = [f for f in facts if f.key == "hitl.rejected"]
        assert diag.content["by"] == "bob" and diag.content["reason"] == "not ours"
    finally:
        store.close()


def test_approving_an_unknown_gate_exits_2_naming_it(tmp_path: Path) -> None:
    db, _ = start(tmp_path)
    res = runner.invoke(app, ["approve", "no-such-gate", "--by", "alice", "--db", db])
    assert res.exit_code == 2
    assert "no-such-gate" in res.stderr


def test_reject_requires_a_reason(tmp_path: Path) -> None:
    db, gate = start(tmp_path)
    res = runner.invoke(app, ["reject", gate["gate_id"], "--by", "bob", "--db", db])
    assert res.exit_code == 2
    listed = runner.invoke(app, ["gates", "--pending", "--json", "--db", db])
    assert [g["gate_id"] for g in json.loads(listed.stdout)] == [gate["gate_id"]]
