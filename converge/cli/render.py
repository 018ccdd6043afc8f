"""Pieces shared by the ``converge`` commands: options, errors, store, rendering."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from audit import SqlRunStore, open_store, resolve_url
from converge.cli.markup import escape
from converge.cli.pipes import drop_stdout
from converge.cli.tables import (
    Column,
    fitted_table,
    kept_columns,
    natural_width,
    plain_table,
    word_widths,
    wrap_words,
)
from converge.logs import structured
from engine import ConvergeError, RunStore

if TYPE_CHECKING:  # imported where used: a command that only reads pays for none
    from rich.console import Console
    from rich.table import Table

    from converge.cli.consoles import Output
    from converge.jobs import Job
    from converge.reports import Report, ReportSpec
    from engine import RunResult, StopReason


class _OnFirstUse:
    """A console made the first time one of its attributes is asked for: a command
    that prints only plain text to a pipe (:func:`print_fitted`) imports no rich
    console."""

    def __init__(self, make: Callable[[], Console]) -> None:
        self._make = make
        self.made: Console | None = None

    def console(self) -> Console:
        """The console, made now if it was not yet."""
        if self.made is None:
            self.made = self._make()
        return self.made

    def __getattr__(self, name: str) -> Any:
        return getattr(self.console(), name)


def _output() -> Console:
    from converge.cli.consoles import Output

    return Output()


def _error_console() -> Console:
    from converge.cli.consoles import error_console

    return error_console()


_OUT = _OnFirstUse(_output)
_ERR = _OnFirstUse(_error_console)
out = cast("Output", _OUT)
"""The console of stdout (:class:`converge.cli.consoles.Output`), made on first use."""
err = cast("Console", _ERR)
"""The console of stderr, made on first use."""


def stderr_console() -> Console:
    """:data:`err` itself (made now), for rich objects that take a console."""
    return _ERR.console()


def _piped_plain() -> bool:
    """Whether stdout is a pipe or file rich would print to without a terminal's width
    or colours, in UTF-8, told without making :data:`out`: no variable that makes rich
    take it for a terminal or size it (``FORCE_COLOR``, ``TTY_COMPATIBLE``,
    ``COLUMNS``...), no notebook or IDLE, not a tty. False when unsure: :data:`out` then
    answers."""
    import builtins

    if any(name in os.environ for name in _TERMINAL_VARIABLES):
        return False
    if hasattr(builtins, "get_ipython") or "idlelib" in sys.modules:
        return False
    stream = sys.stdout
    try:
        if stream.isatty():
            return False
    except (AttributeError, ValueError):
        return False
    return (getattr(stream, "encoding", None) or "utf-8").lower() in ("utf-8", "utf8")


_TERMINAL_VARIABLES = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS")
"""What could make rich print to a pipe as to a terminal, or as wide as it says."""

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db", help="SQLAlchemy URL or SQLite path (default $CONVERGE_DB or converge.db)"
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

BAD_INPUT = 2


def local_time(ts: float | None) -> str:
    """Unix seconds as local ``YYYY-MM-DD HH:MM:SS`` ("" for None); a value that is no
    date (an edited cell) as stored."""
    if ts is None:
        return ""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return str(ts)


def readable_budget(budget: Any) -> str:
    """A recorded budget (``{"max_cycles": 20, ...}``) as ``cycles 20, facts 10000,
    seconds 120``: its limits only; anything else as :func:`readable`."""
    from converge.values import readable

    if not isinstance(budget, dict):
        return readable(budget)
    limits = [
        f"{k.removeprefix('max_').replace('_', ' ')} {readable(v)}"
        for k, v in budget.items()
        if k.startswith("max_") and v is not None
    ]
    return ", ".join(limits) if limits else "no limit"


def say_error(message: str) -> None:
    """Print an error on stderr, ``error: MESSAGE`` (the message as text); a message
    of several lines (a job file's errors, each at its line) is one ``error:`` each.
    A process logging JSON lines (``--log-format json``) logs it as one instead."""
    if structured():
        logging.getLogger("converge.cli").error(message, extra={"event": "error"})
        return
    for line in message.splitlines() or [""]:
        err.print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)


def fail(message: str, code: int = BAD_INPUT) -> NoReturn:
    """Print a one-line error on stderr and exit with ``code``."""
    say_error(message)
    raise typer.Exit(code)


class failing_on:
    """``with failing_on(ConvergeError): ...``: one of the given errors raised in the
    block ends the command by :func:`fail` with the error's text (exit code
    ``BAD_INPUT``, 2); other exceptions pass on, and none is swallowed."""

    __slots__ = ("errors",)

    def __init__(self, *errors: type[Exception]) -> None:
        self.errors = errors

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if isinstance(error, self.errors):
            fail(str(error))


def open_run_store(
    db: str | None,
    *,
    enabled: bool = True,
    read_only: bool = False,
    must_exist: bool | None = None,
) -> RunStore | None:
    """The audit store for ``--db`` (None when disabled; ``read_only`` for commands
    that only read, so a write-protected SQLite copy works). Exits 2 on a bad URL,
    and, with ``must_exist`` (default: ``read_only``), on a SQLite file that does
    not exist: a command that reads a store never creates an empty one."""
    if not enabled:
        return None
    if must_exist if must_exist is not None else read_only:
        missing = missing_sqlite_file(db)
        if missing is not None:
            fail(f"no audit store at {missing} (use --db to point at an existing store)")
    with failing_on(ConvergeError):
        store: RunStore = open_store(db, read_only=read_only)
        return store


def open_sql_store(db: str | None, *, must_exist: bool = True) -> SqlRunStore:
    """The audit store for ``--db`` opened to write (:func:`open_run_store`); exits 2
    on a bad URL and, with ``must_exist``, on a SQLite file that does not exist."""
    store = open_run_store(db, must_exist=must_exist)
    assert isinstance(store, SqlRunStore)
    return store


def missing_sqlite_file(db: str | None) -> str | None:
    """The path of the SQLite file ``db`` names (``--db``, ``$CONVERGE_DB`` or
    ``converge.db``) when that file does not exist; None when it exists or ``db``
    is no SQLite file (a PostgreSQL URL, ``:memory:``, a ``file:`` URI)."""
    try:
        url = make_url(resolve_url(db))
    except ArgumentError:
        return None  # open_store says what is wrong with it
    path = url.database
    if url.get_backend_name() != "sqlite" or not path or path == ":memory:":
        return None
    if path.startswith("file:") or Path(path).exists():
        return None
    return path


def resolve_run(store: RunStore | None, run_id: str) -> str:
    """The full id of the run ``run_id`` names, in full or by a unique prefix
    (:meth:`audit.SqlRunStore.resolve_run_id`); exits 2 naming the candidates of
    an ambiguous prefix, or saying there is no such run."""
    assert isinstance(store, SqlRunStore)
    with failing_on(ConvergeError):
        return store.resolve_run_id(run_id)


def execute_with_progress(
    job: Job, store: RunStore | None, *, as_json: bool, resume: Any = None
) -> RunResult:
    """Build the job's engine and run it (or ``resume(engine)``) under a progress bar."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from converge.interrupts import cancel_on_signals
    from converge.notifications import notify_after_command

    show = not as_json and err.is_terminal
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("budget {task.percentage:>5.1f}%"),
        TimeElapsedColumn(),
        console=stderr_console(),
        transient=True,
        disable=not show,
    ) as progress:
        task = progress.add_task(f"{job.name}: starting", total=100)

        def on_cycle(cycle: int, percent: float) -> None:
            progress.update(
                task, completed=min(percent, 100.0), description=f"{job.name}: cycle {cycle}"
            )

        with failing_on(ConvergeError):
            engine = job.build_engine(store, progress=on_cycle)
        with failing_on(ConvergeError), cancel_on_signals(engine):
            if resume is not None:
                result: RunResult = resume(engine)
            else:
                result = engine.run(job.spec.initial or None)
    notify_after_command(store)  # gate notifications due (never changes the exit code)
    return result


