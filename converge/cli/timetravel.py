"""``converge fork | diff | replay``: go back to a cycle of a recorded run, compare two
runs, run a recorded run again (:mod:`converge.timetravel`).

``fork RUN --at-cycle N`` starts a new run from the state after cycle N of RUN
(``Engine.fork``), with RUN's recorded job or another (``--job``) and the
``--max-*`` budget options over the job's budget; the parent is only read, and
refused (exit 2) when its chain does not verify up to cycle N. ``diff
RUN_A RUN_B`` shows the stop of each and why they differ, the facts only in A,
only in B and changed, and the budget used side by side
(:func:`converge.timetravel.diff_runs`); ``--json`` for CI.

``replay RUN`` runs RUN's job again (or ``--job``'s) against a scratch store, the
LLM agents answered from the model responses RUN recorded and the suggestors
marked non-deterministic played back from their recorded outputs
(:func:`converge.timetravel.replay_run`), and checks that every cycle promotes the
same facts and that the run stops the same way. Exits 0 when it does, 1 at a
divergence (the first is printed: cycle, suggestor, expected vs got), 2 when the
run cannot be replayed. ``--live`` calls the models for real and reports the
divergences with exit 0.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from audit.store import SqlRunStore
from converge.access import Action, run_view
from converge.cli.actors import (
    NO_RUNNER_OPTIONS,
    ReaderTokenOption,
    RunnerFlags,
    ask_read,
    asked,
    reader,
)
from converge.cli.audit import print_json, read_store
from converge.cli.budgets import NO_BUDGET_OPTIONS, BudgetFlags
from converge.cli.commands import CommandGroup, option_groups
from converge.cli.legs import finish_leg, job_for
from converge.cli.markup import escape
from converge.cli.reading import read_run
from converge.cli.render import (
    DbOption,
    JsonOption,
    err,
    execute_with_progress,
    fail,
    failing_on,
    open_sql_store,
    out,
    resolve_run,
)
from converge.timetravel import Divergence, ReplayReport, RunDiff, diff_runs, replay_run, snapshot
from engine import ConvergeError
from engine.result import counted

app = CommandGroup()


@app.command("fork")
@option_groups(leave_out={"add_cycles"})
def fork_cmd(
    run_id: Annotated[str, typer.Argument(help="The run to fork (its id or a unique prefix).")],
    at_cycle: Annotated[
        int, typer.Option("--at-cycle", help="Start from the state after this cycle (0: start).")
    ],
    job_file: Annotated[
        str | None,
        typer.Option("--job", help="Run this job file instead of the one the run recorded."),
    ] = None,
    budget: BudgetFlags = NO_BUDGET_OPTIONS,
    db: DbOption = None,
    as_json: JsonOption = False,
    acting: RunnerFlags = NO_RUNNER_OPTIONS,
) -> None:
    """Start a new run from the state after cycle N of a recorded run (the parent is
    not changed); exits with the fork's stop code, 2 when the cycle cannot be rebuilt
    or the parent does not verify up to it (the first bad seq named).

    A parent that fails another check of `converge verify` (its fact chunks, its row)
    is warned of: the fork takes its facts from the parent's chained events, checked
    up to N."""
    store = open_sql_store(db)
    run_id = resolve_run(store, run_id)
    job = job_for(job_file, store, run_id)
    given = budget.over(job.spec.budget)
    who = acting.principal(store)  # before the fork writes anything
    asked(store, who, Action.FORK_RUN, lambda: run_view(store, run_id))
    unverified = unverified_parent(store, run_id, at_cycle)
    result = execute_with_progress(
        job, store, as_json=as_json, resume=lambda engine: engine.fork(run_id, at_cycle, given)
    )
    if unverified:  # the fork took the parent's chain (a refusal said so in one line)
        err.print(unverified, highlight=False, soft_wrap=True)
    if not as_json:
        out.print(f"forked {escape(run_id)} at cycle {at_cycle}: new run {escape(result.run_id)}")
    finish_leg(store, job, result, by=who.name, action="forked", as_json=as_json, db=db)


def unverified_parent(store: SqlRunStore, run_id: str, cycle: int) -> str:
    """The warning of a run to fork that fails ``converge verify``, naming the check
    ("" when it verifies): its chain up to ``cycle`` is checked again by the fork
    (which refuses it, in one line), but a check outside it (the fact chunks of its
    checkpoint, its ``runs`` row, a later event) would otherwise pass without a word.
    Printed once the fork took the parent's state."""
    try:
        report = store.verify(run_id)
    except ConvergeError:
        return ""
    if report.ok:
        return ""
    return (
        f"[bold yellow]warning:[/] run {escape(run_id)} does not verify: seq "
        f"{report.first_bad_seq}: {escape(report.reason or '')} (converge verify "
        f"{escape(run_id)}); the fork took the facts of its cycles up to {cycle} from its "
        "chained events, which the fork checked again, not from what fails"
    )


