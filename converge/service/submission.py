"""Submitting a run, and finding the runs no process is executing.

:func:`submit_run` records the run ``queued`` (``audit.run_queue._queue.queue_run``) and
only then sends its message: a crash or a broker outage between the two leaves a
queued run that :func:`recover_runs` (``converge worker --recover``, and every
worker at start) sends again. So does a decision: the gate is decided in the store
before its run's resume is sent, and a paused run with no pending gate is a resume
that :func:`recover_runs` sends again. :class:`ExpiredLeases` sends again, while
workers run, the runs whose holder's lease expired (docs/scale-out.md).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection
from dataclasses import KW_ONLY, dataclass, field

from audit.run_queue import queue_run, resumes_to_recover, runs_to_recover
from audit.store import SqlRunStore
from converge.jobs import Job
from converge.service.metering import recording
from converge.service.queues import RunQueue
from engine import RunHeader, RunStatus, new_run_id

log = logging.getLogger("converge.service")


def submit_run(job: Job, store: SqlRunStore, queue: RunQueue, run_id: str | None = None) -> str:
    """Record ``job``'s run as ``queued`` in ``store``, send it to ``queue``; its run id.

    Returns as soon as the message is sent (the run executes on a worker, or in
    ``queue``'s pool). Raises ``StoreError`` (nothing recorded, nothing sent); an
    error of the queue propagates after the run is recorded (it stays queued and
    :func:`recover_runs` sends it again).
    """
    rid = run_id or new_run_id()
    # the suggestors' names are recorded when a worker builds the job's engine
    queue_run(store, RunHeader(rid, job.name, job.record(), (), time.time()))
    queue.send(rid, "run")
    return rid


def recover_runs(store: SqlRunStore, queue: RunQueue) -> list[str]:
    """Send again every run that no process is executing: ``queued`` ones and
    ``crashed`` ones (their writer on this host is gone), then the resumes of the
    paused runs whose gates are decided (their message lost, or still on its way);
    the run ids sent. A run sent twice is still executed once (the take and the
    claim are compare-and-sets). Raises ``StoreError``, or what ``queue.send``
    raises (the runs not sent yet stay as recorded)."""
    sent: list[str] = []
    for run_id, status in runs_to_recover(store):
        log.warning("recovering run %s (%s): sent again", run_id, status)
        queue.send(run_id, "run")
        sent.append(run_id)
    for run_id in resumes_to_recover(store):
        log.warning("recovering run %s (paused, its gate decided): its resume sent again", run_id)
        queue.send(run_id, "resume")
        sent.append(run_id)
    return sent


RESEND_S = 60.0
"""How long (seconds) :class:`ExpiredLeases` waits before sending a run again that it
already sent and that is still unclaimed (every worker busy, a message lost)."""


def _count_takeover() -> None:
    metrics = recording()  # converge_lease_takeovers_total (docs/operations.md)
    if metrics is not None:
        metrics.takeover()


@dataclass(eq=False)
class ExpiredLeases:
    """The runs whose lease expired (their host died, hung or was cut off: docs/
    scale-out.md), sent again to ``queue`` so that another worker claims them.

    ``tick()`` (every second in ``converge worker``'s keeper process) reads the
    running runs not held any more, by the database's clock, and sends each one
    once, then again only if it is still unclaimed ``resend_s`` seconds later
    (``clock``: monotonic seconds). A run sent twice is still executed once.

    ``waiting`` (a server without a broker: its pool's
    :meth:`~converge.service.LocalRunPool.pending`): the ``queued`` runs too (put
    back by a pool process that stopped, left by a server that died), except
    those ``waiting`` returns, which the pool has already."""

    store: SqlRunStore
    queue: RunQueue
    _: KW_ONLY
    resend_s: float = RESEND_S
    clock: Callable[[], float] = time.monotonic
    waiting: Callable[[], Collection[str]] | None = None
    _sent: dict[str, float] = field(default_factory=dict, init=False, repr=False)

    def tick(self) -> list[str]:
        """One pass: the run ids sent now. Raises ``StoreError`` (the store failed)."""
        now = self.clock()
        found = runs_to_recover(self.store, queued=self.waiting is not None)
        held = self.waiting() if self.waiting is not None else ()
        due = {run_id: status for run_id, status in found if run_id not in held}
        self._sent = {r: at for r, at in self._sent.items() if r in due}
        sent: list[str] = []
        for run_id, status in due.items():
            if now - self._sent.get(run_id, -math.inf) < self.resend_s:
                continue
            if status == RunStatus.QUEUED:
                log.warning("run %s: queued and no process has it, sent again", run_id)
            else:
                log.warning("run %s: its lease expired, sent again for another worker", run_id)
            self.queue.send(run_id, "run")
            if status != RunStatus.QUEUED and run_id not in self._sent:
                _count_takeover()
            self._sent[run_id] = now
            sent.append(run_id)
        return sent
