"""Exactly once, in the store (issue 28): one claim protocol with a fencing epoch,
a decision whose value any later resume applies, and fact ids unique per run.

Every test runs on SQLite and on PostgreSQL (``CONVERGE_TEST_PG_URL``).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from audit import SqlRunStore, open_store
from audit.tables import SCHEMA_VERSION
from engine import (
    AuditEvent,
    Budget,
    Converged,
    CycleBudgetExhausted,
    Engine,
    Fact,
    GateDecision,
    HitlGatePending,
    Provenance,
    ResumeError,
    RunBusy,
    RunFinished,
    StoreError,
)
from engine.facts import fact_json
from engine.store import PromotedFacts
from tests.hitlfixtures import INITIAL, make_engine
from tests.jobfixtures import tick


def _budget_stopped(store: SqlRunStore, cycles: int = 3) -> str:
    engine = Engine(budget=Budget(max_cycles=cycles), store=store).register(tick)
    result = engine.run(run_id=f"tick-{uuid.uuid4().hex[:10]}")
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    return result.run_id


def _paused(store: SqlRunStore) -> tuple[str, str]:
    result = make_engine(store).run(INITIAL, run_id=f"hitl-{uuid.uuid4().hex[:10]}")
    assert isinstance(result.stop_reason, HitlGatePending)
    return result.run_id, result.stop_reason.gate_id


def test_a_claim_bumps_the_epoch_and_a_second_claim_of_the_same_epoch_loses(
    store: SqlRunStore,
) -> None:
    run_id = _budget_stopped(store)
    other = open_store(store.url)  # another process's store
    try:
        claim = store.claim_resume(run_id, expected_epoch=0)
        assert (claim.epoch, claim.was) == (1, "stopped")
        with pytest.raises(RunBusy):
            other.claim_resume(run_id, expected_epoch=0)
        with pytest.raises(RunBusy):  # it is running now, by a live process
            other.claim_resume(run_id)
    finally:
        other.close()


def test_a_superseded_process_writes_nothing_more_to_the_run(store: SqlRunStore) -> None:
    run_id = _budget_stopped(store)
    first = open_store(store.url)
    second = open_store(store.url)
    try:
        assert first.claim_resume(run_id).epoch == 1
        # its writer looks gone (a pid no process has, its lease expired by the
        # database's clock): the second takes the run over
        now = "extract(epoch from clock_timestamp())" if store.is_postgres else "unixepoch()"
        with second.transaction() as conn:
            conn.execute(text("UPDATE runs SET pid = 2147483646 WHERE run_id = :r"), {"r": run_id})
            conn.execute(
                text(f"UPDATE run_leases SET expires_at = {now} - 10 WHERE run_id = :r"),
                {"r": run_id},
            )
        taken = second.claim_resume(run_id)
        assert (taken.epoch, taken.was) == (2, "crashed")
        before = len(store.events(run_id))
        event = AuditEvent("cycle_started", 9, {"suggestors": []}, 1.0)
        with pytest.raises(StoreError, match="claimed by another process"):
            first.append_events(run_id, [event])
        assert len(store.events(run_id)) == before
        second.append_events(run_id, [event])  # the holder of the claim still writes
        assert len(store.events(run_id)) == before + 1
    finally:
        first.close()
        second.close()


def test_a_run_that_finished_with_nothing_left_to_do_is_not_claimable(
    store: SqlRunStore,
) -> None:
    run_id = _budget_stopped(store)
    result = Engine(store=store).register(tick).resume_run(run_id, Budget(max_cycles=4))
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    gated, gate_id = _paused(store)
    done = make_engine(store).resume(gate_id, GateDecision.approve(by="alice"))
    assert done.stop_reason == Converged()
    with pytest.raises(RunFinished, match=r"already finished \(converged\)"):
        store.claim_resume(gated)


def test_a_resume_that_cannot_start_gives_its_claim_back(store: SqlRunStore) -> None:
    run_id = _budget_stopped(store)
    # other suggestors: the resume is refused after its claim, which it gives back
    with pytest.raises(Exception, match="suggestors differ"):
        make_engine(store).resume_run(run_id)
    assert store.run(run_id).status == "stopped"
    result = Engine(store=store).register(tick).resume_run(run_id, Budget(max_cycles=5))
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert store.verify(run_id).ok


def test_the_value_of_a_decision_whose_decider_died_before_the_claim_is_applied(
    store: SqlRunStore,
) -> None:
    # the window between decide_gate and the claim: the decision (with the human's
    # value) is recorded, no process continued the run; `converge resume RUN` does
    run_id, gate_id = _paused(store)
    decision = GateDecision.approve(by="alice").model_copy(update={"value": {"spdx": "MIT"}})
    store.decide_gate(gate_id, decision, "approved")
    result = make_engine(store).resume_run(run_id)
    assert result.stop_reason == Converged()
    [unknown] = result.context.get("license.unknown")
    assert unknown.content == {"spdx": "MIT"}
    assert [f.content for f in store.facts(run_id, "license.unknown")] == [{"spdx": "MIT"}]
    assert store.verify(run_id).ok


def _promote(store: SqlRunStore, run_id: str, fact: Fact) -> None:
    batch = PromotedFacts(5, 2.0)
    batch.facts.append(fact)
    batch.texts.append(fact_json(fact))
    batch.rows.append(fact_json(fact))
    store.append_events(run_id, [batch])


def test_a_fact_id_written_twice_by_a_writer_bypassing_the_engine_is_named_by_verify(
    store: SqlRunStore,
) -> None:
    # the engine never writes a fact id twice (the fence, crash recovery:
    # tests/test_checkpoints.py); a writer calling the store directly is caught by verify
    run_id = _budget_stopped(store)
    [first] = store.facts(run_id, "n")[:1]
    again = Fact(first.id, first.key, "other content", 1.0, Provenance("tick", 5, "x/5/0", ()))
    _promote(store, run_id, again)
    report = store.verify(run_id)
    assert not report.ok and f"fact {first.id} promoted twice" in (report.reason or "")
    # the same id in another run is another fact
    other = _budget_stopped(store)
    assert store.facts(other, "n")[0].id == first.id
    assert store.verify(other).ok


VERSION_3 = ("ALTER TABLE audit_events DROP COLUMN fact_id", "ALTER TABLE runs DROP COLUMN epoch")
"""What turns today's tables into what version 3 had: no epoch, no fact ids."""


