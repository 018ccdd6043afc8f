"""``converge events RUN``: a run's audit events, from the command line.

One row per event (seq, cycle, kind, time, a one-line summary of its payload), in
the order the chain holds them; ``--kind`` keeps some kinds; ``--json`` prints
every event whole (:meth:`audit.StoredEvent.to_dict`, its hash included).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import ValidationError

from converge.access import sight
from converge.cli.actors import ReaderTokenOption
from converge.cli.audit import one_of, print_json
from converge.cli.commands import CommandGroup
from converge.cli.reading import RunArgument, read_run
from converge.cli.render import (
    DbOption,
    JsonOption,
    failing_on,
    print_fitted,
    readable_budget,
)
from converge.cli.tables import Column
from converge.values import iso_utc, readable
from engine import BudgetStatus, ConvergeError
from engine.result import counted
from engine.store import EVENT_KINDS

app = CommandGroup()


@app.command("events")
def events_cmd(
    run_id: RunArgument,
    kinds: Annotated[
        list[str] | None,
        typer.Option(
            "--kind",
            help="Only events of this kind (repeat for several): run_started, "
            "fact_promoted, gate_decided... (docs/audit.md).",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """A run's audit events in order: seq, cycle, kind, time (ISO, UTC) and a short summary
    of each payload (--json: every event whole, with its hash). With --token, as its
    person may see them (a gate they may not read: its existence and status)."""
    for kind in kinds or ():
        one_of("--kind", kind, EVENT_KINDS)
    store, run_id, person = read_run(db, token, run_id)
    with failing_on(ConvergeError):
        seen = sight(store, person, [run_id])
        events = [seen.event(e.to_dict()) for e in store.events(run_id, kinds or None)]
    if as_json:
        print_json(events)
        return
    rows = [
        (
            str(e["seq"]),
            str(e["cycle"]),
            e["kind"],
            iso_utc(e["ts"]),
            payload_summary(e["payload"]),
        )
        for e in events
    ]
    print_fitted(f"events of {run_id} ({len(events)})", EVENT_COLUMNS, rows)


EVENT_COLUMNS = (
    Column("seq", whole=True, justify="right"),
    Column("cycle", whole=True, justify="right", priority=2),
    Column("kind", whole=True),
    Column("time (UTC)", whole=True, priority=1),
    Column("payload", floor=24),
)

SUMMARY_CHARS = 160
"""The longest payload summary :func:`payload_summary` gives (characters)."""
FIELD_CHARS = 60
"""The longest one field's value is shown in a payload summary (characters)."""


WHOLE_FIELDS = ("approved", "by", "value", "reason")
"""Fields shown first in a payload summary and never cut (a decision's)."""


def _field(name: str, value: Any) -> str:
    """One payload field's value as :func:`payload_summary` shows it."""
    if name == "budget":
        return readable_budget(value)
    if name == "budget_status":
        try:
            return BudgetStatus.model_validate(value).summary()
        except ValidationError:
            pass  # an edited cell: shown as recorded
    text = readable(value, name)
    return f"({text})" if isinstance(value, dict) else text


def payload_summary(payload: dict[str, Any]) -> str:
    """One short line of an event's payload, as a person reads it: each field as
    ``name=value`` (:func:`converge.reports.readable`: unix seconds in ISO UTC,
    a budget as its limits, a mapping as ``key=value``), empty fields left out, a
    long list shown by its size (``initial_facts=2 items``), a long value cut to
    :data:`FIELD_CHARS` (a decision's :data:`WHOLE_FIELDS` first, never cut); at most
    :data:`SUMMARY_CHARS` characters."""
    parts = []
    # who decided and their answer first, and whole: what a reader looks for
    first = [n for n in WHOLE_FIELDS if n in payload]
    for name in [*first, *(n for n in payload if n not in first)]:
        value = payload[name]
        if value is None or value == "" or value == [] or value == {}:
            continue
        text = " ".join(_field(name, value).split())
        if len(text) > FIELD_CHARS and name not in WHOLE_FIELDS:
            if isinstance(value, list):
                text = counted(len(value), "item")
            else:
                text = text[: FIELD_CHARS - 1] + "…"
        parts.append(f"{name}={text}")
    line = ", ".join(parts)
    keep = len(", ".join(p for p in parts if p.split("=", 1)[0] in WHOLE_FIELDS))
    limit = max(SUMMARY_CHARS, keep)
    return line if len(line) <= limit else line[: limit - 1] + "…"