@app.command("diff")
def diff_cmd(
    run_a: Annotated[str, typer.Argument(help="Run A (its id or a unique prefix).")],
    run_b: Annotated[str, typer.Argument(help="Run B (its id or a unique prefix).")],
    db: DbOption = None,
    db_b: Annotated[
        str | None, typer.Option("--db-b", help="The store of run B, when not --db's.")
    ] = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """Two runs side by side: their stops and why they differ, the facts only in A,
    only in B and changed, the budget each used. Exits 0 when they are the same
    (stop and facts), 1 when they differ."""
    store_a = read_store(db, token)
    store_b = read_store(db_b, token) if db_b is not None else store_a
    id_a, id_b = resolve_run(store_a, run_a), resolve_run(store_b, run_b)
    ask_read(store_a, reader(store_a, token), Action.SEE_RUN, id_a)
    ask_read(store_b, reader(store_b, token), Action.SEE_RUN, id_b)
    with failing_on(ConvergeError):
        a = snapshot(store_a, id_a)
        b = snapshot(store_b, id_b)
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
        head.add_row(f"budget {name}", _use(name, da), _use(name, db))
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


def _use(name: str, d: dict[str, Any] | None) -> str:
    """``used/limit`` of a budget dimension, in its unit (seconds as ms under 1 s,
    cost in USD): the last leg's use, as the run's stop recorded it."""
    if d is None:
        return "-"
    used, limit = d.get("used"), d.get("limit")
    shown = f"/{_in_unit(name, limit)}" if limit is not None else ""
    return _in_unit(name, used) + shown


def _in_unit(name: str, value: Any) -> str:
    if name == "seconds" and isinstance(value, int | float):
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.3g} s"
    if name == "cost_usd" and isinstance(value, int | float):
        return f"{_num(value)} USD"
    return _num(value)


def _num(value: Any) -> str:
    """A figure without a useless ``.0`` (``10`` for 10.0, ``0.059`` kept)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _short(value: Any, width: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command("replay")
def replay_cmd(
    run_id: Annotated[str, typer.Argument(help="The run to replay (its id or a unique prefix).")],
    job_file: Annotated[
        str | None,
        typer.Option(
            "--job", help="Replay with this job file instead of the one the run recorded."
        ),
    ] = None,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Call the models and run the non-deterministic suggestors for real; "
            "report the divergences and exit 0.",
        ),
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
    token: ReaderTokenOption = None,
) -> None:
    """Re-execute a recorded run with its recorded model responses (no model is
    called) and check that every cycle promotes the same facts and that it stops
    the same way. Exits 0 when it does, 1 at a divergence, 2 when the run cannot
    be replayed.

    Example: converge replay 3b83f89c --job examples/dependency_audit/reviewed.yaml
    """
    store, run_id, _ = read_run(db, token, run_id)
    try:
        report = replay_run(store, run_id, job_file, live=live)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json(report.to_dict())
    else:
        print_replay(report)
    raise typer.Exit(report.exit_code())


def print_replay(report: ReplayReport) -> None:
    """The replay report as `converge replay` prints it (to stdout)."""
    mode = "live: the models were called"
    if not report.live:
        mode = f"offline: {counted(report.model_responses, 'model response')} from the recording"
    if report.played_back:
        mode += f", played back: {', '.join(report.played_back)}"
    out.print(f"replay of {escape(report.run_id)} (job {escape(str(report.job))}; {escape(mode)})")
    if not report.same and report.other_models:
        was, now = (", ".join(m) or "no model" for m in report.models)
        out.print(
            f"[yellow]other models:[/] the run was recorded with {escape(was)}, this replay "
            f"used {escape(now)}: an agent's model comes from its job's `model:` or "
            "$CONVERGE_MODEL; set them as they were to replay the run as recorded"
        )
    out.print(
        f"cycles {report.cycles[0]} / {report.cycles[1]}, facts {report.facts[0]} / "
        f"{report.facts[1]}, stop {escape(_kind(report.expected_stop))} / "
        f"{escape(_kind(report.got_stop))}  (recorded / replayed)"
    )
    for note in report.redacted:
        out.print(f"redacted fact {escape(note)} (its content is not compared)")
    first = report.first_divergence
    if first is None:
        out.print(
            "[green]same:[/] every cycle promoted the same facts and the run stopped the same way"
        )
        return
    out.print(f"[bold red]first divergence:[/] {escape(_where(first))}")
    out.print(f"  {escape(first.message)}")
    out.print(f"  expected: {escape(_json(first.expected))}")
    out.print(f"  got:      {escape(_json(first.got))}")
    rest = report.divergences[1:]
    if rest:
        out.print(f"{counted(len(rest), 'more divergence')}:")
        for d in rest:
            out.print(f"  {escape(d.message)}")


def _where(d: Divergence) -> str:
    who = f", suggestor {d.suggestor}" if d.suggestor is not None else ""
    return f"cycle {d.cycle}{who} ({d.kind})"


def _kind(stop: dict[str, Any] | None) -> str:
    return "-" if stop is None else str(stop["reason"].get("kind"))


def _json(value: Any, width: int = 300) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"
