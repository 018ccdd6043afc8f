"""Pieces shared by the ``converge`` commands: options, errors, store, rendering."""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from audit import open_store
from converge.interrupts import cancel_on_signals
from converge.jobs import Job
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


def open_run_store(db: str | None, *, enabled: bool = True) -> RunStore | None:
    """The audit store for ``--db`` (None when disabled). Exits 2 on a bad URL."""
    if not enabled:
        return None
    try:
        store: RunStore = open_store(db)
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


def render_result(result: RunResult, *, as_json: bool, job: str | None = None) -> None:
    """The summary of a run of ``job``: stop reason, explain, facts per key, usage, budget."""
    if as_json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
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
        facts.add_row(key, str(n))
    out.print(facts)
