"""``--log-format`` of ``converge serve`` and ``converge worker`` (:mod:`converge.logs`)."""

from __future__ import annotations

from typing import Annotated

import typer

from converge.logs import LOG_FORMAT_ENV, LogFormat, configure_logging

__all__ = ["LogFormatOption", "start_logging"]

LogFormatOption = Annotated[
    LogFormat,
    typer.Option(
        "--log-format",
        envvar=LOG_FORMAT_ENV,
        case_sensitive=False,
        help="Log lines on stderr: text, or json (one object a line: time, level, event, "
        f"message, run_id, gate_id, person); the processes it starts follow (${LOG_FORMAT_ENV}).",
    ),
]


def start_logging(fmt: LogFormat, process: str) -> None:
    """Log this process's lines (``process``: serve, pool, worker) on stderr in ``fmt``."""
    configure_logging(fmt, process=process)
