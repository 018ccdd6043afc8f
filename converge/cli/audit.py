"""``converge runs | show | facts | lineage | verify | anchor``: read the audit trail.

Thin: the queries, the timeline and the verification live in ``audit``; this module
parses options and renders with rich (or prints JSON with ``--json``). A run is
named by its id or a unique prefix of it; tables fit the terminal
(:mod:`converge.cli.tables`). ``runs`` is :mod:`converge.cli.runs`, ``facts`` and
``lineage`` :mod:`converge.cli.facts`: their commands are added here, in the order
of the help.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from audit import VerifyReport
from audit.queries import forks_of, last_budget_status, timeline
from converge.cli import proofs
from converge.cli.actors import ReaderTokenOption
from converge.cli.commands import CommandGroup
from converge.cli.facts import facts_cmd, lineage_cmd
from converge.cli.markup import escape
from converge.cli.reading import (
    CATEGORIES,
    KINDS,
    STATUSES,
    RunArgument,
    one_of,
    print_json,
    read_run,
    read_store,
    warn_if_tampered,
)
from converge.cli.render import (
    DbOption,
    JsonOption,
    err,
    fail,
    failing_on,
    local_time,
    out,
    print_fitted,
    print_line,
    resolve_run,
)
from converge.cli.results import print_next_commands
from converge.cli.runs import runs_cmd
from converge.cli.tables import Column
from engine import ConvergeError
from engine.status import RunStatus
from engine.wording import counted

__all__ = ["CATEGORIES", "KINDS", "STATUSES", "app", "one_of", "print_json", "read_store"]

app = CommandGroup()


app.command("runs")(runs_cmd)


@app.command("show")
def show_cmd(
    run_id: RunArgument,
    db: DbOption = None,
    as_json: JsonOption = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Also the traceback of each failed suggestor.")
    ] = False,
    token: ReaderTokenOption = None,
) -> None:
    """A run: header, timeline of cycles, stop reason with explain and budget status."""
    from rich.table import Table

    from converge.access import sight
    from converge.explaining import counts_of, explain_stop

    store, run_id, person = read_run(db, token, run_id)
    with failing_on(ConvergeError):  # CorruptRow too: a cell it cannot read, named
        seen = sight(store, person, [run_id])
        row = store.run(run_id)
        events = store.events(run_id)
        cycles = timeline(events)
        budget = last_budget_status(events)
        forks = forks_of(store, run_id)
    warn_if_tampered(store, run_id)
    reason = row.stop_reason
    started = events[0].payload.get("forked_from") if events else None
    link = started if isinstance(started, dict) else None  # a fork's, as chained
    if as_json:
        print_json(
            seen(
                {
                    "run": row.to_dict(),
                    "forked_from": link,
                    "forks": [{"run_id": f.fork, "cycle": f.cycle} for f in forks],
                    "explain": None if reason is None else explain_stop(reason, counts_of(cycles)),
                    "budget_status": None if budget is None else budget.model_dump(mode="json"),
                    "timeline": [c.to_dict() for c in cycles],
                    "events": len(events),
                    "failures": _failures(events),
                }
            )
        )
        return
    head = Table(title=f"run {row.run_id}", show_header=False, title_justify="left")
    head.add_column("", style="bold")
    head.add_column("")
    head.add_row("job", escape(row.job or "-"))
    head.add_row("status", row.status)
    head.add_row("started", local_time(row.started_at))
    head.add_row("ended", local_time(row.ended_at))
    head.add_row("suggestors", escape(", ".join(row.suggestors)))
    if row.parent_run_id is not None:  # a fork (converge fork): its parent and cycle
        at = f" at cycle {link.get('cycle')}" if link is not None else ""
        head.add_row("forked from", escape(f"{row.parent_run_id}{at}"))
    if forks:
        head.add_row("forks", escape(", ".join(f"{f.fork} at cycle {f.cycle}" for f in forks)))
    head.add_row("cycles", str(row.cycles))
    head.add_row("facts", f"{row.facts_count} (root {row.facts_root or '-'})")
    u = row.usage
    head.add_row("usage", f"{u.input_tokens}+{u.output_tokens} tokens, ${u.cost_usd:.4f}")
    if row.duration_ms is not None:
        head.add_row("duration", f"{row.duration_ms} ms")
    head.add_row("events", f"{len(events)} (chain {row.chain}, head {row.head_hash[:16]}…)")
    out.print(head)
    timeline_rows = []
    for c in cycles:
        ran = ", ".join(c.executed) + (f"; failed: {'; '.join(c.failed)}" if c.failed else "")
        keys = ", ".join(f"{k}: {n}" for k, n in c.promoted_keys.items())
        timeline_rows.append(
            (
                str(c.cycle),
                ran,
                f"{c.promoted}" + (f" ({keys})" if keys else ""),
                "\n".join(c.rejected),
                seen("\n".join(c.gates)),
                "\n".join([*c.signals, *c.notes]),
            )
        )
    print_fitted("timeline", TIMELINE_COLUMNS, timeline_rows)
    if reason is not None:
        colour = "green" if reason.is_success() else "yellow" if reason.is_hitl_pending() else "red"
        out.print(f"[bold]stop:[/] [{colour}]{escape(seen(str(reason)))}[/]")
        explained = explain_stop(reason, counts_of(cycles))
        out.print(f"[bold]explain:[/] {escape(seen(explained))}")
        if row.status == RunStatus.PAUSED:
            print_next_commands(reason, db=db)
    if budget is not None:
        out.print(f"[bold]budget:[/] {escape(budget.summary())} (overall {budget.percent:.1f}%)")
    if verbose:
        for f in _failures(events):
            out.print(
                f"[bold red]{escape(f['suggestor'])} failed[/] in cycle {f['cycle']}: "
                f"{escape(f['error'])}"
            )
            if f["traceback"]:
                out.print(escape(f["traceback"].rstrip()), highlight=False, soft_wrap=True)


TIMELINE_COLUMNS = (
    Column("cycle", whole=True, justify="right"),
    Column("suggestors", floor=16),
    Column("promoted", priority=1, floor=16),
    Column("rejected", priority=2, floor=16, optional=True),
    Column("gates", priority=3, floor=16, optional=True),
    Column("signals / notes", priority=4, floor=16, optional=True),
)


def _failures(events: list[Any]) -> list[dict[str, Any]]:
    """The ``suggestor_failed`` events: suggestor, cycle, error and traceback."""
    return [
        {
            "suggestor": str(e.payload.get("suggestor")),
            "cycle": e.cycle,
            "error": str(e.payload.get("error")),
            "traceback": e.payload.get("traceback"),
        }
        for e in events
        if e.kind == "suggestor_failed"
    ]


app.command("facts")(facts_cmd)
app.command("lineage")(lineage_cmd)


@app.command("verify")
def verify_cmd(
    run_id: Annotated[str | None, typer.Argument(help="The run (omit with --all).")] = None,
    all_runs: Annotated[bool, typer.Option("--all", help="Verify every run.")] = False,
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            help="A ledger head printed by `converge anchor` earlier: also prove that "
            "nothing recorded before it was removed or rewritten (implies --all).",
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    head1: Annotated[
        str | None, typer.Option("--from", help="A signed head (`converge anchor`) taken earlier.")
    ] = None,
    head2: Annotated[
        str | None, typer.Option("--to", help="A signed head taken later: the ledger only grew?")
    ] = None,
    public_key: Annotated[
        Path | None, typer.Option("--public-key", help="The public key that signed --from/--to.")
    ] = None,
) -> None:
    """Recompute hash chains and check runs, gates, checkpoints and the ledger against
    them; exit 0 when all verify, 1 otherwise (first bad seq, why). With --from/--to
    (docs/audit-format.md): the RFC 6962 consistency of two signed heads.

    Keyed (HMAC) stores need their key in $CONVERGE_AUDIT_KEY: without it a keyed
    store reports "key required", with another key "wrong key", never "ok".
    """
    if head1 is not None or head2 is not None:
        if head1 is None or head2 is None or run_id is not None or all_runs or anchor:
            fail("--from and --to go together, without a RUN, --all or --anchor")
        proofs.verify_consistency_cmd(db, head1, head2, public_key, as_json)
    if run_id is not None and (all_runs or anchor):
        fail("give a RUN, or --all / --anchor, not both")
    store = read_store(db)
    if run_id is not None:
        run_id = resolve_run(store, run_id)
    try:
        if anchor is not None:
            reports = store.verify_anchor(anchor)
        else:
            reports = store.verify_all() if run_id is None else [store.verify(run_id)]
    except (ConvergeError, ValueError) as exc:
        fail(str(exc))
    ok = all(r.ok for r in reports)
    if as_json:
        print_json({"ok": ok, "runs": [r.to_dict() for r in reports]})
    else:
        for r in reports:
            mark, word = ("[green]ok[/]", "ok") if r.ok else ("[bold red]FAILED[/]", "FAILED")
            print_line(
                f"{mark} {escape(r.run_id)}: {_verdict(r, escape)}",
                f"{word} {r.run_id}: {_verdict(r, str)}",
            )
        counts = f"{sum(r.ok for r in reports)}/{len(reports)} runs verify"
        print_line(counts, counts)
    raise typer.Exit(0 if ok else 1)


def _verdict(r: VerifyReport, quote: Callable[[str], str]) -> str:
    """What ``converge verify`` says of a run after its id, its recorded texts passed
    through ``quote`` (rich's ``escape`` for markup, ``str`` for plain text)."""
    if r.ok and r.events == 0 and (r.reason or "").startswith("pruned by "):
        return quote(r.reason or "")
    if r.ok:
        return f"{r.events} events" + (f" ({quote(r.reason)})" if r.reason else "")
    return f"first bad seq {r.first_bad_seq}: {quote(r.reason or '')}"


@app.command("anchor")
def anchor_cmd(
    db: DbOption = None, as_json: JsonOption = False, signing_key: proofs.SigningKeyOption = None
) -> None:
    """Print the ledger head (seq:hash, HMAC-signed in a keyed store) to keep outside
    the database; `converge verify --anchor HEAD` later proves nothing before it changed.
    With a signing key: the Ed25519-signed RFC 6962 head, one line without spaces."""
    if proofs.signing_configured(signing_key):
        proofs.signed_anchor(db, signing_key, as_json)
        return
    from audit.ledger import integrate_pending

    store = read_store(db)
    with failing_on(ConvergeError):
        left = integrate_pending(store)  # the anchor covers every head committed before
        head = store.anchor()
    if left:
        err.print(
            f"[yellow]{counted(left, 'run head')} committed but not integrated: not covered[/]"
        )
    if as_json:
        print_json({"anchor": head})
    else:
        out.print(head, highlight=False, soft_wrap=True)
