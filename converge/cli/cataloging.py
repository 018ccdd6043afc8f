"""Writes :data:`converge.cli.catalog.COMMANDS` from the commands themselves.

``python -m converge.cli.cataloging`` imports every command module, builds its
commands as ``converge`` does and rewrites the table's generated block;
tests/test_cli_catalog.py compares the table with :func:`from_commands`.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from converge.cli import catalog
from converge.cli.catalog import Entry
from converge.cli.commands import sub_commands

__all__ = ["from_commands", "write"]


def from_commands() -> tuple[Entry, ...]:
    """The table as the commands give it now: imports every module of :data:`MODULES`
    and builds its commands as ``converge`` does (slow: for the test and the writer)."""
    entries: list[Entry] = []
    for module in catalog.MODULES:
        app = importlib.import_module(f"converge.cli.{module}").app
        for name, command in sub_commands(app).items():
            entries.append(Entry(name, module, command.short_help or ""))
    return tuple(entries)


def _source(entries: tuple[Entry, ...]) -> str:
    """The generated block: one ``Entry`` a command, long summaries split in pieces."""
    lines = ["    # <generated>"]
    for e in entries:
        one = f"    Entry({_quoted(e.name)}, {_quoted(e.module)}, {_quoted(e.summary)}),"
        if len(one) <= 100:
            lines.append(one)
            continue
        lines += ["    Entry(", f"        {_quoted(e.name)},", f"        {_quoted(e.module)},"]
        whole = len(_quoted(e.summary)) + 9 <= 100  # one piece, as ruff would join them
        pieces = [e.summary] if whole else _pieces(e.summary, 80)
        lines += [f"        {_quoted(piece)}" for piece in pieces]
        lines[-1] += ","
        lines.append("    ),")
    lines.append("    # </generated>")
    return "\n".join(lines)


def _quoted(text: str) -> str:
    """``text`` as a Python string literal in double quotes (as ruff formats it)."""
    if '"' in text and "'" not in text:
        return repr(text)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pieces(text: str, width: int) -> list[str]:
    """``text`` cut after spaces into pieces of at most ``width`` characters (a word
    longer than that stays whole)."""
    pieces: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if current and len(candidate) > width:
            pieces.append(current + " ")
            current = word
        else:
            current = candidate
    pieces.append(current)
    return pieces


def write(path: Path | None = None) -> bool:
    """Rewrite :data:`COMMANDS` in this module's file (or ``path``) from
    :func:`from_commands`; True when the file changed."""
    target = path or Path(catalog.__file__)
    text = target.read_text(encoding="utf-8")
    block = re.compile(r"    # <generated>\n.*?    # </generated>", re.S)
    new = block.sub(lambda _: _source(from_commands()), text, count=1)
    if new == text:
        return False
    target.write_text(new, encoding="utf-8")
    return True


if __name__ == "__main__":  # pragma: no cover - the writer
    print("converge/cli/catalog.py " + ("rewritten" if write() else "unchanged"))
