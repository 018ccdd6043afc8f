"""The gate commands' papercuts: who decides, when "approved" is said, what the table shows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from converge.cli import app
from tests.faultfixtures import opened
from tests.webfixtures import QUORUM_JOB, VENDORED

runner = CliRunner()


def _paused(tmp_path: Path, extra: str = "") -> tuple[str, str]:
    """Run the gated job into a fresh SQLite file; (db, gate id)."""
    job = tmp_path / "job.yaml"
    job.write_text(QUORUM_JOB % (1, extra))
    return _paused_at_a_gate(job, str(tmp_path / "gates.db"))


def _paused_at_a_gate(job: Path, db: str) -> tuple[str, str]:
    """``converge run JOB --db DB``, which must pause (exit 10); (db, its first gate's id)."""
    res = runner.invoke(app, ["run", str(job), "--db", db])
    assert res.exit_code == 10, res.output
    listed = json.loads(runner.invoke(app, ["gates", "--json", "--db", db]).stdout)
    return db, listed[0]["gate_id"]


def test_approve_and_reject_refuse_an_empty_by(tmp_path: Path) -> None:
    db, gate_id = _paused(tmp_path)

    empty = runner.invoke(app, ["approve", gate_id, "--by", "", "--db", db])
    blank = runner.invoke(app, ["reject", gate_id, "--by", "  ", "--reason", "no", "--db", db])

    for res in (empty, blank):
        assert res.exit_code == 2
        assert "--by must name who decides" in res.output
    with opened(db) as store:
        assert store.get_gate(gate_id).status == "pending"


def test_approve_says_approved_only_after_the_decision_is_recorded(tmp_path: Path) -> None:
    db, gate_id = _paused(tmp_path)

    done = runner.invoke(app, ["approve", gate_id, "--by", "alice", "--db", db])
    again = runner.invoke(app, ["approve", gate_id, "--by", "bob", "--db", db])

    assert done.exit_code == 0, done.output
    assert f"approved gate {gate_id} as alice; resumed run" in done.output
    assert again.exit_code == 2
    assert "already decided (approved by alice" in again.output
    assert "approv" not in again.output.replace("approved by alice", "")


def test_approving_an_expired_gate_prints_no_approval_and_applies_its_timeout(
    tmp_path: Path,
) -> None:
    # a deadline of a microsecond has passed by the time the command reads the gate
    db, gate_id = _paused(tmp_path, ", timeout_s: 0.000001, on_timeout: reject")

    res = runner.invoke(app, ["approve", gate_id, "--by", "alice", "--db", db])

    assert res.exit_code == 2
    assert "expired" in res.output
    assert "approved gate" not in res.output
    with opened(db) as store:
        gate = store.get_gate(gate_id)
        assert (gate.status, gate.decided_by) == ("expired", "timeout")
        [decided] = store.events(gate.run_id, kinds=["gate_decided"])
        assert decided.payload["by"] == "timeout" and decided.payload["approved"] is False


def test_the_gate_table_shows_the_proposal_the_status_expired_and_the_reason(
    tmp_path: Path,
) -> None:
    db, gate_id = _paused(tmp_path, ", timeout_s: 0.000001, on_timeout: reject")

    res = runner.invoke(app, ["gates", "--expire", "--db", db], env={"COLUMNS": "200"})

    assert res.exit_code == 0, res.output
    assert f"gate {gate_id} expired" in res.output
    header = next(line for line in res.output.splitlines() if "status" in line)
    for column in ("proposal", "summary", "decided", "reason"):
        assert column in header
    row = next(line for line in res.output.splitlines() if gate_id in line and "│" in line)
    assert "expired" in row
    assert "license.unknown: name=b" in row
    assert "gate expired" in row


def _vendored(tmp_path: Path) -> tuple[str, str]:
    """Run the vendored-license job into a fresh SQLite file; (db, gate id)."""
    return _paused_at_a_gate(VENDORED, str(tmp_path / "vendored.db"))


def _approved_as_mit(db: str, gate_id: str) -> tuple[Any, str | None]:
    """``converge approve GATE --by alice --value MIT``, which must succeed; the gated
    ``license.unknown`` fact's content after, and the run's stop kind."""
    res = runner.invoke(app, ["approve", gate_id, "--by", "alice", "--value", "MIT", "--db", db])
    assert res.exit_code == 0, res.output
    with opened(db) as store:
        run_id = store.get_gate(gate_id).run_id
        [fact] = store.facts(run_id, key="license.unknown")
        return fact.content, store.run(run_id).kind


def test_approve_with_a_value_gives_the_proposal_a_human_classification(tmp_path: Path) -> None:
    content, kind = _approved_as_mit(*_vendored(tmp_path))
    assert content == {
        "name": "legacy-left-pad",
        "version": "0.3.1",
        "raw": "(no license metadata)",
        "spdx": "MIT",
        "source": "human",
    }
    assert kind == "criteria_met"


def test_a_value_the_policy_hook_refuses_records_nothing(tmp_path: Path) -> None:
    db, gate_id = _vendored(tmp_path)

    res = runner.invoke(
        app, ["approve", gate_id, "--by", "alice", "--value", "whatever I like", "--db", db]
    )

    assert res.exit_code == 2
    assert "'whatever I like' is not an SPDX license expression" in res.output
    assert "approved gate" not in res.output
    with opened(db) as store:
        gate = store.get_gate(gate_id)
        assert gate.status == "pending"
        assert store.events(gate.run_id, kinds=["gate_decided"]) == []


def test_without_a_hook_the_approved_content_is_the_value_as_given(tmp_path: Path) -> None:
    content, _ = _approved_as_mit(*_paused(tmp_path))
    assert content == "MIT"
