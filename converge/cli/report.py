"""``converge report RUN``: a run's report tables, rendered from the store.

The reports are the ``report:`` entries of the job the run recorded
(:mod:`converge.reports`); ``--key K`` shows the reports of that key only, or,
when the job has none for it, every field of its facts. A run whose job has no
``report:`` gets one table per fact key. ``--format`` picks rich tables,
Markdown, CSV or JSON, so a CI job can publish the result.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from audit import SqlRunStore
from converge.cli.actors import ReaderTokenOption
from converge.cli.commands import CommandGroup
from converge.cli.reading import RunArgument, read_run, warn_if_tampered
from converge.cli.render import DbOption, fail, failing_on
from converge.cli.results import print_reports
from converge.jobs import job_from_record
from converge.reports import (
    FORMATS,
    ReportSpec,
    build_reports,
    render_csv,
    render_markdown,
    reports_json,
)
from engine import ConvergeError, Fact

app = CommandGroup()


def run_reports(store: SqlRunStore, run_id: str, key: str | None = None) -> list[ReportSpec]:
    """The report specs for ``run_id``: its job's ``report:`` (those of ``key`` when
    given), else one spec per fact key (or for ``key``) showing every field.
    Raises ``ConvergeError`` for an unknown run."""
    header = store.get_run_header(run_id)
    specs: list[ReportSpec] = []
    if header.job_spec:
        try:
            specs = list(job_from_record(header.job_spec).spec.report)
        except ConvergeError:
            specs = []  # a job this converge cannot read: fall back to every key
    if key is not None:
        return [s for s in specs if s.key == key] or [ReportSpec(key=key)]
    if specs:
        return specs
    keys = dict.fromkeys(f.key for f in store.facts(run_id))
    return [ReportSpec(key=k) for k in keys]


@app.command("report")
def report_cmd(
    run_id: RunArgument,
    key: Annotated[
        str | None, typer.Option("--key", help="Only the reports of this fact key.")
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", "-f", help=f"Output format: {', '.join(FORMATS)} (json is complete)."
        ),
    ] = "table",
    db: DbOption = None,
    token: ReaderTokenOption = None,
) -> None:
    """The report tables of a recorded run (its job file's report: entries)."""
    if fmt not in FORMATS:
        fail(f"--format {fmt!r} is not one of: {', '.join(FORMATS)}")
    store, run_id, _ = read_run(db, token, run_id)  # a unique prefix of the id will do
    with failing_on(ConvergeError):
        specs = run_reports(store, run_id, key)
        facts: list[Fact] = store.facts(run_id)
    warn_if_tampered(store, run_id, facts)
    reports = build_reports(specs, facts)
    if fmt == "json":
        sys.stdout.write(json.dumps(reports_json(reports, run_id), indent=2, default=str) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(render_markdown(reports))
    elif fmt == "csv":
        sys.stdout.write(render_csv(reports))
    else:
        print_reports(reports)
