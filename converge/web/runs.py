"""Runs: the list with filters, a run's page; ``/api/runs``."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BeforeValidator
from starlette.concurrency import run_in_threadpool

from audit.run_queue import request_cancel
from audit.tokens import Principal
from converge.web.auth import api_principal, check_csrf, page_principal, store_of
from converge.web.errors import answers, http_error
from converge.web.views import run_page_data, runs_list
from engine import ConvergeError, StopCategory
from engine.stop import ALL_VARIANTS

router = APIRouter()

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
    _who: Annotated[Principal, Depends(api_principal)],
    category: CategoryFilter = None,
    kind: KindFilter = None,
    job: Filter = None,
) -> list[dict[str, Any]]:
    """Recorded runs, newest first, filtered by stop category, kind and job."""
    filters = _filters(category, kind, job)
    return await run_in_threadpool(lambda: runs_list(store_of(request), **filters))


def _filters(
    category: StopCategory | None, kind: StopKind | None, job: str | None
) -> dict[str, str | None]:
    return {
        "category": None if category is None else str(category),
        "kind": None if kind is None else str(kind),
        "job": job or None,
    }


@router.get("/api/runs/{run_id}", responses=answers(401, 404))
async def api_run(
    request: Request, run_id: str, _who: Annotated[Principal, Depends(api_principal)]
) -> dict[str, Any]:
    """One run: row, stop reason and explain, timeline, budget status, gates (404 unknown)."""
    try:
        data = await run_in_threadpool(
            run_page_data, store_of(request), run_id, request.app.state.clock
        )
    except ConvergeError as exc:
        raise http_error(exc) from exc
    data.pop("budget_svg")
    data.pop("lineage_svg")
    return data


@router.get("/runs", response_class=HTMLResponse)
async def runs_page(
    request: Request,
    who: Annotated[Principal, Depends(page_principal)],
    category: Annotated[CategoryFilter, BeforeValidator(_blank_is_none)] = None,
    kind: Annotated[KindFilter, BeforeValidator(_blank_is_none)] = None,
    job: Filter = None,
) -> Response:
    """The runs, filtered by stop category, kind and job (an empty field: no filter)."""
    filters = _filters(category, kind, job)
    rows = await run_in_threadpool(lambda: runs_list(store_of(request), **filters))
    page: Response = request.app.state.render(
        request, "runs.html", who=who, runs=rows, filters=filters
    )
    return page


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_page(
    request: Request, run_id: str, who: Annotated[Principal, Depends(page_principal)]
) -> Response:
    """A run: timeline, stop reason and explain, budget bars, lineage by key, its gates."""
    try:
        data = await run_in_threadpool(
            run_page_data, store_of(request), run_id, request.app.state.clock
        )
    except ConvergeError as exc:
        raise http_error(exc) from exc
    page: Response = request.app.state.render(request, "run.html", who=who, **data)
    return page


def _cancel(request: Request, run_id: str, who: Principal) -> str:
    """Ask for the run's cancel as ``who``; its status (``RunBusy`` → 409)."""
    if not who.may_decide:
        raise HTTPException(403, f"{who.name} has a viewer token: it may not cancel runs")
    return request_cancel(store_of(request), run_id, who.name)


@router.post("/api/runs/{run_id}/cancel", status_code=202, responses=answers(401, 403, 404, 409))
async def api_cancel(
    request: Request, run_id: str, who: Annotated[Principal, Depends(api_principal)]
) -> dict[str, Any]:
    """Cancel a queued or running run as the token's person (an approver): 202; it
    ends ``UserCancelled`` at its next cycle boundary, on whichever worker holds it."""
    try:
        status = await run_in_threadpool(_cancel, request, run_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    return {"run_id": run_id, "status": status, "cancel_requested": True}


@router.post("/runs/{run_id}/cancel")
async def cancel_form(
    request: Request, run_id: str, who: Annotated[Principal, Depends(page_principal)]
) -> Response:
    """The run page's cancel button."""
    form = await request.form()
    sent = form.get("csrf")
    check_csrf(request, sent if isinstance(sent, str) else None)
    try:
        await run_in_threadpool(_cancel, request, run_id, who)
    except ConvergeError as exc:
        raise http_error(exc) from exc
    return RedirectResponse(f"/runs/{run_id}", status_code=303)
