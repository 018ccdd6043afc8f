"""What a worker does with a run message: start a queued run, recover a crashed one,
or resume one whose gate was decided; each at most once, whoever else got the message.

A message names a run and an action (``run`` or ``resume``); the store says what is
left to do. A queued run is taken (``audit.run_queue._queue.take_queued``) and started
with a checkpoint of cycle 0, so that a worker killed at any point leaves a run
the next one recovers; a ``crashed`` run (its writer gone) is recovered by
``Engine.resume_run``, as is a fork recorded ``queued`` with its checkpoint
(``converge.timetravel.record_fork``, whatever the action); a ``resume`` continues
a paused run whose gate is decided (the recorded decision, value included) or a
run stopped resumably. A run that another process holds (``RunBusy``) or that has
finished (``RunFinished``) is left alone: the message was a duplicate.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from audit.ledger import require_key
from audit.run_queue import cancel_requested, clear_cancel, take_queued
from audit.store import SqlRunStore
from converge.decisions import job_of_run
from converge.jobs import Job
from converge.logs import bound
from converge.run_queue import Action
from converge.service.metering import recording
from engine import ConvergeError, Engine, RunBusy, RunFinished, RunResult, check_run_id
from engine.status import RunStatus

CANCEL_POLL_S = 0.1
"""How often (seconds) the process running a run reads its cancel requests."""

log = logging.getLogger("converge.service")

Build = Callable[[Engine], None]
"""A hook called with each engine built for a run (progress display, tracing)."""


def execute_run(
    store: SqlRunStore, run_id: str, action: Action = "run", *, prepare: Build | None = None
) -> RunResult | None:
    """Do what is left of ``run_id`` for a message with ``action``; its next stop, or
    None when there was nothing to do here (another process has it, it finished,
    it waits for a decision); ``prepare`` gets the run's engine before it runs
    (``converge.interrupts.Shutdown.track``). Raises ``RunNotFound`` and
    ``ConvergeError`` (the run recorded no job, a reference of its job no longer
    imports; ``InvalidRunId``: a queued run whose id is no run id), ``AuditKeyError``
    (a keyed store without its key: nothing taken or written). Its log lines carry
    the run id; its next stop is logged (``run_stopped``)."""
    with bound(run_id=run_id):
        log.info("run %s: %s here", run_id, action, extra={"event": "run_executing"})
        result = _execute(store, run_id, action, prepare)
        if result is not None:
            stop = result.stop_reason
            log.info(
                "run %s stopped: %s", run_id, stop,
                extra={"event": "run_stopped", "gate_id": getattr(stop, "gate_id", None)},
            )  # fmt: skip
        return result


def _execute(
    store: SqlRunStore, run_id: str, action: Action, prepare: Build | None
) -> RunResult | None:
    require_key(store, f"executing run {run_id}")
    row = store.run(run_id)
    status = row.status
    recorded = status == RunStatus.QUEUED and row.last_seq > 0  # a fork recorded for us
    if not recorded and (
        status == RunStatus.QUEUED or (status == RunStatus.CRASHED and row.last_seq == 0)
    ):
        check_run_id(run_id)  # a run queued before ids were checked is not taken
        try:
            take_queued(store, run_id)
        except RunBusy:
            return None
        job = job_of_run(store, run_id)
        engine = _engine(store, job, run_id, prepare)
        engine.checkpoint_at_start = True
        return _leg(store, engine, run_id, lambda: engine.run(job.spec.initial or None, run_id))
    if (
        recorded
        or status == RunStatus.CRASHED
        or (action == "resume" and status in (RunStatus.PAUSED, RunStatus.STOPPED))
    ):
        engine = _engine(store, job_of_run(store, run_id), run_id, prepare)
        return _leg(store, engine, run_id, lambda: engine.resume_run(run_id))
    return None


def _engine(store: SqlRunStore, job: Job, run_id: str, prepare: Build | None) -> Engine:
    """The job's engine, reading the run's cancel requests at each cycle boundary (the
    watcher thread cuts long async work; this makes a cancel exact between cycles),
    handed to ``prepare`` (a worker's shutdown cancels it); instrumented when this
    process records metrics (:func:`converge.service.metering.recording`)."""
    built: list[Engine] = []

    def after_cycle(cycle: int, percent: float) -> None:
        if cancel_requested(store, run_id):
            built[0].cancel(run_id)

    built.append(job.build_engine(store, progress=after_cycle))
    metrics = recording()  # a process of a pool that serves /metrics (docs/operations.md)
    if metrics is not None:
        metrics.instrument(built[0])
    if prepare is not None:
        prepare(built[0])
    return built[0]


def _leg(
    store: SqlRunStore, engine: Engine, run_id: str, go: Callable[[], RunResult]
) -> RunResult | None:
    """One leg of the run, cancellable from any process; None when another process
    claimed it first or it was finished."""
    try:
        with watching_cancel(store, engine, run_id):
            return go()
    except (RunBusy, RunFinished) as exc:
        log.info("run %s: nothing to do here (%s)", run_id, exc)
        return None
    finally:
        try:
            clear_cancel(store, run_id)
        except ConvergeError:
            log.warning("run %s: could not clear its cancel request", run_id)


@contextmanager
def watching_cancel(
    store: SqlRunStore, engine: Engine, run_id: str, every_s: float = CANCEL_POLL_S
) -> Iterator[None]:
    """While inside, a cancel request for ``run_id`` in the store (``converge cancel``)
    cancels it in ``engine``: the run ends ``UserCancelled`` at its next cycle
    boundary. Polls every ``every_s`` seconds in a daemon thread."""
    done = threading.Event()

    def poll() -> None:
        while not done.wait(every_s):
            try:
                if cancel_requested(store, run_id):
                    engine.cancel(run_id)
            except ConvergeError as exc:  # a store hiccup must not kill the watch
                log.warning("run %s: cannot read cancel requests: %s", run_id, exc)

    watcher = threading.Thread(target=poll, name=f"converge-cancel-{run_id}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
