"""A run's result and reports as the ``converge`` commands print them: the stop, the
facts, the job's report tables and the commands that come next (``run``, ``resume``,
``approve`` and ``report`` print through here; ``--json`` the whole result)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import typer

from converge.cli.markup import escape
from converge.cli.pipes import drop_stdout
from converge.cli.render import fit_width, out, print_table, stdout_console
from converge.cli.tables import word_widths, wrap_words
from engine import RunStore

if TYPE_CHECKING:
    from rich.table import Table

    from converge.jobs import Job
    from converge.reports import Report, ReportSpec
    from engine import RunResult, StopReason


def report_table(report: Report, width: int | None = None) -> Table:
    """A report's rows as a rich table: every row, nothing cut, the first column
    (the report's main field) kept on one line when it fits. At ``width``
    characters (a terminal's) no word breaks: columns are at least their longest
    word, a cell wraps at spaces and after hyphens (``license-`` / ``expression``,
    never ``BSD-3-Cla`` / ``use``); only a table whose words cannot fit folds. The
    title is printed apart by :func:`print_reports`: as a table title, rich wraps
    it to the table's width (a two-column count table broke "Counts by license")."""
    from rich.measure import Measurement
    from rich.table import Table

    table = Table(title_justify="left")
    rows = report.rows
    widths = None
    if width is not None and rows:
        plain = _plain_report_table(report)
        options = out.options.update(max_width=10_000)
        if Measurement.get(stdout_console(), options, plain).maximum > width:
            widths = word_widths(report.columns, rows, width)
    for i, col in enumerate(report.columns):
        numeric = rows and all(r[i].isdigit() for r in rows)
        table.add_column(
            escape(col),
            no_wrap=i == 0 if widths is None else True,
            overflow="fold",
            justify="right" if numeric else "left",
            width=None if widths is None else widths[i],
        )
    for row in rows:
        cells = (
            row if widths is None else [wrap_words(v, w) for v, w in zip(row, widths, strict=True)]
        )
        table.add_row(*(escape(v) for v in cells))
    return table


def _plain_report_table(report: Report) -> Table:
    from rich.table import Table

    table = Table()
    for col in report.columns:
        table.add_column(escape(col), no_wrap=True)
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
            print_table(report_table(report, fit_width()))
        else:
            out.print(f"no {escape(report.key)} facts in this run", soft_wrap=True)


def render_result(
    result: RunResult,
    *,
    as_json: bool,
    job: str | Job | None = None,
    reports: Sequence[ReportSpec] | None = None,
    all_facts: bool = False,
    store: RunStore | None = None,
    db: str | None = None,
) -> None:
    """The summary of a run of ``job``: stop reason, explain, the next command (a
    paused run's ``converge approve GATE --by NAME``), criteria as evaluated at the
    stop, usage, budget, facts per key, then the job's report tables and, for a
    run recorded in ``store`` that stopped, the commands that look at its findings,
    replay and export it (:mod:`converge.cli.next_steps`; ``db``: the ``--db`` given).

    With ``as_json``, one JSON object: :meth:`RunResult.to_dict` plus ``"facts"``,
    ``{key: [content, ...]}`` for the report keys (every key with ``all_facts``).
    ``reports`` default to the ``report:`` entries of ``job`` when it is a :class:`Job`.
    A run paused at a gate in ``store`` also says what waits: the proposal at the
    gate and, by key, the proposals of its cycle merged after the decision (its
    criteria are as at the pause: they do not count those yet).

    A reader that closes the pipe early (``converge run job.yaml | head``) does not
    change the exit code: the rest of the output is dropped and the command exits
    with the stop's code (``typer.Exit``), as it would have after printing it all.
    """
    try:
        _render_result(
            result,
            as_json=as_json,
            job=job,
            reports=reports,
            all_facts=all_facts,
            store=store,
            db=db,
        )
        sys.stdout.flush()
    except BrokenPipeError:
        drop_stdout()
        raise typer.Exit(result.stop_reason.exit_code) from None


def print_next_commands(
    reason: StopReason, run_id: str = "", db: str | None = None, *, reports: bool = False
) -> None:
    """:func:`converge.cli.next_steps.next_lines`, one line each (``next:``, ``or:``):
    never wrapped inside a table cell, as they are copied and pasted."""
    from converge.cli.next_steps import next_lines

    for line in next_lines(reason, run_id, db, reports=reports):
        label, rest = line[:5], line[5:]
        out.print(f"[bold]{label}[/]{escape(rest)}", highlight=False, soft_wrap=True)


def _render_result(
    result: RunResult,
    *,
    as_json: bool,
    job: str | Job | None,
    reports: Sequence[ReportSpec] | None,
    all_facts: bool,
    store: RunStore | None = None,
    db: str | None = None,
) -> None:
    from rich.table import Table

    from converge.cli.next_steps import waiting_at_gate
    from converge.explaining import explain_result
    from converge.jobs import Job
    from converge.reports import build_reports, facts_by_key

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
    table.add_row("explain", escape(explain_result(result, store)))
    if len(result.signals) > 1:
        table.add_row("signals", escape("\n".join(f"{s.kind_code()}: {s}" for s in result.signals)))
    table.add_row("cycles", str(result.cycles))
    u = result.usage
    table.add_row("usage", f"{u.input_tokens}+{u.output_tokens} tokens, ${u.cost_usd:.4f}")
    table.add_row(
        "budget", f"{result.budget_status.summary()} (overall {result.budget_status.percent:.1f}%)"
    )
    table.add_row("duration", f"{result.duration_ms} ms")
    waiting = waiting_at_gate(store, result)
    if waiting:
        table.add_row("waiting", escape(waiting))
    at = " at the pause" if waiting else ""
    for c in result.criteria:
        table.add_row(
            f"criterion {escape(c.id)}",
            escape(c.outcome + at + (f" ({c.reason})" if c.reason else "")),
        )
    out.print(table)
    if reason.is_hitl_pending():
        print_next_commands(reason, db=db)
    counts = Counter(f.key for f in result.context)
    facts = Table(title="facts per key", title_justify="left")
    facts.add_column("key")
    facts.add_column("facts", justify="right")
    for key, n in counts.items():
        facts.add_row(escape(key), str(n))
    out.print(facts)
    print_reports(build_reports(reports, list(result.context)))
    if store is not None and not reason.is_hitl_pending():
        print_next_commands(reason, result.run_id, db, reports=bool(reports))
