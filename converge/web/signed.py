"""Signed decisions through the API: the statement to sign, and its upload.

The private key stays with its person: ``converge approve/reject GATE --sign-with
KEY --server URL`` asks ``POST /api/gates/{id}/statement`` for the statement of
the decision as it would be recorded (the value the gate's hook derives from the
answer, the run's chain head now), signs it on the person's machine, and uploads
it to ``POST /api/gates/{id}/signed-decision``. The server checks it against the
token's person and their registered public key
(:mod:`converge.governance`) and records it like any decision
(:func:`converge.decisions.decide`), the statement in the chained event. The
browser never sees a key.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, WithJsonSchema
from starlette.concurrency import run_in_threadpool

from converge import metrics
from converge.access import Action, Person
from converge.decisions import DecisionReport, checked_value, decide, job_of_run
from converge.governance import statement_for
from converge.web.asking import ApiPerson, ask_gate
from converge.web.auth import store_of
from converge.web.errors import Unprocessable, answers, http_error
from converge.web.gates import DecisionIn, vote_answers
from converge.web.views import gate_dict
from engine import ConvergeError, GateAlreadyDecided, GateDecision
from engine.status import GateStatus

router = APIRouter()


class StatementOut(BaseModel):
    """The answer of ``POST /api/gates/{id}/statement``: the statement to sign."""

    statement: dict[str, Any]


SIGNED_STATEMENT: dict[str, Any] = {
    "type": "object",
    "title": "SignedStatement",
    "description": (
        "The `converge.decision/1` statement `/api/gates/{gate_id}/statement` gave, with "
        "`key_id` and `sig`; `approved` (a boolean) and `reason` (text or null) are "
        "read from it (422 otherwise), the rest is checked against the signature (403)."
    ),
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["approved"],
    "additionalProperties": True,
}
"""What the document says of a signed statement (its fields are checked here)."""


class SignedDecisionIn(BaseModel):
    """The body of ``POST /api/gates/{id}/signed-decision``: the signed statement
    (``converge.decision/1``, with ``key_id`` and ``sig``), as the statement route
    gave it plus the signature."""

    model_config = ConfigDict(extra="forbid")

    statement: Annotated[dict[str, Any], WithJsonSchema(SIGNED_STATEMENT)]


def _statement(request: Request, gate_id: str, who: Person, body: DecisionIn) -> dict[str, Any]:
    store = store_of(request)
    gate = store.get_gate(gate_id)
    ask_gate(request, who, Action.DECIDE, gate)
    if gate.status != GateStatus.PENDING:
        raise GateAlreadyDecided(gate_id, gate.status, gate.decided_by, None)
    decision = GateDecision(
        approved=body.approved, by=who.name, reason=body.reason, value=body.value
    )
    content = checked_value(job_of_run(store, gate.run_id), gate, decision)
    if content is not None:
        decision = decision.model_copy(update={"value": content})
    return statement_for(store, gate, decision, body.value)


@router.post(
    "/api/gates/{gate_id}/statement",
    responses=answers(400, 401, 403, 404, 409, 413, 422),
)
async def api_statement(
    request: Request, gate_id: str, body: DecisionIn, who: ApiPerson
) -> StatementOut:
    """The statement of this decision by the token's person, to sign with their
    private key and upload to ``/api/gates/{gate_id}/signed-decision``: the gate,
    its run, the run's chain head now, who, approved, reason, the value recorded
    (what the gate's hook makes of ``value``) and the answer given. Records nothing."""
    try:
        statement = await run_in_threadpool(_statement, request, gate_id, who, body)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    return StatementOut(statement=statement)


def _field(statement: dict[str, Any], name: str, kinds: tuple[type, ...]) -> Any:
    value = statement.get(name)
    if not isinstance(value, kinds):
        raise Unprocessable(f"body.statement.{name}", f"{name} must be {kinds[0].__name__}")
    return value


def _report(request: Request, report: DecisionReport) -> dict[str, Any]:
    store = store_of(request)
    out = gate_dict(store, report.gate, clock=request.app.state.clock)
    run_id = report.gate.run_id
    out["run"] = {"run_id": run_id, "url": f"/runs/{run_id}", "api_url": f"/api/runs/{run_id}"}
    return out


@router.post(
    "/api/gates/{gate_id}/signed-decision",
    status_code=202,
    responses=vote_answers("A signed vote"),
)
async def api_signed_decision(
    request: Request, gate_id: str, body: SignedDecisionIn, who: ApiPerson
) -> Any:
    """Record a decision signed by the token's person (403 when it is not theirs,
    not signed with their registered public key, or not this decision): 202 when it
    decided the gate (its run's resume sent to a worker), 200 for a vote of a
    quorum still short. The signed statement is kept in the chained event."""
    statement = body.statement

    def allowed() -> None:  # who may not decide it learns nothing of the statement's checks
        ask_gate(request, who, Action.DECIDE, store_of(request).get_gate(gate_id))

    try:
        await run_in_threadpool(allowed)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    approved = _field(statement, "approved", (bool,))
    reason = _field(statement, "reason", (str, type(None)))
    decision = GateDecision(
        approved=approved, by=who.name, reason=reason, value=statement.get("answer")
    )

    def record() -> tuple[DecisionReport, dict[str, Any]]:
        report = decide(
            store_of(request),
            gate_id,
            decision,
            clock=request.app.state.clock,
            queue=request.app.state.run_queue,
            signed=statement,
            role=who.role,
        )
        return report, _report(request, report)

    started = time.perf_counter()
    try:
        report, out = await run_in_threadpool(record)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    metrics.DECISION_SECONDS.observe(time.perf_counter() - started)  # docs/operations.md
    metrics.gate_decided(report.gate)
    if report.still_needed:
        return JSONResponse(out, status_code=200)
    return out
