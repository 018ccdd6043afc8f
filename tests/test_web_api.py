"""The inbox's JSON API: who may decide, what each refusal answers, exactly-once decisions."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from audit.people import add_token
from audit.store import SqlRunStore
from converge.jobs import load_job
from converge.web import create_app
from tests.faultfixtures import opened
from tests.webfixtures import quorum_job, run_job, served, settle


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlRunStore]:
    with opened(str(tmp_path / "api.db")) as s:
        yield s


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


# -- time travel (issue 24): fork a run at a cycle, diff two runs ------------------------
OSCILLATOR = Path(__file__).resolve().parent.parent / "examples" / "oscillator" / "job.yaml"


def test_forking_over_the_api_takes_an_approver_and_chains_the_link_diff_takes_a_token(
    store: SqlRunStore,
) -> None:
    parent = run_job(load_job(OSCILLATOR), store).run_id  # cycle budget 10
    viewer = add_token(store, "victor", "viewer")
    alice = add_token(store, "alice", "approver")
    fork = f"/api/runs/{parent}/fork"
    with served(store) as base:
        bare = httpx.post(base + fork, json={"cycle": 4})
        seen = httpx.post(base + fork, json={"cycle": 4}, headers=_bearer(viewer))
        beyond = httpx.post(base + fork, json={"cycle": 99}, headers=_bearer(alice))
        done = httpx.post(
            base + fork, json={"cycle": 4, "max_cycles": 12}, headers=_bearer(alice), timeout=60
        )
        child = done.json()["run_id"]
        stopped = _followed_to_its_stop(f"{base}/api/runs/{child}", _bearer(viewer))
        diff = f"{base}/api/runs/{parent}/diff/{child}"
        unread = httpx.get(diff)
        read = httpx.get(diff, headers=_bearer(viewer))
        shown = httpx.get(f"{base}/api/runs/{child}", headers=_bearer(viewer))
        listed = httpx.get(f"{base}/api/runs", headers=_bearer(viewer))
    assert (bare.status_code, seen.status_code) == (401, 403)
    assert "may not fork runs" in seen.json()["detail"]
    assert beyond.status_code == 400 and "cannot fork it at cycle 99" in beyond.json()["detail"]
    assert [r.run_id for r in store.runs()] == [child, parent]  # refusals recorded nothing
    assert done.status_code == 202, done.text  # recorded, run by the server's workers
    body = done.json()
    assert body["forked_from"] == {"run": parent, "cycle": 4}
    assert (body["status"], body["url"]) == ("queued", f"/runs/{child}")
    assert (stopped["kind"], stopped["cycles"]) == ("cycle_budget_exhausted", 12)
    assert store.verify(child).ok and store.verify(parent).ok
    assert store.events(child)[0].payload["forked_from"]["run"] == parent  # in the chain
    assert shown.json()["forked_from"]["cycle"] == 4
    assert {r["run_id"]: r["forked_from"] for r in listed.json()}[parent] is None
    assert unread.status_code == 401
    assert read.status_code == 200
    assert [f["id"] for f in read.json()["facts"]["only_b"]] == ["pong#5", "ping#6"]
    assert "B is a fork of the other run at cycle 4" in read.json()["why"]


def _followed_to_its_stop(url: str, headers: dict[str, str]) -> dict[str, Any]:
    """``GET url`` (a run) until the run has stopped, as a client following a fork
    would (60 s at most); the run's last answer."""
    deadline = time.monotonic() + 60
    while True:
        run = httpx.get(url, headers=headers).json()["run"]
        if run["status"] not in ("queued", "running") or time.monotonic() > deadline:
            return dict(run)
        threading.Event().wait(0.05)


def _sign_in(client: TestClient, token: str) -> str:
    """Sign in through the login form; the CSRF token of the pages' forms."""
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    done = client.post("/login", data={"csrf": csrf.group(1), "token": token, "next": "/runs"})
    form = re.search(r'name="csrf" value="([^"]+)"', done.text)
    assert done.status_code == 200 and form is not None
    return form.group(1)


def test_the_run_page_forks_for_an_approver_and_links_the_fork_to_its_parent_and_diff(
    sqlite_store: SqlRunStore,
) -> None:
    parent = run_job(load_job(OSCILLATOR), sqlite_store).run_id
    alice = add_token(sqlite_store, "alice", "approver")
    victor = add_token(sqlite_store, "victor", "viewer")
    anonymous = TestClient(create_app(sqlite_store))
    assert (
        anonymous.post(f"/runs/{parent}/fork", data={"cycle": "4"}, follow_redirects=False)
        .headers["location"]
        .startswith("/login")
    )
    viewer = TestClient(create_app(sqlite_store))
    viewer_csrf = _sign_in(viewer, victor)
    assert 'id="fork-form"' not in viewer.get(f"/runs/{parent}").text
    assert (
        viewer.post(f"/runs/{parent}/fork", data={"csrf": viewer_csrf, "cycle": "4"}).status_code
        == 403
    )
    client = TestClient(create_app(sqlite_store))
    csrf = _sign_in(client, alice)
    assert 'id="fork-form"' in client.get(f"/runs/{parent}").text
    forged = client.post(f"/runs/{parent}/fork", data={"csrf": "forged", "cycle": "4"})
    assert forged.status_code == 403
    assert len(sqlite_store.runs()) == 1  # nothing forked without an approver's form
    done = client.post(
        f"/runs/{parent}/fork",
        data={"csrf": csrf, "cycle": "4", "max_cycles": "12"},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text
    child = done.headers["location"].removeprefix("/runs/")
    assert sqlite_store.events(child)[0].payload["forked_from"]["cycle"] == 4
    settle(client.app)  # the fork runs on the server's workers, not in the request
    page = client.get(f"/runs/{child}").text
    assert f'forked from <a href="/runs/{parent}">{parent}</a> at cycle 4' in page
    assert f'id="diff-parent" href="/runs/{parent}/diff/{child}"' in page
    assert f'<a href="/runs/{child}">{child}</a> at cycle 4' in client.get(f"/runs/{parent}").text
    assert (
        f'fork of <a href="/runs/{parent}">{parent[:8]}</a> at cycle 4' in client.get("/runs").text
    )
    diff = viewer.get(f"/runs/{parent}/diff/{child}")  # read-only: viewers too
    assert diff.status_code == 200
    assert "B is a fork of the other run at cycle 4" in diff.text
    assert "pong#5" in diff.text and "ping#6" in diff.text
