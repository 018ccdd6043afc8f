"""A run's hash-chained trail and its write path (docs/audit.md).

The chain of a run's audit events and its hashes (``_chain``), the kinds of event
the write path and the verifiers both name (``_kinds``), the writer thread (``_background``) and its
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
    from audit.trail._background import (
        BackgroundWriter,
    )
    from audit.trail._chain import (
        GENESIS,
        ChainRow,
        event_message,
        hasher,
        verify_chain,
    )

__all__ = [
    "GENESIS",
    "BackgroundWriter",
    "ChainRow",
    "event_message",
    "hasher",
    "verify_chain",
]

if not TYPE_CHECKING:
    __getattr__ = face(
        __name__,
        __all__,
        (
            "_background",
            "_chain",
        ),
    )
