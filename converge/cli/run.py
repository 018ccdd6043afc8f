"""``converge run``: run a job file to its stop."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from audit.ledger import require_key
from audit.store import SqlRunStore
from converge.access import Action, job_view
from converge.cli.actors import NO_RUNNER_OPTIONS, RunnerFlags, asked
from converge.cli.budgets import NO_BUDGET_OPTIONS, BudgetFlags
from converge.cli.commands import CommandGroup, option_groups
from converge.cli.legs import finish_leg, job_for
from converge.cli.render import (
    BAD_INPUT,
    DbOption,
    JsonOption,
    err,
    execute_with_progress,
    failing_on,
    open_run_store,
)
from converge.jobs import Job
from engine import ConvergeError, RunResult, RunStore
from engine.stop_categories import EXIT_CODES as STOP_EXIT_CODES

app = CommandGroup()

EXIT_CODES = (
    "Exit codes (the category of the stop, docs/stop-reasons.md): "
    + ", ".join(f"{code} {category.value}" for category, code in STOP_EXIT_CODES.items())
    + f", {BAD_INPUT} bad input (job file, option)."
)

OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


@app.command(
    help="Run a job to its stop and print its summary and reports.\n\n"
    "--max-cycles, --max-seconds, --max-tokens, --max-cost... replace those limits "
    f"of the job file's budget: for this run.\n\n{EXIT_CODES}"
)
@option_groups(leave_out={"add_cycles"})
def run(
    job_file: Annotated[str, typer.Argument(help="The job file (YAML).")],
    db: DbOption = None,
    as_json: JsonOption = False,
    no_audit: Annotated[
        bool, typer.Option("--no-audit", help="Do not record the run (nothing to query later).")
    ] = False,
    all_facts: Annotated[
        bool,
        typer.Option(
            "--facts", help="With --json: the facts of every key, not only the report keys."
        ),
    ] = False,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            help="Export OpenTelemetry traces over OTLP (OTEL_* variables); "
            "on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set.",
        ),
    ] = False,
    budget: BudgetFlags = NO_BUDGET_OPTIONS,
    acting: RunnerFlags = NO_RUNNER_OPTIONS,
) -> None:
    # every error of the file, its references that name nothing included: refused at
    # once, before a store is created
    job = job_for(job_file, references=True)
    # --max-* over the job file's budget: (recorded in the run's checkpoints, so a
    # resume of this run goes on with it)
    if budget.changes():
        job.spec = job.spec.model_copy(update={"budget": budget.over(job.spec.budget)})
    store = open_run_store(db, enabled=not no_audit)
    if isinstance(store, SqlRunStore):
        # a keyed store's runs need its key: refused before anything is written
        with failing_on(ConvergeError):
            require_key(store, "starting a run")
    # who runs, checked before anything is written: four eyes relies on the name
    who = acting.principal(store)
    asked(store, who, Action.START_RUN, job_view(job.spec.name, job.raw))
    if otel or any(os.environ.get(v) for v in OTLP_ENDPOINTS):
        result = _run_traced(job, store, as_json=as_json)
    else:
        result = execute_with_progress(job, store, as_json=as_json)
    if no_audit:
        _warn_unrecorded_gates(job)
    finish_leg(
        store,
        job,
        result,
        by=who.name,
        action="ran",
        as_json=as_json,
        all_facts=all_facts,
        db=db,
    )


def _run_traced(job: Job, store: RunStore | None, *, as_json: bool) -> RunResult:
    """The run with OpenTelemetry traces (``converge.telemetry``, extra ``otel``)."""
    with failing_on(ConvergeError):
        from converge.telemetry import Tracing
    tracing = Tracing.start()
    try:
        # execute_with_progress builds the engine and hands it to us to run
        return execute_with_progress(
            job,
            store,
            as_json=as_json,
            resume=lambda engine: tracing.run(
                tracing.instrument(engine), job.name, job.spec.initial or None
            ),
        )
    finally:
        tracing.shutdown()


def _warn_unrecorded_gates(job: Job) -> None:
    """A HITL pause of an unrecorded run could never be approved or rejected."""
    if any(g.hitl is not None for g in job.spec.gates):
        err.print(
            "[yellow]warning:[/] this job has HITL gates and --no-audit records nothing: "
            "a pause at a gate could never be approved or rejected",
            highlight=False,
            soft_wrap=True,
        )
