"""``converge gates | approve | reject | resume``: decide gates and continue runs.

Approving or rejecting goes through :func:`converge.decisions.decide`, the path
the approval inbox uses too: the decision is recorded exactly once (compare-and-set
in the store; a quorum gate counts one vote per person) and, when it decides the
gate, the run resumes from the job it recorded, in this process. Listing gates
first applies the deadlines that passed (``expired`` with its ``on_timeout``).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from audit.approvals import DuplicateVote
from audit.store import SqlRunStore
from converge.cli.commands import CommandGroup
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
from converge.decisions import DecisionReport, Execute, decide, job_of_run, list_gates
from converge.jobs import Job
from engine import (
    Budget,
    ConvergeError,
    Engine,
    GateDecision,
    GateRecord,
    RunResult,
)

app = CommandGroup()


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


def _store(db: str | None) -> SqlRunStore:
    store = open_run_store(db)
    assert isinstance(store, SqlRunStore)
    return store


def _cli_execute(store: SqlRunStore, as_json: bool) -> Execute:
    """Run the job under the CLI's progress bar (errors exit 2 with one line)."""

    def execute(job: Job, step: Callable[[Engine], RunResult]) -> RunResult:
        return execute_with_progress(job, store, as_json=as_json, resume=step)

    return execute


def _content(g: GateRecord) -> str:
    """The proposal's key and content, as the reviewer needs them to decide."""
    content = g.proposal.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return f"{g.proposal.get('key', '?')}: {text}"


@app.command("gates")
def gates_cmd(
    pending: Annotated[bool, typer.Option("--pending", help="Only pending gates.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """List HITL gates (newest first)."""
    store = _store(db)
    try:
        # a gate past its deadline is decided by its on_timeout the first time it is listed
        records = list_gates(store, pending=pending, execute=_quiet_execute(store))
    except ConvergeError as exc:
        fail(str(exc))
    if as_json:
        sys.stdout.write(json.dumps([_gate_dict(g) for g in records], indent=2) + "\n")
        return
    table = Table(title="gates", title_justify="left")
    # ids are what a user copies into `approve`: never wrapped or cut
    table.add_column("gate", no_wrap=True, min_width=len(records[0].gate_id) if records else 4)
    # a gate id starts with its run id, so the run has no column of its own
    for col in ("status", "cycle", "proposal", "summary", "decided", "reason"):
        table.add_column(col)
    for g in records:
        decided = f"{g.decided_by} {_when(g.decided_at)}" if g.decided_by else ""
        table.add_row(
            g.gate_id,
            g.status,
            str(g.cycle),
            escape(_content(g)),
            escape(g.summary),
            escape(decided),
            escape(g.reason or ""),
        )
    out.print(table)


def _quiet_execute(store: SqlRunStore) -> Execute:
    def execute(job: Job, step: Callable[[Engine], RunResult]) -> RunResult:
        return step(job.build_engine(store))

    return execute


def _decide(gate_id: str, decision: GateDecision, db: str | None, as_json: bool) -> None:
    if not decision.by.strip():
        fail("--by must name who decides (it is recorded in the audit trail)")
    store = _store(db)
    try:
        report = decide(store, gate_id, decision, execute=_cli_execute(store, as_json))
    except (DuplicateVote, ConvergeError) as exc:
        fail(str(exc))
    # only now is the decision recorded: say so, then show where the run went
    verb = "approved" if decision.approved else "rejected"
    if report.result is None:
        message = (
            f"{verb} gate {gate_id} as {decision.by}: {report.required - report.still_needed} "
            f"of {report.required} approvals; {report.still_needed} more needed"
        )
        if as_json:
            sys.stdout.write(json.dumps(_report_dict(report), indent=2) + "\n")
        else:
            err.print(escape(message))
        raise typer.Exit(_PENDING_EXIT)
    if not as_json:
        err.print(
            escape(f"{verb} gate {gate_id} as {decision.by}; resumed run {report.gate.run_id}")
        )
    job = job_of_run(store, report.gate.run_id)
    _finish(report.result, as_json, job)


_PENDING_EXIT = 10
"""Exit code while the gate still waits for approvals (as a run paused at a gate)."""


def _report_dict(report: DecisionReport) -> dict[str, Any]:
    return {
        "gate": _gate_dict(report.gate),
        "approvals": [
            {"by": v.voter, "approved": v.approved, "reason": v.reason} for v in report.votes
        ],
        "approvals_required": report.required,
        "still_needed": report.still_needed,
    }


def _finish(result: RunResult, as_json: bool, job: Job) -> None:
    render_result(result, as_json=as_json, job=job)
    raise typer.Exit(result.stop_reason.exit_code)


@app.command("approve")
def approve_cmd(
    gate_id: Annotated[str, typer.Argument(help="The gate to approve.")],
    by: Annotated[str, typer.Option("--by", help="Who approves.")],
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (recorded in the run's chain).")
    ] = None,
    value: Annotated[
        str | None,
        typer.Option(
            "--value",
            help="A human answer the proposal's content takes (e.g. a license: MIT), "
            "checked by the gate policy's validate_value hook.",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve a gate (with one approval of its quorum) and resume its run to the next stop."""
    _decide(gate_id, GateDecision.approve(by=by, reason=reason, value=value), db, as_json)


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
    max_cycles: Annotated[
        int | None, typer.Option("--max-cycles", help="Cycles in total, those done included.")
    ] = None,
    max_facts: Annotated[
        int | None, typer.Option("--max-facts", help="Facts in total, those kept included.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", help="Tokens in total, those used included.")
    ] = None,
    max_seconds: Annotated[
        float | None,
        typer.Option("--max-seconds", help="Seconds in total, those run so far included."),
    ] = None,
    max_cost_usd: Annotated[
        float | None,
        typer.Option("--max-cost-usd", help="USD in total, what was spent included."),
    ] = None,
    max_invocations: Annotated[
        int | None,
        typer.Option("--max-invocations", help="Invocations in total, those made included."),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Continue a stopped, expired-gate or crashed run (more budget optional)."""
    store = _store(db)
    try:
        # a pending gate of this run past its deadline: decided by on_timeout first
        list_gates(store, pending=True, execute=_quiet_execute(store))
        job = job_of_run(store, run_id)
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
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        fail(f"bad budget: --{where.replace('_', '-')}: {first['msg']}")
    used = {"max_cycles": checkpoint.get("cycle"), "max_facts": len(checkpoint.get("facts", []))}
    for name, done in used.items():
        limit = changes.get(name)
        if limit and isinstance(done, int) and limit <= done:
            flag = "--" + name.replace("_", "-")
            fail(
                f"{flag} {limit} is not above the {done} already used: budgets are totals "
                f"(try {flag} {done + (limit or 1)})"
            )
    result = execute_with_progress(
        job, store, as_json=as_json, resume=lambda engine: engine.resume_run(run_id, budget)
    )
    _finish(result, as_json, job)


def _when(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
