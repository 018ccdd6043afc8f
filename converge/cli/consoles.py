"""The rich consoles of ``converge``: :class:`Output` (stdout) and the one of stderr,
made by :mod:`converge.cli.render` on first use (a listing printed to a pipe uses
neither: rich's console module costs as much as the listing)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleDimensions

from converge.cli.pipes import drop_stdout

__all__ = ["UNWRAPPED", "Output", "SizedWhenPrinting", "error_console"]

UNWRAPPED = 100_000
"""The width of stdout piped or redirected without ``$COLUMNS``: no line is wrapped."""


class SizedWhenPrinting(Console):
    """A console sized by ``$COLUMNS`` / ``$LINES`` as they are when it prints, not as
    they were when it was made (rich reads them once, in its constructor): made on
    first use by one command run in-process (typer's CliRunner), it follows the
    next one's, as the consoles made at import did."""

    def __init__(self, *, width: int | None = None, **options: Any) -> None:
        super().__init__(width=width, **options)
        if width is None:  # else the width asked for, as rich keeps it
            self._width = None
            self._height = options.get("height")


class Output(SizedWhenPrinting):
    """The console of stdout. Piped or redirected (no terminal, no ``$COLUMNS``) it
    wraps nothing: a summary's explanation stays on its line for ``grep`` and a file
    (rich would wrap at 80 columns). When its reader closes the pipe, the rest of the
    output goes to the null device instead of rich's ``SystemExit(1)``: the command
    finishes and exits with the code its result gives (``verify --all | head -1``
    exits 0 for an intact store), as it would have after printing it all."""

    @property
    def size(self) -> ConsoleDimensions:
        """The terminal's size, or ``$COLUMNS``; :data:`UNWRAPPED` wide when neither."""
        found = super().size
        columns = self._environ.get("COLUMNS", "").strip()
        if self._width is None and not columns.isdigit() and not self.is_terminal:
            return ConsoleDimensions(UNWRAPPED, found.height)
        return found

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]

    def on_broken_pipe(self) -> None:
        """Drop the rest of the output (:func:`drop_stdout`); carry on."""
        drop_stdout()


def error_console() -> Console:
    """The console of stderr."""
    return SizedWhenPrinting(stderr=True)
