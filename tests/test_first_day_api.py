"""The inbox's JSON API as its OpenAPI document describes it.

- The run filters take only the stop vocabulary: ``GET /api/runs?category=bogus``
  or ``?kind=bogus`` is a 422 naming the field (SQLite and PostgreSQL).
- The document lists each refusal of each route with its body. schemathesis holds
  the API to it in tests/test_api_contract_served.py, against the real ``converge
  serve`` with its pool (every check, every phase, SQLite and PostgreSQL); it
  replaced the in-process runs of this module, which sent nothing to a worker and
  allowed 400, 413 and 422 for every valid request.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from audit.people import add_token
from audit.store import SqlRunStore
from converge.run_queue import Action
from converge.web import create_app
from tests.faultfixtures import opened
from tests.webfixtures import quorum_job, run_job, vendored_run

ROUTES = (
    "/api/gates",
    "/api/gates/{gate_id}",
    "/api/gates/{gate_id}/decision",
    "/api/runs",
    "/api/runs/{run_id}",
)
"""Routes of the JSON API whose refusals are checked by name."""


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqlRunStore]:
    with opened(str(tmp_path / "api.db")) as s:
        yield s


class Unsent:
    """A run queue that sends nothing: these tests read the API's answers, and a
    decision's resume would start a worker process for each."""

    def send(self, run_id: str, action: Action = "run") -> None:
        pass


def _client(store: SqlRunStore) -> tuple[TestClient, dict[str, str]]:
    """An in-process client of the inbox over ``store`` (one paused run) and the
    headers of an approver's token."""
    run_job(quorum_job(2), store)
    token = add_token(store, "alice", "approver")
    app = create_app(store, run_queue=Unsent())
    return TestClient(app), {"Authorization": f"Bearer {token}"}


# -- item 5: the run filters ------------------------------------------------------------
@pytest.mark.parametrize(("field", "named"), [("category", "'hitl'"), ("kind", "'converged'")])
def test_an_unknown_run_filter_is_422_naming_the_field_and_the_known_values(
    store: SqlRunStore, field: str, named: str
) -> None:
    client, auth = _client(store)

    answer = client.get(f"/api/runs?{field}=bogus", headers=auth)

    assert answer.status_code == 422
    body = answer.json()
    assert body["detail"].startswith(f"invalid request: query.{field}: Input should be ")
    assert named in body["detail"]
    assert body["errors"] == [body["detail"].removeprefix("invalid request: ")]


def test_known_run_filters_select_the_runs_of_that_stop(store: SqlRunStore) -> None:
    client, auth = _client(store)
    [paused] = store.runs()

    by_category = client.get("/api/runs?category=hitl", headers=auth)
    by_kind = client.get("/api/runs?kind=hitl_gate_pending&job=quorum", headers=auth)
    other = client.get("/api/runs?category=success&kind=criteria_met", headers=auth)

    assert [r["run_id"] for r in by_category.json()] == [paused.run_id]
    assert [r["run_id"] for r in by_kind.json()] == [paused.run_id]
    assert (other.status_code, other.json()) == (200, [])


def test_the_runs_page_takes_its_empty_form_fields_and_refuses_unknown_ones(
    sqlite_store: SqlRunStore,
) -> None:
    client, auth = _client(sqlite_store)
    client.cookies.set("converge_session", auth["Authorization"].removeprefix("Bearer "))

    empty = client.get("/runs?category=&kind=&job=")
    bogus = client.get("/runs?kind=bogus")

    assert empty.status_code == 200
    assert "quorum" in empty.text
    assert bogus.status_code == 422
    assert "query.kind: Input should be" in bogus.text


# -- item 13: the OpenAPI document and what the API answers -----------------------------
def _operation(doc: dict[str, Any], path: str, method: str = "get") -> dict[str, Any]:
    operation: dict[str, Any] = doc["paths"][path][method]
    return operation


def test_the_document_lists_each_refusal_of_each_route_with_its_body(
    sqlite_store: SqlRunStore,
) -> None:
    client, _ = _client(sqlite_store)

    doc = client.get("/api/openapi.json").json()

    assert all(path.startswith("/api/") for path in doc["paths"])  # no page
    refusals = {
        path: sorted(int(s) for m in ops.values() for s in m["responses"] if int(s) >= 400)
        for path, ops in doc["paths"].items()
    }
    assert {path: refusals[path] for path in ROUTES} == {
        # every route that authenticates may answer 429 (too many failures)
        "/api/gates": [401, 422, 429],
        "/api/gates/{gate_id}": [401, 403, 404, 429],
        "/api/gates/{gate_id}/decision": [400, 401, 403, 404, 409, 413, 422, 429],
        "/api/runs": [401, 422, 429],
        "/api/runs/{run_id}": [401, 404, 429],
    }
    decision = _operation(doc, "/api/gates/{gate_id}/decision", "post")["responses"]
    schema_of = {
        s: r["content"]["application/json"]["schema"] for s, r in decision.items() if int(s) >= 400
    }
    assert schema_of["422"] == {"$ref": "#/components/schemas/InvalidRequest"}
    assert schema_of["409"] == {"$ref": "#/components/schemas/Problem"}
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    assert doc["components"]["securitySchemes"]["token"]["scheme"] == "bearer"
    kinds = doc["components"]["schemas"]["StopKind"]["enum"]
    assert {"criteria_met", "hitl_gate_pending"} <= set(kinds) and len(kinds) == 21


def test_a_422_of_a_gate_hook_has_the_documented_shape(sqlite_store: SqlRunStore) -> None:
    client, auth = _client(sqlite_store)
    vendored_run(sqlite_store)
    [gate] = [g for g in sqlite_store.gates(pending=True) if g.summary.startswith("Classify the")]

    answer = client.post(
        f"/api/gates/{gate.gate_id}/decision",
        json={"approved": True, "value": "no such license"},
        headers=auth,
    )

    assert answer.status_code == 422
    body = answer.json()
    assert set(body) == {"detail", "errors"}
    assert "'no such license' is not an SPDX license expression" in body["detail"]
    assert body["errors"] == [f"body.value: {body['detail']}"]
