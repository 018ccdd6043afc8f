"""The typer classes every ``converge`` command group is built from.

typer's rich help (0.2x) prints a value placeholder beside every option, ``<bool>``
for a flag too (``--help <bool>``), as if a flag took a value; and it keeps the
line breaks of a docstring's first paragraph in the command list, so a summary
written over two source lines is shown broken mid-sentence; its later paragraphs
keep those line breaks in the help itself (a narrow terminal broke each line twice:
where it wraps, and where the source did). :class:`CommandGroup` (a ``typer.Typer``)
gives its commands :class:`Command` and its groups :class:`Group`, which show flags
bare, a command's summary as one paragraph and each paragraph of its help flowed
(:func:`flowed`), so all wrap to the terminal.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

__all__ = ["Command", "CommandGroup", "Group", "bare_flags", "flowed", "summary"]


def summary(help_text: str | None) -> str | None:
    """The first paragraph of ``help_text`` on one line (None when there is none)."""
    if not help_text:
        return None
    first = inspect.cleandoc(help_text).split("\n\n", 1)[0]
    return " ".join(first.split()) or None


def flowed(help_text: str | None) -> str | None:
    """``help_text`` with each paragraph on one line (the source's line breaks inside
    a paragraph dropped), paragraphs still apart; a paragraph whose later lines are
    indented or start a list item (``- ``, ``* ``) is kept as written."""
    if not help_text:
        return help_text
    paragraphs = inspect.cleandoc(help_text).split("\n\n")
    return "\n\n".join(_flow(p) for p in paragraphs)


def _flow(paragraph: str) -> str:
    lines = paragraph.split("\n")
    if any(line.startswith((" ", "- ", "* ")) for line in lines[1:]):
        return paragraph
    return " ".join(line.strip() for line in lines)


def bare_flags(params: list[Any]) -> list[Any]:
    """``params`` with each flag's value placeholder blanked (an empty metavar), so
    the help shows ``--json`` and not ``--json <bool>``; other options keep theirs."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class Command(TyperCommand):
    """A ``converge`` command: flags without placeholders, a one-paragraph summary,
    its help's paragraphs flowed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = flowed(self.help)
        if self.short_help is None:
            self.short_help = summary(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        """The command's parameters, ``--help`` included, flags shown bare."""
        return bare_flags(super().get_params(ctx))


class Group(TyperGroup):
    """A ``converge`` command group (the root and ``token``), as :class:`Command`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = flowed(self.help)
        if self.short_help is None:
            self.short_help = summary(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        """The group's parameters, ``--help`` and ``--version`` included, flags bare."""
        return bare_flags(super().get_params(ctx))


class CommandGroup(typer.Typer):
    """``typer.Typer`` whose commands are :class:`Command` and whose group is :class:`Group`.

    Takes the same arguments as ``typer.Typer``.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        super().__init__(**kwargs)

    def command(  # type: ignore[override]
        self, name: str | None = None, **kwargs: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """As ``typer.Typer.command``, with :class:`Command` as the default ``cls``."""
        kwargs.setdefault("cls", Command)
        return super().command(name, **kwargs)
