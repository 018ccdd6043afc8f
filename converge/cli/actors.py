"""Who runs a command that starts or continues a run (``--by``): recorded with the
run (``audit.people._people.record_actor``), so that a four-eyes gate refuses them as its
decider."""

from __future__ import annotations

import contextlib
import getpass
import os
from typing import Annotated

import typer

from audit.people import record_actor
from audit.store import SqlRunStore
from engine import ConvergeError, RunStore

ActorOption = Annotated[
    str | None,
    typer.Option(
        "--by",
        help="Who starts or continues the run (default $CONVERGE_USER, else your login); "
        "a four-eyes gate refuses them as its decider.",
    ),
]


def actor(name: str | None) -> str:
    """``--by``, else ``$CONVERGE_USER``, else the login name."""
    if name and name.strip():
        return name.strip()
    try:
        return os.environ.get("CONVERGE_USER") or getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return "unknown"


def record(store: RunStore | None, run_id: str, name: str | None, action: str) -> None:
    """Record ``actor(name)`` as having ``action``-ed the run (nothing without a store)."""
    if not isinstance(store, SqlRunStore):
        return
    # the run itself is recorded; a failure here only loses the name for four eyes
    with contextlib.suppress(ConvergeError):
        record_actor(store, run_id, actor(name), action)
