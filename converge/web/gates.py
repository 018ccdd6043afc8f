"""Gates: the inbox (``/``), a gate's page and its decision form; ``/api/gates``."""

from __future__ import annotations

import logging
import time
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool
from starlette.concurrency import run_in_threadpool

from audit.people import (
    MAX_COMMENT_CHARS,
    MAX_REASON_CHARS,
    add_comment,
    run_with_comments,
)
from converge import metrics
from converge.access import Action, Person
from converge.decisions import DecisionReport, decide
from converge.governance import gate_history
from converge.logs import note
from converge.web.asking import ApiPerson, PagePerson, ask_gate, client_of
from converge.web.auth import check_csrf, store_of
from converge.web.errors import answers, http_error
from converge.web.views import UNREADABLE, GateLookups, gate_dict, gate_page_data, gates_list
from engine import ConvergeError, GateDecision
from engine.status import GateStatus, RunStatus

router = APIRouter()
log = logging.getLogger("converge.web")

if TYPE_CHECKING:
    GateFilter = str
else:
    GateFilter = StrEnum("GateFilter", {**{s.value: s.value for s in GateStatus}, "all": "all"})
    GateFilter.__doc__ = "The ``status`` filter of ``/api/gates``: a gate status, or ``all``."

FORM_FIELDS = frozenset({"csrf", "decision", "reason", "value"})
MAX_VALUE_CHARS = 1_000


DECISION_SCHEMA: dict[str, Any] = {
    # a value goes with an approval: a rejection's ``value`` is null or absent (422 else)
    "if": {"properties": {"approved": {"const": False}}, "required": ["approved"]},
    "then": {"properties": {"value": {"type": "null"}}},
    "examples": [
        {"approved": True, "reason": "MIT in the file header", "value": "MIT"},
        {"approved": False, "reason": "not ours to ship"},
    ],
}
"""What the document adds to :class:`DecisionIn`'s fields: the rule of ``value``, examples."""


class DecisionIn(BaseModel):
    """The body of ``POST /api/gates/{id}/decision``: no other field is accepted, no
    type is converted (``"true"`` is no boolean), a rejection carries no ``value``."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=DECISION_SCHEMA)

    approved: StrictBool
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    value: str | None = Field(default=None, max_length=MAX_VALUE_CHARS)


def _report(request: Request, report: DecisionReport) -> dict[str, Any]:
    """The answer to a decision: the gate, votes and job as the decision recorded and
    checked them (not read again), its run and comments read in one transaction.

    The run is as it is now: a decision that decided its gate sent the resume to a
    worker, so a run the store still holds paused at that gate is ``queued`` (no
    stop yet: its ``kind`` is None, as a running one's), and ``events_url`` is where
    to follow it to its next stop."""
    store = store_of(request)
    gate = report.gate
    run, comments = run_with_comments(store, gate.run_id)
    known = GateLookups.known(store, gate, list(report.votes), report.job, comments)
    out = gate_dict(store, gate, clock=request.app.state.clock, lookups=known)
    status, kind = run.status, run.kind
    at_this_gate = getattr(run.stop_reason, "gate_id", None) == gate.gate_id
    if not report.still_needed and status == RunStatus.PAUSED and at_this_gate:
        status = RunStatus.QUEUED  # its resume is on its way: nothing ran yet
    if status in (RunStatus.QUEUED, RunStatus.RUNNING):
        kind = None  # the stop of its leg before the decision is not where it is
    out["run"] = {
        "run_id": run.run_id,
        "status": status,
        "kind": kind,
        "url": f"/runs/{run.run_id}",
        "api_url": f"/api/runs/{run.run_id}",
        "events_url": f"/api/runs/{run.run_id}/events",
    }
    return out


async def _decide(
    request: Request, gate_id: str, decision: GateDecision, who: Person
) -> DecisionReport:
    """Record the decision as ``who`` (the access policy asked in ``decide``); a resume
    it starts is sent to the app's run queue (a worker, or the server's own pool),
    never run in this request."""
    started = time.perf_counter()
    try:
        report = await run_in_threadpool(
            lambda: decide(
                store_of(request),
                gate_id,
                decision,
                clock=request.app.state.clock,
                queue=request.app.state.run_queue,
                role=who.role,
            )
        )
    except ConvergeError as exc:
        raise http_error(exc) from exc
    metrics.DECISION_SECONDS.observe(time.perf_counter() - started)  # docs/operations.md
    metrics.gate_decided(report.gate)
    note(run_id=report.gate.run_id)  # on its access line too
    log.info(
        "gate %s %s by %s", gate_id, "approved" if decision.approved else "rejected", who.name,
        extra={"event": "gate_decided", "run_id": report.gate.run_id, "person": who.name},
    )  # fmt: skip
    return report


# -- the JSON API -----------------------------------------------------------------------
@router.get("/api/gates", responses=answers(401, 422))
async def api_gates(
    request: Request,
    who: ApiPerson,
    status: Annotated[GateFilter, Query()] = GateStatus.PENDING,
) -> list[dict[str, Any]]:
    """The gates this person may read with ``status`` (default pending; ``all``), newest
    first; ``may_decide`` says which they may decide."""
    wanted = None if status == "all" else GateStatus(status)
    return await run_in_threadpool(
        gates_list, store_of(request), wanted, request.app.state.clock, who
    )


@router.get("/api/gates/{gate_id}", responses=answers(401, 403, 404))
async def api_gate(request: Request, gate_id: str, who: ApiPerson) -> dict[str, Any]:
    """One gate with its votes and comments (404 unknown; 403 not among its readers)."""
    try:
        data = await run_in_threadpool(_gate_data, request, gate_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    data.pop("lineage_svg", None)
    return data


def vote_answers(vote: str) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route that records ``vote`` (``"A vote"``): 202 when it
    decided the gate, 200 while a quorum still needs approvals, and its refusals."""
    return {
        200: {"description": f"{vote} recorded; the gate still needs more approvals."},
        **answers(400, 401, 403, 404, 409, 413, 422),
    }


