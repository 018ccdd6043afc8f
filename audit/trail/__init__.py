"""A run's hash-chained trail (docs/audit.md).

The chain of a run's audit events and its hashes (``_chain``), the kinds of event
the write path and the verifiers both name (``_kinds``), appending a cycle's batch
(``_events``, and on PostgreSQL in one statement: ``_head_cas``), starting and
finishing a run with its header (``_runs``, ``_run_header``), checkpoints and fact
chunks (``_checkpoints``), HITL gate rows and their compare-and-set decision
(``_gates``), and the key a writer must hold, checked before a run starts, a gate
is decided or a run is claimed (``_store_key``); redacted facts against their
chained ``fact_redacted`` events, which the store's verify and the bundle
verifier both check (``_redactions``). The writer thread, bulk inserts,
leases and liveness are :mod:`audit.writing`'s. Every new run head goes to the
ledger through the store's :class:`audit.core.HeadLedger`, never by importing the
sequencer.
"""

from __future__ import annotations

from audit.trail._chain import (
    CHAIN_COLUMNS,
    GENESIS,
    ChainRow,
    VerifyReport,
    event_message,
    hasher,
    read_chain,
    verify_chain,
)
from audit.trail._checkpoints import (
    chunks_problem,
    inherited_count,
    load_checkpoint,
    put_checkpoint,
    read_checkpoint,
)
from audit.trail._events import (
    append,
    append_events,
    commit,
    last_seq,
    locked_run_row,
    save_checkpoint,
)
from audit.trail._gates import (
    claim_resume,
    decide_gate,
    gate_record,
    get_gate,
    list_gates,
    pause_run,
    release_claim,
    settle_gate,
)
from audit.trail._kinds import CHECKPOINTED, REQUEUED, TERMINAL
from audit.trail._redactions import MARK, REDACTED, check_redactions
from audit.trail._run_header import header_column, read_header
from audit.trail._runs import finish_run, get_run_header, start_run
from audit.trail._store_key import (
    KEY_FINGERPRINT,
    AuditKeyError,
    keyed_as,
    require_key,
    stored_fingerprint,
)

__all__ = [
    "CHAIN_COLUMNS",
    "CHECKPOINTED",
    "GENESIS",
    "KEY_FINGERPRINT",
    "MARK",
    "REDACTED",
    "REQUEUED",
    "TERMINAL",
    "AuditKeyError",
    "ChainRow",
    "VerifyReport",
    "append",
    "append_events",
    "check_redactions",
    "chunks_problem",
    "claim_resume",
    "commit",
    "decide_gate",
    "event_message",
    "finish_run",
    "gate_record",
    "get_gate",
    "get_run_header",
    "hasher",
    "header_column",
    "inherited_count",
    "keyed_as",
    "last_seq",
    "list_gates",
    "load_checkpoint",
    "locked_run_row",
    "pause_run",
    "put_checkpoint",
    "read_chain",
    "read_checkpoint",
    "read_header",
    "release_claim",
    "require_key",
    "save_checkpoint",
    "settle_gate",
    "start_run",
    "stored_fingerprint",
    "verify_chain",
]
