"""Stored cells checked before anything reads them: their column's type, their JSON.

SQLite keeps whatever value a cell is given, whatever its column's declared type
(a text in ``runs.cycles``, a number in ``gates.proposal``), so a row edited
outside converge may hold anything; PostgreSQL enforces the types, but a JSON
text column (``runs.reason``, ``runs.usage``...) may still hold any text there.
:func:`bad_cell` names the first cell of a row that is not of its column's type,
and :func:`json_cell` parses a JSON text cell or says why it cannot, so that the
readers raise ``engine.errors.CorruptRow`` naming the cell and ``verify`` reports
it, instead of failing on it with a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import orjson
from sqlalchemy import Float, Integer, String, Table, Text
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from engine.facts import canonical_json

__all__ = [
    "bad_cell",
    "cells",
    "json_cell",
    "loads",
    "of_type",
    "same_cell",
    "same_json",
    "unchanged",
]


JSON_COLUMNS = frozenset({"job_spec", "suggestors", "usage", "reason", "proposal", "extra"})
"""The columns of ``runs`` and ``gates`` that hold JSON text."""

TIME_COLUMNS = frozenset({"started_at", "ended_at", "opened_at", "expires_at", "decided_at"})
"""The columns that hold unix seconds."""


def _expected(column_type: Any) -> tuple[type, ...] | None:
    """The Python types a cell of ``column_type`` holds (None: not checked)."""
    if isinstance(column_type, TypeDecorator):  # a custom type: what it stores
        column_type = column_type.impl
    if isinstance(column_type, Integer):
        return (int,)
    if isinstance(column_type, Float):  # Double included
        return (int, float)
    if isinstance(column_type, String | Text):
        return (str,)
    return None


def of_type(value: Any, types: tuple[type, ...]) -> bool:
    """True when ``value`` is one of ``types`` (a bool is no integer here)."""
    return isinstance(value, types) and not isinstance(value, bool)


def bad_cell(table: Table, row: Mapping[Any, Any]) -> tuple[str, str] | None:
    """``(column, why)`` of the first cell of ``row`` (a row of ``table``, as a
    mapping) that is NULL in a NOT NULL column or not of its column's type; None
    when every cell is. Columns missing from ``row`` are not checked."""
    for column in table.columns:
        if column.name not in row:
            continue
        value = row[column.name]
        if value is None:
            if not column.nullable:
                return column.name, "NULL in a column that is never empty"
            continue
        types = _expected(column.type)
        if types is not None and not of_type(value, types):
            wanted = " or ".join(t.__name__ for t in types)
            return column.name, f"{type(value).__name__} {value!r:.40} where {wanted} is expected"
    return None


def json_cell(text: Any, shape: type | None = None) -> tuple[Any, str | None]:
    """``(value, None)`` for a JSON text (of ``shape``, dict or list, when given);
    ``(None, why)`` when ``text`` is no text, no JSON or not of that shape."""
    if not isinstance(text, str):
        return None, f"{type(text).__name__} where JSON text is expected"
    try:
        value = json.loads(text)
    except ValueError as exc:  # the int digit limit too
        return None, f"not JSON ({exc})"
    except RecursionError:
        return None, "JSON nested too deeply"
    if shape is not None and not isinstance(value, shape):
        return None, f"a JSON {type(value).__name__} where a JSON {shape.__name__} is expected"
    return value, None


def same_json(text: Any, value: Any) -> bool:
    """True when the JSON text cell ``text`` holds ``value`` (None: a NULL cell),
    compared as canonical JSON, so that ``1``, ``1.0`` and ``true`` differ."""
    if value is None or text is None:
        return value is None and text is None
    parsed, why = json_cell(text)
    if why is not None:
        return False
    try:
        return canonical_json(parsed) == canonical_json(value)
    except (TypeError, ValueError):
        return False


def same_cell(column: str, cell: Any, value: Any) -> bool:
    """True when a stored ``cell`` of ``column`` holds the chained ``value``."""
    if column in JSON_COLUMNS:
        return same_json(cell, value)
    if value is None or cell is None:
        return value is None and cell is None
    if column in TIME_COLUMNS:
        number = (int, float)
        return of_type(cell, number) and of_type(value, number) and float(cell) == float(value)
    return type(cell) is type(value) and bool(cell == value)


def cells(row: Mapping[Any, Any], *columns: str) -> dict[str, Any]:
    """The cells ``columns`` of ``row`` (a row's mapping) by column name: the fields a
    record takes as they are stored (``KeyError`` for a column the row lacks)."""
    return {column: row[column] for column in columns}


def unchanged(table: Table, row: Any, *columns: str) -> list[ColumnElement[bool]]:
    """The conditions that ``table``'s ``columns`` still hold what ``row`` read (its
    attributes of those names): a compare-and-set's ``where``."""
    return [table.c[column] == getattr(row, column) for column in columns]


# orjson parses a 100k-fact chunk or bundle several times faster than ``json``, but
# refuses integers past 64 bits, which JSON and canonical JSON allow (a suggestor may
# promote ``2**70``): loads falls back to ``json`` for those.
def loads(text: str | bytes) -> Any:
    """JSON text → value (orjson, or ``json`` for what orjson refuses but JSON
    allows). Raises ``ValueError`` for text that is not JSON or that no reader
    should hold: nested deeper than Python's recursion allows, an integer of more
    digits than ``sys.get_int_max_str_digits()`` (4300), bytes not UTF-8."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            return json.loads(text)
        except RecursionError:  # orjson stops at 1024 levels, json at the stack's end
            raise ValueError("JSON nested too deeply") from None
