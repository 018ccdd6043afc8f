"""The store-wide ledger of run heads (docs/audit.md): its chain and anchor
(``_ledger``), the sequencer that integrates
pending heads in batches (``_sequencer``, ``_integration``), what ``verify`` says of
heads not integrated yet (``_pending``), the ledger as an RFC 6962 tree with signed
heads (``_tree``), its checkpoints in the C2SP format (``_checkpoint``) and a
witness that cosigns them (``_witness``), anchors kept outside the store
(``_anchors``). The key a writer holds is checked by the trail
(:func:`audit.trail.require_key`), offered here too for the commands that check it.
"""

from __future__ import annotations

from audit.ledger._anchors import anchor_text, claim_reports, parse_claim
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
from audit.ledger._integration import integrate, integrate_own, integrate_pending, pending_count
from audit.ledger._ledger import (
    LEDGER_HEAD,
    LEDGER_SINCE,
    append,
    entry_message,
    key_fingerprint,
    read_head,
    verify_ledger,
)
from audit.ledger._pending import NOT_YET_INTEGRATED, deleted_pending, run_in_ledger
from audit.ledger._sequencer import (
    SEQUENCED_HEADS,
    LedgerSequencer,
    SequencedHeads,
    start_sequencing,
    stop_sequencing,
)
from audit.ledger._tree import (
    HEAD_TYPE,
    check_consistency,
    head_line,
    ledger_entries,
    ledger_tree,
    parse_head,
    signed_head,
)
from audit.ledger._witness import cosign_checkpoint, cosigned_by
from audit.trail import AuditKeyError, require_key

__all__ = [
    "HEAD_TYPE",
    "LEDGER_HEAD",
    "LEDGER_SINCE",
    "NOT_YET_INTEGRATED",
    "SEQUENCED_HEADS",
    "AuditKeyError",
    "Checkpoint",
    "LedgerSequencer",
    "SequencedHeads",
    "anchor_text",
    "append",
    "check_consistency",
    "checkpoint_note",
    "claim_reports",
    "consistency_proof",
    "cosign_checkpoint",
    "cosigned_by",
    "deleted_pending",
    "entry_message",
    "format_proof",
    "head_line",
    "integrate",
    "integrate_own",
    "integrate_pending",
    "kept_checkpoint",
    "key_fingerprint",
    "ledger_entries",
    "ledger_tree",
    "parse_checkpoint",
    "parse_claim",
    "parse_head",
    "parse_proof",
    "pending_count",
    "read_head",
    "require_key",
    "run_in_ledger",
    "signed_head",
    "start_sequencing",
    "stop_sequencing",
    "store_origin",
    "verify_ledger",
]
