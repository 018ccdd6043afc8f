"""The root ``converge`` command group (:data:`app`): its ``--version`` option and
its commands, loaded on use from :data:`converge.cli.catalog.COMMANDS`
(:class:`converge.cli.commands.LazyGroup`)."""

from __future__ import annotations

from typing import Annotated

import typer

from converge.cli.commands import CommandGroup, LazyGroup

__all__ = ["app"]

app = CommandGroup(
    name="converge",
    help="Run convergence jobs whose every stop is typed, audited and explainable.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


def _print_version(value: bool) -> None:
    if value:
        from converge import __version__

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