def fit_width() -> int | None:
    """The width (characters) tables must fit: the terminal's, or ``$COLUMNS`` when
    set; None when the output is piped or redirected without ``$COLUMNS`` (a table
    then takes the width its cells need, so ``grep`` sees whole rows)."""
    if out.is_terminal or os.environ.get("COLUMNS", "").strip().isdigit():
        return out.width
    return None


def print_fitted(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    """A table of plain-text ``rows`` fitted to :func:`fit_width` (low-priority
    columns dropped, :func:`converge.cli.tables.fitted_table`), printed whole."""
    plain = _OUT.made is None and _piped_plain()  # rich's console neither made nor imported
    width = None if plain else fit_width()
    if plain or (
        width is None and out.color_system is None and out.encoding.lower() in ("utf-8", "utf8")
    ):
        # piped, no colours: the text rich would print, without rich's renderer
        keep = kept_columns(columns, rows)
        text = plain_table(title, [columns[i] for i in keep], [[r[i] for i in keep] for r in rows])
        if text is not None:
            _write(text)
            return
    table = fitted_table(title, columns, rows, width)
    print_table(table, None if width is not None else natural_width(columns, rows))


_EMOJI_CODE = re.compile(r":\S*?:")
"""What rich might take for an emoji code (``:smile:``) and replace."""


def print_line(markup: str, plain: str) -> None:
    """Print ``markup`` (rich markup) on stdout; ``plain`` is the same text without its
    tags. Piped without colours (as :func:`print_fitted` tells it), ``plain`` is written
    as it is when rich would print exactly that: one line of printable characters,
    no space at either end, nothing rich could read as an emoji code, narrower than
    the unwrapped width; else rich prints ``markup``."""
    light = (
        _OUT.made is None
        and plain.isprintable()
        and plain == plain.strip()
        and len(plain) < 10_000
        and _EMOJI_CODE.search(plain) is None
        and _piped_plain()
    )
    if light:
        _write(plain + "\n")
    else:
        out.print(markup)


def _write(text: str) -> None:
    """``text`` on stdout as :data:`out` writes (a closed pipe: :meth:`Output.on_broken_pipe`)."""
    stream = out.file if _OUT.made is not None else sys.stdout  # the file out would take
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        drop_stdout()  # as Output.on_broken_pipe


def print_table(table: Table, needed: int | None = None) -> None:
    """Print ``table`` whole: on a terminal (or with ``$COLUMNS``) it wraps to that
    width; piped or redirected, it takes the width its cells need (``needed``
    characters or fewer, when the caller knows; else rich measures it, which costs
    as much as printing it), so no value is cut or broken."""
    width = fit_width()
    if width is not None:
        out.print(table)
        return
    from rich.measure import Measurement

    from converge.cli.consoles import Output

    if needed is None:
        options = out.options.update(max_width=100_000)
        needed = Measurement.get(_OUT.console(), options, table).maximum
    # an Output too: a closed pipe ends a run's output with the run's exit code
    wide = Output(width=max(needed, out.width), no_color=out.no_color, highlight=False)
    wide.print(table, crop=False)


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
        if Measurement.get(_OUT.console(), options, plain).maximum > width:
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
