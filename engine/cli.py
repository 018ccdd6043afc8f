"""``converge``: the command line, and the composition root of the project.

It parses, calls the library, and renders with rich; every figure it shows is
reachable from Python. Exit codes of ``run``, ``approve`` and ``resume`` follow
the stop reason (DESIGN.md §5); a bad job file or bad input exits 2.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from converge.jobs import load_job
from engine.cli_common import (
    DbOption,
    JsonOption,
    execute_with_progress,
    fail,
    open_run_store,
    render_result,
)
from engine.errors import ConvergeError

app = typer.Typer(
    name="converge",
    help="Run convergence jobs whose every stop is typed, audited and explainable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Run convergence jobs whose every stop is typed, audited and explainable."""


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


def _register_commands() -> None:
    """Commands of the audit trail and of gates live in their own modules."""
    for module in ("engine.cli_audit", "engine.cli_gates"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.register(app)


_register_commands()


def main() -> None:  # pragma: no cover - the console script
    """Entry point of the ``converge`` console script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
