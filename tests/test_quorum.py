"""Quorum on a gate: N distinct approvals decide it, one rejection rejects it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from audit.people import add_token, cast_vote
from audit.store import SqlRunStore
from converge.cli import app
from converge.decisions import decide
from converge.errors import JobFileError
from converge.jobs import parse_job
from engine import GateAlreadyDecided, GateDecision
from engine.errors import DuplicateVote
from gates import require_approval
from tests.faultfixtures import opened
from tests.hitlfixtures import STORES, store_url_for
from tests.webfixtures import QUORUM_JOB, quorum_job, run_job, served, settle

runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    with opened(str(tmp_path / "quorum.db")) as s:
        yield s


def _gate(store: SqlRunStore, required: int = 2) -> str:
    result = run_job(quorum_job(required), store)
    assert result.stop_reason.kind_code() == "hitl_gate_pending"
    return store.gates(pending=True)[0].gate_id


def test_one_approval_of_two_required_leaves_the_gate_pending_with_the_vote_in_the_chain(
    store: SqlRunStore,
) -> None:
    gate_id = _gate(store)

    report = decide(store, gate_id, GateDecision.approve(by="alice", reason="fine by me"))

    assert report.result is None
    assert (report.required, report.still_needed) == (2, 1)
    gate = store.get_gate(gate_id)
    assert gate.status == "pending"
    assert store.run(gate.run_id).status == "paused"
    [vote] = store.events(gate.run_id, kinds=["gate_vote"])
    assert vote.payload == {
        "gate_id": gate_id,
        "by": "alice",
        "approved": True,
        "reason": "fine by me",
        "approvals": 1,
        "required": 2,
    }
    assert store.events(gate.run_id, kinds=["gate_decided"]) == []
    assert store.verify(gate.run_id).ok


def test_the_second_distinct_approval_decides_the_gate_and_resumes_the_run(
    store: SqlRunStore,
) -> None:
    gate_id = _gate(store)
    decide(store, gate_id, GateDecision.approve(by="alice"))

    report = decide(store, gate_id, GateDecision.approve(by="bob", reason="agreed"))

    assert report.result is not None
    assert report.result.stop_reason.kind_code() == "converged"
    gate = store.get_gate(gate_id)
    assert (gate.status, gate.decided_by) == ("approved", "alice, bob")
    [decided] = store.events(gate.run_id, kinds=["gate_decided"])
    assert decided.payload["by"] == "alice, bob" and decided.payload["approved"] is True
    assert store.run(gate.run_id).status == "stopped"
    assert store.verify(gate.run_id).ok


def test_a_rejection_after_one_approval_rejects_the_gate(store: SqlRunStore) -> None:
    gate_id = _gate(store)
    decide(store, gate_id, GateDecision.approve(by="alice"))

    report = decide(store, gate_id, GateDecision.reject(by="carol", reason="not ours"))

    assert report.result is not None
    gate = store.get_gate(gate_id)
    assert (gate.status, gate.decided_by, gate.reason) == ("rejected", "carol", "not ours")
    [decided] = store.events(gate.run_id, kinds=["gate_decided"])
    assert decided.payload["approved"] is False
    assert [f.key for f in store.facts(gate.run_id)].count("hitl.rejected") == 1
    with pytest.raises(GateAlreadyDecided):
        decide(store, gate_id, GateDecision.approve(by="bob"))


def test_the_same_person_approving_twice_is_refused_and_counts_once(store: SqlRunStore) -> None:
    gate_id = _gate(store)
    decide(store, gate_id, GateDecision.approve(by="alice"))

    with pytest.raises(DuplicateVote, match="alice already voted"):
        decide(store, gate_id, GateDecision.approve(by="alice"))

    gate = store.get_gate(gate_id)
    assert gate.status == "pending"
    assert len(store.events(gate.run_id, kinds=["gate_vote"])) == 1


def _deciding_vote_cast_then_process_died(store: SqlRunStore, last: GateDecision) -> str:
    # what a process leaves when it dies between recording the deciding vote and
    # resuming the run: decisive votes on a gate that is still pending
    gate_id = _gate(store)
    cast_vote(store, gate_id, GateDecision.approve(by="alice"), 2)
    assert cast_vote(store, gate_id, last, 2).decision is not None
    assert store.get_gate(gate_id).status == "pending"
    return gate_id


def test_the_deciding_voter_repeating_the_vote_applies_it_when_its_process_died(
    store: SqlRunStore,
) -> None:
    gate_id = _deciding_vote_cast_then_process_died(store, GateDecision.approve(by="bob"))

    report = decide(store, gate_id, GateDecision.approve(by="bob", reason="again"))

    assert report.result is not None and report.result.stop_reason.kind_code() == "converged"
    gate = store.get_gate(gate_id)
    assert (gate.status, gate.decided_by) == ("approved", "alice, bob")
    assert len(store.events(gate.run_id, kinds=["gate_vote"])) == 1  # alice's; none added
    assert store.verify(gate.run_id).ok
    with pytest.raises(GateAlreadyDecided):  # applied once
        decide(store, gate_id, GateDecision.approve(by="bob"))


def test_a_repeated_deciding_rejection_rejects_the_gate(store: SqlRunStore) -> None:
    gate_id = _deciding_vote_cast_then_process_died(
        store, GateDecision.reject(by="carol", reason="no")
    )

    decide(store, gate_id, GateDecision.reject(by="carol", reason="no"))

    gate = store.get_gate(gate_id)
    assert (gate.status, gate.decided_by) == ("rejected", "carol")
    assert [f.key for f in store.facts(gate.run_id)].count("hitl.rejected") == 1


def test_only_the_deciding_voter_with_the_same_verdict_may_repeat_it(store: SqlRunStore) -> None:
    gate_id = _deciding_vote_cast_then_process_died(store, GateDecision.approve(by="bob"))

    for other in (
        GateDecision.approve(by="carol"),  # a new voter: the votes already decided
        GateDecision.approve(by="alice"),  # an earlier voter, not the deciding one
        GateDecision.reject(by="bob", reason="on second thought"),  # a changed verdict
    ):
        with pytest.raises(GateAlreadyDecided, match="approved by alice, bob"):
            decide(store, gate_id, other)
    assert store.get_gate(gate_id).status == "pending"


def test_two_of_three_through_the_api_the_same_token_twice_is_409(store: SqlRunStore) -> None:
    gate_id = _gate(store)
    alice, bob = add_token(store, "alice"), add_token(store, "bob")
    url = f"/api/gates/{gate_id}/decision"
    with served(store) as base:
        first = httpx.post(base + url, json={"approved": True}, headers=_bearer(alice))
        again = httpx.post(base + url, json={"approved": True}, headers=_bearer(alice))
        second = httpx.post(base + url, json={"approved": True}, headers=_bearer(bob), timeout=60)
    assert first.status_code == 200
    assert (first.json()["status"], first.json()["still_needed"]) == ("pending", 1)
    assert [a["by"] for a in first.json()["approvals"]] == ["alice"]
    assert again.status_code == 409 and "alice already voted" in again.json()["detail"]
    assert second.status_code == 202
    assert (second.json()["status"], second.json()["decided_by"]) == ("approved", "alice, bob")
    assert store.run(second.json()["run_id"]).status == "stopped"


def test_cli_approve_adds_one_approval_and_says_how_many_are_still_needed(
    store: SqlRunStore, tmp_path: Path
) -> None:
    gate_id = _gate(store, required=3)
    db = store.url.removeprefix("sqlite:///")

    first = runner.invoke(app, ["approve", gate_id, "--by", "alice", "--db", db])
    twice = runner.invoke(app, ["approve", gate_id, "--by", "alice", "--db", db])

    assert first.exit_code == 10, first.output
    assert "1 of 3 approvals; 2 more needed" in first.output
    assert twice.exit_code == 2
    assert "alice already voted" in twice.output
    assert store.get_gate(gate_id).status == "pending"


def test_approvals_required_below_one_is_refused_in_python_and_in_job_files() -> None:
    with pytest.raises(ValueError, match="approvals_required"):
        require_approval(keys=["k"], approvals_required=0)
    with pytest.raises(JobFileError, match="approvals_required") as caught:
        parse_job(QUORUM_JOB % (0, ""), "quorum.yaml")
    assert caught.value.line == 5  # the line of approvals_required


@pytest.mark.parametrize("kind", STORES)
def test_eight_racing_voters_on_a_two_of_eight_gate_decide_it_once(
    kind: str, tmp_path: Path
) -> None:
    with store_url_for(kind, tmp_path) as url, opened(url) as racing:
        gate_id = _gate(racing, required=2)
        barrier = threading.Barrier(8)

        def vote(i: int) -> str:
            barrier.wait(timeout=60)
            try:
                report = decide(racing, gate_id, GateDecision.approve(by=f"approver{i}"))
            except GateAlreadyDecided:
                return "refused"
            return "decided" if report.result is not None else "counted"

        with ThreadPoolExecutor(8) as pool:
            outcomes = sorted(pool.map(vote, range(8)))
        assert outcomes == ["counted", "decided"] + ["refused"] * 6
        gate = racing.get_gate(gate_id)
        assert gate.status == "approved" and len(gate.decided_by or "") > 0
        assert len(racing.events(gate.run_id, kinds=["gate_vote"])) == 1
        assert len(racing.events(gate.run_id, kinds=["gate_decided"])) == 1
        assert racing.verify(gate.run_id).ok


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_inbox_offers_the_deciding_voter_to_apply_a_vote_its_process_did_not(
    store: SqlRunStore,
) -> None:
    import re

    from fastapi.testclient import TestClient

    from converge.web import create_app

    gate_id = _deciding_vote_cast_then_process_died(store, GateDecision.approve(by="bob"))
    pages: dict[str, tuple[TestClient, str]] = {}
    for name in ("alice", "bob"):
        client = TestClient(create_app(store))
        login = client.get("/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', login.text)
        assert csrf is not None
        token = add_token(store, name)
        client.post("/login", data={"csrf": csrf.group(1), "token": token, "next": "/"})
        page = client.get(f"/gates/{gate_id}")
        assert page.status_code == 200 and f'id="who">{name}<' in page.text
        pages[name] = (client, page.text)
    # alice voted but did not decide: nothing to apply; bob cast the deciding vote
    assert 'id="apply-vote"' not in pages["alice"][1] and 'id="voted"' in pages["alice"][1]
    client, text = pages["bob"]
    form = re.search(r'id="apply">.*?name="csrf" value="([^"]+)"', text, re.S)
    assert form is not None
    done = client.post(
        f"/gates/{gate_id}/decision",
        data={"csrf": form.group(1), "decision": "approve", "reason": "", "value": "MIT"},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text
    settle(client.app)  # type: ignore[arg-type]
    gate = store.get_gate(gate_id)
    assert (gate.status, gate.decided_by) == ("approved", "alice, bob")
    assert store.run(gate.run_id).status == "stopped"
    # the answer given when applying goes with the approval
    assert [f.content for f in store.facts(gate.run_id) if f.key == "license.unknown"] == ["MIT"]
