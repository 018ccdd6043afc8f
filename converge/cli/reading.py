"""What the commands that read the audit trail share: the store opened to read,
JSON on stdout, the values of ``--category``, ``--kind`` and ``--status``, and the
warning of a run that looks altered."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from rich.markup import escape

from audit import SqlRunStore
from audit.queries import tamper_hint
from converge.cli.render import err, fail, open_run_store
from engine import ConvergeError, Fact, StopCategory
from engine.status import RunStatus
from engine.stop_categories import STOP_KINDS

__all__ = [
    "CATEGORIES",
    "KINDS",
    "STATUSES",
    "one_of",
    "print_json",
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
