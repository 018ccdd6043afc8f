"""``converge replay``: re-execute a recorded run without calling a model.

``replay RUN`` runs RUN's job again (or ``--job``'s) against a scratch store, the
LLM agents answered from the model responses RUN recorded and the suggestors
marked non-deterministic played back from their recorded outputs
(:func:`converge.replay.replay_run`), and checks that every cycle promotes the
same facts and that the run stops the same way. Exits 0 when it does, 1 at a
divergence (the first is printed: cycle, suggestor, expected vs got), 2 when the
run cannot be replayed. ``--live`` calls the models for real and reports the
divergences with exit 0.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape

from converge.cli.audit import print_json, read_store
from converge.cli.commands import CommandGroup
from converge.cli.render import DbOption, JsonOption, fail, out, resolve_run
from converge.replay import Divergence, ReplayReport, replay_run
from engine import ConvergeError

app = CommandGroup()


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
) -> None:
    """Re-execute a recorded run with its recorded model responses (no model is
    called) and check that every cycle promotes the same facts and that it stops
    the same way. Exits 0 when it does, 1 at a divergence, 2 when the run cannot
    be replayed.

    Example: converge replay 3b83f89c --job examples/dependency_audit/reviewed.yaml
    """
    store = read_store(db)
    run_id = resolve_run(store, run_id)
    try:
        report = replay_run(store, run_id, job_file, live=live)
    except ConvergeError as exc:
        fail(str(exc))
    finally:
        store.close()
    if as_json:
        print_json(report.to_dict())
    else:
        _print(report)
    raise typer.Exit(report.exit_code())


def _print(report: ReplayReport) -> None:
    mode = "live: the models were called"
    if not report.live:
        mode = f"offline: {report.model_responses} model response(s) from the recording"
    if report.played_back:
        mode += f", played back: {', '.join(report.played_back)}"
    out.print(f"replay of {escape(report.run_id)} (job {escape(str(report.job))}; {escape(mode)})")
    out.print(
        f"cycles {report.cycles[0]} / {report.cycles[1]}, facts {report.facts[0]} / "
        f"{report.facts[1]}, stop {escape(_kind(report.expected_stop))} / "
        f"{escape(_kind(report.got_stop))}  (recorded / replayed)"
    )
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
        out.print(f"{len(rest)} more divergence(s):")
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
