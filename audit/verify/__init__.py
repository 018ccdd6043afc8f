"""Verification (``converge verify``, docs/audit.md): a run's chain recomputed
and checked against what queries and resumes read (``_verify``), the row checks
column by column (``_row_checks``), the cross-checks of outcomes, gates and
checkpoints (``_crosscheck``) and exactly-once (``_exactly_once``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.verify._verify import (
        verify_all,
        verify_anchor,
        verify_run,
    )

__all__ = [
    "verify_all",
    "verify_anchor",
    "verify_run",
]

if not TYPE_CHECKING:
    __getattr__ = face(__name__, __all__, ("_verify",))
