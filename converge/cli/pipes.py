"""stdout for the console script when its reader goes away (``converge runs | head -1``).

Light on purpose: :func:`converge.cli.main` wraps stdout before it knows which
command runs, so this module imports nothing beyond the standard library.
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["ClosedPipeGuard", "drop_stdout", "stdout_closed"]


class ClosedPipeGuard:
    """``sys.stdout`` for the console script: a write or flush that meets a reader
    gone (``BrokenPipeError``) drops the rest of the output (:func:`drop_stdout`)
    instead of raising, so a command's exit code never depends on its reader;
    :func:`stdout_closed` then says so (for the commands that follow a run, which
    stop there). Any other attribute is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` (length returned, also when dropped)."""
        try:
            return int(self._stream.write(text))
        except BrokenPipeError:
            drop_stdout()
            return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream (to the null device once the reader is gone)."""
        try:
            self._stream.flush()
        except BrokenPipeError:
            drop_stdout()
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_READER_GONE: list[bool] = []
"""Non-empty once stdout's reader closed the pipe (:func:`drop_stdout`)."""


def stdout_closed() -> bool:
    """Whether stdout's reader closed the pipe (the output now goes nowhere)."""
    return bool(_READER_GONE)


def drop_stdout() -> None:
    """Point stdout at the null device, once its reader closed the pipe: what is
    still buffered, and the flush at exit, then go nowhere instead of failing (a
    failed flush at exit would turn the exit code into 120)."""
    _READER_GONE.append(True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (a test's capture)
        pass
    finally:
        os.close(devnull)
