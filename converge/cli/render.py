"""Pieces shared by the ``converge`` commands: options, errors, store, rendering."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from audit import open_store
from converge.interrupts import cancel_on_signals
from converge.jobs import Job
from converge.reports import Report, ReportSpec, build_reports, facts_by_key
from engine import ConvergeError, RunResult, RunStore

out = Console()
err = Console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="SQLAlchemy URL or SQLite path (default $CONVERGE_DB or converge.db)"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

BAD_INPUT = 2


def fail(message: str, code: int = BAD_INPUT) -> NoReturn:
    """Print a one-line error on stderr and exit with ``code``."""
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def open_run_store(
    db: str | None, *, enabled: bool = True, read_only: bool = False
) -> RunStore | None:
    """The audit store for ``--db`` (None when disabled; ``read_only`` for commands
    that only read, so a write-protected SQLite copy works). Exits 2 on a bad URL."""
    if not enabled:
        return None
    try:
        store: RunStore = open_store(db, read_only=read_only)
        return store
    except ConvergeError as exc:
        fail(str(exc))


def execute_with_progress(
    job: Job, store: RunStore | None, *, as_json: bool, resume: Any = None
) -> RunResult:
    """Build the job's engine and run it (or ``resume(engine)``) under a progress bar."""
    show = not as_json and err.is_terminal
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("budget {task.percentage:>5.1f}%"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not show,
    ) as progress:
        task = progress.add_task(f"{job.name}: starting", total=100)

        def on_cycle(cycle: int, percent: float) -> None:
            progress.update(
                task, completed=min(percent, 100.0), description=f"{job.name}: cycle {cycle}"
            )

        try:
            engine = job.build_engine(store, progress=on_cycle)
        except ConvergeError as exc:
            fail(str(exc))
        try:
            with cancel_on_signals(engine):
                if resume is not None:
                    result: RunResult = resume(engine)
                else:
                    result = engine.run(job.spec.initial or None)
        except ConvergeError as exc:
            fail(str(exc))
    return result


def print_table(table: Table) -> None:
    """Print ``table`` whole: on a terminal it wraps to the terminal's width; piped or
    redirected, it takes the width its cells need, so no value is cut or broken."""
    if out.is_terminal:
        out.print(table)
        return
    needed = Measurement.get(out, out.options.update(max_width=100_000), table).maximum
    wide = Console(width=max(needed, out.width), no_color=out.no_color, highlight=False)
    wide.print(table, crop=False)


def report_table(report: Report) -> Table:
    """A report's rows as a rich table: every row, cells folded (never cut), the
    first column (the report's main field) kept on one line. The title is printed
    apart by :func:`print_reports`: as a table title, rich wraps it to the table's
    width (a two-column count table broke "Counts by license" over two lines)."""
    table = Table(title_justify="left")
    for i, col in enumerate(report.columns):
        numeric = report.rows and all(r[i].isdigit() for r in report.rows)
        table.add_column(
            escape(col),
            no_wrap=i == 0,
            overflow="fold",
            justify="right" if numeric else "left",
        )
    for row in report.rows:
        table.add_row(*(escape(v) for v in row))
    return table


def print_reports(reports: Iterable[Report]) -> None:
    """Each report: its title and row count on one line, then its table
    (:func:`report_table`), or, when it has no rows (a run that stopped before
    producing such facts), one line saying so instead of an empty table."""
    for report in reports:
        out.print(f"[bold]{escape(report.title)}[/] ({len(report.rows)})", soft_wrap=True)
        if report.rows:
            print_table(report_table(report))
        else:
            out.print(f"no {escape(report.key)} facts in this run", soft_wrap=True)


def render_result(
    result: RunResult,
    *,
    as_json: bool,
    job: str | Job | None = None,
    reports: Sequence[ReportSpec] | None = None,
    all_facts: bool = False,
) -> None:
    """The summary of a run of ``job``: stop reason, explain, criteria as evaluated at
    the stop, usage, budget, facts per key, then the job's report tables.

    With ``as_json``, one JSON object: :meth:`RunResult.to_dict` plus ``"facts"``,
    ``{key: [content, ...]}`` for the report keys (every key with ``all_facts``).
    ``reports`` default to the ``report:`` entries of ``job`` when it is a :class:`Job`.
    """
    if isinstance(job, Job):
        if reports is None:
            reports = job.spec.report
        job = job.name
    reports = list(reports or ())
    if as_json:
        data = result.to_dict()
        keys = None if all_facts else [r.key for r in reports]
        data["facts"] = facts_by_key(result.context, keys)
        sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
        return
    reason = result.stop_reason
    colour = "green" if reason.is_success() else "yellow" if reason.is_hitl_pending() else "red"
    title = f"{job}: run {result.run_id}" if job else f"run {result.run_id}"
    table = Table(title=escape(title), show_header=False, title_justify="left")
    table.add_column("", style="bold")
    table.add_column("")
    table.add_row("stop", f"[{colour}]{escape(str(reason))}[/]")
    table.add_row(
        "kind", f"{reason.kind_code()} ({reason.category.value}, exit {reason.exit_code})"
    )
    table.add_row("explain", escape(reason.explain()))
    if len(result.signals) > 1:
        table.add_row("signals", escape("\n".join(f"{s.kind_code()}: {s}" for s in result.signals)))
    table.add_row("cycles", str(result.cycles))
    u = result.usage
    table.add_row("usage", f"{u.input_tokens}+{u.output_tokens} tokens, ${u.cost_usd:.4f}")
    table.add_row(
        "budget", f"{result.budget_status.summary()} (overall {result.budget_status.percent:.1f}%)"
    )
    table.add_row("duration", f"{result.duration_ms} ms")
    for c in result.criteria:
        table.add_row(
            f"criterion {escape(c.id)}", escape(c.outcome + (f" ({c.reason})" if c.reason else ""))
        )
    out.print(table)
    counts = Counter(f.key for f in result.context)
    facts = Table(title="facts per key", title_justify="left")
    facts.add_column("key")
    facts.add_column("facts", justify="right")
    for key, n in counts.items():
        facts.add_row(escape(key), str(n))
    out.print(facts)
    print_reports(build_reports(reports, list(result.context)))
