"""The inbox's JSON API as its OpenAPI document describes it.

- The run filters take only the stop vocabulary: ``GET /api/runs?category=bogus``
  or ``?kind=bogus`` is a 422 naming the field (SQLite and PostgreSQL).
- schemathesis generates requests from ``/api/openapi.json`` (valid and invalid
  ones, with an approver's token) and checks every answer with all its checks
  (``--checks all``): its status is listed, its body has the documented shape
  (422 included), its content type is the documented one, no answer is a server
  error, valid data is accepted and invalid data refused (a schema-valid request
  the state refuses answers a documented 400, 413 or 422). Its stateful phase
  chains calls along the links it infers (a gate's id into its decision, a run's
  into its fork) with the same checks.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import checks
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode

from audit import open_store
from audit.people import add_token
from audit.store import SqlRunStore
from converge.run_queue import Action
from converge.web import create_app
from converge.web.limits import FailureLimiter
from tests.hitlfixtures import STORES, opened_store
from tests.webfixtures import quorum_job, run_job, vendored_run

checks.load_all_checks()  # the registry fills on first use
CHECKS: list[Any] = checks.CHECKS.get_all()
"""Every check schemathesis has (``--checks all``)."""
ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
REFUSED = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429", "5xx"]
"""schemathesis's defaults for valid and invalid data (4.x)."""
CONFIG = SchemathesisConfig.from_dict(
    {
        "checks": {
            # a schema-valid request the state refuses, as the document says: a fork
            # beyond the run's cycles (400), a value the gate's hook refuses or a
            # reason its policy requires (422), a body over 64 KiB (413)
            "positive_data_acceptance": {"expected-statuses": [*ACCEPTED, "400", "413", "422"]},
            # an invalid body over 64 KiB is refused before it is read: 413
            "negative_data_rejection": {"expected-statuses": [*REFUSED, "413"]},
        }
    }
)
EXAMPLES = 25
"""Generated requests per operation and generation mode (valid, invalid)."""
ROUTES = (
    "/api/gates",
    "/api/gates/{gate_id}",
    "/api/gates/{gate_id}/decision",
    "/api/runs",
    "/api/runs/{run_id}",
)
"""Routes of the JSON API whose refusals are checked by name."""


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


def _first_lines(exc: BaseException) -> str:
    """What schemathesis found, without the response body it quotes."""
    return " / ".join(line.strip() for line in str(exc).split("[")[0].splitlines() if line.strip())


def test_schemathesis_finds_every_answer_of_the_api_in_its_document(
    sqlite_store: SqlRunStore,
) -> None:
    client, auth = _client(sqlite_store)
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", client.app, config=CONFIG)
    failures: list[str] = []
    tried: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        tried.append(operation.label)
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=EXAMPLES,
                derandomize=True,
                database=None,
                deadline=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def conforms(case: schemathesis.Case) -> None:
                case.validate_response(case.call(headers=auth), checks=CHECKS, headers=auth)

            try:
                conforms()
            except Unsatisfiable:
                # no invalid request exists (a path taking any string): nothing to send
                assert mode is GenerationMode.NEGATIVE, operation.label
            except (AssertionError, FailureGroup) as exc:  # a finding: all are reported below
                failures.append(f"{operation.label} ({mode.value}): {_first_lines(exc)}")

    assert failures == [], "\n\n".join(failures)
    assert {label.split(" ", 1)[1] for label in tried} >= set(ROUTES), tried


STATEFUL_STEPS = 150
"""Scenarios of the stateful phase (each a few linked calls)."""


def test_schemathesis_stateful_sequences_follow_the_documents_links_without_a_failure(
    tmp_path: Path,
) -> None:
    stores: list[SqlRunStore] = [open_store(str(tmp_path / "api-0.db"))]
    client, auth = _client(stores[0])
    template = tmp_path / "template.db"  # one paused run and alice's token
    made = open_store(str(template))
    run_job(quorum_job(2), made)
    token = add_token(made, "alice", "approver")
    made.close()
    numbers = itertools.count()
    schema = schemathesis.openapi.from_asgi("/api/openapi.json", client.app, config=CONFIG)
    # the paused run's event stream stays open until the run stops, by design: a
    # step cannot wait for its end (tests/test_live_runs.py reads it as a stream)
    machine: Any = schema.exclude(path="/api/runs/{run_id}/events").as_state_machine()
    answered: list[tuple[str, int]] = []

    class Authorised(machine):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            # each scenario starts from the same state (a copy of the template: the
            # same run, gate and token): hypothesis generates its steps from the
            # answers it got, and replays them
            stores.pop().close()
            path = tmp_path / f"scenario-{next(numbers)}.db"
            shutil.copyfile(template, path)
            store = open_store(str(path))
            stores.append(store)
            auth["Authorization"] = f"Bearer {token}"
            client.app.state.store = store  # type: ignore[attr-defined]
            # and no memory of the last scenario's failed sign-ins: the same steps
            # get the same answers (hypothesis replays them and compares)
            client.app.state.limiter = FailureLimiter(store)  # type: ignore[attr-defined]

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            return {"headers": auth}

        def validate_response(self, response: Any, case: schemathesis.Case, **kwargs: Any) -> None:
            answered.append((case.operation.label, response.status_code))
            case.validate_response(response, checks=CHECKS, headers=auth)

    try:
        Authorised.run(
            settings=settings(
                max_examples=STATEFUL_STEPS,
                derandomize=True,
                database=None,
                deadline=None,
                # no shrinking: a replay against a store that moved on would not
                # generate the same steps; the first failure found is reported
                phases=[Phase.generate],
                stateful_step_count=6,
                suppress_health_check=list(HealthCheck),
            )
        )
    finally:
        for s in stores:
            s.close()
    # the links were followed: a gate or run named by an earlier answer was found
    by_id = [status for label, status in answered if "{" in label and status not in (401, 404)]
    assert by_id, f"no call reached a gate or run by an id an answer gave: {answered[:20]}"
