"""``RunStatus`` and ``GateStatus``: one vocabulary for the store, the CLI and the web.

- The CLI's ``--status`` choices are exactly the run statuses; the web's gate
  filter is exactly the gate statuses and ``all`` (in its OpenAPI document too).
- A member is its plain string everywhere it leaves Python: the rows the store
  writes and the values it binds (SQLite and PostgreSQL), JSON (json, orjson,
  pydantic), text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel
from sqlalchemy import select, text
from typer.testing import CliRunner

from audit.store import SqlRunStore
from audit.tables import gates, runs
from converge.cli import app
from converge.cli.audit import STATUSES
from engine import GateStatus, RunStatus

RUN_STATUSES = ("queued", "running", "paused", "stopped", "crashed")
GATE_STATUSES = ("pending", "approved", "rejected", "expired")


def test_the_statuses_are_the_ones_the_store_holds() -> None:
    assert tuple(RunStatus) == RUN_STATUSES
    assert tuple(GateStatus) == GATE_STATUSES
    assert RunStatus.PAUSED == "paused" and GateStatus("pending") is GateStatus.PENDING


def test_the_cli_status_choices_are_exactly_the_run_statuses(tmp_path: Path) -> None:
    assert tuple(RunStatus) == STATUSES

    res = CliRunner().invoke(app, ["runs", "--status", "bogus", "--db", str(tmp_path / "a.db")])

    assert res.exit_code == 2
    assert f"is not one of: {', '.join(RunStatus)}" in res.output


def _web(store: SqlRunStore) -> tuple[Any, dict[str, str]]:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from audit.people import add_token
    from converge.web import create_app

    token = add_token(store, "alice", "approver")
    return TestClient(create_app(store)), {"Authorization": f"Bearer {token}"}


def test_the_webs_gate_filter_is_exactly_the_gate_statuses_and_all(tmp_path: Path) -> None:
    from audit import open_store

    store = open_store(str(tmp_path / "web.db"))
    try:
        client, auth = _web(store)
        doc = client.get("/api/openapi.json").json()
        [param] = [
            p for p in doc["paths"]["/api/gates"]["get"]["parameters"] if p["name"] == "status"
        ]
        ref = param["schema"]["$ref"].rsplit("/", 1)[-1]
        bogus = client.get("/api/gates?status=bogus", headers=auth)
        every = {
            s: client.get(f"/api/gates?status={s}", headers=auth).status_code for s in GATE_STATUSES
        }
    finally:
        store.close()

    assert doc["components"]["schemas"][ref]["enum"] == [*GateStatus, "all"]
    assert param["schema"].get("default", "pending") == "pending"
    assert bogus.status_code == 422
    assert "'pending', 'approved', 'rejected', 'expired' or 'all'" in bogus.json()["detail"]
    assert every == dict.fromkeys(GATE_STATUSES, 200)


def test_a_status_member_is_its_plain_string_in_json_and_text() -> None:
    class Row(BaseModel):
        status: str

    assert json.dumps({"status": RunStatus.CRASHED}) == '{"status": "crashed"}'
    assert orjson.dumps({"status": GateStatus.EXPIRED}) == b'{"status":"expired"}'
    assert Row(status=RunStatus.PAUSED).model_dump_json() == '{"status":"paused"}'
    assert (str(GateStatus.PENDING), f"{RunStatus.QUEUED}") == ("pending", "queued")


def test_the_store_writes_and_binds_statuses_as_plain_strings(store: SqlRunStore) -> None:
    from tests.webfixtures import quorum_job, run_job

    run_job(quorum_job(2), store)
    [run] = store.runs()
    [gate] = store.gates()

    with store.transaction(write=False) as conn:
        stored = conn.execute(
            select(runs.c.status, gates.c.status).select_from(
                runs.join(gates, runs.c.run_id == gates.c.run_id)
            )
        ).one()
        by_member = (
            conn.execute(select(runs.c.run_id).where(runs.c.status == RunStatus.PAUSED))
            .scalars()
            .all()
        )
        by_gate = (
            conn.execute(select(gates.c.gate_id).where(gates.c.status.in_([GateStatus.PENDING])))
            .scalars()
            .all()
        )
        typed = (
            conn.execute(text("SELECT status FROM runs WHERE status = :s"), {"s": RunStatus.PAUSED})
            .scalars()
            .all()
        )

    assert tuple(stored) == ("paused", "pending")
    assert all(type(s) is str for s in stored)
    assert (run.status, gate.status) == (RunStatus.PAUSED, GateStatus.PENDING)
    assert by_member == [run.run_id] and by_gate == [gate.gate_id] and typed == ["paused"]
