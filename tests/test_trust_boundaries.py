"""Trust boundaries of the store (issue 29, part A), on SQLite and PostgreSQL: a
database writer without the audit key edits what a resume, a query or a report
reads, and is caught.

- the job spec a paused run resumes with is chained in its ``run_started``: an
  edited one (a quorum of 2 made 1, the value hook removed, the invariants
  dropped) is named by ``verify`` and refused by ``approve`` and by a resume,
  with nothing written;
- ``verify`` compares every ``runs`` column a command shows or a resume reads
  (usage, job, status, times...) and names the one that differs;
- a corrupt row never silences the tools: ``verify --all`` reports that run and
  goes on; ``runs`` and ``show`` print one error line and exit non-zero; the
  inbox's ``/api/runs`` answers with the other runs and marks the bad one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

import audit.trail._runs
from audit import open_store
from audit.people import add_token
from converge.cli import app
from engine import GateDecision, TamperedRow
from tests.boundaryfixtures import Recorded, edit_spec, recorded, sql
from tests.hitlfixtures import STORES, store_url_for
from tests.webfixtures import served

runner = CliRunner()


@pytest.fixture(params=STORES)
def rec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Recorded]:
    """The runs ``paused``, ``done`` and ``plain`` on a fresh store of each kind."""
    with store_url_for(request.param, tmp_path) as url:
        store = open_store(url)
        try:
            yield recorded(store, url, tmp_path)
        finally:
            store.close()


def cli(*args: str) -> Result:
    """``converge ARGS`` in this process."""
    return runner.invoke(app, list(args))


def _no_traceback(res: Result) -> None:
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output


def _error_lines(res: Result) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.strip()]


def _snapshot(url: str) -> dict[str, list[Any]]:
    """Every row of the tables a decision, a claim or a resume writes."""
    tables = {
        "runs": "SELECT * FROM runs ORDER BY run_id",
        "events": "SELECT run_id, seq, kind, payload, hash FROM audit_events ORDER BY run_id, seq",
        "gates": "SELECT * FROM gates ORDER BY gate_id",
        "checkpoints": "SELECT run_id, data FROM checkpoints ORDER BY run_id",
        "ledger": "SELECT * FROM ledger ORDER BY seq",
    }
    return {name: [tuple(r) for r in sql(url, q)] for name, q in tables.items()}


def _quorum_of_one(spec: dict[str, Any]) -> None:
    spec["gates"][0]["hitl"]["approvals_required"] = 1


def _no_hook(spec: dict[str, Any]) -> None:
    del spec["gates"][0]["hitl"]["validate_value"]


def _no_invariants(spec: dict[str, Any]) -> None:
    spec["invariants"] = []


def _all_three(spec: dict[str, Any]) -> None:
    for edit in (_quorum_of_one, _no_hook, _no_invariants):
        edit(spec)


SPEC_EDITS: dict[str, Callable[[dict[str, Any]], None]] = {
    "approvals_required 2 -> 1": _quorum_of_one,
    "the value hook removed": _no_hook,
    "invariants: []": _no_invariants,
    "all three": _all_three,
}


@pytest.mark.parametrize("edit", SPEC_EDITS)
def test_an_edited_job_spec_is_named_by_verify(rec: Recorded, edit: str) -> None:
    edit_spec(rec.url, "paused", SPEC_EDITS[edit])

    reports = {r.run_id: r for r in rec.store.verify_all()}

    assert not reports["paused"].ok
    assert reports["paused"].reason == "runs row differs from the chain (job_spec)"
    assert reports["done"].ok and reports["plain"].ok
    res = cli("verify", "--all", "--db", rec.url)
    assert res.exit_code == 1 and "2/3 runs verify" in res.stdout, res.output


def test_an_edited_job_spec_is_refused_by_approve_and_resume_with_nothing_written(
    rec: Recorded,
) -> None:
    edit_spec(rec.url, "paused", _all_three)
    before = _snapshot(rec.url)

    # the edit would let one person decide the two-person gate with a value the
    # hook refuses, in a run whose invariant forbids it
    approve = cli("approve", rec.gate, "--by", "alice", "--value", "AGPL-3.0-only", "--db", rec.url)
    resume = cli("resume", "paused", "--db", rec.url)
    with pytest.raises(TamperedRow) as caught:
        rec.job().build_engine(rec.store).resume(rec.gate, GateDecision.approve(by="alice"))

    for res in (approve, resume):
        _no_traceback(res)
        assert res.exit_code == 2, res.output
        [line] = _error_lines(res)
        assert "run paused" in line and "runs.job_spec" in line, line
    assert (caught.value.run_id, caught.value.column) == ("paused", "runs.job_spec")
    assert _snapshot(rec.url) == before
    assert rec.store.get_gate(rec.gate).status == "pending"


def test_the_recorded_job_spec_decides_the_gate_as_before(rec: Recorded) -> None:
    # untouched, the same commands keep the quorum and the hook
    refused = cli("approve", rec.gate, "--by", "alice", "--value", "AGPL-3.0-only", "--db", rec.url)
    first = cli("approve", rec.gate, "--by", "alice", "--value", "MIT", "--db", rec.url)

    assert refused.exit_code == 2 and "not allowed in this product" in refused.stderr
    assert first.exit_code == 10, first.output  # one of two approvals: still paused
    assert rec.store.get_gate(rec.gate).status == "pending"
    assert all(r.ok for r in rec.store.verify_all())


COLUMN_EDITS = {
    "usage": "usage = :usage",
    "job": "job = 'forged'",
    "status": "status = 'paused'",
    "started_at": "started_at = started_at - 3600",
    "ended_at": "ended_at = ended_at + 3600",
    "duration_ms": "duration_ms = duration_ms + 1",
    "suggestors": "suggestors = '[\"scan\"]'",
    "parent_run_id": "parent_run_id = 'plain'",
}

FORGED = {"usage": json.dumps({"input_tokens": 999, "output_tokens": 999, "cost_usd": 12.5})}
"""What ``converge show`` would print as the truth: ``999+999 tokens, $12.50``."""


@pytest.mark.parametrize("column", COLUMN_EDITS)
def test_an_edited_runs_column_is_named_by_verify(rec: Recorded, column: str) -> None:
    sql(rec.url, f"UPDATE runs SET {COLUMN_EDITS[column]} WHERE run_id = 'done'", **FORGED)

    reports = {r.run_id: r for r in rec.store.verify_all()}

    assert not reports["done"].ok
    assert reports["done"].reason == f"runs row differs from the chain ({column})"
    assert reports["paused"].ok and reports["plain"].ok


def test_a_corrupt_reason_and_a_list_usage_are_reported_per_run_while_the_others_verify(
    rec: Recorded,
) -> None:
    sql(rec.url, "UPDATE runs SET reason = 'not json' WHERE run_id = 'done'")
    sql(rec.url, "UPDATE runs SET usage = '[1, 2, 3]' WHERE run_id = 'plain'")

    reports = {r.run_id: r for r in rec.store.verify_all()}
    verify = cli("verify", "--all", "--db", rec.url, "--json")
    runs = cli("runs", "--db", rec.url)
    runs_json = cli("runs", "--db", rec.url, "--json")
    show_done = cli("show", "done", "--db", rec.url)
    show_plain = cli("show", "plain", "--db", rec.url)

    assert reports["done"].reason == "runs row differs from the chain (reason)"
    assert reports["plain"].reason == "runs row differs from the chain (usage)"
    assert reports["paused"].ok
    assert verify.exit_code == 1
    assert {r["run_id"]: r["ok"] for r in json.loads(verify.stdout)["runs"]} == {
        "done": False,
        "plain": False,
        "paused": True,
    }
    for res in (verify, runs, runs_json, show_done, show_plain):
        _no_traceback(res)
    assert runs.exit_code == 1 and "paused" in runs.stdout
    assert sorted(_error_lines(runs)) == [
        "error: run done: cannot read runs.reason: not JSON (Expecting value: line 1 column 1 "
        "(char 0))",
        "error: run plain: cannot read runs.usage: a JSON list where a JSON dict is expected",
    ]
    marked = {r["run_id"]: r for r in json.loads(runs_json.stdout)}
    assert runs_json.exit_code == 1 and marked["paused"]["status"] == "paused"
    assert (marked["done"]["column"], marked["plain"]["column"]) == ("reason", "usage")
    for res, column in ((show_done, "runs.reason"), (show_plain, "runs.usage")):
        assert res.exit_code == 2
        [line] = _error_lines(res)
        assert column in line
    # what does not need the row still reads: the facts are the events'
    assert cli("facts", "done", "--db", rec.url).exit_code == 0


def test_the_inbox_answers_with_the_other_runs_and_marks_the_unreadable_one(
    rec: Recorded,
) -> None:
    sql(rec.url, "UPDATE runs SET reason = 'not json' WHERE run_id = 'done'")
    token = add_token(rec.store, "alice")

    with served(rec.store) as base:
        answer = httpx.get(f"{base}/api/runs", headers={"Authorization": f"Bearer {token}"})

    assert answer.status_code == 200, answer.text
    listed = {r["run_id"]: r for r in answer.json()}
    assert set(listed) == {"done", "paused", "plain"}
    assert listed["done"]["column"] == "reason" and "runs.reason" in listed["done"]["error"]
    assert listed["paused"]["kind"] == "hitl_gate_pending" and "error" not in listed["paused"]


def test_a_run_started_before_headers_were_chained_still_resumes_and_verifies(
    rec: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as an older converge recorded it: run_started without the header
    monkeypatch.setattr(audit.trail._runs, "with_header", lambda events, header, started_at: events)
    job = rec.job()
    paused = job.build_engine(rec.store).run(job.spec.initial, run_id="older")
    monkeypatch.undo()
    [started] = rec.store.events("older", kinds=["run_started"])
    assert "header" not in started.payload
    assert rec.store.verify("older").ok

    gate = getattr(paused.stop_reason, "gate_id", "")
    assert cli("approve", gate, "--by", "alice", "--value", "MIT", "--db", rec.url).exit_code == 10
    done = cli("approve", gate, "--by", "bob", "--value", "MIT", "--db", rec.url)

    assert done.exit_code == 0, done.output
    assert rec.store.run("older").kind == "converged"
    assert all(r.ok for r in rec.store.verify_all())
