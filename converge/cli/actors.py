"""Who acts from the command line (``--by``, ``--token``) and whether they may: the
person is checked before anything is written (:func:`converge.governance.cli_runner`:
a known person once anyone is registered; the token's own person when tokens are
required), asked of the access policy (:func:`asked`: exit 2 with one line and a row
in the access log when refused), then recorded with the run
(``audit.people.record_actor``), so that a four-eyes gate refuses them as its
decider.

A read command takes ``--token`` too (:func:`reader`): without one it reads as
whoever holds the database (who could read the file itself); with one, as that
person, by the same policy as the inbox."""

from __future__ import annotations

import contextlib
import getpass
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from audit.store import SqlRunStore
from converge.cli.render import failing_on, open_sql_store
from engine import ConvergeError, RunStore

if TYPE_CHECKING:  # imported where asked: a command read without a token asks nothing
    from audit.people import Principal
    from converge.access import Action, Person, Resource

__all__ = [
    "NO_RUNNER_OPTIONS",
    "ActorOption",
    "ManagerTokenOption",
    "ReaderTokenOption",
    "RunnerFlags",
    "RunnerTokenOption",
    "actor",
    "ask_read",
    "asked",
    "managed_store",
    "manager",
    "named",
    "reader",
    "record",
    "runner",
]

ActorOption = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Who starts or continues the run (default $CONVERGE_USER, else your token's "
        "person, else your login); a four-eyes gate refuses them as its decider.",
    ),
]
RunnerTokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="CONVERGE_TOKEN",
        show_envvar=True,
        help="Your API token (converge token add NAME): proves who runs (--by must be "
        "its person); required when the store requires tokens (converge config show).",
    ),
]


@dataclass(frozen=True, slots=True)
class RunnerFlags:
    """``--by`` and ``--token`` of a command that runs, resumes, forks, cancels or
    comments, as given (an option group: :func:`converge.cli.commands.option_groups`)."""

    by: ActorOption = None
    token: RunnerTokenOption = None

    def principal(
        self, store: RunStore | None, *, doing: str = "run, submit, resume or fork a run"
    ) -> Principal:
        """Who acts, checked before anything is written: :func:`runner`."""
        return runner(store, self.by, self.token, doing=doing)


NO_RUNNER_OPTIONS = RunnerFlags()
"""Neither option given: the default of a command's :class:`RunnerFlags` parameter."""

ReaderTokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="CONVERGE_TOKEN",
        show_envvar=True,
        help="Read as this token's person, by the inbox's access policy (docs/access.md); "
        "without it, as whoever holds the database.",
    ),
]


def named(name: str | None) -> str | None:
    """``--by``, else ``$CONVERGE_USER``; None when neither names anyone."""
    if name and name.strip():
        return name.strip()
    return (os.environ.get("CONVERGE_USER") or "").strip() or None


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "unknown"


def actor(name: str | None) -> str:
    """``--by``, else ``$CONVERGE_USER``, else the login name (unchecked)."""
    return named(name) or _login()


def runner(
    store: RunStore | None,
    by: str | None,
    token: str | None,
    *,
    doing: str = "run, submit, resume or fork a run",
) -> Principal:
    """Who acts, as recorded for four eyes: ``--by`` / ``$CONVERGE_USER`` / the token's
    person / the login, checked against the store (:func:`cli_runner`) before
    anything is written. Exits 2 with one line when refused (an unknown person, a
    missing or bad token, a token of someone else); unchecked without a store
    (``--no-audit``: nothing is recorded)."""
    from audit.people import Principal
    from converge.governance import cli_runner

    if not isinstance(store, SqlRunStore):
        return Principal(actor(by), "admin")
    with failing_on(ConvergeError):
        return cli_runner(store, named(by), token, _login(), doing=doing)


def asked(
    store: RunStore | None,
    who: Principal,
    action: Action,
    resource: Resource | Callable[[], Resource],
) -> Person | None:
    """Ask the access policy whether ``who`` may do ``action`` to ``resource`` (or to
    what it gives: read from the store here, so that an unreadable row is one line);
    their person when allowed; exits 2 with the policy's sentence when refused
    (written to the access log, nothing else). Without a store, nothing to ask."""
    if not isinstance(store, SqlRunStore):
        return None
    from converge.access import ask, person_of

    with failing_on(ConvergeError):
        person = person_of(who)
        target = resource() if callable(resource) else resource
        ask(store, person, action, target, client="cli")
    return person


def ask_read(store: SqlRunStore, person: Person | None, action: Action, run_id: str) -> None:
    """Refuse (exit 2, one line, in the access log) unless ``person`` may do
    ``action`` (see, follow, export) to run ``run_id``; None (no token) may."""
    if person is None:
        return
    from converge.access import ask, run_view

    with failing_on(ConvergeError):
        ask(store, person, action, run_view(store, run_id), client="cli")


ManagerTokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        help="Act as this token's person, who must be an admin (docs/access.md); without "
        "it, as whoever holds the database.",
    ),
]


def manager(store: SqlRunStore, token: str | None) -> None:
    """Refuse (exit 2, one line, in the access log) a change to the store's people,
    tokens or settings unless ``token``'s person may make it; without a token, the
    database's holder may."""
    person = reader(store, token)
    if person is None:
        return
    from converge.access import STORE, Action, ask

    with failing_on(ConvergeError):
        ask(store, person, Action.MANAGE_PEOPLE, STORE, client="cli")


def managed_store(db: str | None, token: str | None, *, must_exist: bool = True) -> SqlRunStore:
    """The store of ``--db`` (:func:`~converge.cli.render.open_sql_store`) once
    ``token``'s person may change its people, tokens or settings (:func:`manager`:
    exit 2, one line, in the access log, when they may not)."""
    store = open_sql_store(db, must_exist=must_exist)
    manager(store, token)
    return store


def reader(store: SqlRunStore, token: str | None) -> Person | None:
    """Who reads: the person of ``token`` (exit 2 for a bad one), or None without a
    token (the database's holder, who sees everything)."""
    if not token:
        return None
    from converge.access import person_of
    from converge.governance import token_person

    with failing_on(ConvergeError):
        who = token_person(store, token)
        return person_of(who)


def record(store: RunStore | None, run_id: str, name: str, action: str) -> None:
    """Record ``name`` (:func:`runner`'s) as having ``action``-ed the run (nothing
    without a store)."""
    if not isinstance(store, SqlRunStore):
        return
    from audit.people import record_actor

    # the run itself is recorded; a failure here only loses the name for four eyes
    with contextlib.suppress(ConvergeError):
        record_actor(store, run_id, name, action)
