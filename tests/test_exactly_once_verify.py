"""``converge verify`` fails naming a fact id written twice in a run (issue 28).

The duplicate is made by hand, as a double recording would leave it: a copy of one
``fact_promoted`` event slipped in after the run's last promotion, every later event
renumbered, the whole chain recomputed (plain sha256), the run's head, seq and
facts count moved along, and a ledger entry appended for the new head. Any unique
index on fact ids (schema version 4 had one) is dropped first (whoever can write
the database can).
So the chain, the outcome columns and the ledger all agree: only a check of
exactly-once itself can see it. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, text

from audit.ledger import append as ledger_append
from audit.trail import GENESIS, event_message, hasher
from engine.facts import canonical_json
from tests.faultfixtures import Stores, fork_cli, make_stores, snapshot, stopped_run
from tests.storecopies import sql_engine


@pytest.fixture(params=["sqlite", "postgresql"])
def stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stores]:
    """Stores of one kind for this test, removed afterwards."""
    with make_stores(request.param, tmp_path) as made:
        yield made


def _drop_unique_indexes(conn: Connection) -> None:
    """Drop every unique index on ``audit_events`` but its primary key."""
    if conn.dialect.name == "postgresql":
        names = conn.execute(
            text(
                "SELECT i.indexname FROM pg_indexes i "
                "JOIN pg_index x ON x.indexrelid = (quote_ident(i.schemaname) || '.' || "
                "quote_ident(i.indexname))::regclass "
                "WHERE i.schemaname = current_schema() AND i.tablename = 'audit_events' "
                "AND x.indisunique AND NOT x.indisprimary"
            )
        ).scalars()
    else:
        names = conn.execute(
            text(
                "SELECT name FROM sqlite_master WHERE type = 'index' "
                "AND tbl_name = 'audit_events' AND sql LIKE 'CREATE UNIQUE%'"
            )
        ).scalars()
    for name in list(names):
        conn.execute(text(f'DROP INDEX "{name}"'))


def duplicate_fact(url: str, run_id: str, fact_id: str, content: Any = None) -> None:
    """Record ``fact_id`` a second time in ``run_id`` (``content`` instead, if given)."""
    engine = sql_engine(url)
    try:
        with engine.begin() as conn:
            _drop_unique_indexes(conn)
            rows = [
                dict(r)
                for r in conn.execute(
                    text("SELECT * FROM audit_events WHERE run_id = :r ORDER BY seq"),
                    {"r": run_id},
                ).mappings()
            ]
            promoted = [i for i, r in enumerate(rows) if r["kind"] == "fact_promoted"]
            [original] = [i for i in promoted if json.loads(rows[i]["payload"])["id"] == fact_id]
            twice = dict(rows[original])
            if content is not None:
                twice["payload"] = canonical_json(
                    {**json.loads(twice["payload"]), "content": content}
                )
            rows.insert(promoted[-1] + 1, twice)
            for row in rows:
                payload = json.loads(row["payload"])
                if row["kind"] == "run_stopped" and "facts_count" in payload:
                    payload["facts_count"] += 1  # the stop counted the facts recorded
                    row["payload"] = canonical_json(payload)
            h, rid, prev = hasher(None), json.dumps(run_id), GENESIS
            for seq, row in enumerate(rows, 1):
                message = event_message(
                    rid, seq, row["kind"], row["cycle"], row["ts"], row["payload"]
                )
                row["seq"], row["hash"] = seq, h(prev, message)
                prev = row["hash"]
            columns = [f'"{c}"' for c in rows[0]]
            names = list(rows[0])
            conn.execute(text("DELETE FROM audit_events WHERE run_id = :r"), {"r": run_id})
            conn.execute(
                text(
                    f"INSERT INTO audit_events ({', '.join(columns)}) "
                    f"VALUES ({', '.join(':' + c for c in names)})"
                ),
                rows,
            )
            conn.execute(
                text(
                    "UPDATE runs SET last_seq = :n, head_hash = :h, facts_count = facts_count + 1 "
                    "WHERE run_id = :r"
                ),
                {"n": len(rows), "h": prev, "r": run_id},
            )
            ledger_append(conn, h, run_id, len(rows), prev)
    finally:
        engine.dispose()


@pytest.mark.parametrize("changed", [False, True], ids=["same-content", "other-content"])
def test_verify_fails_naming_a_fact_id_written_twice(
    stores: Stores, tmp_path: Path, changed: bool
) -> None:
    run = stopped_run(stores, tmp_path, max_cycles=3)
    before = fork_cli(["verify", run.run_id, "--db", run.url], tmp_path)
    assert before.returncode == 0, before.stdout

    duplicate_fact(run.url, run.run_id, "n#1", {"n": 99, "cycle": 2} if changed else None)

    assert snapshot(run.url, run.run_id).duplicates == ["n#1"]  # the forgery took
    after = fork_cli(["verify", run.run_id, "--db", run.url], tmp_path)
    shown = " ".join(after.stdout.split())
    assert after.returncode == 1, f"verify says: {shown}"
    assert "n#1" in shown, f"verify does not name the duplicate n#1: {shown}"
