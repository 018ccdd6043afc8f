"""``converge gates | approve | reject | resume``: decide gates and continue runs.

Approving or rejecting records the decision (exactly once, compare-and-set in the
store) and resumes the run from the job the run recorded, in this process.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from converge.cli.render import (
    DbOption,
    JsonOption,
    err,
    execute_with_progress,
    fail,
    open_run_store,
    out,
    render_result,
)
from converge.jobs import Job, job_from_record
from engine import (
    Budget,
    ConvergeError,
    GateAlreadyDecided,
    GateDecision,
    GateRecord,
    RunResult,
    RunStore,
)

app = typer.Typer()


def _gate_dict(g: GateRecord) -> dict[str, Any]:
    return {
        "gate_id": g.gate_id,
        "run_id": g.run_id,
        "status": g.status,
        "summary": g.summary,
        "suggestor": g.suggestor,
        "cycle": g.cycle,
        "proposal_id": g.proposal_id,
        "proposal": g.proposal,
        "opened_at": g.opened_at,
        "expires_at": g.expires_at,
        "decided_by": g.decided_by,
        "decided_at": g.decided_at,
        "reason": g.reason,
    }


def _job_of_run(store: RunStore, run_id: str) -> Job:
    header = store.get_run_header(run_id)
    if not header.job_spec:
        raise ConvergeError(f"run {run_id} recorded no job; resume it from Python instead")
    return job_from_record(header.job_spec)


def _store(db: str | None) -> RunStore:
    store = open_run_store(db)
    assert store is not None
    return store


@app.command("gates")
def gates_cmd(
    pending: Annotated[bool, typer.Option("--pending", help="Only pending gates.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List HITL gates (newest first)."""
    store = _store(db)
    try:
        records: list[GateRecord] = store.gates(pending=pending)  # type: ignore[attr-defined]
    except ConvergeError as exc:
        fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps([_gate_dict(g) for g in records], indent=2) + "\n")
        return
    table = Table(title="gates", title_justify="left")
    # ids are what a user copies into `approve`: never wrapped or cut
    table.add_column("gate", no_wrap=True, min_width=len(records[0].gate_id) if records else 4)
    # a gate id starts with its run id, so the run has no column of its own
    for col in ("status", "cycle", "suggestor", "summary", "decided"):
        table.add_column(col)
    for g in records:
        decided = f"{g.decided_by} {_when(g.decided_at)}" if g.decided_by else ""
        table.add_row(g.gate_id, g.status, str(g.cycle), g.suggestor, escape(g.summary), decided)
    out.print(table)


def _decide(gate_id: str, decision: GateDecision, db: str | None, as_json: bool) -> None:
    store = _store(db)
    try:
        gate = store.get_gate(gate_id)
        job = _job_of_run(store, gate.run_id)
    except ConvergeError as exc:
        fail(str(exc))
    if gate.status != "pending":
        # the engine's compare-and-set decides races; this only answers early
        fail(str(GateAlreadyDecided(gate_id, gate.status, gate.decided_by, _iso(gate))))
    verb = "approving" if decision.approved else "rejecting"
    if not as_json:
        err.print(f"{verb} gate {gate_id} as {escape(decision.by)}; resuming run {gate.run_id}")
    result = execute_with_progress(
        job, store, as_json=as_json, resume=lambda engine: engine.resume(gate_id, decision)
    )
    _finish(result, as_json, job)


def _finish(result: RunResult, as_json: bool, job: Job) -> None:
    render_result(result, as_json=as_json, job=job.name)
    raise typer.Exit(result.stop_reason.exit_code)


@app.command("approve")
def approve_cmd(
    gate_id: Annotated[str, typer.Argument(help="The gate to approve.")],
    by: Annotated[str, typer.Option("--by", help="Who approves.")],
    reason: Annotated[str | None, typer.Option("--reason")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve a gate and resume its run to the next stop."""
    _decide(gate_id, GateDecision.approve(by=by, reason=reason), db, as_json)


@app.command("reject")
def reject_cmd(
    gate_id: Annotated[str, typer.Argument(help="The gate to reject.")],
    by: Annotated[str, typer.Option("--by", help="Who rejects.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded).")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Reject a gate (its proposal is dropped and recorded) and resume the run."""
    _decide(gate_id, GateDecision.reject(by=by, reason=reason), db, as_json)


@app.command("resume")
def resume_cmd(
    run_id: Annotated[str, typer.Argument(help="A run stopped by a budget, policy or cancel.")],
    max_cycles: Annotated[int | None, typer.Option("--max-cycles")] = None,
    max_facts: Annotated[int | None, typer.Option("--max-facts")] = None,
    max_tokens: Annotated[int | None, typer.Option("--max-tokens")] = None,
    max_seconds: Annotated[float | None, typer.Option("--max-seconds")] = None,
    max_cost_usd: Annotated[float | None, typer.Option("--max-cost-usd")] = None,
    max_invocations: Annotated[int | None, typer.Option("--max-invocations")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a stopped, expired-gate or crashed run (more budget optional)."""
    store = _store(db)
    try:
        job = _job_of_run(store, run_id)
        checkpoint = store.load_checkpoint(run_id)
        current = Budget.model_validate(checkpoint["budget"])
    except (ConvergeError, KeyError, ValueError) as exc:
        fail(str(exc))
    changes = {
        k: v
        for k, v in {
            "max_cycles": max_cycles,
            "max_facts": max_facts,
            "max_tokens": max_tokens,
            "max_seconds": max_seconds,
            "max_cost_usd": max_cost_usd,
            "max_invocations": max_invocations,
        }.items()
        if v is not None
    }
    try:
        budget = Budget.model_validate({**current.model_dump(), **changes})
    except ValueError as exc:
        fail(f"bad budget: {exc}")
    result = execute_with_progress(
        job, store, as_json=as_json, resume=lambda engine: engine.resume_run(run_id, budget)
    )
    _finish(result, as_json, job)


def _iso(gate: GateRecord) -> str | None:
    at = gate.decided_at
    return None if at is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
