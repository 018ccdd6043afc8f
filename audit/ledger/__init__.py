"""The store-wide ledger of run heads (docs/audit.md): its chain and anchor
(``_ledger``), the integration delay (``_timing``), the sequencer that integrates
pending heads in batches (``_sequencer``, ``_integration``), what ``verify`` says of
heads not integrated yet (``_pending``), the ledger as an RFC 6962 tree with signed
heads (``_tree``), anchors kept outside the store (``_anchors``) and the key a
writer holds (``_store_key``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.ledger._integration import (
        integrate,
        integrate_pending,
        pending_count,
    )
    from audit.ledger._ledger import (
        append,
        entry_message,
        verify_ledger,
    )
    from audit.ledger._pending import (
        NOT_YET_INTEGRATED,
    )
    from audit.ledger._sequencer import (
        LedgerSequencer,
        SequencedHeads,
        start_sequencing,
    )
    from audit.ledger._store_key import (
        AuditKeyError,
        require_key,
    )
    from audit.ledger._timing import (
        LEDGER_DELAY_ENV,
        LedgerTiming,
        ledger_timing,
    )
    from audit.ledger._tree import (
        check_consistency,
        head_line,
        ledger_entries,
        ledger_tree,
        parse_head,
        signed_head,
    )

__all__ = [
    "LEDGER_DELAY_ENV",
    "NOT_YET_INTEGRATED",
    "AuditKeyError",
    "LedgerSequencer",
    "LedgerTiming",
    "SequencedHeads",
    "append",
    "check_consistency",
    "entry_message",
    "head_line",
    "integrate",
    "integrate_pending",
    "ledger_entries",
    "ledger_timing",
    "ledger_tree",
    "parse_head",
    "pending_count",
    "require_key",
    "signed_head",
    "start_sequencing",
    "verify_ledger",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_integration",
            "_ledger",
            "_pending",
            "_sequencer",
            "_store_key",
            "_timing",
            "_tree",
        ),
    )
