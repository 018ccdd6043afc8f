"""One leg of a job's run from the command line, the way ``run``, ``fork`` and
``resume`` all end it: the job loaded (from its file, or as the run recorded it),
the leg run under the progress bar (:func:`converge.cli.render.execute_with_progress`),
who did it recorded, its result rendered and the command's exit code its stop's.
"""

from __future__ import annotations

from typing import NoReturn

import typer

from audit.store import SqlRunStore
from converge.cli.actors import record
from converge.cli.render import failing_on
from converge.cli.results import render_result
from converge.decisions import job_of_run
from converge.jobs import Job, load_job
from engine import ConvergeError, RunResult, RunStore

__all__ = ["finish_leg", "job_for"]


def job_for(
    job_file: str | None,
    store: SqlRunStore | None = None,
    run_id: str = "",
    *,
    references: bool = False,
) -> Job:
    """The job in ``job_file`` (with ``references``, its references checked too), or
    else the one run ``run_id`` recorded in ``store``. Exits 2 when it cannot be
    loaded (``RunNotFound``, no job recorded), or naming each error of a job file
    (``JobFileError``), one line apiece."""
    with failing_on(ConvergeError):
        if job_file is not None:
            return load_job(job_file, references=references)
        if store is None:
            raise ConvergeError("give a job file")
        return job_of_run(store, run_id)


def finish_leg(
    store: RunStore | None,
    job: Job,
    result: RunResult,
    *,
    by: str,
    action: str,
    as_json: bool,
    all_facts: bool = False,
    db: str | None = None,
) -> NoReturn:
    """Record ``by`` (who ran it, as :func:`converge.cli.actors.runner` checked them
    before the leg) as having ``action``-ed the run (``"ran"``, ``"forked"``,
    ``"resumed"``), render ``result`` (the next commands with ``--db db`` when the
    command was given one) and exit with its stop's exit code."""
    record(store, result.run_id, by, action)
    render_result(result, as_json=as_json, job=job, all_facts=all_facts, store=store, db=db)
    raise typer.Exit(result.stop_reason.exit_code)
