"""A run's hash-chained trail and its write path (docs/audit.md).

The chain of a run's audit events and its hashes (``_chain``), the kinds of event
the write path and the verifiers both name (``_kinds``), the writer thread and its
bulk inserts (``_writer``, ``_spliced``), appending a cycle's batch (``_events``,
and on PostgreSQL in one statement: ``_head_cas``), starting and finishing a run
with its header (``_runs``, ``_run_header``), checkpoints and fact chunks
(``_checkpoints``), HITL gate rows and their compare-and-set decision (``_gates``),
and whether a run's writer is alive (``_liveness``). Every new run head goes to the
ledger through the store's :class:`audit.core.HeadLedger`, never by importing the
sequencer; the underscored modules are private to ``audit``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.lazy import face

if TYPE_CHECKING:
    from audit.trail._chain import (
        GENESIS,
        KEYED,
        PLAIN,
        ChainRow,
        VerifyReport,
        event_message,
        hasher,
        read_chain,
        verify_chain,
    )
    from audit.trail._checkpoints import (
        checkpoint_blob,
        checkpoint_text,
        chunks_digest,
        chunks_problem,
        load_checkpoint,
        put_checkpoint,
        read_checkpoint,
        read_chunks,
        saved_event,
        with_digest,
    )
    from audit.trail._events import (
        append,
        append_checkpointed,
        append_events,
        commit,
        lock_run,
        move_head,
        predict,
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
    from audit.trail._head_cas import (
        append_known,
    )
    from audit.trail._kinds import (
        CHECKPOINTED,
        TERMINAL,
    )
    from audit.trail._liveness import (
        this_writer,
        writer_alive,
    )
    from audit.trail._run_header import (
        HEADER_COLUMNS,
        header_column,
        header_record,
        read_header,
        with_header,
    )
    from audit.trail._runs import (
        finish_run,
        get_run_header,
        outcome_values,
        start_run,
    )
    from audit.trail._spliced import (
        started_json,
    )
    from audit.trail._writer import (
        EVENT_COLUMNS,
        MAX_QUEUED,
        SWITCH_INTERVAL_S,
        BackgroundWriter,
        BulkInserter,
        ChainedBatch,
        FactRows,
        Prediction,
        QueuedBatch,
        chain_batch,
        fold_digest,
    )

__all__ = [
    "CHECKPOINTED",
    "EVENT_COLUMNS",
    "GENESIS",
    "HEADER_COLUMNS",
    "KEYED",
    "MAX_QUEUED",
    "PLAIN",
    "SWITCH_INTERVAL_S",
    "TERMINAL",
    "BackgroundWriter",
    "BulkInserter",
    "ChainRow",
    "ChainedBatch",
    "FactRows",
    "Prediction",
    "QueuedBatch",
    "VerifyReport",
    "append",
    "append_checkpointed",
    "append_events",
    "append_known",
    "chain_batch",
    "checkpoint_blob",
    "checkpoint_text",
    "chunks_digest",
    "chunks_problem",
    "claim_resume",
    "commit",
    "decide_gate",
    "event_message",
    "finish_run",
    "fold_digest",
    "gate_record",
    "get_gate",
    "get_run_header",
    "hasher",
    "header_column",
    "header_record",
    "list_gates",
    "load_checkpoint",
    "lock_run",
    "move_head",
    "outcome_values",
    "pause_run",
    "predict",
    "put_checkpoint",
    "read_chain",
    "read_checkpoint",
    "read_chunks",
    "read_header",
    "release_claim",
    "save_checkpoint",
    "saved_event",
    "settle_gate",
    "start_run",
    "started_json",
    "this_writer",
    "verify_chain",
    "with_digest",
    "with_header",
    "writer_alive",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_chain",
            "_checkpoints",
            "_events",
            "_gates",
            "_head_cas",
            "_kinds",
            "_liveness",
            "_run_header",
            "_runs",
            "_spliced",
            "_writer",
        ),
    )
