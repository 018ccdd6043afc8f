"""Retention: stopped runs removed after a time, their proof kept in the ledger as a
tombstone (``_prune``; docs/audit.md, "Retention").
"""

from __future__ import annotations

from audit.retention._prune import PrunedRun, PruneReport, prune

__all__ = [
    "PruneReport",
    "PrunedRun",
    "prune",
]
