"""Runs: the list with filters, a run's page; ``/api/runs``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from audit.tokens import Principal
from converge.web.auth import api_principal, page_principal, store_of
from converge.web.errors import http_error
from converge.web.views import run_page_data, runs_list
from engine import ConvergeError

router = APIRouter()

Filter = Annotated[str | None, Query(max_length=200)]


@router.get("/api/runs")
async def api_runs(
    request: Request,
    _who: Annotated[Principal, Depends(api_principal)],
    category: Filter = None,
    kind: Filter = None,
    job: Filter = None,
) -> list[dict[str, Any]]:
    """Recorded runs, newest first, filtered by stop category, kind and job."""
    return await run_in_threadpool(
        lambda: runs_list(store_of(request), category=category, kind=kind, job=job)
    )


@router.get("/api/runs/{run_id}")
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
    category: Filter = None,
    kind: Filter = None,
    job: Filter = None,
) -> Response:
    """The runs, filtered by stop category, kind and job."""
    filters = {"category": category or None, "kind": kind or None, "job": job or None}
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
