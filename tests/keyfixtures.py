"""Shared pieces of the key and signed-decision tests (tests/test_trust_keys.py,
tests/test_signed_decisions.py): stores of both kinds, a gated job run through
the CLI, a snapshot of everything a write would touch, and a forger's re-chain.

``store_url(kind, tmp_path)`` yields a fresh SQLite file or PostgreSQL schema
URL. ``snapshot(url)`` reads every chained row, gate, vote, ledger entry and the
ledger head: two equal snapshots mean nothing was written in between.
``rechain(url, run_id, key)`` recomputes a run's chain (plain sha256 with
``key=None``, HMAC with the operator's key) and the whole ledger after it, as
someone able to write the database would after editing a row.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, create_engine, inspect, text
from typer.testing import CliRunner, Result

from audit.ledger import entry_message
from audit.trail import GENESIS, event_message, hasher
from audit.url import resolve_url
from converge.cli import app
from tests.hitlfixtures import store_url_for

STORES = ("sqlite", "postgresql")

KEY = "the-operators-audit-key"
"""The audit key of the keyed stores of these tests."""

JOB = """\
name: trust
suggestors: [tests.hitlfixtures:scan, tests.hitlfixtures:count, tests.hitlfixtures:finish]
budget: {max_cycles: %d}
gates: [{hitl: {keys: [license.unknown], summary: "Classify {content[name]}",
                approvals_required: %d%s}}]
initial: {seed: [1]}
"""

UNGATED = """\
name: trust-budget
suggestors: [tests.hitlfixtures:scan, tests.hitlfixtures:count, tests.hitlfixtures:finish]
budget: {max_cycles: 1}
initial: {seed: [1]}
"""

HOOK = ", validate_value: 'tests.exactlyoncejobs:license_value'"
"""The gate keys of a value hook: ``--value MIT`` becomes ``{name, spdx, source}``."""

runner = CliRunner()


@contextmanager
def store_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL of ``kind`` (a SQLite file, or a PostgreSQL schema dropped after)."""
    with store_url_for(kind, tmp_path) as url:
        yield str(url)


def cli(*args: str) -> Result:
    """``converge ARGS`` in this process (the environment as the test set it)."""
    return runner.invoke(app, list(args))


def run_gated(
    url: str, tmp_path: Path, *, required: int = 1, gated: bool = True, extra: str = ""
) -> str:
    """``converge run`` the small gated job into ``url``: the id of its pending gate
    (``extra``: more keys of its ``hitl`` gate, e.g. :data:`HOOK`); with
    ``gated=False`` the job without its gate and one cycle of budget: the id of the
    run, stopped on its budget (resumable)."""
    job = tmp_path / f"trust-{required}-{gated}.yaml"
    job.write_text(JOB % (10, required, extra) if gated else UNGATED)
    res = cli("run", str(job), "--db", url, "--json")
    assert res.exit_code in (3, 10), res.output
    data = json.loads(res.stdout)
    if res.exit_code == 3:
        return str(data["run_id"])
    return str(data["stop_reason"]["gate_id"])


def _sql(url: str, fn: Callable[[Connection], Any]) -> Any:
    engine = create_engine(resolve_url(url))
    try:
        with engine.begin() as conn:
            return fn(conn)
    finally:
        engine.dispose()


def sql(url: str, statement: str, **params: Any) -> list[Any]:
    """Run one SQL statement on the store; its rows (empty for a write)."""

    def go(conn: Connection) -> list[Any]:
        result = conn.execute(text(statement), params)
        return [tuple(r) for r in result] if result.returns_rows else []

    rows: list[Any] = _sql(url, go)
    return rows


def snapshot(url: str) -> dict[str, list[Any]]:
    """Every row a decision, a vote, a claim or a resume would write."""
    queries = {
        "events": "SELECT run_id, seq, kind, payload, hash FROM audit_events ORDER BY run_id, seq",
        "runs": "SELECT run_id, status, epoch, last_seq, head_hash, chain FROM runs "
        "ORDER BY run_id",
        "gates": "SELECT gate_id, status, decided_by, reason FROM gates ORDER BY gate_id",
        "ledger": "SELECT seq, run_id, last_seq, head, hash FROM ledger ORDER BY seq",
        "meta": "SELECT key, value FROM converge_meta ORDER BY key",
        "checkpoints": "SELECT run_id, data FROM checkpoints ORDER BY run_id",
    }

    def read(conn: Connection) -> dict[str, list[Any]]:
        out = {name: [tuple(r) for r in conn.execute(text(q))] for name, q in queries.items()}
        if inspect(conn).has_table("gate_votes"):
            out["votes"] = [
                tuple(r) for r in conn.execute(text("SELECT gate_id, voter FROM gate_votes"))
            ]
        return out

    found: dict[str, list[Any]] = _sql(url, read)
    return found


def rechain(url: str, run_id: str, key: str | None, *, ledger: bool = True) -> None:
    """Recompute ``run_id``'s chain with ``key`` (None: plain sha256, marking the run
    plain), then (``ledger``) the whole ledger, its entries following the runs' heads."""
    h = hasher(None if key is None else key.encode())

    def go(conn: Connection) -> None:
        rid = json.dumps(run_id)
        prev = GENESIS
        rows = conn.execute(
            text(
                "SELECT seq, kind, cycle, ts, payload, hash FROM audit_events "
                "WHERE run_id = :r ORDER BY seq"
            ),
            {"r": run_id},
        ).all()
        old_to_new: dict[str, str] = {}
        for seq, kind, cycle, ts, payload, old in rows:
            prev = h(prev, event_message(rid, seq, kind, cycle, ts, payload))
            old_to_new[str(old)] = prev
            conn.execute(
                text("UPDATE audit_events SET hash = :h WHERE run_id = :r AND seq = :s"),
                {"h": prev, "r": run_id, "s": seq},
            )
        chain = "sha256" if key is None else "hmac-sha256"
        conn.execute(
            text("UPDATE runs SET head_hash = :h, chain = :c WHERE run_id = :r"),
            {"h": prev, "c": chain, "r": run_id},
        )
        if not ledger:
            return
        entries = conn.execute(
            text("SELECT seq, run_id, last_seq, head FROM ledger ORDER BY seq")
        ).all()
        conn.execute(text("DELETE FROM ledger"))
        top = GENESIS
        for seq, entry_run, last_seq, head in entries:
            head = old_to_new.get(head, head) if entry_run == run_id else head
            top = h(top, entry_message(seq, entry_run, last_seq, head))
            conn.execute(
                text(
                    "INSERT INTO ledger (seq, run_id, last_seq, head, hash) "
                    "VALUES (:s, :r, :l, :h, :x)"
                ),
                {"s": seq, "r": entry_run, "l": last_seq, "h": head, "x": top},
            )
        conn.execute(
            text("UPDATE converge_meta SET value = :v WHERE key = 'ledger_head'"),
            {"v": f"{len(entries)}:{top}"},
        )

    _sql(url, go)
