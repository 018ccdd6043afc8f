"""converge's application layer: the composition root.

The command line (:mod:`converge.cli`) and job files (:mod:`converge.jobs`) live
here. This package wires the engine (``engine``) to the criteria, gates and audit
packages; none of those imports it back (docs/architecture.md).

``__version__`` (a str, the installed distribution's version) is looked up on
first use: :mod:`importlib.metadata` is not imported by every command.
"""

from __future__ import annotations

from typing import Any

__all__ = ["__version__"]

__version__: str
"""The installed ``converge-engine``'s version, looked up on first use."""


def __getattr__(name: str) -> Any:
    """``converge.__version__``: the installed ``converge-engine``'s version ("0.1.0"
    when running from a source tree that is not installed)."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("converge-engine")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        found = "0.1.0"
    globals()["__version__"] = found
    return found
