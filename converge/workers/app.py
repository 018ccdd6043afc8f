"""The Celery application shared by the engine's side and the workers.

Both sides build the same app from ``(broker_url, backend_url)``: JSON only, one
task (``converge.execute``), acknowledged late and requeued when the worker
running it is lost, one message prefetched per worker process (so a slow task
does not hold others back). Requires the ``workers`` extra (Celery).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

from converge.workers.wire import (
    decode_remaining,
    encode_exception,
    encode_output,
    with_recorded_usage,
)
from engine import Context, ConvergeError, Fact, fact_from_dict, resolve_reference
from engine.errors import ImportReferenceError, StopRun

try:
    from celery import Celery, current_app
    from celery.exceptions import TimeoutError as CeleryTimeout
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "converge.workers needs the 'workers' extra: pip install 'converge-engine[workers]'"
    ) from exc

__all__ = ["DEFAULT_QUEUE", "TASK_NAME", "CeleryTimeout", "celery_app", "run_execution"]

TASK_NAME = "converge.execute"
DEFAULT_QUEUE = "converge"


def celery_app(broker_url: str, backend_url: str | None) -> Any:
    """A Celery app over ``broker_url`` (AMQP or Redis) and ``backend_url`` (a
    key-value result backend, e.g. Redis; None: none, enough to send whole runs),
    with ``converge.execute`` (suggestors) registered; a worker also registers
    ``converge.run`` (whole runs, :func:`converge.workers.runs.register_run_task`)."""
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


_snapshots: dict[str, list[Fact]] = {}  # facts list key → the facts read so far
_SNAPSHOTS_KEPT = 8


def _backend_facts(app: Any, where: dict[str, Any]) -> list[Fact]:
    """The first ``where["count"]`` facts of the run's list ``where["key"]`` in the
    result backend's Redis; only those not read before are fetched."""
    key, count = str(where["key"]), int(where["count"])
    known = _snapshots.pop(key, [])
    if len(known) < count:
        raw = app.backend.client.lrange(key, len(known), count - 1)
        known.extend(fact_from_dict(json.loads(r)) for r in raw)
        if len(known) < count:
            raise KeyError(f"facts list {key} holds {len(known)} facts, not {count} (expired?)")
    _snapshots[key] = known  # most recently used last
    while len(_snapshots) > _SNAPSHOTS_KEPT:
        del _snapshots[next(iter(_snapshots))]
    return known[:count]


def run_execution(
    ref: str,
    name: str,
    cycle: int,
    facts: list[dict[str, Any]] | dict[str, Any],
    remaining_s: float | None,
    remaining: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run suggestor ``name`` (found at ``ref``) over ``facts`` at ``cycle``; the
    reply of :mod:`converge.workers.wire`. ``facts`` is the list of facts
    (``fact_to_dict`` form) or ``{"key", "count"}`` naming them in the result
    backend (``ship="backend"``). ``remaining_s`` is the run's time budget left
    when the task was sent (seconds; None = unlimited); ``remaining`` what was
    left of all its budgets (:func:`converge.workers.wire.encode_remaining`), the
    worker context's ``remaining_budget()``."""
    try:
        s = _suggestor(ref, name)
        left = decode_remaining(remaining)
        if isinstance(facts, dict):
            ctx = Context.of(_backend_facts(current_app, facts), cycle, left)
        else:
            ctx = Context.of([fact_from_dict(f) for f in facts], cycle, left)
    except (ConvergeError, KeyError, TypeError, ValueError) as exc:
        return {"unusable": f"{type(exc).__name__}: {exc}"}
    try:
        out = s.execute(ctx)
        if inspect.isawaitable(out):
            out = asyncio.run(_awaited(out))
    except (Exception, StopRun) as exc:  # StopRun, a signal, is no Exception
        return with_recorded_usage(encode_exception(exc), ctx)
    return with_recorded_usage(encode_output(out), ctx)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
