"""The Celery application shared by the engine's side and the workers.

Both sides build the same app from ``(broker_url, backend_url)``: JSON only, one
task (``converge.execute``), acknowledged late and requeued when the worker
running it is lost, one message prefetched per worker process (so a slow task
does not hold others back). Requires the ``workers`` extra (Celery).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from converge.workers.wire import encode_exception, encode_output
from engine import Context, ConvergeError, fact_from_dict, resolve_reference
from engine.errors import ImportReferenceError

try:
    from celery import Celery
    from celery.exceptions import TimeoutError as CeleryTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "converge.workers needs the 'workers' extra: pip install 'converge[workers]'"
    ) from exc

__all__ = ["DEFAULT_QUEUE", "TASK_NAME", "CeleryTimeout", "celery_app", "run_execution"]

TASK_NAME = "converge.execute"
DEFAULT_QUEUE = "converge"


def celery_app(broker_url: str, backend_url: str) -> Any:
    """A Celery app over ``broker_url`` (AMQP or Redis) and ``backend_url`` (a
    key-value result backend, e.g. Redis), with ``converge.execute`` registered."""
    app = Celery("converge", broker=broker_url, backend=backend_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,  # a killed worker's task goes back to the queue
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        result_expires=3600,  # seconds; the engine deletes what it read
        broker_connection_retry_on_startup=True,
        broker_connection_timeout=2.0,  # seconds
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
        result_extended=False,
    )
    app.task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=True)(run_execution)
    return app


_suggestors: dict[tuple[str, str], Any] = {}


def _suggestor(ref: str, name: str) -> Any:
    """The suggestor ``name`` that ``ref`` resolves to in this worker (cached)."""
    found = _suggestors.get((ref, name))
    if found is None:
        obj = resolve_reference(ref)
        if isinstance(obj, list | tuple):  # a factory of several suggestors
            obj = next((s for s in obj if getattr(s, "name", None) == name), None)
        if getattr(obj, "name", None) != name or not callable(getattr(obj, "execute", None)):
            raise ImportReferenceError(f"{ref} does not give a suggestor named {name!r}")
        found = _suggestors[(ref, name)] = obj
    return found


def run_execution(
    ref: str, name: str, cycle: int, facts: list[dict[str, Any]], remaining_s: float | None
) -> dict[str, Any]:
    """Run suggestor ``name`` (found at ``ref``) over ``facts`` at ``cycle``; the
    reply of :mod:`converge.workers.wire`. ``remaining_s`` is the run's time budget
    left when the task was sent (seconds; None = unlimited)."""
    try:
        s = _suggestor(ref, name)
        ctx = Context.of([fact_from_dict(f) for f in facts], cycle)
    except (ConvergeError, KeyError, TypeError, ValueError) as exc:
        return {"unusable": f"{type(exc).__name__}: {exc}"}
    try:
        out = s.execute(ctx)
        if inspect.isawaitable(out):
            out = asyncio.run(_awaited(out))
    except Exception as exc:
        return encode_exception(exc)
    return encode_output(out)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
