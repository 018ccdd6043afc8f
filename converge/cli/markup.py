"""``escape``: text made safe to print through rich's markup, as ``rich.markup.escape``
makes it, without importing rich's text, style and emoji modules (``rich.markup``
imports them: a third of what ``converge runs`` costs beyond its libraries, for a
listing printed to a pipe without rich at all; tests/test_cli_light_reads.py
compares the two)."""

from __future__ import annotations

import re

__all__ = ["escape"]

_MARKUP = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")
"""What rich's markup reads as a tag, with the backslashes before it (rich's own)."""


def _doubled(match: re.Match[str]) -> str:
    backslashes, text = match.groups()
    return f"{backslashes}{backslashes}\\{text}"


def escape(markup: str) -> str:
    """``markup`` with each ``[tag]`` rich would read escaped (its backslashes doubled,
    one added), and a single trailing backslash doubled: ``rich.markup.escape``."""
    markup = _MARKUP.sub(_doubled, markup)
    if markup.endswith("\\") and not markup.endswith("\\\\"):
        return markup + "\\"
    return markup
