"""Bad input on every endpoint of the inbox: a 4xx with a clear message, nothing recorded."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from audit.people import add_token, votes
from audit.store import SqlRunStore
from converge.web import create_app
from tests.faultfixtures import opened
from tests.webfixtures import logged_in, quorum_job, run_job, vendored_run

MB = 1024 * 1024


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlRunStore]:
    with opened(str(tmp_path / "bad.db")) as s:
        yield s


@pytest.fixture
def gate_id(store: SqlRunStore) -> str:
    run_job(quorum_job(2), store)
    return store.gates(pending=True)[0].gate_id


@pytest.fixture
def token(store: SqlRunStore) -> str:
    return add_token(store, "alice")


@pytest.fixture
def client(store: SqlRunStore) -> TestClient:
    return TestClient(create_app(store))


def _nothing_recorded(store: SqlRunStore, gate_id: str, last_seq: int) -> None:
    gate = store.get_gate(gate_id)
    assert gate.status == "pending"
    assert votes(store, gate_id) == []
    assert store.run(gate.run_id).last_seq == last_seq


def _signed_in(client: TestClient, token: str) -> str:
    """Sign in through the login form; the CSRF token of the pages' forms."""
    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    done = client.post("/login", data={"csrf": csrf.group(1), "token": token, "next": "/"})
    assert done.status_code == 200 and 'id="who">alice<' in done.text
    form = re.search(r'name="csrf" value="([^"]+)"', done.text)
    assert form is not None
    return form.group(1)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"approved": "yes"}, "approved: Input should be a valid boolean"),
        ({}, "approved: Field required"),
        ({"approved": True, "by": "mallory"}, "by: Extra inputs are not permitted"),
        ({"approved": True, "reason": 42}, "reason: Input should be a valid string"),
        ({"approved": True, "reason": "x" * 10_001}, "reason: String should have at most 10000"),
        ([True], "Input should be a valid dictionary"),
    ],
)
def test_a_malformed_decision_body_is_422_naming_the_field(
    store: SqlRunStore,
    gate_id: str,
    token: str,
    client: TestClient,
    body: Any,
    expected: str,
) -> None:
    seq = store.run(store.get_gate(gate_id).run_id).last_seq

    answer = client.post(
        f"/api/gates/{gate_id}/decision", json=body, headers={"Authorization": f"Bearer {token}"}
    )

    assert answer.status_code == 422
    assert expected in answer.json()["detail"]
    _nothing_recorded(store, gate_id, seq)


