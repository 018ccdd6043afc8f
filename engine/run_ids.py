"""What a run id may be: :func:`check_run_id`.

A run id names a run in the store, in URLs (``/api/runs/{id}``), in gate ids
(``{run_id}-g{n}``), on command lines and in the messages of the run service: 1 to
:data:`MAX_RUN_ID_LENGTH` ASCII letters, digits, ``.``, ``_``, ``:`` and ``-``,
beginning with a letter or a digit. Every id converge generates is one
(``new_run_id``: 16 hex digits; forks get new ones); an id given to ``Engine.run``,
to a store's ``queue_run`` / ``start_run`` or on the command line is checked here,
so no whitespace, newline, slash or control character ever enters a run's name.
"""

from __future__ import annotations

import re

from engine.errors import InvalidRunId

__all__ = ["MAX_RUN_ID_LENGTH", "RUN_ID_PATTERN", "check_run_id"]

MAX_RUN_ID_LENGTH = 128
"""The longest run id (its gate ids, ``-g`` and a number after it, fit the store's 200)."""
RUN_ID_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9._:-]{{0,{MAX_RUN_ID_LENGTH - 1}}}"
"""A run id, as a regular expression (matched whole)."""
_RUN_ID = re.compile(RUN_ID_PATTERN)


def check_run_id(value: object, field: str = "run_id") -> str:
    """``value`` when it is a run id; else :class:`~engine.errors.InvalidRunId`
    naming ``field`` (where it was given) and saying what a run id is."""
    if isinstance(value, str) and _RUN_ID.fullmatch(value):
        return value
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    raise InvalidRunId(
        f"{field} {shown} is not a run id: 1 to {MAX_RUN_ID_LENGTH} letters, digits, "
        "'.', '_', ':' or '-', beginning with a letter or a digit",
        field=field,
        value=value,
    )
