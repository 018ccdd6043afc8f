"""The audit store's typed read models (issue 59 item 16): ``audit.models``' SQLModel
classes over the store's own tables, queried with a SQLModel ``Session`` and
``select(...)`` on runs the real ``converge`` recorded, on SQLite and PostgreSQL;
no ``converge`` command imports SQLModel."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import Session, select  # the 'models' extra (make test installs every extra)

from audit import open_store
from audit.models import Decision, Event, Fact, Gate, Run
from audit.store import SqlRunStore
from tests.faultfixtures import run_cli
from tests.hitlfixtures import STORES, store_url_for
from tests.servicefixtures import write_job
from tests.test_third_day_cli import DONE_JOB, OSCILLATOR, VENDORED

ROOT = Path(__file__).resolve().parent.parent
WEEK_S = 7 * 86400


@pytest.fixture(params=STORES)
def recorded(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[SqlRunStore, dict[str, str]]]:
    """A store of each kind with runs the real CLI recorded: two spent their cycle
    budget (one of them made 8 days old), one converged, the vendored audit decided
    by alice, one paused at a gate; and their ids."""
    with store_url_for(request.param, tmp_path) as url:
        ids: dict[str, str] = {}
        for name, args in (
            ("budget", [OSCILLATOR]),
            ("old budget", [OSCILLATOR]),
            ("converged", [str(write_job(tmp_path / "done.yaml", DONE_JOB))]),
            ("decided", [VENDORED]),
            ("paused", [VENDORED]),
        ):
            ran = run_cli(["run", *args, "--db", str(url), "--json"])
            ids[name] = json.loads(ran.stdout)["run_id"]
        gates = json.loads(run_cli(["gates", "--pending", "--json", "--db", str(url)]).stdout)
        gate = next(g["gate_id"] for g in gates if g["run_id"] == ids["decided"])
        decided = run_cli(
            [
                "approve",
                gate,
                "--by",
                "alice",
                "--value",
                "MIT",
                "--reason",
                "headers",
                "--db",
                str(url),
            ]
        )
        assert decided.returncode == 0, decided.stderr
        store = open_store(str(url))
        with store.sql_engine.begin() as conn:  # a run of last month, as far as runs go
            conn.execute(
                text("UPDATE runs SET started_at = started_at - :age WHERE run_id = :run"),
                {"age": WEEK_S + 86400, "run": ids["old budget"]},
            )
        try:
            yield store, ids
        finally:
            store.close()


def test_runs_stopped_by_budget_last_week_and_every_decision_by_a_person(
    recorded: tuple[SqlRunStore, dict[str, str]],
) -> None:
    store, ids = recorded
    week_ago = time.time() - WEEK_S
    with Session(store.sql_engine) as session:
        budget = session.exec(
            select(Run).where(Run.category == "budget", Run.started_at >= week_ago)
        ).all()
        decisions = session.exec(select(Decision).order_by(Decision.decided_at)).all()
        by_alice = session.exec(select(Decision).where(Decision.decided_by == "alice")).all()
        pending = session.exec(select(Gate).where(Gate.status == "pending")).all()

    assert [r.run_id for r in budget] == [ids["budget"]]
    [run] = budget
    assert run.stop is not None and run.stop.kind_code() == "cycle_budget_exhausted"
    assert run.suggestor_names == ["ping", "pong"] and run.cycles == 10
    assert [(d.run_id, d.decided_by, d.approved, d.reason) for d in decisions] == [
        (ids["decided"], "alice", True, "headers")
    ]
    assert by_alice == decisions
    assert [g.run_id for g in pending] == [ids["paused"]]
    assert pending[0].proposal_data["key"] == "license.unknown"


def test_facts_and_events_read_as_the_store_reads_them(
    recorded: tuple[SqlRunStore, dict[str, str]],
) -> None:
    store, ids = recorded
    run_id = ids["decided"]
    with Session(store.sql_engine) as session:
        licenses = session.exec(
            select(Fact).where(Fact.run_id == run_id, Fact.of_key("license")).order_by(Fact.seq)
        ).all()
        unknown = session.exec(
            select(Fact).where(Fact.run_id == run_id, Fact.of_key("license.unknown"))
        ).all()
        events = session.exec(select(Event).where(Event.run_id == run_id).order_by(Event.seq)).all()

    promoted = [f for f in store.facts(run_id) if f.key == "license"]
    assert [f.fact for f in licenses] == promoted  # not license.unknown: the key, whole
    assert [(f.key, f.content["spdx"]) for f in unknown] == [("license.unknown", "MIT")]
    stored = store.events(run_id)
    assert [(e.seq, e.kind, e.hash) for e in events] == [(e.seq, e.kind, e.hash) for e in stored]
    assert [e.data for e in events] == [e.payload for e in stored]


def test_no_converge_command_imports_sqlmodel(tmp_path: Path) -> None:
    def imported(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-X", "importtime", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        return done.stderr  # where -X importtime writes

    cli = imported("-c", "import converge.cli")
    command = imported("-m", "converge.cli", "runs", "--db", str(tmp_path / "none.db"))
    store = imported("-c", "import audit, audit.store, audit.queries")
    models = imported("-c", "import audit.models")

    for found in (cli, command, store):
        assert "converge" in found or "audit" in found  # the import log itself
        assert " sqlmodel" not in found and "audit.models" not in found
    assert " sqlmodel" in models  # the check can fail: the log names it when imported
