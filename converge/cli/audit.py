"""``converge runs | show | facts | lineage | verify``: read the audit trail.

Thin: the queries, the timeline and the verification live in ``audit``; this module
parses options and renders with rich (or prints JSON with ``--json``). A run is
named by its id or a unique prefix of it; tables fit the terminal
(:mod:`converge.cli.tables`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from audit import SqlRunStore, parse_since
from audit.ledger import integrate_pending
from audit.queries import (
    ForkLink,
    RunRow,
    UnreadableRun,
    fork_link,
    fork_links,
    forks_of,
    last_budget_status,
    mark_inherited,
    read_runs,
    timeline,
)
from converge.access import Action, check, run_views, sight
from converge.cli import proofs
from converge.cli.actors import ReaderTokenOption, ask_read, reader
from converge.cli.commands import CommandGroup
from converge.cli.render import (
    DbOption,
    JsonOption,
    err,
    fail,
    local_time,
    open_run_store,
    out,
    print_fitted,
    print_next_commands,
    resolve_run,
    say_error,
)
from converge.cli.runs_table import print_runs
from converge.cli.tables import Column
from converge.reports import readable
from engine import ConvergeError, Fact, StopCategory, fact_to_dict
from engine.status import RunStatus
from engine.stop import ALL_VARIANTS

if TYPE_CHECKING:
    import networkx as nx

app = CommandGroup()


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


def _content(value: Any) -> str:
    """A content whole, as a person reads it: ``key=value, ...`` (a table folds it;
    nothing is cut; ``--json`` has the JSON)."""
    return readable(value)


STATUSES = tuple(s.value for s in RunStatus)
CATEGORIES = tuple(c.value for c in StopCategory)
KINDS = tuple(sorted(v.model_fields["kind"].default for v in ALL_VARIANTS))


def one_of(option: str, value: str | None, valid: tuple[str, ...]) -> None:
    """Exit 2 unless ``value`` (of ``option``) is None or one of ``valid``."""
    if value is not None and value not in valid:
        fail(f"{option} {value!r} is not one of: {', '.join(valid)}")


@app.command("runs")
def runs_cmd(
    category: Annotated[
        str | None,
        typer.Option("--category", help=f"Stop category: {', '.join(CATEGORIES)}."),
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option("--kind", help="Stop kind (cycle_budget_exhausted...; docs/stop-reasons.md)."),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="ISO date/time, or an age: 30m, 1h, 7d.")
    ] = None,
    job: Annotated[str | None, typer.Option("--job", help="Job name.")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help=f"{', '.join(STATUSES[:-1])} or {STATUSES[-1]}.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most N runs (0 = all).")] = 100,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """List recorded runs, newest first (with --token: those its person may see)."""
    one_of("--category", category, CATEGORIES)
    one_of("--kind", kind, KINDS)
    one_of("--status", status, STATUSES)
    try:
        since_ts = None if since is None else parse_since(since)
    except ValueError as exc:
        fail(str(exc))
    store = read_store(db, token)
    person = reader(store, token)
    try:
        found = read_runs(
            store, category=category, kind=kind, since=since_ts, job=job, status=status, limit=limit
        )
        if person is not None:
            views = run_views(store, [r.run_id for r in found if isinstance(r, RunRow)])
            found = [
                r
                for r in found
                if not isinstance(r, RunRow) or check(person, Action.SEE_RUN, views[r.run_id])
            ]
    except ConvergeError as exc:
        fail(str(exc))
    # a row that cannot be read: one error line each, the others listed, exit 1
    rows = [r for r in found if isinstance(r, RunRow)]
    unreadable = [r for r in found if isinstance(r, UnreadableRun)]
    # a fork's link to its parent, as its chain holds it (audit.queries._forks)
    links = fork_links(store, [r.run_id for r in rows if r.parent_run_id is not None])
    if as_json:
        print_json([_run_json(r, links) for r in found])
    else:
        print_runs(rows, links)
    for bad in unreadable:
        say_error(str(bad.error))
    if unreadable:
        raise typer.Exit(1)


def _run_json(r: RunRow | UnreadableRun, links: dict[str, ForkLink]) -> dict[str, Any]:
    """A row of ``runs --json``: a run with ``forked_from`` (None: no fork)."""
    data = r.to_dict()
    if isinstance(r, RunRow):
        link = links.get(r.run_id)
        data["forked_from"] = None if link is None else link.to_dict()
    return data


@app.command("show")
def show_cmd(
    run_id: Annotated[str, typer.Argument(help="The run (its id or a unique prefix).")],
    db: DbOption = None,
    as_json: JsonOption = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="Also the traceback of each failed suggestor.")
    ] = False,
    token: ReaderTokenOption = None,
) -> None:
    """A run: header, timeline of cycles, stop reason with explain and budget status."""
    store = read_store(db, token)
    run_id = resolve_run(store, run_id)
    person = reader(store, token)
    ask_read(store, person, Action.SEE_RUN, run_id)
    try:
        seen = sight(store, person, [run_id])
        row = store.run(run_id)
        events = store.events(run_id)
        cycles = timeline(events)
        budget = last_budget_status(events)
        forks = forks_of(store, run_id)
    except ConvergeError as exc:  # CorruptRow too: a cell it cannot read, named
        fail(str(exc))
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
                    "explain": None if reason is None else reason.explain(),
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
        out.print(f"[bold]explain:[/] {escape(seen(reason.explain()))}")
        if row.status == RunStatus.PAUSED:
            print_next_commands(reason)
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


@app.command("facts")
def facts_cmd(
    run_id: Annotated[str, typer.Argument(help="The run (its id or a unique prefix).")],
    key: Annotated[str | None, typer.Option("--key", help="Only facts of this key.")] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """The facts of a run, in promotion order, with provenance."""
    store = read_store(db, token)
    run_id = resolve_run(store, run_id)
    person = reader(store, token)
    ask_read(store, person, Action.SEE_RUN, run_id)
    try:
        facts = store.facts(run_id, key=key)
        seen = sight(store, person, [run_id])
    except ConvergeError as exc:
        fail(str(exc))
    if as_json:
        print_json(seen([fact_to_dict(f) for f in facts]))
        return
    rows = [
        (
            f.id,
            f.key,
            _content(seen(f.content)),
            f"{f.confidence:g}",
            f.provenance.suggestor,
            str(f.provenance.cycle),
            ", ".join(f.provenance.parents),
        )
        for f in facts
    ]
    print_fitted(f"facts of {run_id} ({len(facts)})", FACT_COLUMNS, rows)


FACT_COLUMNS = (
    Column("id", whole=True),
    # a fact's id starts with its key: the first column dropped, with conf
    Column("key", priority=5, whole=True),
    # the content gets the room; it folds, nothing is cut
    Column("content", floor=24),
    Column("conf", priority=4, justify="right", whole=True),
    Column("suggestor", priority=1, whole=True),
    Column("cycle", priority=2, justify="right", whole=True),
    Column("parents", priority=3, floor=16, optional=True),
)


@app.command("lineage")
def lineage_cmd(
    run_id: Annotated[str, typer.Argument(help="The run (its id or a unique prefix).")],
    fact_id: Annotated[str, typer.Argument(help="The fact (e.g. license#3).")],
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """The facts a fact was derived from, as a tree (its parents, their parents...);
    in a fork, the facts taken from its parent name the parent run."""
    store = read_store(db, token)
    run_id = resolve_run(store, run_id)
    ask_read(store, reader(store, token), Action.SEE_RUN, run_id)
    try:
        link = fork_link(store, run_id)
        graph = mark_inherited(store.lineage(run_id, fact_id), link)
    except ConvergeError as exc:
        fail(str(exc))
    if as_json:
        print_json(
            {
                "fact": fact_id,
                "forked_from": None if link is None else link.to_dict(),
                "nodes": [
                    (fact_to_dict(d["fact"]) | ({"run": d["run"]} if "run" in d else {}))
                    if "fact" in d
                    else {"id": n, "missing": True}
                    for n, d in graph.nodes(data=True)
                ],
                "edges": [[a, b] for a, b in graph.edges],
            }
        )
        return
    if link is not None:
        out.print(f"[dim]{escape(str(link))}: facts of cycles <= {link.cycle} are its[/]")
    out.print(_lineage_tree(graph, fact_id))


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
            mark = "[green]ok[/]" if r.ok else "[bold red]FAILED[/]"
            detail = (
                f"{r.events} events" + (f" ({escape(r.reason)})" if r.reason else "")
                if r.ok
                else f"first bad seq {r.first_bad_seq}: {escape(r.reason or '')}"
            )
            out.print(f"{mark} {escape(r.run_id)}: {detail}")
        out.print(f"{sum(r.ok for r in reports)}/{len(reports)} runs verify")
    raise typer.Exit(0 if ok else 1)


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
    store = read_store(db)
    try:
        left = integrate_pending(store)  # the anchor covers every head committed before
        head = store.anchor()
    except ConvergeError as exc:
        fail(str(exc))
    if left:
        err.print(f"[yellow]{left} run head(s) committed but not integrated: not covered[/]")
    if as_json:
        print_json({"anchor": head})
    else:
        out.print(head, highlight=False, soft_wrap=True)


def _label(graph: nx.DiGraph[str], node: str) -> str:
    fact: Fact | None = graph.nodes[node].get("fact")
    if fact is None:
        return f"[red]{escape(node)}[/] (not recorded)"
    p = fact.provenance
    parent = graph.nodes[node].get("run")  # taken from the parent run (a fork's)
    where = "" if parent is None else f", from run {escape(parent)}"
    return (
        f"[bold]{escape(fact.id)}[/] = {escape(_content(fact.content))} "
        f"[dim]({escape(p.suggestor)}, cycle {p.cycle}{where})[/]"
    )


def _lineage_tree(graph: nx.DiGraph[str], fact_id: str) -> Tree:
    """The fact at the root, its parents below it (a node seen twice is not expanded again)."""
    root = Tree(_label(graph, fact_id))
    seen = {fact_id}
    todo: list[tuple[Tree, str]] = [(root, fact_id)]
    while todo:
        branch, node = todo.pop()
        for parent in sorted(graph.predecessors(node)):
            if parent in seen:
                branch.add(_label(graph, parent) + " [dim](above)[/]")
                continue
            seen.add(parent)
            todo.append((branch.add(_label(graph, parent)), parent))
    return root
