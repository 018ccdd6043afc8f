"""Gate deadlines: a gate past its deadline shows as expired wherever it is listed,
and listing records nothing; the process keeping the deadlines (``converge serve``,
a worker, ``converge gates --expire``) applies its on_timeout decision once, on
time, and sends the run's resume to its queue; a decider arriving late applies it
too, still once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from fastapi.testclient import TestClient

from audit.people import add_token
from audit.store import SqlRunStore
from converge.decisions import decide
from converge.service import DeadlineKeeper, LocalRunPool
from converge.web import create_app
from engine import GateAlreadyDecided, GateDecision, GateExpired, GateRecord
from tests.webfixtures import quorum_job, run_job


def _expiring_gate(store: SqlRunStore) -> GateRecord:
    run_job(quorum_job(2, timeout_s=60), store)  # on_timeout: approve
    [gate] = store.gates(pending=True)
    assert gate.expires_at is not None
    return gate


def _after_deadline(gate: GateRecord) -> Callable[[], float]:
    """A clock five seconds past the gate's deadline (the store's own times stay real)."""
    assert gate.expires_at is not None
    late = gate.expires_at + 5
    return lambda: late


def test_listing_a_gate_past_its_deadline_shows_it_expired_and_records_nothing(
    store: SqlRunStore,
) -> None:
    gate = _expiring_gate(store)
    token = add_token(store, "alice", "viewer")
    events_before = len(store.events(gate.run_id))

    app = create_app(store, clock=_after_deadline(gate))
    answer = TestClient(app).get(
        "/api/gates?status=all", headers={"Authorization": f"Bearer {token}"}
    )

    [listed] = answer.json()
    assert listed["status"] == "expired"
    assert store.get_gate(gate.gate_id).status == "pending"
    assert len(store.events(gate.run_id)) == events_before
    assert store.run(gate.run_id).status == "paused"


def test_the_deadline_keeper_applies_on_timeout_on_time_and_resumes_the_run_in_its_pool(
    store: SqlRunStore,
) -> None:
    gate = _expiring_gate(store)
    pool = LocalRunPool(store)
    keeper = DeadlineKeeper(store, pool, clock=_after_deadline(gate))

    assert keeper.tick() == [gate.gate_id]
    pool.wait(timeout=60)
    pool.close()

    assert keeper.tick() == []
    expired = store.get_gate(gate.gate_id)
    assert (expired.status, expired.decided_by) == ("expired", "timeout")
    [decided] = store.events(gate.run_id, kinds=["gate_decided"])
    assert decided.payload["by"] == "timeout" and decided.payload["approved"] is True
    assert store.run(gate.run_id).status == "stopped"
    assert store.verify(gate.run_id).ok


def test_racing_keepers_and_decisions_record_the_timeout_decision_exactly_once(
    store: SqlRunStore,
) -> None:
    gate = _expiring_gate(store)
    barrier = threading.Barrier(8)
    late = _after_deadline(gate)

    def racer(i: int) -> str:
        barrier.wait(timeout=60)
        if i % 2 == 0:
            DeadlineKeeper(store, pool, clock=late).tick()
            return "kept"
        try:
            decide(store, gate.gate_id, GateDecision.approve(by=f"approver{i}"), clock=late)
        except GateExpired:
            return "expired"
        except GateAlreadyDecided:
            return "already"
        return "decided"

    pool = LocalRunPool(store)
    with ThreadPoolExecutor(8) as threads:
        outcomes = list(threads.map(racer, range(8)))
    pool.wait(timeout=60)
    pool.close()

    assert "decided" not in outcomes
    assert store.get_gate(gate.gate_id).status == "expired"
    decided = store.events(gate.run_id, kinds=["gate_decided"])
    assert [e.payload["by"] for e in decided] == ["timeout"]
    assert store.events(gate.run_id, kinds=["gate_vote"]) == []
    assert len(store.events(gate.run_id, kinds=["run_stopped"])) == 1
    assert store.verify(gate.run_id).ok


def test_a_gate_before_its_deadline_stays_pending_after_a_keeper_pass(store: SqlRunStore) -> None:
    gate = _expiring_gate(store)

    assert DeadlineKeeper(store, LocalRunPool(store)).tick() == []
    [listed] = store.gates(pending=True)

    assert listed.gate_id == gate.gate_id and listed.status == "pending"
    assert store.events(gate.run_id, kinds=["gate_decided"]) == []
