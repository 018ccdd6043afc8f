"""Stores, runs and checks for the ledger sequencer's tests (tests/test_ledger_sequencer*.py)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import audit.ledger._sequencer
import audit.trail._head_cas
from audit import SqlRunStore, open_store
from audit.ledger import pending_count, verify_ledger
from audit.testing import pg_schema
from audit.writing import LedgerTiming
from engine import Budget, Context, Engine, Proposal, suggestor
from tests.pgfixtures import require_pg

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_800_000_000.0


@suggestor(name="tick", dependencies=["n"])
def tick(ctx: Context) -> list[Proposal]:
    """One small commit per cycle: the next number."""
    return [Proposal("n", ctx.get("n")[-1].content + 1)]


class Clock:
    """An injected clock (unix seconds), moved by the test."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "pg"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store's URL: a SQLite file, or a PostgreSQL schema (dropped after)."""
    if request.param == "sqlite":
        yield str(tmp_path / "ledger.db")
        return
    require_pg()
    with pg_schema("converge_seq") as made:
        yield made


@pytest.fixture
def pg_url() -> Iterator[str]:
    require_pg()
    with pg_schema("converge_seq") as made:
        yield made


def delayed(url: str, clock: Clock | None = None, *, delay: float = 3600.0) -> SqlRunStore:
    """A store whose commits leave their heads pending (``delay`` seconds on
    ``clock``: with the default, no pass is ever due but the first)."""
    store = open_store(url)
    # no sequencer thread: the test runs the passes
    store.ledger_timing = LedgerTiming(
        delay=delay, bound=10.0, clock=clock or Clock(), background=False
    )
    return store


@contextmanager
def no_end_pass(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As a process killed before its end-of-run pass: heads stay pending."""
    with monkeypatch.context() as m:
        # the store imports it from the ledger's face where a run ends
        m.setattr("audit.ledger.integrate_own", lambda *a, **k: None)
        yield


def crash(store: SqlRunStore) -> None:
    """Let go of ``store`` as a process killed -9 would: no last pass."""
    store.writer.close()
    store.sql_engine.dispose()


def run(store: SqlRunStore, run_id: str, cycles: int = 5) -> None:
    Engine(budget=Budget(max_cycles=cycles), store=store).register(tick).run(
        {"n": [0]}, run_id=run_id
    )


def ledger_rows(store: SqlRunStore) -> list[tuple[int, str, int, str]]:
    with store.transaction(write=False) as conn:
        rows = conn.execute(text("SELECT seq, run_id, last_seq, head FROM ledger ORDER BY seq"))
        return [(r[0], r[1], r[2], r[3]) for r in rows]


def chain_hash(store: SqlRunStore, run_id: str, seq: int) -> str | None:
    with store.transaction(write=False) as conn:
        query = text("SELECT hash FROM audit_events WHERE run_id = :r AND seq = :s")
        value = conn.execute(query, {"r": run_id, "s": seq}).scalar()
    return None if value is None else str(value)


def assert_ledger_in_order(store: SqlRunStore, heads: list[tuple[str, int, str]]) -> None:
    """Every recorded head once in the ledger, each run's in commit order, each one
    a hash of its run's chain, nothing pending, and everything verifies."""
    rows = ledger_rows(store)
    keys = Counter((r[1], r[2]) for r in rows)
    assert max(keys.values()) == 1, "a head integrated twice"
    assert {(r[1], r[2], r[3]) for r in rows} == set(heads), "a head lost or invented"
    for run_id in {h[0] for h in heads}:
        seqs = [r[2] for r in rows if r[1] == run_id]
        assert seqs == sorted(seqs) and seqs[-1] == store.run(run_id).last_seq
    for _seq, run_id, last_seq, head in rows:
        assert last_seq == 0 or chain_hash(store, run_id, last_seq) == head
    assert pending_count(store) == 0
    with store.transaction(write=False) as conn:
        assert verify_ledger(conn, store.chain_hash).report.ok
    reports = store.verify_all()
    assert all(r.ok and r.reason is None for r in reports), [str(r) for r in reports]


@pytest.fixture
def recorded_heads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, str]]:
    """Every head any commit of this process records pending, as (run_id, last_seq,
    head): through ``record_head`` or in the commit's own statement (audit.trail._head_cas)."""
    heads: list[tuple[str, int, str]] = []
    lock = threading.Lock()
    original = audit.ledger._sequencer.head_recorded

    def spy(store: Any, run_id: str, last_seq: int, head: str) -> None:
        original(store, run_id, last_seq, head)
        with lock:
            heads.append((run_id, last_seq, head))

    # both ways reach it through the store's HeadLedger (audit.ledger.SequencedHeads)
    monkeypatch.setattr(audit.ledger._sequencer, "head_recorded", spy)
    return heads
