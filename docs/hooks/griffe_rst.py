"""A griffe extension: the reStructuredText of our docstrings, as Markdown.

Sphinx roles (``:class:`~engine.Budget```) become code spans (`` `Budget` ``), and
the ``::`` introducing a literal block goes (``Example::`` becomes ``Example:``; the
indented block that follows is a code block in Markdown too), so the API pages do
not show the markup."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|data|mod|exc|obj):`(~?)([^`]+)`")
LITERAL = re.compile(r"^[ \t]*::[ \t]*\n|(?<=\S)::[ \t]*$", re.M)


def _code(match: re.Match[str]) -> str:
    short, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def markdown(text: str) -> str:
    """``text`` without its roles and literal-block markers."""
    text = ROLE.sub(_code, text)
    return LITERAL.sub(lambda m: "" if "\n" in m.group() else ":", text)


def _rewrite(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = markdown(obj.docstring.value)
    for member in obj.members.values():
        if not member.is_alias:
            _rewrite(member)  # type: ignore[arg-type]


class RestToMarkdown(griffe.Extension):
    """Rewrites every docstring of a package griffe loads."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the docstrings of ``pkg`` and of everything it defines."""
        _rewrite(pkg)
