"""Runs: the list with filters, a run's page; ``/api/runs``; forking a run at a cycle
and the diff of two runs (:mod:`converge.web.time_travel`)."""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel, BeforeValidator, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from audit import redact_fact
from audit.run_queue import request_cancel
from converge.access import STORE, Action, Person, ask, seen_by
from converge.web.asking import ApiPerson, PagePerson, ask_run, client_of
from converge.web.auth import check_csrf, store_of
from converge.web.errors import answers, http_error
from converge.web.live import LIVE_KINDS
from converge.web.time_travel import (
    PAGE_FACTS,
    ForkRequest,
    diff_data,
    fork_answer,
    fork_as,
    fork_data,
    with_fork_links,
)
from converge.web.views import run_page_data, runs_list
from engine import ConvergeError, StopCategory
from engine.stop import ALL_VARIANTS

router = APIRouter()
log = logging.getLogger("converge.web")

STOP_KINDS = tuple(v.model_fields["kind"].default for v in ALL_VARIANTS)
"""Every stop reason's ``kind`` code, in the order of docs/stop-reasons.md."""

if TYPE_CHECKING:
    StopKind = str
else:
    StopKind = StrEnum("StopKind", {k: k for k in STOP_KINDS})
    StopKind.__doc__ = "A stop reason's kind code (docs/stop-reasons.md)."


def _blank_is_none(value: object) -> object:
    """The pages' filter form sends empty fields: an empty filter is no filter."""
    return value or None


Filter = Annotated[str | None, Query(max_length=200)]
CategoryFilter = Annotated[
    StopCategory | None,
    Query(description="Only runs whose stop has this category (422 for an unknown one)."),
]
KindFilter = Annotated[
    StopKind | None,
    Query(description="Only runs whose stop reason has this kind (422 for an unknown one)."),
]


@router.get("/api/runs", responses=answers(401, 422))
async def api_runs(
    request: Request,
    who: ApiPerson,
    category: CategoryFilter = None,
    kind: KindFilter = None,
    job: Filter = None,
) -> list[dict[str, Any]]:
    """Recorded runs this person may see, newest first, filtered by stop category,
    kind and job; a fork has ``forked_from: {run, cycle, facts_root}`` (None for
    other runs)."""
    filters = _filters(category, kind, job)
    return await run_in_threadpool(_runs_with_links, request, filters, who)


def _runs_with_links(
    request: Request, filters: dict[str, str | None], who: Person
) -> list[dict[str, Any]]:
    store = store_of(request)
    return with_fork_links(store, runs_list(store, **filters, who=who))


def _filters(
    category: StopCategory | None, kind: StopKind | None, job: str | None
) -> dict[str, str | None]:
    return {
        "category": None if category is None else str(category),
        "kind": None if kind is None else str(kind),
        "job": job or None,
    }


