"""``converge``: the command line.

It parses, calls the library, and renders with rich; every figure it shows is
reachable from Python. One module per command group, each with its own
``typer.Typer`` whose commands are added to the one :data:`app` here:

- :mod:`converge.cli.run`: ``run``;
- :mod:`converge.cli.audit`: ``runs`` (:mod:`converge.cli.runs`), ``show``, ``facts``,
  ``lineage`` (:mod:`converge.cli.facts`), ``verify``, ``anchor``;
- :mod:`converge.cli.events`: ``events``;
- :mod:`converge.cli.gates`: ``gates``, ``approve``, ``reject``;
- :mod:`converge.cli.resuming`: ``resume``;
- :mod:`converge.cli.history`: ``comment`` and ``gates GATE --history``;
- :mod:`converge.cli.service`: ``submit``, ``cancel``, ``watch`` (runs as a service);
- :mod:`converge.cli.tokens`: ``token add``, ``token list``, ``token revoke``,
  ``user add``, ``access-log`` (people, their tokens and groups, the refusals);
- :mod:`converge.cli.config`: ``config set``, ``config show`` (the store's settings);
- :mod:`converge.cli.retention`: ``prune`` (stopped runs removed, tombstones kept);
- :mod:`converge.cli.serve`: ``serve`` (the approval inbox);
- :mod:`converge.cli.report`: ``report``;
- :mod:`converge.cli.schema`: ``schema``;
- :mod:`converge.cli.worker`: ``worker`` (a Celery worker, extra ``workers``);
- :mod:`converge.cli.model`: ``model serve`` (the local model, extra ``local``);
- :mod:`converge.cli.proofs`: ``keys generate``, ``export``, ``verify-bundle``;
- :mod:`converge.cli.checkpoints`: ``checkpoint``, ``witness cosign`` (C2SP formats);
- :mod:`converge.cli.timetravel`: ``fork``, ``diff``, ``replay``;
- :mod:`converge.cli.actors`: who acts (``--by``, ``--token``) and the access
  policy's questions (:mod:`converge.access`);
- :mod:`converge.cli.render`: the shared options, errors and rendering;
  :mod:`converge.cli.tables`: tables that fit the terminal;
  :mod:`converge.cli.budgets`: the ``--max-*`` budget options.

Exit codes of ``run``, ``approve`` and ``resume`` follow the stop reason
(docs/stop-reasons.md); a bad job file or bad input exits 2. A reader that closes
the pipe early (``converge run job.yaml | head``) changes no exit code.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from converge import __version__
from converge.cli import (
    audit,
    checkpoints,
    config,
    events,
    gates,
    history,
    model,
    proofs,
    report,
    resuming,
    retention,
    run,
    schema,
    serve,
    service,
    timetravel,
    tokens,
    worker,
)
from converge.cli.commands import CommandGroup
from converge.cli.render import ClosedPipeGuard, drop_stdout

__all__ = ["app", "main"]

app = CommandGroup(
    name="converge",
    help="Run convergence jobs whose every stop is typed, audited and explainable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"converge {__version__}")
        raise typer.Exit(0)


@app.callback()
def _group(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Run convergence jobs whose every stop is typed, audited and explainable."""


# added without a name, a sub-app's commands join the top level (`converge runs`,
# not `converge audit runs`), in this order in the help
app.add_typer(run.app)
app.add_typer(audit.app)
app.add_typer(events.app)
app.add_typer(gates.app)
app.add_typer(resuming.app)
app.add_typer(history.app)
app.add_typer(service.app)
app.add_typer(tokens.app)
app.add_typer(config.app)
app.add_typer(retention.app)
app.add_typer(serve.app)
app.add_typer(report.app)
app.add_typer(schema.app)
app.add_typer(worker.app)
app.add_typer(model.app)
app.add_typer(proofs.app)
app.add_typer(checkpoints.app)
app.add_typer(timetravel.app)


def main() -> None:  # pragma: no cover - the console script
    """Entry point of the ``converge`` console script.

    A reader that closes the pipe (``converge runs | head -1``) ends the output,
    quietly: the rest goes to the null device (:class:`ClosedPipeGuard`) and the
    command exits with the code its result gives (``run``, ``approve`` and
    ``resume`` their stop's, :func:`converge.cli.render.render_result`; ``verify``
    0 for an intact store); ``watch`` stops following and exits 1.
    """
    sys.stdout = ClosedPipeGuard(sys.stdout)
    try:
        app()
    except BrokenPipeError:
        drop_stdout()
        raise SystemExit(1) from None
