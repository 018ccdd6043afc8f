"""``converge gates GATE --history`` and ``converge comment``: what happened to a gate,
and a comment on it (in its run's hash chain)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

from audit.store import SqlRunStore
from converge.cli.actors import NO_RUNNER_OPTIONS, RunnerFlags, asked
from converge.cli.commands import CommandGroup, option_groups
from converge.cli.render import DbOption, failing_on, open_sql_store, out, print_fitted
from converge.cli.tables import Column
from engine import ConvergeError

app = CommandGroup()

HISTORY_COLUMNS = (
    Column("time (UTC)", whole=True),
    Column("what", whole=True),
    Column("by", whole=True, priority=1),
    Column("detail", floor=24),
)


def print_history(store: SqlRunStore, gate_id: str, as_json: bool) -> None:
    """Print the gate's history (exit 2 for an unknown gate or one that cannot be
    read, 1 when some entry cannot be read: it is listed as ``unreadable``)."""
    from converge.governance import gate_history
    from converge.values import iso_utc

    with failing_on(ConvergeError):
        entries = gate_history(store, gate_id)
    if as_json:
        sys.stdout.write(json.dumps(entries, indent=2, default=str) + "\n")
        if any(e["kind"] == "unreadable" for e in entries):
            raise typer.Exit(1)
        return
    rows = [
        (
            "?" if e["ts"] is None else iso_utc(e["ts"]),
            str(e["kind"]),
            str(e["by"] or ""),
            _detail(e["detail"]),
        )
        for e in entries
    ]
    print_fitted(f"gate {gate_id}", HISTORY_COLUMNS, rows)
    if any(e["kind"] == "unreadable" for e in entries):
        raise typer.Exit(1)  # as `converge runs` with a row it cannot read


def _detail(detail: Any) -> str:
    """An entry's detail as a person reads it (:func:`converge.reports.readable`):
    ``key=value`` fields, times in ISO UTC, a nested mapping in parentheses."""
    from converge.values import readable

    if isinstance(detail, dict):
        return "; ".join(
            f"{k}=({readable(v, k)})" if isinstance(v, dict) else f"{k}={readable(v, k)}"
            for k, v in detail.items()
            if v not in (None, "", [], {})
        )
    return readable(detail)


@app.command("comment")
@option_groups()
def comment_cmd(
    gate_id: Annotated[str, typer.Argument(help="The gate to comment on.")],
    text: Annotated[str, typer.Argument(help="The comment.")],
    acting: RunnerFlags = NO_RUNNER_OPTIONS,
    db: DbOption = None,
) -> None:
    """Comment on a gate; the comment goes into its run's hash chain (who, when, text).

    Who comments is checked as for `converge run` (a known person once anyone is
    registered; with tokens required, the token's own person) and must be allowed
    to read the gate (docs/access.md); a refusal exits 2 and records nothing but a
    row of the access log.
    """
    from audit.people import add_comment
    from converge.access import Action, gate_view, run_view

    store = open_sql_store(db)
    who = acting.principal(store, doing="comment on a gate")
    with failing_on(ConvergeError):
        gate = store.get_gate(gate_id)
    asked(store, who, Action.COMMENT, lambda: gate_view(gate, run_view(store, gate.run_id)))
    with failing_on(ConvergeError):
        c = add_comment(store, gate.gate_id, who.name, text)
    out.print(f"commented on gate {c.gate_id} as {c.by}", highlight=False)
