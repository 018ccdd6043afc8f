"""How the store writes, beneath its shared state (:class:`audit.core.StoreCore`):
the writer thread that commits queued batches (``_background``), the chaining and
bulk inserts of a batch (``_writer``, a fork's first event spliced: ``_spliced``),
the leases of the running runs this process holds (``_lease``), whether a run's
writer is alive (``_liveness``) and when run heads reach the ledger (``_timing``).

It imports no other room of ``audit``: the store's state is built from it, and the
trail, the queries and the run queue use it through this face.
"""

from __future__ import annotations

from audit.writing._background import BackgroundWriter
from audit.writing._lease import (
    DEFAULT_LEASE_S,
    LEASE_ENV,
    LOST,
    LeaseKeeper,
    grant,
    lease_seconds,
    read_lease,
    release,
    running_held,
    with_leases,
)
from audit.writing._liveness import this_writer, writer_alive
from audit.writing._timing import LEDGER_DELAY_ENV, LedgerTiming, ledger_timing
from audit.writing._writer import BulkInserter, ChainedBatch, Prediction, QueuedBatch, chain_batch

__all__ = [
    "DEFAULT_LEASE_S",
    "LEASE_ENV",
    "LEDGER_DELAY_ENV",
    "LOST",
    "BackgroundWriter",
    "BulkInserter",
    "ChainedBatch",
    "LeaseKeeper",
    "LedgerTiming",
    "Prediction",
    "QueuedBatch",
    "chain_batch",
    "grant",
    "lease_seconds",
    "ledger_timing",
    "read_lease",
    "release",
    "running_held",
    "this_writer",
    "with_leases",
    "writer_alive",
]
