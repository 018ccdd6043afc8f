"""A corrupt cell in any column of any table the inbox or the command line reads
(issue 40, item 4): the row is reported as one that cannot be read, the others are
served, and nothing answers 500 or prints a traceback.

The columns come from the tables' SQLAlchemy metadata, so a column added later
is fuzzed too. Each case writes one value into one cell of a "victim" row (of run
1, its gate, bob's rows, alice's token) in a copy of a small SQLite store, then
reads every page, JSON route and listing command. The value is of the wrong type
for the column (a text in a number, bytes in a text, text in a boolean), text that
is no JSON in a JSON column, or, for the text columns of the listed tables, a
hundred thousand characters. SQLite refuses NULL in a NOT NULL column (so no case writes
one there); it keeps every other value whatever the column's declared type.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Boolean, Float, Integer, Table, create_engine, insert, text
from typer.testing import CliRunner

from audit import open_store
from audit.people import add_comment, add_to_groups, add_token, cast_vote, log_access, record_actor
from audit.signing import add_person
from audit.signing._known_people import people_table
from audit.tables import (
    access_log,
    api_tokens,
    audit_events,
    gate_votes,
    gates,
    group_members,
    notification_deliveries,
    run_actors,
    run_cancels,
    run_leases,
    runs,
)
from audit.testing import pg_schema
from converge.cli import app as cli_app
from converge.web import create_app
from converge.web.auth import SESSION_COOKIE
from engine import GateDecision
from tests.pgfixtures import require_pg
from tests.webfixtures import quorum_job, run_job

runner = CliRunner()

RUNS = 8
"""Run 0 is the one no case touches; runs 1-7 each hold one table's victim row."""

VICTIMS: dict[str, tuple[Table, str]] = {
    "runs": (runs, "run_id = :run1"),
    "gates": (gates, "gate_id = :gate2"),
    "gate_votes": (gate_votes, "gate_id = :gate3"),
    "audit_events": (audit_events, "run_id = :run4 AND kind = 'gate_comment'"),
    "access_log": (access_log, "target = :gate5"),
    "notification_deliveries": (notification_deliveries, "gate_id = :gate6"),
    "run_actors": (run_actors, "run_id = :run7"),
    "run_cancels": (run_cancels, "run_id = :run7"),
    "run_leases": (run_leases, "run_id = :run6"),
    "people": (people_table, "name = 'bob'"),
    "group_members": (group_members, "name = 'bob'"),
}
"""Each table the inbox and the command line read, and the row of it a case
corrupts: of a run (or its gate) of its own, so that the cases of several tables
run together without one hiding another. ``api_tokens`` has cases of its own
(:data:`TOKEN_VICTIM`): alice's token, whose requests are all the surfaces."""

TOKEN_VICTIM = (api_tokens, "name = 'alice'")

JSON_COLUMNS = {
    ("runs", "job_spec"),
    ("runs", "suggestors"),
    ("runs", "usage"),
    ("runs", "reason"),
    ("gates", "proposal"),
    ("gates", "extra"),
    ("audit_events", "payload"),
    ("audit_events", "fact_id"),
}
HUGE_VICTIMS: dict[str, tuple[Table, str]] = {
    "runs": (runs, "run_id = :run7"),
    "gates": (gates, "gate_id = :gate7"),
    "audit_events": (audit_events, "run_id = :run7 AND kind = 'gate_comment'"),
}
"""The rows of the listed tables whose text cells get a hundred thousand characters, in the
same cases (run 7's row is read whole while the victims above are not)."""

HUGE = "x" * 100_000

Edit = tuple[Table, str, str, Any]
"""(table, column, which row, value)."""


def _wrong(table: Table, column: str) -> Any:
    """A value not of the column's type (or no JSON, in a JSON column)."""
    if (table.name, column) in JSON_COLUMNS:
        return '{"not json'
    if isinstance(table.c[column].type, Integer | Float | Boolean):
        return "not a number"
    return b"\xff\x00 bytes"


