"""The store-wide ledger of run heads (docs/audit.md): its chain and anchor
(``_ledger``), the integration delay (``_timing``), the sequencer that integrates
pending heads in batches (``_sequencer``, ``_integration``), what ``verify`` says of
heads not integrated yet (``_pending``), the ledger as an RFC 6962 tree with signed
heads (``_tree``), its checkpoints in the C2SP format (``_checkpoint``) and a
witness that cosigns them (``_witness``), anchors kept outside the store
(``_anchors``) and the key a writer holds (``_store_key``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.ledger._checkpoint import (
        Checkpoint,
        checkpoint_note,
        consistency_proof,
        format_proof,
        kept_checkpoint,
        parse_checkpoint,
        parse_proof,
        store_origin,
    )
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
    from audit.ledger._witness import (
        cosign_checkpoint,
        cosigned_by,
    )

__all__ = [
    "LEDGER_DELAY_ENV",
    "NOT_YET_INTEGRATED",
    "AuditKeyError",
    "Checkpoint",
    "LedgerSequencer",
    "LedgerTiming",
    "SequencedHeads",
    "append",
    "check_consistency",
    "checkpoint_note",
    "consistency_proof",
    "cosign_checkpoint",
    "cosigned_by",
    "entry_message",
    "format_proof",
    "head_line",
    "integrate",
    "integrate_pending",
    "kept_checkpoint",
    "ledger_entries",
    "ledger_timing",
    "ledger_tree",
    "parse_checkpoint",
    "parse_head",
    "parse_proof",
    "pending_count",
    "require_key",
    "signed_head",
    "start_sequencing",
    "store_origin",
    "verify_ledger",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_checkpoint",
            "_integration",
            "_ledger",
            "_pending",
            "_sequencer",
            "_store_key",
            "_timing",
            "_tree",
            "_witness",
        ),
    )
