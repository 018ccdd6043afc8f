"""The audit store records what runs returned, on SQLite and PostgreSQL.

Every stop category from a real engine run lands in ``runs`` with the same
``StopReason``; gates are decided once; checkpoints and queries round-trip; bad
input gives one clear error.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from audit import SqlRunStore, open_store
from audit.testing import pg_schema, pg_unreachable_reason
from criteria import Blocked, KeyPresent, criterion, invariant
from engine import (
    Budget,
    Context,
    Engine,
    GateAlreadyDecided,
    GateDecision,
    GateNotFound,
    Proposal,
    ResumeError,
    RunBusy,
    RunNotFound,
    RunResult,
    SchemaVersionError,
    StopDecision,
    StopRun,
    StoreError,
    suggestor,
)
from engine.policy import RunStats
from engine.stop import InvariantClass
from gates import require_approval


def pg_or_skip() -> None:
    """Skip when PostgreSQL is unreachable, unless ``CI`` is set: then fail."""
    why = pg_unreachable_reason()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    """A fresh store: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        s = open_store(str(tmp_path / "audit.db"))
        yield s
        s.close()
        return
    pg_or_skip()
    with pg_schema() as url:
        s = open_store(url)
        yield s
        s.close()


# -- small real runs, one per stop category -------------------------------------------


@suggestor(name="double", dependencies=["n"])
def double(ctx: Context) -> list[Proposal]:
    return [Proposal("n", f.content * 2, parents=(f.id,)) for f in ctx.get("n") if f.content < 50]


@suggestor(name="tick")
def tick(ctx: Context) -> list[Proposal]:
    """No dependencies: runs every cycle, a new ``k`` each time (never converges)."""
    return [Proposal("k", ctx.count("k"))]


@suggestor(name="boom", dependencies=["n"])
def boom(ctx: Context) -> list[Proposal]:
    raise RuntimeError("disk on fire")


@suggestor(name="quitter", dependencies=["n"])
def quitter(ctx: Context) -> list[Proposal]:
    raise StopRun("enough for today")


@invariant(name="below_ten", invariant_class=InvariantClass.STRUCTURAL)
def below_ten(ctx: Context) -> str | None:
    return None if ctx.count("k") < 3 else "k reached 3"


@criterion(id="signed_off")
def signed_off(ctx: Context) -> Blocked:
    return Blocked("needs a sign-off", approval_ref="ticket-7")


class AfterTwoCycles:
    """A custom stop policy: stops the run after cycle 2."""

    id = "after_two"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        return StopDecision("too_long", f"cycle {stats.cycle}") if stats.cycle >= 2 else None


def build(name: str, store: SqlRunStore) -> Engine:
    """An engine whose run ends in the category ``name``."""
    budget = Budget(max_cycles=20)
    match name:
        case "converged":
            return Engine(budget=budget, store=store).register(double)
        case "criteria_met":
            return Engine(budget=budget, criteria=[KeyPresent("n", 3)], store=store).register(
                double
            )
        case "budget":
            return Engine(budget=Budget(max_cycles=3), store=store).register(tick)
        case "validation":
            return Engine(budget=budget, invariants=[below_ten], store=store).register(tick)
        case "error":
            return Engine(budget=budget, store=store).register(boom)
        case "cancelled":
            return Engine(budget=budget, store=store).register(quitter)
        case "policy":
            return Engine(budget=budget, stop_policies=[AfterTwoCycles()], store=store).register(
                tick
            )
        case "hitl":
            gate = require_approval(keys=["n"], summary="approve {content}")
            return Engine(budget=budget, gates=[gate], store=store).register(double)
        case "human":
            return Engine(budget=budget, criteria=[signed_off], store=store).register(double)
    raise AssertionError(name)


CATEGORIES = {
    "converged": ("success", "converged"),
    "criteria_met": ("success", "criteria_met"),
    "budget": ("budget", "cycle_budget_exhausted"),
    "validation": ("validation", "invariant_violated"),
    "error": ("error", "error"),
    "cancelled": ("cancelled", "stop_requested"),
    "policy": ("policy", "policy_stopped"),
    "hitl": ("hitl", "hitl_gate_pending"),
    "human": ("human", "human_intervention_required"),
}


def run_one(name: str, store: SqlRunStore) -> RunResult:
    return build(name, store).run({"n": [1]})


