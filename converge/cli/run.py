"""``converge run``: run a job file to its stop."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from converge.cli.render import (
    DbOption,
    JsonOption,
    execute_with_progress,
    fail,
    open_run_store,
    render_result,
)
from converge.jobs import Job, load_job
from engine import ConvergeError, RunResult, RunStore

app = typer.Typer()

OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


@app.command()
def run(
    job_file: Annotated[str, typer.Argument(help="The job file (YAML).")],
    db: DbOption = None,
    as_json: JsonOption = False,
    no_audit: Annotated[bool, typer.Option("--no-audit", help="Do not record the run.")] = False,
    otel: Annotated[
        bool,
        typer.Option(
            "--otel",
            help="Export OpenTelemetry traces over OTLP (OTEL_* variables); "
            "on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set.",
        ),
    ] = False,
) -> None:
    """Run a job to its stop; the exit code tells which kind of stop (0 = success)."""
    try:
        job = load_job(job_file)
    except ConvergeError as exc:
        fail(str(exc))
    store = open_run_store(db, enabled=not no_audit)
    if otel or any(os.environ.get(v) for v in OTLP_ENDPOINTS):
        result = _run_traced(job, store, as_json=as_json)
    else:
        result = execute_with_progress(job, store, as_json=as_json)
    render_result(result, as_json=as_json, job=job.name)
    raise typer.Exit(result.stop_reason.exit_code)


def _run_traced(job: Job, store: RunStore | None, *, as_json: bool) -> RunResult:
    """The run with OpenTelemetry traces (``converge.telemetry``, extra ``otel``)."""
    try:
        from converge.telemetry import Tracing
    except ConvergeError as exc:
        fail(str(exc))
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
