"""Retention: stopped runs removed after a time, their proof kept in the ledger as a
tombstone (``_prune``; docs/audit.md, "Retention").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.retention._prune import (
        PrunedRun,
        PruneReport,
        prune,
    )

__all__ = [
    "PruneReport",
    "PrunedRun",
    "prune",
]

if not TYPE_CHECKING:
    __getattr__ = face(__name__, __all__, ("_prune",))
