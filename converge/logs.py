"""The logs of ``converge serve``, its pool processes and ``converge worker``: one
stdlib ``logging`` configuration, as text (the default) or one JSON object a line.

``--log-format json`` (or ``$CONVERGE_LOG_FORMAT=json``) makes every line on
stderr a JSON object (twelve-factor: the process writes its event stream, the
platform collects it)::

    {"time": "2026-01-15T08:00:00.123Z", "level": "info", "event": "gate_decided",
     "message": "gate g-1 approved by alice", "logger": "converge.web",
     "process": "serve", "pid": 4242, "run_id": "ee1c45c5...", "gate_id": "g-1",
     "person": "alice"}

- ``time``: ISO 8601 in UTC, milliseconds, ``Z``; ``level``: ``debug``, ``info``,
  ``warning``, ``error`` or ``critical``; ``event``: a short stable name
  (:data:`EVENTS` for the loggers that give none, e.g. ``http_request`` for each
  line of uvicorn's access log); ``message``: the human line.
- ``run_id``, ``gate_id``, ``person``: present where known (given with the record,
  or bound to the request or run being handled: :func:`bound`, :func:`note`).
- An access line also has ``method``, ``path``, ``status`` and ``client``; a line
  with an exception has ``exception`` (its traceback as text).

The text format is one line a record: ``TIME LEVEL EVENT: MESSAGE`` then the
known fields as ``key=value``.

Secrets are never written: every message, field and traceback goes through
:func:`redact`, which removes API tokens (``cvg_...``), the password of any
URL (``scheme://user:***@host``), bearer credentials and session cookies, and
the exact values of the secrets of this process's environment
(``$CONVERGE_AUDIT_KEY``, ``$CONVERGE_WEB_SECRET``, the passwords of
``$CONVERGE_DB`` and ``$CONVERGE_BROKER``, and any value :func:`keep_secret` was
given).
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from types import TracebackType
from typing import Any, TextIO

__all__ = [
    "CONTEXT_FIELDS",
    "EVENTS",
    "LOG_FORMAT_ENV",
    "JsonFormatter",
    "LogFormat",
    "TextFormatter",
    "bound",
    "configure_logging",
    "keep_secret",
    "note",
    "redact",
    "structured",
]

LOG_FORMAT_ENV = "CONVERGE_LOG_FORMAT"
"""Environment variable choosing the format (``text`` or ``json``); the processes a
configured process starts (its pool, Celery's) inherit it."""
CONTEXT_FIELDS = ("run_id", "gate_id", "person")
"""The fields a line carries where known."""
EVENTS = {
    "uvicorn.access": "http_request",
    "uvicorn.error": "server",
    "uvicorn.asgi": "server",
    "sse_starlette": "stream",
    "celery": "worker",
    "multiprocessing": "worker",
    "kombu": "broker",
    "amqp": "broker",
    "py.warnings": "python_warning",
}
"""The ``event`` of a record that names none, by logger (its longest known prefix);
a record of ``converge.NAME`` that names none is ``NAME``, any other ``log``."""
SECRET_ENV = (
    "CONVERGE_AUDIT_KEY",
    "CONVERGE_WEB_SECRET",
    "CONVERGE_DB",
    "CONVERGE_BROKER",
    "CONVERGE_BACKEND",
)
"""Environment variables whose secrets (a key, a URL's password) are never logged."""
MIN_SECRET_CHARS = 6
"""Shorter values are not redacted by value (they would blank ordinary words)."""


class LogFormat(StrEnum):
    """How a line is written: ``text`` (the default) or ``json``."""

    text = "text"
    json = "json"


# -- redaction ---------------------------------------------------------------------

_PATTERNS = [
    # a URL's password: scheme://user:PASSWORD@host
    (re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+@"), r"\1***@"),
    # an API token of `converge token add`
    (re.compile(r"cvg_[A-Za-z0-9_-]+"), "cvg_***"),
    # a bearer credential, a session cookie
    (re.compile(r"(?i)(bearer\s+)[^\s\"',;]+"), r"\1***"),
    (re.compile(r"(converge_session=)[^\s\"',;]+"), r"\1***"),
]
_secrets: set[str] = set()
_secrets_lock = threading.Lock()


def keep_secret(value: str | bytes | None) -> None:
    """Never log ``value`` (a key, a password), wherever it appears. Values shorter than
    :data:`MIN_SECRET_CHARS` characters are ignored (the patterns of :func:`redact`
    still apply)."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if value and len(value) >= MIN_SECRET_CHARS:
        with _secrets_lock:
            _secrets.add(value)


def _secrets_of_environment(environ: Mapping[str, str]) -> None:
    for name in SECRET_ENV:
        value = environ.get(name)
        if not value:
            continue
        if name in ("CONVERGE_AUDIT_KEY", "CONVERGE_WEB_SECRET"):
            keep_secret(value)
        for match in re.finditer(r"://[^\s:/@]*:([^\s@/]+)@", value):
            keep_secret(match.group(1))


def redact(text: str) -> str:
    """``text`` without the secrets the module docstring lists (each replaced by ``***``)."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    with _secrets_lock:
        known = sorted(_secrets, key=len, reverse=True)
    for secret in known:
        text = text.replace(secret, "***")
    return text


# -- context -----------------------------------------------------------------------

_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "converge_log_context", default=None
)


@contextmanager
def bound(**fields: str | None) -> Iterator[dict[str, str]]:
    """Within the block, every line logged by this task or thread (and the threads of
    the pool it hands work to) carries ``fields`` (``run_id``, ``gate_id``,
    ``person``; None ones are left out), over those bound outside; yields the
    mutable mapping :func:`note` fills in."""
    outer = _context.get() or {}
    mapping = {**outer, **{k: v for k, v in fields.items() if v is not None}}
    token = _context.set(mapping)
    try:
        yield mapping
    finally:
        _context.reset(token)


def note(**fields: str | None) -> None:
    """Add ``fields`` to what the enclosing :func:`bound` block's lines carry, also the
    lines logged after this call by code that started the block (e.g. the access
    line of a request whose person is learnt by its authentication). Nothing
    outside a block."""
    mapping = _context.get()
    if mapping is not None:
        mapping.update({k: v for k, v in fields.items() if v is not None})


def _fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The known context fields of ``record``: given with it (``extra=``), else bound."""
    found = dict(_context.get() or {})
    for name in CONTEXT_FIELDS:
        value = getattr(record, name, None)
        if value is not None:
            found[name] = str(value)
    return {k: found[k] for k in CONTEXT_FIELDS if k in found}


def _event_of(record: logging.LogRecord) -> str:
    given = getattr(record, "event", None)
    if isinstance(given, str) and given:
        return given
    name = record.name
    while name:
        if name in EVENTS:
            return EVENTS[name]
        name = name.rpartition(".")[0]
    if record.name.startswith("converge."):  # converge.service: "service"
        return record.name.rpartition(".")[2]
    return "log"


def _access_fields(record: logging.LogRecord) -> dict[str, Any]:
    """uvicorn's access line: ``(client, method, path, http_version, status)``."""
    args = record.args
    if record.name != "uvicorn.access" or not isinstance(args, tuple) or len(args) != 5:
        return {}
    client, method, path, _version, status = args
    return {"method": method, "path": redact(str(path)), "status": status, "client": client}


def _iso(created: float) -> str:
    """``created`` (unix seconds) as ISO 8601 in UTC to the millisecond, ``Z``."""
    when = datetime.fromtimestamp(created, UTC)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- formatters --------------------------------------------------------------------


class JsonFormatter(logging.Formatter):
    """One JSON object a record, keys as in the module docstring, secrets redacted."""

    def __init__(self, process: str = "converge") -> None:
        super().__init__()
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "event": _event_of(record),
            "message": redact(record.getMessage()),
            "logger": record.name,
            "process": self.process,
            "pid": record.process,
        }
        line.update(_fields_of(record))
        line.update(_access_fields(record))
        if record.exc_info:
            line["exception"] = redact(self.formatException(record.exc_info))
        elif record.exc_text:
            line["exception"] = redact(record.exc_text)
        return json.dumps(line, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``TIME LEVEL EVENT: MESSAGE key=value...`` on one line (a traceback after it),
    secrets redacted."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={v}" for k, v in _fields_of(record).items())
        text = (
            f"{_iso(record.created)} {record.levelname} {_event_of(record)}: "
            f"{redact(record.getMessage())}" + (f" {fields}" if fields else "")
        )
        if record.exc_info:
            text += "\n" + redact(self.formatException(record.exc_info))
        return text


