"""A small commit on PostgreSQL in one statement (audit.trail._head_cas): the run's head moved by a
compare-and-set against the head this process last wrote, with the batch's rows,
its fact chunk and its pending ledger head.

Each cycle of a run is one such statement, not a locking transaction; the rows,
chunks and ledger heads it writes verify and resume as the locking write's do,
for small batches (a parameter per value) and larger ones (arrays), with payloads
that need escaping. A head moved by another writer, a transaction of this process
that rolled back, a superseding claim and a deleted run all make the
compare-and-set miss: the locking write takes over (chaining again, or raising
``RunSuperseded`` / ``RunNotFound``, nothing written). SQLite never takes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import audit.trail._events
import audit.trail._head_cas
from audit import SqlRunStore, open_store
from audit.trail._head_cas import SCALAR_ROWS, append_known
from engine import Budget, Context, Engine, Proposal, suggestor
from engine.errors import RunNotFound, RunSuperseded
from engine.store import AuditEvent, RunHeader
from tests.ledgerfixtures import T0, assert_ledger_in_order, pg_url, recorded_heads, run

__all__ = ["pg_url", "recorded_heads"]  # fixtures, used by name

ODD = 'tab\there, newline\nthere, back\\slash, "quotes", é😀\u2028, {"json": [1]}'


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How many commits took the one statement (``cas``, ``missed``: it moved no
    row) and how many locked the run's row (``locked``)."""
    seen = {"cas": 0, "missed": 0, "locked": 0}
    execute, lock_run = audit.trail._head_cas._execute, audit.trail._events.lock_run

    def counted_execute(*args: Any) -> int:
        moved = execute(*args)
        seen["cas" if moved else "missed"] += 1
        return moved

    def counted_lock(*args: Any) -> Any:
        seen["locked"] += 1
        return lock_run(*args)

    monkeypatch.setattr(audit.trail._head_cas, "_execute", counted_execute)
    monkeypatch.setattr(audit.trail._events, "lock_run", counted_lock)
    return seen


@pytest.fixture
def store_url(pg_url: str) -> str:
    """PostgreSQL alone (the head's compare-and-set is its path): conftest's ``store``."""
    return pg_url


def _start(store: SqlRunStore, run_id: str) -> None:
    store.start_run(RunHeader(run_id, None, None, ("a",), T0), [])
    store.append_events(run_id, [AuditEvent("cycle_started", 1, {}, T0 + 1)])  # locks: first


def _cycle(store: SqlRunStore, run_id: str, cycle: int, n: int = 1) -> None:
    events = [AuditEvent("note", cycle, {"i": i, "text": ODD}, T0 + cycle) for i in range(n)]
    store.append_events(run_id, events)


def _ok(store: SqlRunStore, run_id: str) -> None:
    report = store.verify(run_id)
    assert report.ok, str(report)


@suggestor(name="burst", dependencies=["n"])
def burst(ctx: Context) -> list[Proposal]:
    """Many facts per cycle (more rows than SCALAR_ROWS), with text that needs escaping."""
    last = ctx.get("n")[-1].content
    if last >= 60:
        return []
    return [Proposal("n", last + 1)] + [
        Proposal("odd", f"{ODD} {last}.{i}") for i in range(SCALAR_ROWS + 3)
    ]


def test_each_cycle_of_a_run_is_one_statement_and_the_ledger_gets_every_head(
    pg_url: str, calls: dict[str, int], recorded_heads: list[tuple[str, int, str]]
) -> None:
    store = open_store(pg_url)
    run(store, "cas-run", cycles=40)
    assert calls["cas"] >= 35 and calls["missed"] == 0
    assert calls["locked"] <= 5  # the first cycle, a checkpoint, the end
    _ok(store, "cas-run")
    assert_ledger_in_order(store, recorded_heads)
    assert "cas-run" not in store.run_heads  # a process serving many runs keeps none it ended
    store.close()


