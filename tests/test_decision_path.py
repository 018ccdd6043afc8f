"""What a decision from the inbox passes through (issue 39, docs/architecture.md).

``POST /api/gates/{id}/decision`` as a token-authenticated approver decides a pending
gate, followed from the route to the hand-off of the run's resume
(:func:`tests.pathwalks.decision_path`): it must ask the access policy, record the
decision and hand the resume over once; the deciding vote of a quorum and the gate it
decides are one transaction. How long that path is (its stays and returns) is a
figure for readers, printed into docs/architecture.md by ``docs/hooks/figures.py``,
not a bound the build fails on (issue 55).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import CodeType
from typing import Any

import pytest

from audit import open_store
from audit.people import add_token, votes
from audit.store import SqlRunStore
from engine import GateDecision
from engine.errors import StoreError
from tests.pathwalks import NotingQueue, code, decision_path, describe, returns_of
from tests.webfixtures import quorum_job, run_job

ON_THE_PATH = ("decide", "check_decision", "decision_verdict", "record_decision", "hand_over")
"""In this order: the decision, its rules checked, the access policy asked by them,
the record, the hand-off (each a function name on the path)."""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    s = open_store(str(tmp_path / "decide.db"))
    try:
        yield s
    finally:
        s.close()


def _gate(store: SqlRunStore, required: int) -> str:
    result = run_job(quorum_job(required), store)
    assert result.stop_reason.kind_code() == "hitl_gate_pending"
    return store.gates(pending=True)[0].gate_id


def _check(path: list[CodeType]) -> None:
    names = [c.co_name for c in path]
    missing = [n for n in ON_THE_PATH if n not in names]
    assert not missing, f"the decision never entered {missing}:\n{describe(path)}"
    order = [names.index(n) for n in ON_THE_PATH]
    assert order == sorted(order), f"out of order, want {ON_THE_PATH}:\n{describe(path)}"


def test_a_decision_from_the_inbox_asks_the_policy_records_and_hands_over(
    store: SqlRunStore,
) -> None:
    gate_id = _gate(store, 1)
    token = add_token(store, "alice")
    path, queue = decision_path(store, gate_id, token)
    assert store.get_gate(gate_id).status == "approved"
    assert queue.sent == [(store.get_gate(gate_id).run_id, "resume")]
    _check(path)


def test_the_deciding_vote_of_a_quorum_asks_the_policy_records_and_hands_over(
    store: SqlRunStore,
) -> None:
    from converge.decisions import decide

    gate_id = _gate(store, 2)
    decide(store, gate_id, GateDecision.approve(by="bob"), queue=NotingQueue())  # type: ignore[arg-type]
    token = add_token(store, "alice")
    path, queue = decision_path(store, gate_id, token)
    assert store.get_gate(gate_id).status == "approved"
    assert len(queue.sent) == 1
    _check(path)


def test_the_deciding_vote_and_the_gate_decided_are_one_transaction(
    store: SqlRunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from audit.people import _deciding
    from converge.decisions import decide

    gate_id = _gate(store, 2)
    decide(store, gate_id, GateDecision.approve(by="bob"), queue=NotingQueue())  # type: ignore[arg-type]
    events = len(store.events(store.get_gate(gate_id).run_id))

    def fails(*args: Any, **kwargs: Any) -> Any:
        raise StoreError("the disk is full")

    monkeypatch.setattr(_deciding, "settle_gate", fails)
    queue = NotingQueue()
    with pytest.raises(StoreError):
        decide(store, gate_id, GateDecision.approve(by="carol"), queue=queue)  # type: ignore[arg-type]
    gate = store.get_gate(gate_id)
    assert gate.status == "pending" and queue.sent == []
    assert [v.voter for v in votes(store, gate_id)] == ["bob"]  # carol's vote rolled back
    assert len(store.events(gate.run_id)) == events
    monkeypatch.undo()
    report = decide(store, gate_id, GateDecision.approve(by="carol"), queue=queue)  # type: ignore[arg-type]
    assert report.gate.status == "approved" and report.gate.decided_by == "bob, carol"
    assert len(queue.sent) == 1


def test_a_path_that_skips_the_policy_or_goes_out_of_order_is_reported() -> None:
    def path(*names: str) -> list[CodeType]:
        return [code(n, f"m{i % 2}.py") for i, n in enumerate(names)]

    _check(path(*ON_THE_PATH))
    with pytest.raises(AssertionError, match="decision_verdict"):
        _check(path("decide", "check_decision", "record_decision", "hand_over"))
    with pytest.raises(AssertionError, match="out of order"):
        _check(path("decide", "check_decision", "decision_verdict", "hand_over", "record_decision"))


def test_the_path_counter_counts_returns_to_a_module_left() -> None:
    a1, a2, b1, a3 = code("f", "a"), code("g", "a"), code("h", "b"), code("i", "a")
    assert returns_of([a1, a2]) == 0
    assert returns_of([a1, b1]) == 0
    assert returns_of([a1, b1, a3]) == 1