# -- configuration -----------------------------------------------------------------


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment (a command run in-process by a test
    runner writes to the runner's, then to the one restored after it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        pass


_handlers: list[logging.Handler] = []
UNPROPAGATED_LOGGERS = ("multiprocessing",)
"""Loggers that do not propagate to the root (billiard's, of Celery's pool: "Process
'ForkPoolWorker-1' pid:... exited with 'exitcode 143'"): given the handler themselves."""
QUIET_LOGGERS = ("amqp", "kombu", "urllib3", "httpx", "httpcore", "asyncio")
"""Libraries whose INFO lines say nothing an operator acts on: WARNING and above."""


def structured() -> bool:
    """Whether this process writes its logs as JSON lines (:func:`configure_logging`)."""
    root = logging.getLogger().handlers
    return any(h in root and isinstance(h.formatter, JsonFormatter) for h in _handlers)


def configure_logging(
    fmt: LogFormat | str,
    *,
    process: str = "converge",
    level: int = logging.INFO,
    stream: TextIO | None = None,
) -> None:
    """Send every record of this process (converge's, uvicorn's, Celery's, the
    warnings) to ``stream`` (default stderr) in format ``fmt``, at ``level`` and
    above; ``process`` names this process in JSON lines (``serve``, ``pool``,
    ``worker``). Sets :data:`LOG_FORMAT_ENV` so that the processes it starts log
    alike, and learns the secrets of its environment (:func:`redact`). In JSON,
    an uncaught exception (of any thread) is logged as one line too. Raises
    ``ValueError`` for an unknown ``fmt``. Calling it again replaces the handler."""
    chosen = LogFormat(fmt)
    _secrets_of_environment(os.environ)
    handler: logging.Handler = _Stderr() if stream is None else logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(process) if chosen is LogFormat.json else TextFormatter())
    root = logging.getLogger()
    while _handlers:  # the one this function installed before
        old = _handlers.pop()
        for logger in (root, *(logging.getLogger(n) for n in UNPROPAGATED_LOGGERS)):
            logger.removeHandler(old)
    _handlers.append(handler)
    root.addHandler(handler)
    for name in UNPROPAGATED_LOGGERS:  # their own handler: theirs never reach the root's
        logger = logging.getLogger(name)
        logger.propagate = False
        logger.addHandler(handler)
    root.setLevel(level)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "celery"):
        logger = logging.getLogger(name)
        logger.handlers.clear()  # uvicorn's or Celery's own, if they set any
        logger.propagate = True
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    logging.captureWarnings(True)
    os.environ[LOG_FORMAT_ENV] = chosen.value
    if chosen is LogFormat.json:
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(
    kind: type[BaseException], value: BaseException, tb: TracebackType | None
) -> None:
    logging.getLogger("converge").critical(
        "uncaught %s: %s", kind.__name__, value, exc_info=(kind, value, tb),
        extra={"event": "uncaught_exception"},
    )  # fmt: skip


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    value = args.exc_value if args.exc_value is not None else args.exc_type()
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("converge").error(
        "uncaught %s in thread %s: %s", args.exc_type.__name__, name, value,
        exc_info=(args.exc_type, value, args.exc_traceback),
        extra={"event": "uncaught_exception"},
    )  # fmt: skip