@router.post("/api/gates/{gate_id}/decision", status_code=202, responses=vote_answers("A vote"))
async def api_decision(request: Request, gate_id: str, body: DecisionIn, who: ApiPerson) -> Any:
    """Approve or reject as the token's person: 202 with the gate and its run (its
    ``url``) when the decision decided the gate and its run's resume was sent to a
    worker; 200 when a quorum still needs approvals. Never runs the job here."""
    decision = GateDecision(
        approved=body.approved, by=who.name, reason=body.reason, value=body.value
    )
    report = await _decide(request, gate_id, decision, who)
    out = await run_in_threadpool(_report, request, report)
    if report.still_needed:
        return JSONResponse(out, status_code=200)
    return out


# -- the pages --------------------------------------------------------------------------
@router.get("/", response_class=HTMLResponse)
async def inbox_page(request: Request, who: PagePerson) -> Response:
    """The pending gates: age, deadline, run, job, summary; then those that cannot
    be read (a corrupt cell, named), and the recently decided."""
    rows = await run_in_threadpool(
        gates_list, store_of(request), None, request.app.state.clock, who
    )
    pending = [g for g in rows if g["status"] == GateStatus.PENDING and g["may_decide"]]
    watching = [g for g in rows if g["status"] == GateStatus.PENDING and not g["may_decide"]]
    unreadable = [g for g in rows if g["status"] == UNREADABLE]
    recent = [g for g in rows if g["status"] not in (GateStatus.PENDING, UNREADABLE)][:20]
    page: Response = request.app.state.render(
        request,
        "inbox.html",
        who=who,
        pending=pending,
        watching=watching,
        recent=recent,
        unreadable=unreadable,
    )
    return page


