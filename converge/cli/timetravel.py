"""``converge fork | diff``: go back to a cycle of a recorded run, compare two runs.

``fork RUN --at-cycle N`` starts a new run from the state after cycle N of RUN
(``Engine.fork``), with RUN's recorded job or another (``--job``) and the
``--max-*`` budget options over the job's budget; the parent is only read. ``diff
RUN_A RUN_B`` shows the stop of each and why they differ, the facts only in A,
only in B and changed, and the budget used side by side
(:mod:`converge.run_diff`); ``--json`` for CI.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from audit.store import SqlRunStore
from converge.cli.actors import ActorOption, record
from converge.cli.audit import print_json, read_store
from converge.cli.budgets import (
    BudgetFlags,
    MaxCostOption,
    MaxCostUsdOption,
    MaxCyclesOption,
    MaxFactsOption,
    MaxInvocationsOption,
    MaxSecondsOption,
    MaxTokensOption,
)
from converge.cli.commands import CommandGroup
from converge.cli.render import (
    DbOption,
    JsonOption,
    execute_with_progress,
    fail,
    open_run_store,
    out,
    render_result,
    resolve_run,
)
from converge.decisions import job_of_run
from converge.jobs import load_job
from converge.run_diff import RunDiff, diff_runs, snapshot
from engine import ConvergeError

app = CommandGroup()


@app.command("fork")
def fork_cmd(
    run_id: Annotated[str, typer.Argument(help="The run to fork (its id or a unique prefix).")],
    at_cycle: Annotated[
        int, typer.Option("--at-cycle", help="Start from the state after this cycle (0: start).")
    ],
    job_file: Annotated[
        str | None,
        typer.Option("--job", help="Run this job file instead of the one the run recorded."),
    ] = None,
    max_cycles: MaxCyclesOption = None,
    max_facts: MaxFactsOption = None,
    max_tokens: MaxTokensOption = None,
    max_seconds: MaxSecondsOption = None,
    max_cost: MaxCostOption = None,
    max_cost_usd: MaxCostUsdOption = None,
    max_invocations: MaxInvocationsOption = None,
    db: DbOption = None,
    as_json: JsonOption = False,
    by: ActorOption = None,
) -> None:
    """Start a new run from the state after cycle N of a recorded run (the parent is
    not changed); exits with the fork's stop code, 2 when the cycle cannot be rebuilt."""
    store = open_run_store(db, must_exist=True)
    assert isinstance(store, SqlRunStore)
    run_id = resolve_run(store, run_id)
    try:
        job = load_job(job_file) if job_file is not None else job_of_run(store, run_id)
    except ConvergeError as exc:
        fail(str(exc))
    flags = BudgetFlags(
        max_cycles, max_facts, max_tokens, max_seconds, max_cost, max_cost_usd, max_invocations
    )
    budget = flags.over(job.spec.budget)
    result = execute_with_progress(
        job, store, as_json=as_json, resume=lambda engine: engine.fork(run_id, at_cycle, budget)
    )
    record(store, result.run_id, by, "forked")
    if not as_json:
        out.print(f"forked {escape(run_id)} at cycle {at_cycle}: new run {escape(result.run_id)}")
    render_result(result, as_json=as_json, job=job)
    raise typer.Exit(result.stop_reason.exit_code)


@app.command("diff")
def diff_cmd(
    run_a: Annotated[str, typer.Argument(help="Run A (its id or a unique prefix).")],
    run_b: Annotated[str, typer.Argument(help="Run B (its id or a unique prefix).")],
    db: DbOption = None,
    db_b: Annotated[
        str | None, typer.Option("--db-b", help="The store of run B, when not --db's.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Two runs side by side: their stops and why they differ, the facts only in A,
    only in B and changed, the budget each used. Exits 0 when they are the same
    (stop and facts), 1 when they differ."""
    store_a = read_store(db)
    store_b = read_store(db_b) if db_b is not None else store_a
    try:
        a = snapshot(store_a, resolve_run(store_a, run_a))
        b = snapshot(store_b, resolve_run(store_b, run_b))
    except ConvergeError as exc:
        fail(str(exc))
    diff = diff_runs(a, b)
    if as_json:
        print_json(diff.to_dict())
    else:
        _print_diff(diff)
    raise typer.Exit(0 if diff.same else 1)


def _print_diff(diff: RunDiff) -> None:
    head = Table(title="diff", title_justify="left")
    head.add_column("")
    head.add_column(f"A {diff.a.run_id}")
    head.add_column(f"B {diff.b.run_id}")
    a, b = diff.a.header(), diff.b.header()
    for label in ("job", "stop", "cycles", "facts", "facts root"):
        head.add_row(label, escape(_cell(a, label)), escape(_cell(b, label)))
    for name, (da, db) in diff.budget.items():
        head.add_row(f"budget {name}", _use(da), _use(db))
    out.print(head)
    for line in diff.why:
        out.print(f"[bold]why:[/] {escape(line)}")
    out.print(
        f"facts: {diff.common} in both, {len(diff.only_a)} only in A, "
        f"{len(diff.only_b)} only in B, {len(diff.changed)} changed"
    )
    for f in diff.only_a:
        out.print(f"  [red]- A only[/] {escape(f.id)} {escape(_short(f.content))}")
    for f in diff.only_b:
        out.print(f"  [green]+ B only[/] {escape(f.id)} {escape(_short(f.content))}")
    for fa, fb in diff.changed:
        out.print(
            f"  [yellow]~ changed[/] {escape(fa.id)}: "
            f"{escape(_short(fa.content))} -> {escape(_short(fb.content))}"
        )


def _cell(h: dict[str, Any], label: str) -> str:
    """One cell of the diff's head table for a run's :meth:`RunSnapshot.header`."""
    if label == "stop":
        return "-" if h["stop"] is None else str(h["stop"]["kind"])
    if label == "facts":
        return str(h["facts_count"])
    if label == "facts root":
        return str(h["facts_root"] or "-")[:16]
    return str(h[label] or "-")


def _use(d: dict[str, Any] | None) -> str:
    if d is None:
        return "-"
    limit = d.get("limit")
    return _num(d.get("used")) + ("" if limit is None else f"/{_num(limit)}")


def _num(value: Any) -> str:
    """A figure without a useless ``.0`` (``10`` for 10.0, ``0.059`` kept)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"
