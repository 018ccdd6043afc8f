"""``converge runs | show | facts | lineage | verify`` on a recorded run.

Each command is run with ``--db`` on a SQLite file and with ``--json``, and the
JSON must say what the store says.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit import open_store
from converge.cli import app
from engine import Budget, Context, Engine, Proposal, suggestor

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent
DEP_AUDIT = ROOT / "examples" / "dependency_audit" / "job.yaml"


@suggestor(name="double", dependencies=["n"])
def double(ctx: Context) -> list[Proposal]:
    return [Proposal("n", f.content * 2, parents=(f.id,)) for f in ctx.get("n") if f.content < 20]


@suggestor(name="label", dependencies=["n"])
def label(ctx: Context) -> list[Proposal]:
    return [Proposal("label", f"n={f.content}", parents=(f.id,)) for f in ctx.get("n")]


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[str, str]:
    """(db path, run id) of a converged run with two keys and a lineage chain."""
    db = str(tmp_path / "cli.db")
    store = open_store(db)
    engine = Engine(budget=Budget(max_cycles=20), store=store, job_name="doubling")
    result = engine.register(double, label).run({"n": [1]})
    assert result.stop_reason.kind == "converged"
    store.close()
    return db, result.run_id


def invoke(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.stdout


def test_runs_lists_the_recorded_run(recorded: tuple[str, str]) -> None:
    db, run_id = recorded
    code, out = invoke("runs", "--db", db, "--json")
    assert code == 0
    [row] = json.loads(out)
    assert row["run_id"] == run_id and row["kind"] == "converged" and row["job"] == "doubling"
    assert invoke("runs", "--db", db, "--category", "budget", "--json")[1].strip() == "[]"
    assert json.loads(invoke("runs", "--db", db, "--since", "1h", "--json")[1])[0]["run_id"]
    code, out = invoke("runs", "--db", db)
    assert code == 0 and run_id in out


def test_runs_rejects_a_bad_since(recorded: tuple[str, str]) -> None:
    res = runner.invoke(app, ["runs", "--db", recorded[0], "--since", "yesterday-ish"])
    assert res.exit_code == 2
    assert "--since" in res.stderr


def test_show_prints_the_timeline_and_the_stop(recorded: tuple[str, str]) -> None:
    db, run_id = recorded
    code, out = invoke("show", run_id, "--db", db, "--json")
    assert code == 0
    data = json.loads(out)
    assert data["run"]["stop_reason"] == {"kind": "converged"}
    assert data["timeline"][1]["executed"] == ["double", "label"]
    assert sum(c["promoted"] for c in data["timeline"]) == data["run"]["facts_count"] - 1
    assert data["budget_status"]["dimensions"]["cycles"]["limit"] == 20
    code, out = invoke("show", run_id, "--db", db)
    assert code == 0 and "timeline" in out and "explain" in out and "budget" in out


def test_show_of_an_unknown_run_exits_2(recorded: tuple[str, str]) -> None:
    res = runner.invoke(app, ["show", "nope", "--db", recorded[0]])
    assert res.exit_code == 2 and "nope" in res.stderr


def test_facts_lists_facts_with_provenance(recorded: tuple[str, str]) -> None:
    db, run_id = recorded
    code, out = invoke("facts", run_id, "--db", db, "--key", "n", "--json")
    assert code == 0
    facts = json.loads(out)
    assert [f["content"] for f in facts] == [1, 2, 4, 8, 16, 32]
    assert facts[1]["provenance"]["parents"] == ["n#0"]
    code, out = invoke("facts", run_id, "--db", db)
    assert code == 0 and "label#0" in out


def test_lineage_walks_back_to_the_input(recorded: tuple[str, str]) -> None:
    db, run_id = recorded
    code, out = invoke("lineage", run_id, "label#3", "--db", db, "--json")
    assert code == 0
    data = json.loads(out)
    assert {n["id"] for n in data["nodes"]} == {"label#3", "n#3", "n#2", "n#1", "n#0"}
    assert ["n#3", "label#3"] in data["edges"]
    code, out = invoke("lineage", run_id, "label#3", "--db", db)
    assert code == 0 and "n#0" in out and "input" in out
    assert runner.invoke(app, ["lineage", run_id, "nope#9", "--db", db]).exit_code == 2


def test_verify_exits_0_when_intact_and_1_with_the_first_bad_seq(
    recorded: tuple[str, str],
) -> None:
    db, run_id = recorded
    code, out = invoke("verify", run_id, "--db", db, "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    assert invoke("verify", "--all", "--db", db)[0] == 0
    with sqlite3.connect(db) as con:
        con.execute("UPDATE audit_events SET payload = '{}' WHERE seq = 3")
    code, out = invoke("verify", "--all", "--db", db, "--json")
    assert code == 1
    [report] = json.loads(out)["runs"]
    assert (report["first_bad_seq"], report["reason"]) == (3, "payload changed")
    code, out = invoke("verify", run_id, "--db", db)
    assert code == 1 and "first bad seq 3" in out and "payload changed" in out


def test_a_bad_db_url_exits_2_with_one_line() -> None:
    res = runner.invoke(app, ["runs", "--db", "nosuchdb://x"])
    assert res.exit_code == 2
    assert "nosuchdb" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.skipif(not DEP_AUDIT.exists(), reason="examples/dependency_audit not built yet")
def test_the_query_commands_work_on_the_dependency_audit_job(tmp_path: Path) -> None:
    db = str(tmp_path / "dep.db")
    res = runner.invoke(app, ["run", str(DEP_AUDIT), "--db", db, "--json"])
    assert res.exit_code in (0, 4, 10), res.stdout
    run_id = json.loads(res.stdout)["run_id"]
    [row] = json.loads(invoke("runs", "--db", db, "--json")[1])
    assert row["run_id"] == run_id and row["job"] == "dependency-audit"
    assert invoke("show", run_id, "--db", db)[0] == 0
    facts = json.loads(invoke("facts", run_id, "--db", db, "--json")[1])
    assert len(facts) == row["facts_count"]
    derived = next(f for f in facts if f["provenance"]["parents"])
    assert invoke("lineage", run_id, derived["id"], "--db", db)[0] == 0
    assert invoke("verify", "--all", "--db", db)[0] == 0
