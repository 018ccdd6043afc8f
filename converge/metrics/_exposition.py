"""Exposition: the text ``/metrics`` answers, over every process of a pool.

In a process tree that named ``PROMETHEUS_MULTIPROC_DIR``
(:func:`converge.service.metering.shared_directory`: ``converge serve``'s pool, a
Celery worker's prefork pool), every process writes its values to files there and
:func:`exposition` sums them; without that variable, the values are this
process's own.

``converge_queue_depth``, ``converge_gates_pending`` and ``converge_gates_overdue``
are read from the store at each scrape (:class:`QueueDepth`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from sqlalchemy import func, select

from audit.store import SqlRunStore
from audit.tables import gates, runs
from converge.metrics._families import FAMILIES
from engine.status import GateStatus, RunStatus

__all__ = ["CONTENT_TYPE", "QueueDepth", "exposition"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable (:data:`converge.service.metering.MULTIPROC_ENV`)."""
CONTENT_TYPE = CONTENT_TYPE_LATEST
"""The ``Content-Type`` of :func:`exposition`'s text (format 0.0.4)."""


class QueueDepth:
    """A collector of what the store holds, read at each scrape (nothing when the
    store does not answer): ``converge_queue_depth``, the runs recorded ``queued``;
    ``converge_gates_pending``, the gates waiting for a decision; and
    ``converge_gates_overdue``, those of them past their deadline (the deadline
    keeper decides them within seconds: one that stays is an alert)."""

    def __init__(self, store: SqlRunStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def describe(self) -> Iterable[Metric]:
        """No description ahead of a scrape (the store is read at collection)."""
        return ()

    def collect(self) -> Iterator[Metric]:
        """The gauges, one read of the store."""
        pending = gates.c.status == GateStatus.PENDING
        try:
            with self.store.transaction(write=False) as conn:
                depth = conn.execute(
                    select(func.count()).select_from(runs).where(runs.c.status == RunStatus.QUEUED)
                ).scalar_one()
                waiting = conn.execute(
                    select(func.count()).select_from(gates).where(pending)
                ).scalar_one()
                overdue = conn.execute(
                    select(func.count())
                    .select_from(gates)
                    .where(pending, gates.c.expires_at < self.clock())
                ).scalar_one()
        except Exception:  # a scrape never fails for the store: the others still report
            return
        for name, doc, number in (
            ("converge_queue_depth", "Runs recorded queued, waiting for a worker.", depth),
            ("converge_gates_pending", "Gates waiting for a decision.", waiting),
            ("converge_gates_overdue", "Gates still pending past their deadline.", overdue),
        ):
            yield GaugeMetricFamily(name, doc, value=number)


class _Families:
    """:data:`FAMILIES` as one collector of another registry."""

    def collect(self) -> Iterable[Metric]:
        return FAMILIES.collect()


def exposition(*collectors: Any) -> bytes:
    """The text format of every family (summed over the pool's processes in
    multiprocess mode) and of ``collectors`` (e.g. a :class:`QueueDepth`)."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get(MULTIPROC_ENV):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Families())
    for c in collectors:
        registry.register(c)
    return generate_latest(registry)
