"""The YAML text of a job file: read safely, with the line of every field.

:func:`read_yaml` refuses hostile input with one line, not a traceback (YAML
errors, nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_NODES` nodes
once aliases are expanded, values YAML cannot construct) and maps each field's
location (``("gates", 0, "hitl")``) to its line, so that :func:`line_at` (and
:func:`converge.jobs.errors.validation_error`) can name the line of a bad field.
"""

from __future__ import annotations

from typing import Any

import yaml

from converge.errors import JobFileError

__all__ = ["MAX_DEPTH", "MAX_NODES", "Lines", "line_at", "read_yaml"]

Lines = dict[tuple[str | int, ...], int]
"""The line (1-based) of each field's location in a job file."""

MAX_NODES = 50_000
"""Most YAML nodes a job file may hold once its aliases are expanded (alias bombs)."""

MAX_DEPTH = 64
"""Deepest nesting of a job file."""


def read_yaml(text: str, path: str) -> tuple[Any, Lines]:
    """The data of YAML ``text`` and the line of each of its locations.

    Raises :class:`JobFileError` (``path``, line) for invalid YAML, a document
    nested deeper than :data:`MAX_DEPTH` or larger than :data:`MAX_NODES` once its
    aliases are expanded, and a value YAML cannot construct.
    """
    node = _compose(text, path)
    if node is not None:
        _check_size(node, path)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # e.g. a timestamp with month 13: PyYAML's constructor raises plain errors
        raise JobFileError(f"invalid YAML value: {exc}", path=path) from None
    lines: Lines = {}
    if node is not None:
        _index_lines(node, (), lines)
    return data, lines


def _compose(text: str, path: str) -> yaml.Node | None:
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None
    except RecursionError:
        message = f"nested deeper than {MAX_DEPTH} levels"
        raise JobFileError(message, path=path, line=_deep_line(text)) from None


def _deep_line(text: str) -> int | None:
    """The line where flow brackets first nest deeper than :data:`MAX_DEPTH`."""
    depth = 0
    for number, line in enumerate(text.splitlines(), 1):
        for ch in line:
            depth += ch in "[{"
            depth -= ch in "]}"
            if depth > MAX_DEPTH:
                return number
    return None


def _yaml_error(exc: yaml.YAMLError, path: str) -> JobFileError:
    """PyYAML's error in our words, at the line and column where the problem starts:
    for a bracket or quote never closed, where it opens (PyYAML names the place it
    gave up, often a line later)."""
    problem = str(getattr(exc, "problem", None) or exc)
    context = str(getattr(exc, "context", None) or "")
    mark = getattr(exc, "problem_mark", None)
    opened = getattr(exc, "context_mark", None)
    message = _in_our_words(problem)
    opener = _OPENERS.get(context)
    if opener is not None and opened is not None:
        got = problem.rpartition("but got ")[2] or "the end of the file"
        closing = "'\"'" if opener == '"' else ("']'" if opener == "[" else "'}'")
        if "stream end" in got or "end of stream" in problem:
            message = f"the {opener!r} opened here is never closed (no {closing} follows)"
        else:
            at = f" at line {mark.line + 1}" if mark is not None else ""
            message = f"the {opener!r} opened here is not closed by {closing} before {got}{at}"
        mark = opened
    if mark is None:
        return JobFileError(f"invalid YAML: {' '.join(message.split())}", path=path)
    return JobFileError(
        f"invalid YAML at column {mark.column + 1}: {' '.join(message.split())}",
        path=path,
        line=mark.line + 1,
    )


_OPENERS = {
    "while parsing a flow mapping": "{",
    "while parsing a flow sequence": "[",
    "while scanning a quoted scalar": '"',
}
"""PyYAML's context of a bracket or quote left open, and that bracket."""

_WORDS = (
    (
        "mapping values are not allowed here",
        "a ':' where no key may start (a value "
        "holding ': ' needs quotes; a key needs its own line, indented like its siblings)",
    ),
    ("expected <block end>", "this line is not indented like the ones above it"),
    ("found character '\\t'", "a tab: YAML indents with spaces"),
    ("that cannot start any token", "this character cannot start a value (quote the value)"),
    ("found undefined alias", "an alias (*name) with no anchor (&name) before it"),
    ("could not determine a constructor", "a tag (!!...) a job file may not use"),
    ("found duplicate anchor", "an anchor (&name) given twice"),
)
"""PyYAML's problems (a part of its wording) and what we say instead."""


def _in_our_words(problem: str) -> str:
    for theirs, ours in _WORDS:
        if theirs in problem:
            return ours
    return problem


def _check_size(root: yaml.Node, path: str) -> None:
    """Refuse documents too deep, or too large once aliases are expanded.

    Sizes are memoised per node, so a shared (aliased) node is measured once: the
    check costs the document's size, not its expansion's.
    """
    size: dict[int, int] = {}
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, children_done = stack.pop()
        if id(node) in size:
            continue
        if depth > MAX_DEPTH:
            line = node.start_mark.line + 1
            raise JobFileError(f"nested deeper than {MAX_DEPTH} levels", path=path, line=line)
        children = _children(node)
        if children_done:
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_NODES:
                raise JobFileError(
                    f"more than {MAX_NODES} values once its aliases are expanded (an alias bomb?)",
                    path=path,
                    line=node.start_mark.line + 1,
                )
            size[id(node)] = total
            continue
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if id(c) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _index_lines(node: yaml.Node, loc: tuple[str | int, ...], out: Lines) -> None:
    out[loc] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            key = k.value
            out[(*loc, key)] = k.start_mark.line + 1
            _index_lines(v, (*loc, key), out)
            out[(*loc, key)] = k.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, v in enumerate(node.value):
            _index_lines(v, (*loc, i), out)


def line_at(lines: Lines, loc: tuple[str | int, ...]) -> int | None:
    """The line of ``loc``, else of its nearest enclosing location (None when unknown)."""
    for n in range(len(loc), -1, -1):
        line = lines.get(tuple(loc[:n]))
        if line is not None:
            return line
    return None