def test_a_body_that_is_not_json_is_422(
    store: SqlRunStore, gate_id: str, token: str, client: TestClient
) -> None:
    answer = client.post(
        f"/api/gates/{gate_id}/decision",
        content=b"approved=true",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 422
    assert "JSON decode error" in answer.json()["detail"]
    _nothing_recorded(store, gate_id, store.run(store.get_gate(gate_id).run_id).last_seq)


def test_a_reason_of_one_megabyte_is_413_and_nothing_is_recorded(
    store: SqlRunStore, gate_id: str, token: str, client: TestClient
) -> None:
    seq = store.run(store.get_gate(gate_id).run_id).last_seq
    api = client.post(
        f"/api/gates/{gate_id}/decision",
        json={"approved": True, "reason": "x" * MB},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert api.status_code == 413
    assert "request body over 65536 bytes" in api.json()["detail"]

    csrf = _signed_in(client, token)
    form = client.post(
        f"/gates/{gate_id}/decision",
        data={"csrf": csrf, "decision": "approve", "reason": "x" * MB},
    )
    assert form.status_code == 413
    _nothing_recorded(store, gate_id, seq)


def test_a_streamed_body_over_the_limit_without_a_length_is_413(
    store: SqlRunStore, gate_id: str, token: str, client: TestClient
) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"approved": true, "reason": "'
        for _ in range(20):
            yield b"x" * 8192
        yield b'"}'

    answer = client.post(
        f"/api/gates/{gate_id}/decision",
        content=chunks(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 413
    _nothing_recorded(store, gate_id, store.run(store.get_gate(gate_id).run_id).last_seq)


@pytest.mark.parametrize(
    ("path", "status", "expected"),
    [
        ("/api/gates?status=bogus", 422, "query.status: Input should be 'pending'"),
        ("/api/runs?job=" + "j" * 201, 422, "query.job: String should have at most"),
        ("/api/runs/no-such-run", 404, "no run 'no-such-run'"),
        ("/api/gates/no-such-gate", 404, "no gate 'no-such-gate'"),
    ],
)
def test_bad_queries_and_unknown_ids_are_answered_with_a_clear_4xx(
    token: str, client: TestClient, path: str, status: int, expected: str
) -> None:
    answer = client.get(path, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == status
    assert expected in answer.json()["detail"]


@pytest.mark.parametrize(
    ("csrf", "fields", "status", "expected"),
    [
        ("forged", {"decision": "approve"}, 403, "invalid or missing CSRF token"),
        ("missing", {"decision": "approve"}, 403, "invalid or missing CSRF token"),
        ("real", {"decision": "approve", "by": "mallory"}, 400, "unknown form field(s): by"),
        ("real", {"decision": "maybe"}, 400, "decision must be 'approve' or 'reject'"),
        ("real", {"decision": "reject", "reason": "  "}, 422, "a reason is required to reject"),
    ],
)
def test_a_bad_decision_form_is_refused_and_records_nothing(
    store: SqlRunStore,
    gate_id: str,
    token: str,
    client: TestClient,
    csrf: str,
    fields: dict[str, str],
    status: int,
    expected: str,
) -> None:
    seq = store.run(store.get_gate(gate_id).run_id).last_seq
    real = _signed_in(client, token)
    sent = {"real": {"csrf": real}, "forged": {"csrf": "forged"}, "missing": {}}[csrf]

    answer = client.post(f"/gates/{gate_id}/decision", data={**sent, **fields})

    assert answer.status_code == status
    assert expected in html.unescape(answer.text)
    _nothing_recorded(store, gate_id, seq)


def test_the_login_refuses_a_forged_csrf_token_and_an_unknown_token(
    token: str, client: TestClient
) -> None:
    client.get("/login")
    forged = client.post("/login", data={"csrf": "forged", "token": token, "next": "/"})
    assert forged.status_code == 403
    assert "invalid or missing CSRF token" in forged.text

    page = client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    unknown = client.post("/login", data={"csrf": csrf.group(1), "token": "cvg_nope", "next": "/"})
    assert unknown.status_code == 401
    assert "unknown token" in unknown.text
    assert client.get("/", follow_redirects=False).status_code == 303


def test_the_login_never_redirects_to_another_site(token: str, client: TestClient) -> None:
    done = logged_in(client, token, "//evil.example/", form="/login?next=//evil.example/")
    assert done.status_code == 303
    assert done.headers["location"] == "/"


def test_a_value_the_gate_policy_refuses_is_422_and_records_nothing(
    store: SqlRunStore, token: str, client: TestClient
) -> None:
    vendored_run(store)
    gate_id = store.gates(pending=True)[0].gate_id
    seq = store.run(store.get_gate(gate_id).run_id).last_seq

    answer = client.post(
        f"/api/gates/{gate_id}/decision",
        json={"approved": True, "value": "no such license"},
        headers={"Authorization": f"Bearer {token}"},
    )

    assert answer.status_code == 422
    assert "'no such license' is not an SPDX license expression" in answer.json()["detail"]
    _nothing_recorded(store, gate_id, seq)


def test_a_viewer_signed_in_on_the_pages_gets_no_form_and_403_when_posting_one(
    store: SqlRunStore, gate_id: str, client: TestClient
) -> None:
    viewer = add_token(store, "victor", "viewer")
    page = client.get("/login")
    login_csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert login_csrf is not None
    client.post("/login", data={"csrf": login_csrf.group(1), "token": viewer, "next": "/"})
    gate_page = client.get(f"/gates/{gate_id}")
    assert gate_page.status_code == 200
    assert 'id="decide"' not in gate_page.text
    assert "viewer token" in gate_page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', gate_page.text)
    assert csrf is not None
    seq = store.run(store.get_gate(gate_id).run_id).last_seq

    answer = client.post(
        f"/gates/{gate_id}/decision", data={"csrf": csrf.group(1), "decision": "approve"}
    )

    assert answer.status_code == 403
    assert "victor has a viewer token" in answer.text
    _nothing_recorded(store, gate_id, seq)