def _columns(table: Table, huge: bool) -> list[str]:
    """The columns a case may corrupt: every one, but an INTEGER PRIMARY KEY (SQLite
    refuses a non-integer there); only the text ones for a huge text."""
    out = []
    for c in table.columns:
        numeric = isinstance(c.type, Integer | Float | Boolean)
        if numeric and c.primary_key and len(table.primary_key.columns) == 1:
            continue
        if not (huge and numeric):
            out.append(c.name)
    return out


def _cases() -> list[Any]:
    """Case ``i`` corrupts column ``i`` of every table at once (round the columns of
    a shorter table again), and writes a huge text in text column ``i`` of run 7's
    rows: every column of every table in as many cases as the widest table has
    columns. Then each column of alice's token row, one case each."""
    plan = [(VICTIMS, False), (HUGE_VICTIMS, True)]
    columns = {
        (t, huge): _columns(table, huge)
        for victims, huge in plan
        for t, (table, _w) in victims.items()
    }
    edits: list[list[Edit]] = []
    for i in range(max(len(c) for c in columns.values())):
        case: list[Edit] = []
        for victims, huge in plan:
            for t, (table, where) in victims.items():
                column = columns[t, huge][i % len(columns[t, huge])]
                case.append((table, column, where, HUGE if huge else _wrong(table, column)))
        edits.append(case)
    out = [pytest.param(e, id=f"{i}-{e[0][0].name}.{e[0][1]}") for i, e in enumerate(edits)]
    for column in _columns(api_tokens, huge=False):
        edit = (api_tokens, column, TOKEN_VICTIM[1], _wrong(api_tokens, column))
        out.append(pytest.param([edit], id=f"token-{column}"))
    return out


@dataclass
class Template:
    """The store every case copies: runs paused at their gates, and around them."""

    path: Path
    token: str
    ids: dict[str, str]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    path = tmp_path_factory.mktemp("hostile") / "audit.db"
    store = open_store(str(path))
    ids: dict[str, str] = {}
    try:
        job = quorum_job(2)
        for n in range(RUNS):
            result = run_job(job, store)
            run, gate = result.run_id, result.stop_reason.gate_id  # type: ignore[attr-defined]
            ids |= {f"run{n}": run, f"gate{n}": gate}
            cast_vote(store, gate, GateDecision.approve(by="carl"), 2)
            add_comment(store, gate, "bob", "looks fine")
            record_actor(store, run, "bob", "submitted")
            log_access(store, "decide", "403", name="bob", target=gate, detail="not an approver")
        token = add_token(store, "alice")
        add_token(store, "bob")
        for person in ("alice", "bob"):
            add_person(store, person)
            add_to_groups(store, person, ["ops"])
    finally:
        store.close()
    _side_rows(path, ids)
    return Template(path, token, ids)


def _side_rows(path: Path, ids: dict[str, str]) -> None:
    """A cancel request, a notification and a lease of each run, as their rooms write them."""
    engine = create_engine(f"sqlite:///{path}")
    try:
        run_cancels.create(engine, checkfirst=True)
        notification_deliveries.create(engine, checkfirst=True)
        with engine.begin() as conn:
            for n in range(RUNS):
                conn.execute(
                    insert(run_cancels).values(
                        run_id=ids[f"run{n}"], requested_by="bob", requested_at=1.0
                    )
                )
                conn.execute(
                    insert(notification_deliveries).values(
                        gate_id=ids[f"gate{n}"],
                        event="opened",
                        sink="webhook:http://127.0.0.1:9/hook",
                        run_id=ids[f"run{n}"],
                        status="delivered",
                        attempts=1,
                        answer="200",
                        claimed_by="test",
                        claimed_at=1.0,
                        first_at=1.0,
                        last_at=2.0,
                    )
                )
                conn.execute(  # an expired lease: the runs listings read every lease
                    insert(run_leases).values(
                        run_id=ids[f"run{n}"],
                        holder="gone-host/1/1",
                        epoch=1,
                        expires_at=1.0,
                        renewed_at=1.0,
                    )
                )
    finally:
        engine.dispose()


