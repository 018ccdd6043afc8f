"""The inbox's JSON API: who may decide, what each refusal answers, exactly-once decisions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from audit import open_store
from audit.store import SqlRunStore
from audit.tokens import add_token
from tests.hitlfixtures import STORES, opened_store
from tests.webfixtures import quorum_job, run_job, served


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlRunStore]:
    yield from opened_store(request.param, tmp_path)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlRunStore]:
    s = open_store(str(tmp_path / "api.db"))
    try:
        yield s
    finally:
        s.close()


def _paused_gate(store: SqlRunStore) -> str:
    result = run_job(quorum_job(1), store)
    assert result.stop_reason.kind_code() == "hitl_gate_pending"
    return store.gates(pending=True)[0].gate_id


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_api_answers_401_without_a_token_or_with_an_unknown_one(
    sqlite_store: SqlRunStore,
) -> None:
    gate_id = _paused_gate(sqlite_store)
    with served(sqlite_store) as base:
        bare = httpx.get(f"{base}/api/gates")
        forged = httpx.post(
            f"{base}/api/gates/{gate_id}/decision",
            json={"approved": True},
            headers=_bearer("cvg_not-a-token"),
        )
    assert bare.status_code == 401
    assert "Authorization: Bearer" in bare.json()["detail"]
    assert forged.status_code == 401
    assert forged.json()["detail"] == "unknown, expired or revoked API token"
    assert sqlite_store.get_gate(gate_id).status == "pending"


def test_a_viewer_token_reads_gates_but_gets_403_when_it_decides(
    sqlite_store: SqlRunStore,
) -> None:
    gate_id = _paused_gate(sqlite_store)
    viewer = add_token(sqlite_store, "victor", "viewer")
    with served(sqlite_store) as base:
        listed = httpx.get(f"{base}/api/gates", headers=_bearer(viewer))
        decided = httpx.post(
            f"{base}/api/gates/{gate_id}/decision", json={"approved": True}, headers=_bearer(viewer)
        )
    assert [g["gate_id"] for g in listed.json()] == [gate_id]
    assert decided.status_code == 403
    assert "viewer" in decided.json()["detail"]
    assert sqlite_store.get_gate(gate_id).status == "pending"


def test_an_unknown_gate_is_404_and_a_decided_one_is_409_naming_who_decided(
    sqlite_store: SqlRunStore,
) -> None:
    gate_id = _paused_gate(sqlite_store)
    alice = add_token(sqlite_store, "alice")
    bob = add_token(sqlite_store, "bob")
    with served(sqlite_store) as base:
        unknown = httpx.post(
            f"{base}/api/gates/nope-g1/decision", json={"approved": True}, headers=_bearer(alice)
        )
        first = httpx.post(
            f"{base}/api/gates/{gate_id}/decision",
            json={"approved": True, "reason": "looks right"},
            headers=_bearer(alice),
            timeout=60,
        )
        second = httpx.post(
            f"{base}/api/gates/{gate_id}/decision",
            json={"approved": False, "reason": "no"},
            headers=_bearer(bob),
        )
    assert unknown.status_code == 404
    assert "nope-g1" in unknown.json()["detail"]
    assert first.status_code == 202
    body = first.json()
    assert (body["status"], body["decided_by"]) == ("approved", "alice")
    assert body["run"]["url"] == f"/runs/{body['run_id']}"
    assert second.status_code == 409
    assert "already decided (approved by alice" in second.json()["detail"]
    # the resume ran in the server's pool, not in the request
    run = sqlite_store.run(body["run_id"])
    assert (run.status, run.kind) == ("stopped", "converged")


def test_eight_concurrent_decisions_on_one_gate_give_one_202_and_seven_409(
    store: SqlRunStore,
) -> None:
    gate_id = _paused_gate(store)
    tokens = [add_token(store, f"approver{i}") for i in range(8)]
    barrier = threading.Barrier(8)
    with served(store) as base:

        def post(token: str) -> httpx.Response:
            with httpx.Client(timeout=120) as client:
                barrier.wait(timeout=60)
                return client.post(
                    f"{base}/api/gates/{gate_id}/decision",
                    json={"approved": True, "reason": None},
                    headers=_bearer(token),
                )

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(post, tokens))
    codes = sorted(r.status_code for r in answers)
    assert codes == [202] + [409] * 7, [r.text for r in answers]
    [winner] = [r.json() for r in answers if r.status_code == 202]
    gate = store.get_gate(gate_id)
    decided = store.events(gate.run_id, kinds=["gate_decided"])
    assert len(decided) == 1
    assert decided[0].payload["by"] == gate.decided_by == winner["decided_by"]
    assert store.run(gate.run_id).status == "stopped"
    assert store.verify(gate.run_id).ok