@pytest.mark.parametrize("name", sorted(CATEGORIES))
def test_every_stop_category_is_recorded_with_the_reason_run_returned(
    store: SqlRunStore, name: str
) -> None:
    result = run_one(name, store)
    category, kind = CATEGORIES[name]
    assert result.stop_reason.category.value == category
    assert result.stop_reason.kind == kind
    row = store.run(result.run_id)
    assert row.stop_reason == result.stop_reason
    assert row.category == category and row.kind == kind
    assert row.status == ("paused" if name == "hitl" else "stopped")
    assert row.cycles == result.cycles
    assert row.facts_count == len(result.context)
    assert row.facts_root == result.facts_root
    assert [f.id for f in store.facts(result.run_id)] == [f.id for f in result.context]
    assert store.verify(result.run_id).ok
    assert [r.run_id for r in store.runs(category=category)] == [result.run_id]


def test_queries_filter_by_category_kind_job_and_time(store: SqlRunStore) -> None:
    ids = {name: run_one(name, store).run_id for name in ("converged", "budget", "error")}
    assert {r.run_id for r in store.runs()} == set(ids.values())
    assert [r.run_id for r in store.runs(kind="cycle_budget_exhausted")] == [ids["budget"]]
    assert store.runs(category="policy") == []
    assert len(store.runs(limit=2)) == 2
    assert store.runs(since=time.time() + 3600) == []
    newest_first = [r.started_at for r in store.runs()]
    assert newest_first == sorted(newest_first, reverse=True)
    assert store.runs(job="nope") == []
    assert {r.run_id for r in store.runs(status="stopped")} == set(ids.values())


def test_facts_and_lineage_come_back_from_the_trail(store: SqlRunStore) -> None:
    result = run_one("converged", store)
    facts = store.facts(result.run_id)
    assert facts == list(result.context)
    assert store.facts(result.run_id, key="nope") == []
    last = facts[-1]
    graph = store.lineage(result.run_id, last.id)
    assert set(graph.nodes) == {f.id for f in facts}
    assert ("n#0", "n#1") in graph.edges
    assert graph.nodes["n#0"]["fact"].provenance.suggestor == "input"


def test_a_gate_is_decided_once_and_the_second_decision_names_the_first(
    store: SqlRunStore,
) -> None:
    result = run_one("hitl", store)
    gate_id = result.stop_reason.gate_id  # type: ignore[union-attr]
    [gate] = store.gates(pending=True)
    assert gate.gate_id == gate_id and gate.status == "pending"
    decided = store.decide_gate(gate_id, GateDecision.approve(by="alice"), "approved")
    assert decided.status == "approved" and decided.decided_by == "alice"
    with pytest.raises(GateAlreadyDecided) as info:
        store.decide_gate(gate_id, GateDecision.reject(by="bob", reason="no"), "rejected")
    assert info.value.by == "alice" and info.value.status == "approved"
    assert "alice" in str(info.value)
    assert store.gates(pending=True) == []
    assert store.get_gate(gate_id).decided_by == "alice"
    with pytest.raises(GateNotFound):
        store.decide_gate("nope", GateDecision.approve(by="x"), "approved")


def test_a_paused_run_resumes_from_its_checkpoint_in_another_engine(store: SqlRunStore) -> None:
    first = run_one("hitl", store)
    gate_id = first.stop_reason.gate_id  # type: ignore[union-attr]
    header = store.get_run_header(first.run_id)
    assert header.suggestors == ("double",)
    assert store.load_checkpoint(first.run_id)["run_id"] == first.run_id
    # a fresh engine (as another process would build) resumes from the store
    gate = require_approval(keys=["n"], suggestors=["nobody"])
    engine = Engine(budget=Budget(max_cycles=20), gates=[gate], store=store).register(double)
    result = engine.resume(gate_id, GateDecision.approve(by="alice"))
    assert result.stop_reason.kind == "converged"
    row = store.run(first.run_id)
    assert row.status == "stopped" and row.stop_reason == result.stop_reason
    assert store.verify(first.run_id).ok
    kinds = [e.kind for e in store.events(first.run_id)]
    assert "gate_decided" in kinds and "run_resumed" in kinds
    # finished without a resumable stop: the stale checkpoint is gone
    with pytest.raises(ResumeError):
        store.load_checkpoint(first.run_id)


