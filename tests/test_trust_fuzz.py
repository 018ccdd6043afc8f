"""A database writer's random edits (issue 29, part A), as a property: whatever value
lands in whatever cell of ``runs``, ``gates`` or ``audit_events``, ``verify``,
``runs``, ``show``, ``gates``, ``facts`` and ``report`` answer without a
traceback, and ``verify`` names every change it can check.

Each example writes one value into one cell of a store holding three runs
(:mod:`tests.boundaryfixtures`), runs the commands, and writes the cell back. On
SQLite any value fits any cell (a text in an integer column, bytes anywhere); on
PostgreSQL the values are of the column's type. Not checked by ``verify``, and so
only run for "no traceback": ``runs.pid``, ``runs.hostname`` (the live writer)
and ``runs.epoch`` (the fencing counter), which claims change without an event
(docs/audit.md, "What verify compares").
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, Float, Integer, Table, text
from sqlalchemy.exc import DBAPIError, StatementError
from typer.testing import CliRunner

from audit import open_store
from audit.store import SqlRunStore
from audit.tables import audit_events, gates, runs
from converge.cli import app
from engine.facts import canonical_json
from tests.boundaryfixtures import recorded
from tests.hitlfixtures import STORES, store_url_for
from tests.storecopies import sql_engine

runner = CliRunner()

EXAMPLES = {"sqlite": 40, "postgresql": 15}
"""Examples per store: well under a minute on SQLite, on a busy machine."""

SWEEP = int(os.environ.get("CONVERGE_FUZZ_EXAMPLES", "0"))
"""``$CONVERGE_FUZZ_EXAMPLES=N``: a longer sweep of N random examples (by hand, not in CI)."""

TABLES: dict[str, tuple[Table, tuple[str, ...]]] = {
    "runs": (runs, ("run_id",)),
    "gates": (gates, ("gate_id",)),
    "audit_events": (audit_events, ("run_id", "seq")),
}
"""Each table the writer edits, with the columns that find its row."""

UNCHECKED = {("runs", "pid"), ("runs", "hostname"), ("runs", "epoch")}
"""Cells ``verify`` does not compare (see the module docstring)."""

BY_THE_CHAIN = {"run_id", "head_hash", "last_seq", "chain", "seq", "gate_id"}
"""Columns whose change the chain checks report in their own words (``row
missing``, ``head mismatch``, ``key required``, ``never opened``...), not by name."""

JSON_COLUMNS = {"job_spec", "suggestors", "reason", "usage", "proposal", "extra", "payload"}


@dataclass(frozen=True)
class Cell:
    """One cell: its table, the values of its row's key columns, its column."""

    table: str
    key: tuple[Any, ...]
    column: str

    def where(self, key: tuple[Any, ...] | None = None) -> tuple[str, dict[str, Any]]:
        names = TABLES[self.table][1]
        values = self.key if key is None else key
        clause = " AND ".join(f"{n} = :k{i}" for i, n in enumerate(names))
        return clause, {f"k{i}": v for i, v in enumerate(values)}

    def moved_key(self, value: Any) -> tuple[Any, ...]:
        """The row's key once ``value`` is written (a key column may be the cell)."""
        names = TABLES[self.table][1]
        return tuple(value if n == self.column else k for n, k in zip(names, self.key, strict=True))


@dataclass
class Fuzzed:
    """The store the examples edit, and its cells."""

    kind: str
    url: str
    store: SqlRunStore
    sql: Engine
    cells: list[Cell]


@pytest.fixture(scope="module", params=STORES)
def fuzzed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fuzzed]:
    tmp = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    with store_url_for(request.param, tmp) as url:
        store = open_store(url)
        engine = sql_engine(url)
        try:
            recorded(store, url, tmp)
            yield Fuzzed(request.param, url, store, engine, _cells(engine))
        finally:
            engine.dispose()
            store.close()


def _cells(engine: Engine) -> list[Cell]:
    out: list[Cell] = []
    with engine.connect() as conn:
        for name, (table, key) in TABLES.items():
            rows = conn.execute(text(f"SELECT {', '.join(key)} FROM {name}")).all()
            for row in rows:
                out.extend(Cell(name, tuple(row), c.name) for c in table.columns)
    return out


def _typed_values(table: str, column: str, kind: str) -> st.SearchStrategy[Any]:
    """Values of the column's type (PostgreSQL refuses others), NULL included."""
    col_type = TABLES[table][0].c[column].type
    if isinstance(col_type, Integer):
        base: st.SearchStrategy[Any] = st.integers(-(2**31), 2**31 - 1)
    elif isinstance(col_type, Float):
        base = st.floats(allow_nan=False, width=64)
    else:
        json_text = st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=6), inner, max_size=3)
            ),
            max_leaves=6,
        ).map(json.dumps)
        alphabet = st.characters(exclude_characters="\x00", exclude_categories=("Cs",))
        base = st.text(alphabet, max_size=24) | json_text
    return st.none() | base


