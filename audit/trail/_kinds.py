"""The kinds of audit event the write path and the verifiers both name (docs/audit.md).

A constant module between them, so that the write path never imports a verifier.
"""

from __future__ import annotations

__all__ = ["CHECKPOINTED", "REQUEUED", "TERMINAL"]

TERMINAL = ("run_stopped", "run_paused")
"""The events that carry a run's outcome (and the digest of its checkpoint)."""

CHECKPOINTED = (*TERMINAL, "checkpoint_saved")
"""The events that carry the digest of the checkpoint written with them."""

REQUEUED = "run_requeued"
"""The event of a stopped run put back in the queue (``audit.run_queue.requeue_stopped``):
after it, the run is ``queued`` until a worker claims it."""
