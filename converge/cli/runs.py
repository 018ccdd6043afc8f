"""``converge runs``: the recorded runs, newest first, or with ``--by`` their count
per stop category, stop kind or job (``converge runs --by category --since 7d``)."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any

import typer

from audit import SqlRunStore, parse_since
from audit.queries import ForkLink, RunRow, UnreadableRun, fork_links, read_runs
from converge.cli.actors import ReaderTokenOption, reader
from converge.cli.reading import CATEGORIES, KINDS, STATUSES, one_of, print_json, read_store
from converge.cli.render import DbOption, JsonOption, fail, failing_on, print_fitted, say_error
from converge.cli.runs_table import print_runs
from converge.cli.tables import Column
from engine import ConvergeError

__all__ = ["GROUPS", "runs_cmd"]

GROUPS = ("category", "kind", "job")
"""What ``--by`` counts runs by: their stop's category or kind, or their job."""
DEFAULT_LIMIT = 100


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
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="Count the runs (those the other options select) per stop category, "
            "stop kind or job, most first: category, kind or job.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", help=f"At most N runs (0 = all; default {DEFAULT_LIMIT}, all with --by)."
        ),
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """List recorded runs, newest first (with --token: those its person may see); with
    --by, how many there are per stop category, kind or job."""
    one_of("--category", category, CATEGORIES)
    one_of("--kind", kind, KINDS)
    one_of("--status", status, STATUSES)
    one_of("--by", by, GROUPS)
    try:
        since_ts = None if since is None else parse_since(since)
    except ValueError as exc:
        fail(str(exc))
    if limit is None:
        limit = 0 if by is not None else DEFAULT_LIMIT
    store = read_store(db, token)
    # the table and --by print each stop's kind and category: no stop model to build
    found = _found(
        store, token, category, kind, since_ts, job, status, limit, reasons=as_json and by is None
    )
    # a row that cannot be read: one error line each, the others listed, exit 1
    rows = [r for r in found if isinstance(r, RunRow)]
    unreadable = [r for r in found if isinstance(r, UnreadableRun)]
    if by is not None:
        print_counts(by, rows, as_json=as_json)
    else:
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


def _found(
    store: SqlRunStore,
    token: str | None,
    category: str | None,
    kind: str | None,
    since: float | None,
    job: str | None,
    status: str | None,
    limit: int,
    *,
    reasons: bool = True,
) -> list[RunRow | UnreadableRun]:
    """The runs the options select, those of ``token``'s person may see (exits 2 when
    the store fails); ``reasons``: their stop reasons parsed (:func:`audit.queries.read_runs`)."""
    person = reader(store, token)
    with failing_on(ConvergeError):
        found = read_runs(
            store,
            category=category,
            kind=kind,
            since=since,
            job=job,
            status=status,
            limit=limit,
            reasons=reasons,
        )
        if person is not None:
            from converge.access import Action, check, run_views

            views = run_views(store, [r.run_id for r in found if isinstance(r, RunRow)])
            found = [
                r
                for r in found
                if not isinstance(r, RunRow) or check(person, Action.SEE_RUN, views[r.run_id])
            ]
    return found


def _run_json(r: RunRow | UnreadableRun, links: dict[str, ForkLink]) -> dict[str, Any]:
    """A row of ``runs --json``: a run with ``forked_from`` (None: no fork)."""
    data = r.to_dict()
    if isinstance(r, RunRow):
        link = links.get(r.run_id)
        data["forked_from"] = None if link is None else link.to_dict()
    return data


def run_counts(by: str, rows: list[RunRow]) -> list[tuple[str | None, int]]:
    """``(value, runs)`` per value of ``by`` (``category``, ``kind`` or ``job``), most
    runs first, then by value; a run not stopped yet has no category nor kind (None)."""
    counts = Counter(getattr(r, by) for r in rows)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0] or ""))


def print_counts(by: str, rows: list[RunRow], *, as_json: bool) -> None:
    """``runs --by``: a table of ``by`` and ``runs``, or with ``as_json`` a list of
    ``{by: value, "runs": n}`` (``by`` named as in ``runs --json``)."""
    counts = run_counts(by, rows)
    if as_json:
        print_json([{by: value, "runs": n} for value, n in counts])
        return
    missing = "(no job)" if by == "job" else "(not stopped)"
    print_fitted(
        f"runs by {by}",
        (Column(by, whole=True), Column("runs", justify="right", whole=True)),
        [(missing if value is None else value, str(n)) for value, n in counts],
    )
