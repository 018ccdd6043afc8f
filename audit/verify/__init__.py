"""Verification (``converge verify``, docs/audit.md): a run's chain recomputed
and checked against what queries and resumes read (``_verify``), the row checks
column by column (``_row_checks``), the cross-checks of outcomes, gates and
checkpoints (``_crosscheck``) and exactly-once (``_exactly_once``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.verify._crosscheck import (
        OUTCOME_COLUMNS,
        Problem,
        check_checkpoint,
        check_gates,
        check_outcome,
        checkpoint_digest,
        last_terminal,
        proven_counts,
    )
    from audit.verify._exactly_once import (
        check_exactly_once,
    )
    from audit.verify._row_checks import (
        EventCells,
        check_fact_ids,
        check_gate_columns,
        check_header,
        check_outcome_columns,
        check_status,
        read_events,
        unreadable,
    )
    from audit.verify._verify import (
        anchor,
        verify_all,
        verify_anchor,
        verify_run,
    )

__all__ = [
    "OUTCOME_COLUMNS",
    "EventCells",
    "Problem",
    "anchor",
    "check_checkpoint",
    "check_exactly_once",
    "check_fact_ids",
    "check_gate_columns",
    "check_gates",
    "check_header",
    "check_outcome",
    "check_outcome_columns",
    "check_status",
    "checkpoint_digest",
    "last_terminal",
    "proven_counts",
    "read_events",
    "unreadable",
    "verify_all",
    "verify_anchor",
    "verify_run",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_crosscheck",
            "_exactly_once",
            "_row_checks",
            "_verify",
        ),
    )