@router.get("/api/runs/{run_id}", responses=answers(401, 404))
async def api_run(request: Request, run_id: str, who: ApiPerson) -> dict[str, Any]:
    """One run as this person may see it: row, stop reason and explain, timeline,
    budget status, gates (a gate they may not read: its stub), its fork link
    (``forked_from``) and its forks (404 unknown; 403 a run its job hides from them)."""
    try:
        data = await run_in_threadpool(_run_data, request, run_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    data.pop("budget_svg")
    data.pop("lineage_svg")
    return data


@router.get("/runs", response_class=HTMLResponse)
async def runs_page(
    request: Request,
    who: PagePerson,
    category: Annotated[CategoryFilter, BeforeValidator(_blank_is_none)] = None,
    kind: Annotated[KindFilter, BeforeValidator(_blank_is_none)] = None,
    job: Filter = None,
) -> Response:
    """The runs, filtered by stop category, kind and job (an empty field: no filter)."""
    filters = _filters(category, kind, job)
    rows = await run_in_threadpool(_runs_with_links, request, filters, who)
    page: Response = request.app.state.render(
        request, "runs.html", who=who, runs=rows, filters=filters
    )
    return page


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(request: Request, run_id: str, who: PagePerson) -> Response:
    """A run: timeline, stop reason and explain, budget bars, lineage by key, its
    gates, its parent (a fork) and forks; a form to fork it at a cycle for those
    who may."""
    try:
        data = await run_in_threadpool(_run_data, request, run_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    page: Response = request.app.state.render(
        request, "run.html", who=who, event_kinds=LIVE_KINDS, **data
    )
    return page


def _run_data(request: Request, run_id: str, who: Person) -> dict[str, Any]:
    store = store_of(request)
    clock = request.app.state.clock
    data = run_page_data(store, run_id, clock, who, client=client_of(request))
    data.update(fork_data(store, run_id))
    return data


def _cancel(request: Request, run_id: str, who: Person) -> str:
    """Ask for the run's cancel as ``who``; its status (``RunBusy`` → 409)."""
    ask_run(request, who, Action.CANCEL_RUN, run_id)
    return request_cancel(store_of(request), run_id, who.name)


@router.post("/api/runs/{run_id}/cancel", status_code=202, responses=answers(401, 403, 404, 409))
async def api_cancel(request: Request, run_id: str, who: ApiPerson) -> dict[str, Any]:
    """Cancel a queued or running run as the token's person (who may): 202; it
    ends ``UserCancelled`` at its next cycle boundary, on whichever worker holds it."""
    try:
        status = await run_in_threadpool(_cancel, request, run_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    return {"run_id": run_id, "status": status, "cancel_requested": True}


@router.post("/runs/{run_id}/cancel")
async def cancel_form(request: Request, run_id: str, who: PagePerson) -> Response:
    """The run page's cancel button."""
    form = await request.form()
    sent = form.get("csrf")
    check_csrf(request, sent if isinstance(sent, str) else None)
    try:
        await run_in_threadpool(_cancel, request, run_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


class RedactRequest(BaseModel):
    """The body of a redaction: why (kept in the chained ``fact_redacted`` event)."""

    reason: str = Field(min_length=1, max_length=2000, pattern=r"\S")


def _redact(request: Request, run_id: str, fact_id: str, reason: str, who: Person) -> Any:
    store = store_of(request)
    ask(store, who, Action.REDACT, STORE, client=client_of(request), target=run_id)
    return redact_fact(store, store.resolve_run_id(run_id), fact_id, by=who.name, reason=reason)


@router.post(
    "/api/runs/{run_id}/facts/{fact_id}/redact",
    responses=answers(400, 401, 403, 404, 409, 413, 422),
)
async def api_redact(
    request: Request,
    run_id: str,
    fact_id: str,
    body: RedactRequest,
    who: ApiPerson,
) -> dict[str, Any]:
    """Erase a fact's content from a stopped or paused run as the token's person (an
    admin): its commitment is kept, a ``fact_redacted`` event chains who, when and
    why (docs/audit.md, "Redaction"). 404 an unknown run or fact; 409 a fact
    redacted already, a run not stopped or paused, or of chain format 1."""
    try:
        done = await run_in_threadpool(_redact, request, run_id, fact_id, body.reason, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    result: dict[str, Any] = done.to_dict()
    return result


# -- time travel: fork a run at a cycle, diff two runs ----------------------------------
@router.post(
    "/api/runs/{run_id}/fork",
    status_code=202,
    responses=answers(400, 401, 403, 404, 409, 413, 422),
)
async def api_fork(
    request: Request, run_id: str, body: ForkRequest, who: ApiPerson
) -> dict[str, Any]:
    """Fork the run at ``cycle`` as the token's person (who may), with the job it
    recorded and the budget limits given over that job's: the fork is recorded
    (its parent's chain verified up to the cycle) and handed to the workers, as
    ``converge submit`` does; 202 with the new run's id, its link and where to
    follow it (``GET /api/runs/{id}``). 400 when the cycle cannot be rebuilt
    (beyond the run's cycles, events missing) or the run recorded no job; 409
    when the parent's chain does not verify up to the cycle."""
    fork = await _fork(request, run_id, body, who)
    return fork_answer(fork, run_id, body.cycle)


@router.post("/runs/{run_id}/fork")
async def fork_form(request: Request, run_id: str, who: PagePerson) -> Response:
    """The run page's fork form (``cycle``, optional ``max_cycles``): records the
    fork and hands it to the workers, then shows the new run's page."""
    form = await request.form()
    sent = form.get("csrf")
    check_csrf(request, sent if isinstance(sent, str) else None)
    try:
        body = ForkRequest.model_validate(  # a form's fields are text: "4" is 4 here
            {k: v for k, v in form.items() if k in ("cycle", "max_cycles") and v != ""},
            strict=False,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise HTTPException(422, f"{where}: {first['msg']}") from exc
    fork = await _fork(request, run_id, body, who)
    return RedirectResponse(f"/runs/{fork}", status_code=303)


async def _fork(request: Request, run_id: str, body: ForkRequest, who: Person) -> str:
    """Record the fork asked for (403 unless ``who`` may fork the run) and hand it to
    the app's run queue: the new run's id (the library's refusals answered as HTTP
    errors)."""
    queue = request.app.state.run_queue
    store, changes = store_of(request), body.changes()

    def forked() -> str:
        ask_run(request, who, Action.FORK_RUN, run_id)
        return fork_as(store, run_id, body.cycle, changes, who.name, queue)

    try:
        fork = await run_in_threadpool(forked)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    log.info(
        "run %s forked at cycle %s: %s", run_id, body.cycle, fork,
        extra={"event": "run_forked", "person": who.name},
    )  # fmt: skip
    return fork


@router.get("/api/runs/{run_id}/diff/{other}", responses=answers(401, 404))
async def api_diff(request: Request, run_id: str, other: str, who: ApiPerson) -> dict[str, Any]:
    """Run ``run_id`` (A) against run ``other`` (B), as ``converge diff A B --json``:
    each run's head, ``same``, ``why``, the first cycle whose facts differ, the facts
    only in A, only in B and changed, the budget used side by side (403 unless this
    person may see both)."""
    try:
        return await run_in_threadpool(_diff, request, run_id, other, who, None)
    except ConvergeError as exc:
        raise http_error(exc) from exc


@router.get("/runs/{run_id}/diff/{other}", response_class=HTMLResponse)
async def diff_page(request: Request, run_id: str, other: str, who: PagePerson) -> Response:
    """Two runs side by side (read-only: viewers too): stops and why they differ,
    facts only in A, only in B and changed (the first 200 of each), budget use."""
    try:
        data = await run_in_threadpool(_diff, request, run_id, other, who, PAGE_FACTS)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    page: Response = request.app.state.render(request, "diff.html", who=who, diff=data)
    return page


def _diff(request: Request, a: str, b: str, who: Person, limit: int | None) -> dict[str, Any]:
    """The diff of runs ``a`` and ``b`` as ``who`` may see them (403 unless both)."""
    ask_run(request, who, Action.SEE_RUN, a)
    ask_run(request, who, Action.SEE_RUN, b)
    store = store_of(request)
    data = diff_data(store, a, b, limit=limit)
    seen: dict[str, Any] = seen_by(store, who, data, [a, b], request.app.state.clock())
    return seen