def _older_store(db: Path, version: int, *edits: str) -> str:
    """A SQLite store at ``db`` holding one budget-stopped run, its tables changed by
    ``edits`` (SQL; ``:r`` is the run's id) and marked schema ``version``; the run's id."""
    store = open_store(str(db))
    run_id = _budget_stopped(store)
    store.close()
    engine = create_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        for edit in edits:
            conn.execute(text(edit), {"r": run_id} if ":r" in edit else {})
        conn.execute(
            text("UPDATE converge_meta SET value = :v WHERE key = 'schema_version'"),
            {"v": str(version)},
        )
    engine.dispose()
    return run_id


def _resumed_and_verified(store: SqlRunStore, run_id: str) -> None:
    """The upgraded run resumes to its new budget's stop and still verifies (store closed)."""
    result = Engine(store=store).register(tick).resume_run(run_id, Budget(max_cycles=5))
    assert isinstance(result.stop_reason, CycleBudgetExhausted)
    assert store.verify(run_id).ok
    store.close()


def test_a_version_3_store_is_upgraded_with_its_fact_ids(tmp_path: Path) -> None:
    run_id = _older_store(tmp_path / "v3.db", 3, *VERSION_3)
    store = open_store(str(tmp_path / "v3.db"))
    assert store.verify(run_id).ok
    with store.transaction(write=False) as conn:
        unset = "SELECT count(*) FROM audit_events WHERE fact_id IS NULL AND kind = 'fact_promoted'"
        assert conn.execute(text(unset)).scalar() == 0
    _resumed_and_verified(store, run_id)


def test_a_version_3_store_holding_a_fact_twice_is_refused_naming_it(tmp_path: Path) -> None:
    twice = (
        "INSERT INTO audit_events (run_id, seq, cycle, kind, ts, payload, hash) "
        "SELECT run_id, 1000, cycle, kind, ts, payload, hash FROM audit_events "
        "WHERE run_id = :r AND kind = 'fact_promoted' ORDER BY seq LIMIT 1"
    )
    run_id = _older_store(tmp_path / "v3dup.db", 3, *VERSION_3, twice)
    with pytest.raises(StoreError, match=rf"run {run_id} holds fact .n#0. twice"):
        open_store(str(tmp_path / "v3dup.db"))


def test_a_version_4_store_is_upgraded_without_its_unique_fact_id_index(tmp_path: Path) -> None:
    # what version 4 had: a unique index on the fact ids
    unique = (
        "CREATE UNIQUE INDEX ux_audit_events_fact_id ON audit_events (run_id, fact_id) "
        "WHERE fact_id IS NOT NULL"
    )
    run_id = _older_store(tmp_path / "v4.db", 4, unique)
    store = open_store(str(tmp_path / "v4.db"))
    with store.transaction(write=False) as conn:
        indexes = "SELECT name FROM sqlite_master WHERE type = 'index'"
        assert "ux_audit_events_fact_id" not in {r[0] for r in conn.execute(text(indexes))}
        version = "SELECT value FROM converge_meta WHERE key = 'schema_version'"
        assert conn.execute(text(version)).scalar() == str(SCHEMA_VERSION)
    _resumed_and_verified(store, run_id)


def test_a_resume_whose_budget_the_run_has_used_already_is_refused_writing_nothing(
    store: SqlRunStore,
) -> None:
    # as a resume that lost a race reads the run after the winner went on
    run_id = _budget_stopped(store, cycles=3)
    before = len(store.events(run_id))
    with pytest.raises(ResumeError, match="done 3 cycles already: max_cycles 3"):
        Engine(store=store).register(tick).resume_run(run_id, Budget(max_cycles=3))
    assert len(store.events(run_id)) == before
    assert store.run(run_id).status == "stopped"
    result = Engine(store=store).register(tick).resume_run(run_id, Budget(max_cycles=4))
    assert isinstance(result.stop_reason, CycleBudgetExhausted) and result.cycles == 4
