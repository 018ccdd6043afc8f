"""Keeping a run's facts out of CPython's repeated full garbage collections.

Facts and provenance are named tuples, which the cyclic garbage collector tracks
for as long as they live (CPython untracks only exact tuples). A run that
promotes 100k facts would have every full collection walk all of them again: on
100 suggestors x 100 facts x 10 cycles (docs/performance.md) that was most of the
run time (104k facts/s with the collector,
379k without). So, while a run promotes facts in bulk, the engine collects the
young generations (the cycle's own cyclic garbage is freed) and moves the
survivors to the permanent generation (``gc.freeze``); when the run returns they
are unfrozen, and collected as usual once unreachable.

The engine does this only when the collector is enabled and nothing else in the
process has frozen objects (``gc.get_freeze_count() == 0`` when the run starts),
so an application's own ``gc.freeze`` (e.g. before forking workers) is left alone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

FREEZE_AFTER_FACTS = 4096
"""Freeze once this many facts were promoted since the last freeze (and no
automatic collection during a merge of that many proposals: ``merge.Merge``)."""


class CollectorFreeze:
    """Per-run helper: ``promoted(n)`` after each merge, ``release()`` when the run returns.

    ``adopt=True`` takes over a freeze :class:`BulkLoad` made of a loaded checkpoint,
    so that the run unfreezes it when it returns.
    """

    __slots__ = ("_frozen", "_pending", "owned")

    def __init__(self, adopt: bool = False) -> None:
        self.owned = gc.isenabled() and (adopt or gc.get_freeze_count() == 0)
        self._pending = 0
        self._frozen = adopt and self.owned

    def promoted(self, facts: int) -> None:
        """Note ``facts`` new facts; freeze the survivors once enough have piled up."""
        if not self.owned:
            return
        self._pending += facts
        if self._pending >= FREEZE_AFTER_FACTS:
            self._pending = 0
            gc.collect(1)
            gc.freeze()
            self._frozen = True

    def merged(self) -> None:
        """A large merge ran with the collector off (``merge.Merge``): move what it
        built straight to the permanent generation, unscanned. Collecting first
        would walk each new fact twice (its young generation, then the next), a
        sixth of an audited merge's time; the cost is that cyclic garbage of the
        cycle, if any, waits for the run's return (then it is unfrozen, and
        collected as usual)."""
        if self.owned:
            gc.freeze()
            self._pending = 0
            self._frozen = True

    def release(self) -> None:
        """Give the frozen objects back to the collector (idempotent)."""
        if self._frozen:
            self._frozen = False
            gc.unfreeze()


@dataclass(slots=True)
class BulkLoad:
    """What :func:`bulk_load` did: ``froze`` is True when it froze what it loaded
    (the run that goes on adopts that freeze, see :class:`CollectorFreeze`)."""

    froze: bool = False

    def give_back(self) -> None:
        """The loaded run will not be driven here (a fork queued for a worker): its
        objects go back to the collector (a freeze left behind kept them, and every
        object frozen with them, out of collection for the process's life, and
        turned the freeze off for every later run of it)."""
        if self.froze:
            self.froze = False
            gc.unfreeze()


@contextmanager
def bulk_load() -> Iterator[BulkLoad]:
    """No automatic collection while a checkpoint is parsed into facts.

    Loading 100k facts allocates millions of containers that all survive; the
    collector would scan them again and again (pauses over 200 ms) to free none.
    A load that succeeds moves them straight to the permanent generation (when
    nothing else in the process froze objects): the first collection after the
    load would otherwise walk all of them at once (a resume of a 100k-fact run: a 267 ms
    pause).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    load = BulkLoad()
    try:
        yield load
        if was_enabled and gc.get_freeze_count() == 0:
            gc.freeze()
            load.froze = True
    finally:
        if was_enabled:
            gc.enable()
