"""Pieces shared by the ``converge`` commands: options, errors, store, rendering."""

from __future__ import annotations

import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
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
)
from converge.logs import structured
from engine import ConvergeError, RunStore

if TYPE_CHECKING:  # imported where used: a command that only reads pays for none
    from rich.console import Console
    from rich.table import Table

    from converge.cli.consoles import Output
    from converge.jobs import Job
    from engine import RunResult


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


def stdout_console() -> Console:
    """:data:`out` itself (made now), for rich objects that measure on a console."""
    return _OUT.console()


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


@contextmanager
def failing_on(*errors: type[Exception]) -> Iterator[None]:
    """``with failing_on(ConvergeError): ...``: one of the given errors raised in the
    block ends the command by :func:`fail` with the error's text (exit code
    ``BAD_INPUT``, 2); other exceptions pass on, and none is swallowed."""
    try:
        yield
    except errors as error:
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
