"""``converge runs`` lists stop kinds and categories without building the stop models
(audit.queries.read_runs, reasons=False): a reason is still checked to be a stop
reason's JSON of a known kind, and ``--json`` still parses it whole."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import create_engine, update
from typer.testing import CliRunner

from audit import open_store
from audit.queries import RunRow, UnreadableRun, read_runs
from audit.tables import runs
from converge.cli import app
from engine import Context, Engine, Proposal, suggestor


@suggestor(name="seed", dependencies=[])
def seed(ctx: Context) -> list[Proposal]:
    return [Proposal("n", 1)] if not ctx.get("n") else []


def _store(tmp_path: Path) -> tuple[str, list[str]]:
    """A SQLite store of two stopped runs; their ids, newest first."""
    path = str(tmp_path / "runs.db")
    store = open_store(path)
    try:
        for _ in range(2):
            Engine(store=store).register(seed).run()
        ids = [r.run_id for r in store.runs()]
    finally:
        store.close()
    return path, ids


def test_a_listing_reads_kinds_without_parsing_reasons(tmp_path: Path) -> None:
    path, _ = _store(tmp_path)
    store = open_store(path, read_only=True)
    try:
        listed = read_runs(store, reasons=False)
        parsed = read_runs(store)
    finally:
        store.close()
    rows = [r for r in listed if isinstance(r, RunRow)]
    typed = [r for r in parsed if isinstance(r, RunRow)]
    assert len(rows) == len(typed) == 2
    assert [(r.run_id, r.kind, r.category) for r in rows] == [
        (r.run_id, r.kind, r.category) for r in typed
    ]
    assert [r.stop_reason for r in rows] == [None, None]
    assert [r.stop_reason and r.stop_reason.kind_code() for r in typed] == ["converged"] * 2


def test_a_reason_of_no_known_kind_is_one_error_line_in_the_listing(tmp_path: Path) -> None:
    path, ids = _store(tmp_path)
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        bad = json.dumps({"kind": "no_such_stop"})
        conn.execute(update(runs).where(runs.c.run_id == ids[0]).values(reason=bad))
    engine.dispose()
    store = open_store(path, read_only=True)
    try:
        listed = read_runs(store, reasons=False)
    finally:
        store.close()
    assert isinstance(listed[0], UnreadableRun) and listed[0].error.column == "reason"
    assert isinstance(listed[1], RunRow)
    for args in (["runs"], ["runs", "--by", "kind"], ["runs", "--json"]):
        res = CliRunner().invoke(app, [*args, "--db", path])
        assert res.exit_code == 1, (args, res.output)
        assert ids[1] in res.stdout or args[-1] == "kind"
        assert f"run {ids[0]}" in res.stderr and "reason" in res.stderr