def _values(table: str, column: str, kind: str, original: Any) -> st.SearchStrategy[Any]:
    """Any value on SQLite (it keeps what it is given), typed ones on PostgreSQL;
    and near misses of the original (one more, one character more)."""
    near: list[Any] = []
    if isinstance(original, bool):
        pass
    elif isinstance(original, int):
        near = [original + 1, original - 1]
    elif isinstance(original, float):
        near = [original + 0.5, original * 2 + 1]
    elif isinstance(original, str):
        near = [original + "x", original[:-1], original.upper()]
    typed = _typed_values(table, column, kind)
    values = typed | st.sampled_from(near) if near else typed
    if kind == "sqlite":
        values = values | st.integers() | st.floats(allow_nan=False) | st.binary(max_size=6)
        values = values | st.text(max_size=12)
    return values


def _read(conn: Any, cell: Cell, key: tuple[Any, ...] | None = None) -> tuple[bool, Any]:
    clause, params = cell.where(key)
    row = conn.execute(text(f"SELECT {cell.column} FROM {cell.table} WHERE {clause}"), params)
    found = row.all()
    return (bool(found), found[0][0] if found else None)


def _same(column: str, a: Any, b: Any) -> bool:
    """The cell reads the same (a JSON text: the same canonical JSON)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if a == b:
        return True
    if column in JSON_COLUMNS and isinstance(a, str):
        try:
            return bool(canonical_json(json.loads(a)) == canonical_json(json.loads(b)))
        except (TypeError, ValueError):
            return False
    return False


def _write(engine: Engine, cell: Cell, value: Any, key: tuple[Any, ...] | None = None) -> bool:
    clause, params = cell.where(key)
    try:
        with engine.begin() as conn:
            done = conn.execute(
                text(f"UPDATE {cell.table} SET {cell.column} = :v WHERE {clause}"),
                {**params, "v": value},
            )
            return bool(done.rowcount == 1)
    except (DBAPIError, StatementError, OverflowError):
        return False  # refused by the database (type, NOT NULL, a key taken): no edit


def _commands(run_id: str, as_json: bool) -> list[list[str]]:
    j = ["--json"] if as_json else []
    return [
        ["verify", "--all", *j],
        ["runs", *j],
        ["show", run_id, *j],
        ["gates", *j],
        ["facts", run_id, *j],
        ["report", run_id, *(["--format", "json"] if as_json else [])],
    ]


def _run_of(cell: Cell) -> str:
    if cell.table == "gates":
        return str(cell.key[0]).rsplit("-g", 1)[0]
    return str(cell.key[0])


def _no_traceback(fuzzed: Fuzzed, cell: Cell, value: Any, as_json: bool) -> None:
    for args in _commands(_run_of(cell), as_json):
        res = runner.invoke(app, [*args, "--db", fuzzed.url])
        what = f"converge {' '.join(args)} after {cell} = {value!r}"
        assert res.exception is None or isinstance(res.exception, SystemExit), (
            f"{what}: {res.exception!r}"
        )
        assert "Traceback" not in res.output, f"{what}:\n{res.output}"
        if res.exit_code != 0 and args[0] != "verify":
            # a refusal is one line on stderr, never a dump
            errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
            assert errors, f"{what}: exit {res.exit_code} without an error line:\n{res.output}"


def _named(fuzzed: Fuzzed, cell: Cell, value: Any) -> None:
    reports = [r for r in fuzzed.store.verify_all() if not r.ok]
    what = f"{cell} = {value!r}"
    assert reports, f"verify --all did not see {what}"
    if cell.column in BY_THE_CHAIN or cell.table == "audit_events":
        return  # the chain reports it as a changed, missing or inserted row
    reasons = " | ".join(str(r.reason) for r in reports)
    named = f"({cell.column})" in reasons or f"{cell.table}.{cell.column}" in reasons
    if cell.table == "gates" and cell.column == "run_id":
        named = "missing" in reasons or "never opened" in reasons
    if cell.table == "runs" and cell.column == "status":
        named = named or "a queued run holds events" in reasons
    assert named, f"verify did not name {cell.column} for {what}: {reasons}"


def test_random_cells_never_silence_the_tools_and_every_change_is_named(fuzzed: Fuzzed) -> None:
    @settings(
        max_examples=SWEEP or EXAMPLES[fuzzed.kind],
        deadline=None,
        derandomize=not SWEEP,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def edit_one_cell(data: st.DataObject) -> None:
        cell = data.draw(st.sampled_from(fuzzed.cells), label="cell")
        with fuzzed.sql.connect() as conn:
            _found, original = _read(conn, cell)
        value = data.draw(_values(cell.table, cell.column, fuzzed.kind, original), label="value")
        as_json = data.draw(st.booleans(), label="json")
        if not _write(fuzzed.sql, cell, value):
            return
        moved = cell.moved_key(value)
        try:
            with fuzzed.sql.connect() as conn:
                found, now = _read(conn, cell, moved)
            assert found
            changed = not _same(cell.column, original, now)
            _no_traceback(fuzzed, cell, value, as_json)
            if changed and (cell.table, cell.column) not in UNCHECKED:
                _named(fuzzed, cell, value)
        finally:
            assert _write(fuzzed.sql, cell, original, moved), f"could not restore {cell}"
        assert all(r.ok for r in fuzzed.store.verify_all()), f"{cell} not restored"

    edit_one_cell()
