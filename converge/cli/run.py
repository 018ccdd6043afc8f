"""``converge run``: run a job file to its stop."""

from __future__ import annotations

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
from converge.jobs import load_job
from engine import ConvergeError

app = typer.Typer()


@app.command()
def run(
    job_file: Annotated[str, typer.Argument(help="The job file (YAML).")],
    db: DbOption = None,
    as_json: JsonOption = False,
    no_audit: Annotated[bool, typer.Option("--no-audit", help="Do not record the run.")] = False,
) -> None:
    """Run a job to its stop; the exit code tells which kind of stop (0 = success)."""
    try:
        job = load_job(job_file)
    except ConvergeError as exc:
        fail(str(exc))
    store = open_run_store(db, enabled=not no_audit)
    result = execute_with_progress(job, store, as_json=as_json)
    render_result(result, as_json=as_json, job=job.name)
    raise typer.Exit(result.stop_reason.exit_code)
