"""converge's application layer: the composition root.

The command line (:mod:`converge.cli`) and job files (:mod:`converge.jobs`) live
here. This package wires the engine (``engine``) to the criteria, gates and audit
packages; none of those imports it back (docs/architecture.md).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("converge-engine")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.1.0"

__all__ = ["__version__"]
