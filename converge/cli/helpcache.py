"""``converge --help``, kept as it was printed, so the next one imports no renderer.

The root help lists every command from :data:`converge.cli.catalog.COMMANDS`; typer
renders it with rich (its help renderer alone imports rich's console, markdown and
traceback modules: several times the cost of ``import typer, rich``). The text
depends only on the table and the root group (their source files), the renderer's
versions and how the output is shown (a terminal or not, its size, the colour and
width variables), so the first ``converge --help`` keeps what it printed in
``$XDG_CACHE_HOME/converge`` (``~/.cache/converge``) under a key of all of these,
and a later one with the same key prints it back. Only the :data:`KEPT` most recent
renderings stay (one per terminal size or upgrade): each new one removes the older
ones and any partial write left by a killed process. A cache that cannot be read or
written is skipped: the help is rendered as usual.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["KEPT", "Recorder", "cached", "remember"]

KEPT = 4
"""How many renderings of the help the cache keeps, the most recently written."""

_ENV = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")
_SOURCES = ("catalog.py", "root.py", "commands.py", "helpcache.py")


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "converge"


def _key() -> str:
    """What the printed help depends on, hashed (hex)."""
    parts: list[str] = [sys.version]
    here = Path(__file__).parent
    for name in _SOURCES:
        stat = (here / name).stat()
        parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    for library in ("typer", "rich"):
        spec = importlib.util.find_spec(library)
        origin = spec.origin if spec is not None and spec.origin else ""
        parts.append(f"{library}:{origin}:{os.stat(origin).st_mtime_ns if origin else 0}")
    parts += [f"{name}={os.environ.get(name, '')}" for name in _ENV]
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            parts.append(f"{os.isatty(fd)}:{tuple(os.get_terminal_size(fd))}")
        except (AttributeError, OSError, ValueError):
            parts.append("-")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def cached() -> str | None:
    """The help printed before with the same key (None when there is none)."""
    try:
        return (_cache_dir() / f"help-{_key()}.txt").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def remember(text: str) -> None:
    """Keep ``text`` (the help just printed) under the current key; never raises."""
    try:
        directory = _cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"help-{_key()}.txt"
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, target)
        _forget_older(directory)
    except OSError:
        pass


def _forget_older(directory: Path) -> None:
    """Remove all but the :data:`KEPT` newest renderings, and partial writes older than a
    minute (a killed process's; a running one's is younger)."""
    kept = sorted(directory.glob("help-*.txt"), key=lambda p: p.stat().st_mtime_ns)
    stale = time.time() - 60
    partials = [p for p in directory.glob("help-*.tmp") if p.stat().st_mtime < stale]
    for old in [*kept[:-KEPT], *partials]:
        old.unlink(missing_ok=True)


class Recorder:
    """``sys.stdout`` while the help is rendered: writes go through, and are kept in
    :attr:`text`; any other attribute is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._parts: list[str] = []

    def write(self, text: str | bytes) -> int:
        """Write ``text`` through and keep it (its length returned)."""
        self._parts.append(text.decode() if isinstance(text, bytes) else text)
        return int(self._stream.write(text))

    @property
    def text(self) -> str:
        """Everything written so far."""
        return "".join(self._parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
