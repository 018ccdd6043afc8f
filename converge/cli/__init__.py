"""``converge``: the command line.

It parses, calls the library, and renders with rich; every figure it shows is
reachable from Python. One module per command group, each with its own
``typer.Typer`` whose commands are added to the one :data:`app` here:

- :mod:`converge.cli.run`: ``run``;
- :mod:`converge.cli.audit`: ``runs``, ``show``, ``facts``, ``lineage``, ``verify``;
- :mod:`converge.cli.gates`: ``gates``, ``approve``, ``reject``, ``resume``;
- :mod:`converge.cli.worker`: ``worker`` (a Celery worker, extra ``workers``);
- :mod:`converge.cli.render`: the shared options, errors and rendering.

Exit codes of ``run``, ``approve`` and ``resume`` follow the stop reason
(DESIGN.md §5); a bad job file or bad input exits 2.
"""

from __future__ import annotations

import typer

from converge.cli import audit, gates, run, worker

__all__ = ["app", "main"]

app = typer.Typer(
    name="converge",
    help="Run convergence jobs whose every stop is typed, audited and explainable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _group() -> None:
    """Run convergence jobs whose every stop is typed, audited and explainable."""


# added without a name, a sub-app's commands join the top level (`converge runs`,
# not `converge audit runs`), in this order in the help
app.add_typer(run.app)
app.add_typer(audit.app)
app.add_typer(gates.app)
app.add_typer(worker.app)


def main() -> None:  # pragma: no cover - the console script
    """Entry point of the ``converge`` console script."""
    app()