def test_claiming_a_run_twice_is_refused(store: SqlRunStore) -> None:
    result = run_one("budget", store)
    store.claim_resume(result.run_id)
    assert store.run(result.run_id).status == "running"
    with pytest.raises(RunBusy):
        store.claim_resume(result.run_id)
    with pytest.raises(RunNotFound):
        store.claim_resume("no-such-run")


def test_missing_things_raise_their_own_errors(store: SqlRunStore) -> None:
    with pytest.raises(RunNotFound):
        store.get_run_header("nope")
    with pytest.raises(RunNotFound):
        store.run("nope")
    with pytest.raises(RunNotFound):
        store.verify("nope")
    with pytest.raises(GateNotFound):
        store.get_gate("nope")
    with pytest.raises(ResumeError, match="no checkpoint"):
        store.load_checkpoint("nope")


def test_a_duplicate_run_id_is_a_store_error(store: SqlRunStore) -> None:
    engine = build("converged", store)
    engine.run({"n": [1]}, run_id="same")
    result = engine.run({"n": [1]}, run_id="same")
    assert result.stop_reason.kind == "error"
    assert "already exists" in result.stop_reason.message  # type: ignore[union-attr]


def test_a_corrupted_checkpoint_is_a_resume_error(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "a.db"))
    result = run_one("budget", store)
    with sqlite3.connect(tmp_path / "a.db") as con:
        con.execute("UPDATE checkpoints SET data = '{not json' WHERE run_id = ?", (result.run_id,))
    with pytest.raises(ResumeError, match="not valid JSON"):
        store.load_checkpoint(result.run_id)


# -- bad input: one clear error each --------------------------------------------------


def test_a_url_of_no_known_database_is_one_clear_error() -> None:
    with pytest.raises(StoreError, match=r"nosuchdb://x.*"):
        open_store("nosuchdb://x")


def test_an_unreachable_server_is_one_clear_error() -> None:
    with pytest.raises(StoreError, match="cannot open audit store") as info:
        open_store("postgresql+psycopg://nobody:secret@127.0.0.1:1/none")
    assert "secret" not in str(info.value)


def test_an_unwritable_path_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="does not exist") as info:
        open_store(str(blocker / "converge.db"))
    assert str(blocker) in str(info.value)


def test_a_database_of_another_schema_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)")
    with pytest.raises(StoreError, match="'runs' belongs to another schema") as info:
        open_store(str(path))
    assert str(path) in str(info.value)


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    open_store(str(path)).close()
    with sqlite3.connect(path) as con:
        con.execute("UPDATE converge_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="schema version 99"):
        open_store(str(path))


def test_the_default_location_is_converge_db_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CONVERGE_DB", raising=False)
    open_store().close()
    assert (tmp_path / "converge.db").exists()
    monkeypatch.setenv("CONVERGE_DB", str(tmp_path / "env.db"))
    open_store().close()
    assert (tmp_path / "env.db").exists()


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    open_store(str(path)).close()
    engine = create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
    engine.dispose()


def test_stored_json_is_canonical(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "c.db"))
    result = run_one("converged", store)
    with sqlite3.connect(tmp_path / "c.db") as con:
        payloads = [r[0] for r in con.execute("SELECT payload FROM audit_events")]
    for raw in payloads:
        data: Any = json.loads(raw)
        assert raw == json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert store.run(result.run_id).last_seq == len(payloads)


def test_postgresql_compresses_fact_chunks_and_checkpoints_with_lz4() -> None:
    # pglz cost PostgreSQL ~4x the CPU of lz4 on the chunks of a 100k-fact run
    pg_or_skip()
    with pg_schema() as url:
        s = open_store(url)
        try:
            run_one("converged", s)
            with s.sql_engine.connect() as conn:
                methods = dict(
                    conn.execute(
                        text(
                            "SELECT c.relname, a.attcompression FROM pg_attribute a "
                            "JOIN pg_class c ON c.oid = a.attrelid "
                            "WHERE a.attname = 'data' AND c.relnamespace = "
                            "current_schema()::regnamespace"
                        )
                    ).all()
                )
                stored = conn.execute(
                    text("SELECT pg_column_compression(data) FROM fact_chunks")
                ).scalars()
                # every chunk over the TOAST threshold went through lz4
                assert set(stored) <= {None, "lz4"}
        finally:
            s.close()
    assert methods == {"fact_chunks": "l", "checkpoints": "l", "checkpoint_parts": "l"}