@pytest.fixture
def corrupted(template: Template, tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    path = tmp_path / "audit.db"
    shutil.copy(template.path, path)
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            for table, column, where, value in request.param:
                done = conn.execute(
                    text(f'UPDATE {table.name} SET "{column}" = :value WHERE {where}'),
                    {"value": value, **template.ids},
                )
                assert done.rowcount >= 1, (table.name, column)
    finally:
        engine.dispose()
    return path


def _web(path: Path, t: Template) -> dict[str, Any]:
    """Every read of the inbox, as alice (a bearer token, a session cookie)."""
    store = open_store(str(path))
    try:
        client = TestClient(create_app(store), raise_server_exceptions=False)
        client.cookies.set(SESSION_COOKIE, t.token)
        bearer = {"Authorization": f"Bearer {t.token}"}
        ids = t.ids
        paths = [
            "/",
            "/api/gates",
            "/api/gates?status=all",
            "/api/runs",
            "/runs",
            *(f"/runs/{ids[f'run{n}']}" for n in (0, 1, 2, 3, 4, 7)),
            *(f"/api/runs/{ids[f'run{n}']}" for n in (1, 7)),
            *(f"/gates/{ids[f'gate{n}']}" for n in (0, 2, 3, 4, 7)),
            *(f"/api/gates/{ids[f'gate{n}']}" for n in (0, 2, 3, 4, 7)),
            *(f"/api/gates/{ids[f'gate{n}']}/history" for n in (2, 4, 5, 6)),
        ]
        return {p: client.get(p, headers=bearer, follow_redirects=False) for p in paths}
    finally:
        store.close()


def _served_without_a_500(corrupted: Path, template: Template) -> dict[str, Any]:
    """:func:`_web`'s answers on the corrupted store, none of them a 5xx."""
    answers = _web(corrupted, template)
    errors = {p: (a.status_code, a.text[:300]) for p, a in answers.items() if a.status_code >= 500}
    assert not errors
    return answers


def _cli(path: Path, t: Template) -> dict[str, Any]:
    """Every listing command, on the store: the run and gate of each victim."""
    commands = [["gates", "--json"], ["gates"], ["gates", "--pending"], ["runs", "--json"]]
    commands += [["runs"], ["show", t.ids["run0"]], ["show", t.ids["run1"]]]
    commands += [["events", t.ids[f"run{n}"]] for n in (4, 7)]
    commands += [["gates", t.ids[f"gate{n}"], "--history"] for n in (5, 6)]
    return {
        " ".join(c): runner.invoke(cli_app, [*c, "--db", str(path)], env={"COLUMNS": "100"})
        for c in commands
    }


@pytest.mark.parametrize("corrupted", _cases(), indirect=True)
def test_a_corrupt_cell_is_reported_and_the_other_rows_served_never_a_500_nor_a_traceback(
    corrupted: Path, template: Template
) -> None:
    answers = _served_without_a_500(corrupted, template)
    if answers["/api/gates?status=all"].status_code == 401:
        # alice's own token row was the one corrupted: she is no one, on every route
        assert {a.status_code for a in answers.values()} <= {401, 303, 429}
        return
    commands = _cli(corrupted, template)
    for name, res in commands.items():
        assert res.exception is None or isinstance(res.exception, SystemExit), (name, res.output)
        assert res.exit_code in (0, 1, 2) and "Traceback" not in res.output, (name, res.output)
    gate0, run0 = template.ids["gate0"], template.ids["run0"]
    gates_listed = {g["gate_id"]: g for g in answers["/api/gates?status=all"].json()}
    runs_listed = {r["run_id"]: r for r in answers["/api/runs"].json()}
    # the untouched run and gate are served whole; every victim is listed, read or not
    assert gates_listed[gate0]["status"] == "pending" and "proposal" in gates_listed[gate0]
    assert "error" not in runs_listed[run0]
    for n in range(3, 7):  # gate 2 and 7: their id may be the cell written
        assert template.ids[f"gate{n}"] in gates_listed, n
    for route in (f"/api/gates/{gate0}", f"/gates/{gate0}", f"/runs/{run0}", "/", "/runs"):
        assert answers[route].status_code == 200, route
    assert gate0 in commands["gates --json"].stdout and run0 in commands["runs --json"].stdout
    assert commands[f"show {run0}"].exit_code == 0


@pytest.mark.parametrize("column", ["proposal", "extra"])
def test_a_gate_that_is_no_json_is_listed_as_unreadable_beside_the_others(
    column: str, template: Template, tmp_path: Path
) -> None:
    path = tmp_path / "audit.db"
    shutil.copy(template.path, path)
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(
            text(f"UPDATE gates SET {column} = 'no json' WHERE gate_id = :g"),
            {"g": template.ids["gate1"]},
        )
    engine.dispose()
    _unreadable_gate_is_named(str(path), template)


def _unreadable_gate_is_named(db: str, t: Template) -> None:
    gate1, gate2 = t.ids["gate1"], t.ids["gate0"]
    store = open_store(db)
    try:
        client = TestClient(create_app(store))
        client.cookies.set(SESSION_COOKIE, t.token)
        for route in ("/api/gates", "/api/gates?status=all"):
            listed = client.get(route, headers={"Authorization": f"Bearer {t.token}"}).json()
            by_id = {g["gate_id"]: g for g in listed}
            assert (
                by_id[gate1]["status"] == "unreadable"
                and "cannot read gates." in (by_id[gate1]["error"])
            )
            assert by_id[gate2]["status"] == "pending" and by_id[gate2]["summary"]
        home = client.get("/")
        assert home.status_code == 200 and 'id="unreadable"' in home.text and gate2 in home.text
    finally:
        store.close()
    res = runner.invoke(cli_app, ["gates", "--db", db], env={"COLUMNS": "200"})
    assert res.exit_code == 1 and gate2 in res.stdout
    assert f"gate {gate1}: cannot read gates." in res.stderr


@pytest.fixture
def pg_template(template: Template) -> Iterator[tuple[str, Template]]:
    """The template's runs recorded again on a fresh PostgreSQL schema."""
    require_pg()
    with pg_schema("converge_hostile") as url:
        store = open_store(url)
        try:
            job = quorum_job(2)
            run1, run2 = (run_job(job, store) for _ in range(2))
            ids = {
                "gate1": run1.stop_reason.gate_id,  # type: ignore[attr-defined]
                "gate0": run2.stop_reason.gate_id,  # type: ignore[attr-defined]
            }
            token = add_token(store, "alice")
            with store.transaction() as conn:
                conn.execute(
                    text("UPDATE gates SET proposal = 'no json' WHERE gate_id = :g"),
                    {"g": ids["gate1"]},
                )
        finally:
            store.close()
        yield url, Template(template.path, token, ids)


def test_on_postgresql_a_gate_that_is_no_json_is_listed_as_unreadable_too(
    pg_template: tuple[str, Template],
) -> None:
    url, t = pg_template
    _unreadable_gate_is_named(url, t)


SHAPES = (
    "5",
    '["a", 1]',
    '{"parents": 5, "key": 3, "content": {"a": [1]}, "id": 7, "confidence": "high"}',
    '{"rules": {"approvers": 5, "four_eyes": "x", "notify": 3, "escalate_to": 1}}',
)
"""JSON of the wrong shape: a number, a list, objects whose fields have the wrong types."""


def _shape_cases() -> list[Any]:
    """Each JSON column of a listed row holding JSON of the wrong shape, one case each."""
    out = []
    for t, (table, where) in VICTIMS.items():
        for column in sorted(c for (name, c) in JSON_COLUMNS if name == t):
            for i, shape in enumerate(SHAPES):
                edit = (table, column, where, shape)
                out.append(pytest.param([edit], id=f"{t}.{column}-{i}"))
    return out


@pytest.mark.parametrize("corrupted", _shape_cases(), indirect=True)
def test_json_of_the_wrong_shape_in_a_cell_is_reported_never_a_500_nor_a_traceback(
    corrupted: Path, template: Template
) -> None:
    answers = _served_without_a_500(corrupted, template)
    for name, res in _cli(corrupted, template).items():
        assert res.exception is None or isinstance(res.exception, SystemExit), (name, res.output)
        assert res.exit_code in (0, 1, 2) and "Traceback" not in res.output, (name, res.output)
    gate0 = template.ids["gate0"]
    assert answers[f"/gates/{gate0}"].status_code == 200
    assert answers["/"].status_code == 200 and answers["/runs"].status_code == 200
