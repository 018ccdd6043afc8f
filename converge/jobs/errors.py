"""A job file's validation errors in the user's words, every one of them.

:func:`validation_error` turns pydantic's errors into one :class:`JobFileError`
holding every one, each with the file and its own line (one line apiece): an
unknown key reads ``budgit: unknown key 'budgit' (did you mean 'budget'?)``
(the closest key its table knows, :func:`difflib.get_close_matches`; else the
keys it knows), a missing one ``suggestors: required key missing``. Unknown keys
come first, since a misspelt key is often why a required one is missing.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from converge.errors import JobFileError
from converge.jobs.source import Lines, line_at
from converge.jobs.spec import JobSpec

__all__ = ["validation_error"]

Loc = tuple[str | int, ...]


def validation_error(
    exc: ValidationError,
    path: str,
    lines: Lines,
    prefix: Loc = (),
    schema: Any = JobSpec,
) -> JobFileError:
    """Every error of ``exc`` as one :class:`JobFileError` holding each, one line
    apiece: ``path:line: field: message``.

    ``schema`` is the type validated (a pydantic model, or e.g. ``list[Spec]``): the
    keys it knows give an unknown key its "did you mean". ``prefix`` is where the
    validated data sits in the job file (``("stop_conditions",)``).
    """
    errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
    described = [_describe(err, schema, prefix, lines) for err in errors]
    return JobFileError.of([JobFileError(text, path=path, line=line) for line, text in described])


def _describe(err: ErrorDetails, schema: Any, prefix: Loc, lines: Lines) -> tuple[int | None, str]:
    """The line of one error and its text (``field: message``)."""
    raw = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
    loc, keys = _walk(schema, raw)
    loc = tuple("schema" if p == "schema_" else p for p in (*prefix, *loc))
    line = line_at(lines, loc)
    field = ".".join(str(p) for p in loc) or "(top level)"
    if err["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
        message = f"unknown key {loc[-1]!r}{_suggestion(loc[-1], keys)}"
    elif err["type"] == "missing":
        message = "required key missing"
    else:
        message = err["msg"]
    return line, f"{field}: {message}"


def _suggestion(key: str, known: list[str] | None) -> str:
    if not known:
        return ""
    close = difflib.get_close_matches(key, known, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (known keys: {', '.join(known)})"


def _walk(schema: Any, loc: Loc) -> tuple[Loc, list[str] | None]:
    """Follow pydantic's error location ``loc`` through ``schema``: the location as
    written in the job file (without the tags of tagged unions) and the keys known
    by the table holding its last part (None when that is no single model)."""
    candidates = _unwrap(schema)
    shown: list[str | int] = []
    for i, part in enumerate(loc):
        tagged = _tagged(candidates, part)
        if tagged is not None:
            candidates = [tagged]
            continue
        shown.append(part)
        if i == len(loc) - 1:
            break
        candidates = [t for c in candidates for t in _step(c, part)]
    models = [c for c in candidates if _is_model(c)]
    if len(models) != 1:
        return tuple(shown), None
    return tuple(shown), [f.alias or n for n, f in models[0].model_fields.items()]


def _unwrap(tp: Any) -> list[Any]:
    """The types ``tp`` may be: Annotated and Optional taken off, unions split."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [t for a in typing.get_args(tp) if a is not type(None) for t in _unwrap(a)]
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _tagged(candidates: list[Any], part: str | int) -> Any:
    """The member of a tagged union (several models with a literal ``type``) whose
    tag is ``part``, else None."""
    if len(candidates) < 2 or not isinstance(part, str):
        return None
    for c in candidates:
        field = c.model_fields.get("type") if _is_model(c) else None
        if field is not None and part in typing.get_args(field.annotation):
            return c
    return None


def _step(tp: Any, part: str | int) -> list[Any]:
    """The types at ``part`` inside ``tp`` (an index of a list, a key of a table)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if isinstance(part, int):
        if origin in (list, tuple, set, frozenset, Sequence) and args:
            return _unwrap(args[0])
        return []
    if _is_model(tp):
        for name, field in tp.model_fields.items():
            if part in (name, field.alias):
                return _unwrap(field.annotation)
        return []
    if origin in (dict, Mapping) and len(args) == 2:
        return _unwrap(args[1])
    return []
