"""What the commands that read the audit trail share: the store opened to read,
JSON on stdout, the values of ``--category``, ``--kind`` and ``--status``, and the
warning of a run that looks altered.

And their ``RUN`` argument (:data:`RunArgument`) and the run it names, as its reader
may see it (:func:`read_run`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from audit import SqlRunStore
from audit.queries import tamper_hint
from converge.cli.actors import ask_read, reader
from converge.cli.markup import escape
from converge.cli.render import err, fail, open_run_store, resolve_run
from engine import ConvergeError, Fact, StopCategory
from engine.status import RunStatus
from engine.stop_categories import STOP_KINDS

if TYPE_CHECKING:  # asked where a run is read: a listing imports no access policy
    from converge.access import Action, Person

__all__ = [
    "CATEGORIES",
    "KINDS",
    "STATUSES",
    "RunArgument",
    "one_of",
    "print_json",
    "read_run",
    "read_store",
    "warn_if_tampered",
]

STATUSES = tuple(s.value for s in RunStatus)
CATEGORIES = tuple(c.value for c in StopCategory)
KINDS = tuple(sorted(STOP_KINDS))


def read_store(db: str | None, token: str | None = None) -> SqlRunStore:
    """The store of ``--db`` opened to read; exits 2 when it cannot be opened or is
    a SQLite file that does not exist. With a person's ``token``, opened to write
    as well: a refusal of theirs goes to the access log (docs/access.md)."""
    # reading commands open SQLite read-only: an archived, write-protected copy works;
    # a SQLite file that does not exist is refused, not created
    store = open_run_store(db, read_only=not token, must_exist=True)
    assert isinstance(store, SqlRunStore)
    return store


RunArgument = Annotated[str, typer.Argument(help="The run (its id or a unique prefix).")]
"""A command's ``RUN``: a run's id or a unique prefix of it (:func:`read_run`)."""


def read_run(
    db: str | None, token: str | None, run_id: str, action: Action | None = None
) -> tuple[SqlRunStore, str, Person | None]:
    """``(store, full run id, reader)``: the store of ``--db`` opened to read
    (:func:`read_store`), the run ``run_id`` names in full or by a unique prefix
    (:func:`~converge.cli.render.resolve_run`) and the person of ``token`` (None
    without one: the database's holder). Exits 2 when the store cannot be opened,
    the run is not found or is ambiguous, or the reader may not do ``action``
    (see, export...; by default see) to it (refused in the access log)."""
    from converge.access import Action

    store = read_store(db, token)
    run_id = resolve_run(store, run_id)
    person = reader(store, token)
    ask_read(store, person, action or Action.SEE_RUN, run_id)
    return store, run_id, person


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def one_of(option: str, value: str | None, valid: tuple[str, ...]) -> None:
    """Exit 2 unless ``value`` (of ``option``) is None or one of ``valid``."""
    if value is not None and value not in valid:
        fail(f"{option} {value!r} is not one of: {', '.join(valid)}")


def warn_if_tampered(store: SqlRunStore, run_id: str, facts: Sequence[Fact] | None = None) -> None:
    """One warning line on stderr when the run looks altered (its head is not its
    chain's last link, or ``facts``, all of it, do not hash to its recorded facts
    root: :func:`audit.queries.tamper_hint`), naming the command that finds where;
    what the command shows is still shown. Nothing when the check itself fails."""
    try:
        hint = tamper_hint(store, run_id, facts)
    except ConvergeError:
        return
    if hint is not None:
        err.print(
            f"[bold yellow]warning:[/] run {escape(run_id)} may have been altered: "
            f"{escape(hint)}; converge verify {escape(run_id)} names the first altered row",
            highlight=False,
            soft_wrap=True,
        )
