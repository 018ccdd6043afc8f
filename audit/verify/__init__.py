"""Verification (``converge verify``, docs/audit.md): a run's chain recomputed
and checked against what queries and resumes read (``_verify``), the row checks
column by column (``_row_checks``), the cross-checks of outcomes, gates and
checkpoints (``_crosscheck``) and exactly-once (``_exactly_once``).
"""

from __future__ import annotations

from audit.verify._verify import anchor, verify_all, verify_anchor, verify_run

__all__ = [
    "anchor",
    "verify_all",
    "verify_anchor",
    "verify_run",
]
