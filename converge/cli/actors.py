"""Who runs a command that starts or continues a run (``--by``, ``--token``): checked
before anything is written (:func:`converge.governance.cli_runner`: a known person
once anyone is registered; the token's own person when tokens are required), then
recorded with the run (``audit.people.record_actor``), so that a four-eyes gate
refuses them as its decider."""

from __future__ import annotations

import contextlib
import getpass
import os
from typing import Annotated

import typer

from audit.people import record_actor
from audit.store import SqlRunStore
from converge.cli.render import fail
from converge.governance import cli_runner
from engine import ConvergeError, RunStore

__all__ = ["ActorOption", "RunnerTokenOption", "actor", "named", "record", "runner"]

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


def runner(store: RunStore | None, by: str | None, token: str | None) -> str:
    """Who runs, as recorded for four eyes: ``--by`` / ``$CONVERGE_USER`` / the token's
    person / the login, checked against the store (:func:`cli_runner`) before
    anything is written. Exits 2 with one line when refused (an unknown person, a
    missing, bad or viewer token, a token of someone else); unchecked without a
    store (``--no-audit``: nothing is recorded)."""
    if not isinstance(store, SqlRunStore):
        return actor(by)
    try:
        return cli_runner(store, named(by), token, _login())
    except ConvergeError as exc:
        fail(str(exc))


def record(store: RunStore | None, run_id: str, name: str, action: str) -> None:
    """Record ``name`` (:func:`runner`'s) as having ``action``-ed the run (nothing
    without a store)."""
    if not isinstance(store, SqlRunStore):
        return
    # the run itself is recorded; a failure here only loses the name for four eyes
    with contextlib.suppress(ConvergeError):
        record_actor(store, run_id, name, action)
