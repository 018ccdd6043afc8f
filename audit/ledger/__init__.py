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
    from audit.ledger._anchors import (
        KEY_ID,
        AnchorClaim,
        anchor_text,
        claim_reports,
        parse_claim,
    )
    from audit.ledger._integration import (
        INTEGRATE_LIMIT,
        append_inline,
        integrate,
        integrate_own,
        integrate_pending,
        pending_count,
    )
    from audit.ledger._ledger import (
        KEY_FINGERPRINT,
        LEDGER_HEAD,
        LEDGER_ID,
        LEDGER_SINCE,
        LedgerState,
        append,
        check_run,
        entry_message,
        key_fingerprint,
        parse_anchor,
        read_head,
        verify_ledger,
    )
    from audit.ledger._pending import (
        NOT_YET_INTEGRATED,
        deleted_pending,
        run_in_ledger,
    )
    from audit.ledger._sequencer import (
        FOLLOW_S,
        IDLE_S,
        LEADER_LOCK,
        SEQUENCED_HEADS,
        LedgerSequencer,
        SequencedHeads,
        head_recorded,
        record_head,
        start_sequencing,
        stop_sequencing,
    )
    from audit.ledger._store_key import (
        KEY_REQUIRED,
        WRONG_KEY,
        AuditKeyError,
        key_problem,
        keyed_as,
        require_key,
        stored_fingerprint,
    )
    from audit.ledger._timing import (
        BATCH_HEADS,
        DEFAULT_BOUND_S,
        DEFAULT_DELAY_MS,
        LEDGER_BOUND_ENV,
        LEDGER_DELAY_ENV,
        LedgerTiming,
        Runner,
        ledger_timing,
    )
    from audit.ledger._tree import (
        HEAD_TYPE,
        ConsistencyReport,
        LedgerEntry,
        check_consistency,
        head_line,
        ledger_entries,
        ledger_tree,
        parse_head,
        signed_head,
    )

__all__ = [
    "BATCH_HEADS",
    "DEFAULT_BOUND_S",
    "DEFAULT_DELAY_MS",
    "FOLLOW_S",
    "HEAD_TYPE",
    "IDLE_S",
    "INTEGRATE_LIMIT",
    "KEY_FINGERPRINT",
    "KEY_ID",
    "KEY_REQUIRED",
    "LEADER_LOCK",
    "LEDGER_BOUND_ENV",
    "LEDGER_DELAY_ENV",
    "LEDGER_HEAD",
    "LEDGER_ID",
    "LEDGER_SINCE",
    "NOT_YET_INTEGRATED",
    "SEQUENCED_HEADS",
    "WRONG_KEY",
    "AnchorClaim",
    "AuditKeyError",
    "ConsistencyReport",
    "LedgerEntry",
    "LedgerSequencer",
    "LedgerState",
    "LedgerTiming",
    "Runner",
    "SequencedHeads",
    "anchor_text",
    "append",
    "append_inline",
    "check_consistency",
    "check_run",
    "claim_reports",
    "deleted_pending",
    "entry_message",
    "head_line",
    "head_recorded",
    "integrate",
    "integrate_own",
    "integrate_pending",
    "key_fingerprint",
    "key_problem",
    "keyed_as",
    "ledger_entries",
    "ledger_timing",
    "ledger_tree",
    "parse_anchor",
    "parse_claim",
    "parse_head",
    "pending_count",
    "read_head",
    "record_head",
    "require_key",
    "run_in_ledger",
    "signed_head",
    "start_sequencing",
    "stop_sequencing",
    "stored_fingerprint",
    "verify_ledger",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_anchors",
            "_integration",
            "_ledger",
            "_pending",
            "_sequencer",
            "_store_key",
            "_timing",
            "_tree",
        ),
    )
