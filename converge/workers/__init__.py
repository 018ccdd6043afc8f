"""Scale-out: a run's suggestors executed on Celery workers (docs/scale-out.md).

The engine stays the single merger: ``Engine(executor=CeleryExecutor(broker,
backend))`` sends each cycle's executions as tasks and merges their effects in
registration order, so facts, fact ids, ``facts_root`` and the audit trail equal
an in-process run. ``converge worker --broker URL --backend URL`` starts a
worker (:func:`run_worker`). Requires the ``workers`` extra; see
``docs/scale-out.md``.
"""

from converge.workers.app import DEFAULT_QUEUE, TASK_NAME, celery_app, run_execution
from converge.workers.executor import CeleryExecutor
from converge.workers.references import reference_of
from converge.workers.run_queue import CeleryRunQueue
from converge.workers.runs import RUN_TASK, register_run_task, run_message
from converge.workers.wire import RemoteSuggestorError
from converge.workers.worker import run_worker

__all__ = [
    "DEFAULT_QUEUE",
    "RUN_TASK",
    "TASK_NAME",
    "CeleryExecutor",
    "CeleryRunQueue",
    "RemoteSuggestorError",
    "celery_app",
    "reference_of",
    "register_run_task",
    "run_execution",
    "run_message",
    "run_worker",
]
