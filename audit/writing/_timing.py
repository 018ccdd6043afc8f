"""When a run's head reaches the store-wide ledger: the integration delay and its bound
(docs/audit.md, "The ledger's integration delay").

With a delay (PostgreSQL's default: :data:`DEFAULT_DELAY_MS`), a commit records its
run's new head in ``ledger_pending``, locking only its run, and a sequencer
(:mod:`audit.ledger._sequencer`) integrates the pending heads into the ledger in batches,
a pass every ``delay`` by the one process that leads the store's sequencing
(``converge serve``, a worker, or a committing process when none does), and a
pass by each process at the end of each run or pause and when it closes the
store. Delay 0 (SQLite's default: one writer at a time anyway) integrates inline:
each commit appends its entry to the ledger itself, as before.

``verify`` fails for a head committed more than ``bound`` seconds ago and still
not integrated. :class:`LedgerTiming` holds both, the clock (tests inject one) and
this process's side of the sequencing: its sequencer thread, how many heads it
recorded since that one's last turn, and the frontier of the ledger's tree when
it signs heads.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from engine.errors import ConfigurationError
from engine.hashing.merkle import MerkleFrontier

__all__ = [
    "BATCH_HEADS",
    "DEFAULT_BOUND_S",
    "DEFAULT_DELAY_MS",
    "LEDGER_BOUND_ENV",
    "LEDGER_DELAY_ENV",
    "LedgerTiming",
    "Runner",
    "ledger_timing",
]

LEDGER_DELAY_ENV = "CONVERGE_LEDGER_DELAY_MS"
"""Milliseconds a committed run head may wait before it is integrated (0: inline)."""

LEDGER_BOUND_ENV = "CONVERGE_LEDGER_BOUND_S"
"""Seconds after which ``verify`` fails for a committed head not yet integrated."""

DEFAULT_DELAY_MS = 100.0
"""The integration delay on PostgreSQL (SQLite integrates inline: 0)."""

DEFAULT_BOUND_S = 10.0
"""The integration bound ``verify`` holds the store to."""

BATCH_HEADS = 256
"""A process that recorded this many heads integrates without waiting for the delay."""


def _number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigurationError(f"${name} must be a number >= 0, got {raw!r}")
    return value


class Runner(Protocol):
    """This process's sequencer of a store (:class:`audit.ledger._sequencer.LedgerSequencer`)."""

    def wake(self) -> None:
        """Run a pass now rather than at the end of the delay."""

    def stop(self) -> None:
        """Stop, integrating what is pending."""


@dataclass(slots=True)
class LedgerTiming:
    """The integration delay and bound of one store object, and this process's side
    of the sequencing (see the module's docstring).

    ``delay`` and ``bound`` are seconds; ``clock()`` unix seconds (``time.time``,
    or a test's), read for each head's ``committed_at`` and by ``verify``.
    ``background`` false starts no sequencer thread in this process (tests run the
    passes themselves). ``recorded`` counts the heads this process recorded since
    its sequencer's last turn (``batch`` of them wake it early); ``runner`` is that
    sequencer, started by the process (``runner_pid``) that recorded the first head.
    """

    delay: float
    bound: float
    batch: int = BATCH_HEADS
    clock: Callable[[], float] = time.time
    background: bool = True
    # the ledger tree's frontier at the last head this process signed, and the
    # ledger chain's hash of that entry (by which it knows the ledger continues it)
    frontier: tuple[MerkleFrontier, str] | None = None
    recorded: int = 0
    ever_recorded: bool = False
    runner: Runner | None = None
    runner_pid: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def inline(self) -> bool:
        """True when each commit integrates its own head (delay 0)."""
        return self.delay <= 0


def ledger_timing(pg: bool) -> LedgerTiming:
    """The timing of a store from ``$CONVERGE_LEDGER_DELAY_MS`` (default 100 ms on
    PostgreSQL, 0 = inline on SQLite) and ``$CONVERGE_LEDGER_BOUND_S`` (default 10 s,
    never below the delay). Raises ``ConfigurationError`` for a value that is not a
    number >= 0."""
    delay = _number(LEDGER_DELAY_ENV, DEFAULT_DELAY_MS if pg else 0.0) / 1000.0
    bound = max(_number(LEDGER_BOUND_ENV, DEFAULT_BOUND_S), delay)
    return LedgerTiming(delay=delay, bound=bound)