@router.get("/gates/{gate_id}", response_class=HTMLResponse)
async def gate_page(request: Request, gate_id: str, who: PagePerson) -> Response:
    """A gate: the proposal, the facts it derives from, its lineage, the decision form."""
    try:
        data = await run_in_threadpool(_gate_data, request, gate_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    voted = any(v["by"] == who.name for v in data["approvals"])
    page: Response = request.app.state.render(request, "gate.html", who=who, gate=data, voted=voted)
    return page


@router.post("/gates/{gate_id}/decision")
async def gate_form(request: Request, gate_id: str, who: PagePerson) -> Response:
    """The gate page's form: approve or reject with a reason, as the signed-in person."""
    form = await request.form()
    unknown = sorted(set(form.keys()) - FORM_FIELDS)
    if unknown:
        raise HTTPException(400, f"unknown form field(s): {', '.join(unknown)}")
    values = {k: form.get(k) for k in FORM_FIELDS}
    if any(v is not None and not isinstance(v, str) for v in values.values()):
        raise HTTPException(400, "form fields must be text, not files")
    check_csrf(request, values["csrf"] if isinstance(values["csrf"], str) else None)
    action = values["decision"]
    if action not in ("approve", "reject"):
        raise HTTPException(400, "decision must be 'approve' or 'reject'")
    reason = str(values["reason"] or "").strip() or None
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise HTTPException(400, f"reason is longer than {MAX_REASON_CHARS} characters")
    value = str(values["value"] or "").strip() or None
    if value is not None and len(value) > MAX_VALUE_CHARS:
        raise HTTPException(400, f"value is longer than {MAX_VALUE_CHARS} characters")
    if action == "reject":
        value = None  # the form's value field goes with an approval only
    decision = GateDecision(approved=action == "approve", by=who.name, reason=reason, value=value)
    report = await _decide(request, gate_id, decision, who)
    # decided: the run's live page follows its resume; a vote short of the quorum stays
    target = f"/runs/{report.gate.run_id}" if not report.still_needed else f"/gates/{gate_id}"
    return RedirectResponse(target, status_code=303)


class CommentIn(BaseModel):
    """The body of ``POST /api/gates/{id}/comments``."""

    model_config = ConfigDict(
        extra="forbid", strict=True, json_schema_extra={"examples": [{"text": "MIT, see line 1"}]}
    )

    text: str = Field(min_length=1, max_length=MAX_COMMENT_CHARS)


def _gate_data(request: Request, gate_id: str, who: Person) -> dict[str, Any]:
    """The gate as ``who`` may read it (403 otherwise, in the access log)."""
    clock = request.app.state.clock
    return gate_page_data(store_of(request), gate_id, clock, who, client=client_of(request))


def _comment(request: Request, gate_id: str, who: Person, text: str) -> dict[str, Any]:
    store = store_of(request)
    ask_gate(request, who, Action.COMMENT, store.get_gate(gate_id))
    c = add_comment(store, gate_id, who.name, text)
    return {"gate_id": c.gate_id, "by": c.by, "at": c.ts, "text": c.text}


@router.post(
    "/api/gates/{gate_id}/comments",
    status_code=201,
    responses=answers(400, 401, 403, 404, 413, 422),
)
async def api_comment(
    request: Request, gate_id: str, body: CommentIn, who: ApiPerson
) -> dict[str, Any]:
    """Comment on a gate as the token's person (anyone who may see it): 201; the
    comment is in the run's hash chain."""
    try:
        return await run_in_threadpool(_comment, request, gate_id, who, body.text)
    except ConvergeError as exc:
        raise http_error(exc) from exc


@router.get("/api/gates/{gate_id}/history", responses=answers(401, 403, 404))
async def api_history(request: Request, gate_id: str, who: ApiPerson) -> list[dict[str, Any]]:
    """Everything that happened to a gate, oldest first: opened, votes, comments,
    escalation, the decision, refused decisions (403) and notification outcomes."""

    def history() -> list[dict[str, Any]]:
        ask_gate(request, who, Action.READ_GATE, store_of(request).get_gate(gate_id))
        return gate_history(store_of(request), gate_id)

    try:
        return await run_in_threadpool(history)
    except ConvergeError as exc:
        raise http_error(exc) from exc


@router.post("/gates/{gate_id}/comments")
async def comment_form(request: Request, gate_id: str, who: PagePerson) -> Response:
    """The gate page's comment form."""
    form = await request.form()
    sent, text = form.get("csrf"), form.get("text")
    check_csrf(request, sent if isinstance(sent, str) else None)
    if not isinstance(text, str) or not text.strip():
        raise HTTPException(400, "a comment needs some text")
    try:
        await run_in_threadpool(_comment, request, gate_id, who, text)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    return RedirectResponse(f"/gates/{gate_id}", status_code=303)