def test_large_batches_with_odd_payloads_verify_and_resume_from_their_chunks(
    store: SqlRunStore, calls: dict[str, int]
) -> None:
    engine = Engine(budget=Budget(max_cycles=30), store=store, checkpoint_every=5)
    result = engine.register(burst).run({"n": [0]}, run_id="burst")  # the budget stops it
    assert calls["cas"] >= 20
    _ok(store, "burst")
    facts = [(f.key, f.content) for f in result.context.facts()]
    assert [(f.key, f.content) for f in store.facts("burst")] == facts
    checkpoint = store.load_checkpoint("burst")  # its fact chunks checked against its digest
    assert checkpoint["facts_from_chunks"] and len(checkpoint["facts"]) == len(facts)
    _start(store, "events")
    for cycle in range(2, 5):
        _cycle(store, "events", cycle, n=SCALAR_ROWS + 4)  # arrays
        _cycle(store, "events", cycle, n=SCALAR_ROWS)  # a parameter per value
    _ok(store, "events")
    assert [e.payload["text"] for e in store.events("events", ["note"])] == [ODD] * (
        3 * (2 * SCALAR_ROWS + 4)
    )


def test_a_head_moved_by_another_writer_is_chained_again_under_the_lock(
    pg_url: str, store: SqlRunStore, calls: dict[str, int]
) -> None:
    _start(store, "shared")
    _cycle(store, "shared", 2)
    other = open_store(pg_url)
    _cycle(other, "shared", 3)  # another process moved the head
    other.close()
    _cycle(store, "shared", 4)
    assert calls["missed"] == 1  # then the locking write chained it after cycle 3
    _cycle(store, "shared", 5)
    assert calls["cas"] >= 2
    _ok(store, "shared")
    assert [e.cycle for e in store.events("shared", ["note"])] == [2, 3, 4, 5]


def test_a_head_of_a_transaction_rolled_back_is_never_written_after(
    store: SqlRunStore, calls: dict[str, int]
) -> None:
    _start(store, "rolled")
    _head, seq, facts = store.run_heads["rolled"]
    store.run_heads["rolled"] = ("f" * 64, seq + 1, facts)  # as a commit that rolled back
    _cycle(store, "rolled", 2)
    assert calls["missed"] == 1
    assert store.run("rolled").last_seq == seq + 1
    _ok(store, "rolled")


def test_a_superseding_claim_refuses_the_write_and_nothing_is_written(
    store: SqlRunStore, calls: dict[str, int]
) -> None:
    _start(store, "fenced")
    _cycle(store, "fenced", 2)
    before = store.run("fenced").last_seq
    with store.transaction() as conn:  # another process claimed the run
        conn.execute(text("UPDATE runs SET epoch = epoch + 1 WHERE run_id = 'fenced'"))
    with pytest.raises(RunSuperseded):
        _cycle(store, "fenced", 3)
    assert calls["missed"] == 1
    assert store.run("fenced").last_seq == before
    with store.transaction(write=False) as conn:
        pending = conn.execute(
            text("SELECT max(last_seq) FROM ledger_pending WHERE run_id = 'fenced'")
        ).scalar()
    assert pending is None or pending <= before


def test_a_deleted_run_raises_run_not_found(store: SqlRunStore, calls: dict[str, int]) -> None:
    _start(store, "gone")
    with store.transaction() as conn:
        conn.execute(text("DELETE FROM runs WHERE run_id = 'gone'"))
    with pytest.raises(RunNotFound):
        _cycle(store, "gone", 2)
    assert calls["missed"] == 1


def test_sqlite_keeps_the_locking_write(tmp_path: Path) -> None:
    lite = open_store(str(tmp_path / "lite.db"))
    _start(lite, "lite")
    assert "lite" in lite.run_heads
    assert not append_known(lite, "lite", [AuditEvent("note", 2, {}, T0 + 2)])
    lite.close()


def test_an_inline_ledger_keeps_the_locking_write(store: SqlRunStore) -> None:
    store.ledger_timing.delay = 0.0  # each commit appends to the ledger under its lock
    _start(store, "inline")
    assert not append_known(store, "inline", [AuditEvent("note", 2, {}, T0 + 2)])
    _ok(store, "inline")
