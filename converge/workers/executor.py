"""``CeleryExecutor``: a run's executions as Celery tasks (docs/scale-out.md).

Each cycle, one task per admitted suggestor goes to the queue; workers run them
in any order and on any machine; the engine reads the replies back from the
result backend and hands them to collection in registration order, so the facts,
their ids, ``facts_root`` and the audit events equal an in-process run.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any, Literal

from converge.workers.app import DEFAULT_QUEUE, TASK_NAME, CeleryTimeout, celery_app
from converge.workers.references import reference_of
from converge.workers.wire import encode_remaining, outcome_of, record_replied_usage
from engine import (
    ConfigurationError,
    Effect,
    ExecutorUnavailable,
    StopRun,
    Suggestor,
    fact_to_dict,
)
from engine.executor import CANCELLED, NOT_DONE, TIMED_OUT, CycleWork

__all__ = ["CeleryExecutor"]

Ship = Literal["backend", "context", "dependencies"]
SHIP_MODES: tuple[str, ...] = ("backend", "context", "dependencies")
RUNS_KEPT = 16
"""Runs whose encoded context an executor keeps (a run not kept is encoded afresh)."""
FACTS_TTL_S = 3600
"""Seconds the backend keeps a run's facts list after its last write."""
POLL_S = 0.002
"""Seconds between two reads of the result backend while replies are missing."""
WAKE_S = 0.05
"""Longest wait (seconds) before checking ``Engine.cancel()`` and the deadline again."""


def _stops(outcome: Any, stop_on_error: bool) -> bool:
    """True when collection stops the cycle at this outcome (as the engine's Execute step would)."""
    if isinstance(outcome, StopRun):
        return True
    if isinstance(outcome, BaseException):
        return stop_on_error
    return type(outcome) is Effect and outcome.refusal is not None


class _Shipped:
    """What was shipped of one run's context: its facts encoded so far, how many of
    them are in the backend's list ``key``."""

    __slots__ = ("context", "encoded", "key", "pushed")

    def __init__(self, context: Any, key: str) -> None:
        self.context = context
        self.encoded: list[dict[str, Any]] = []
        self.key = key
        self.pushed = 0


def _no_subscription(producer: Any, task_id: str) -> None:
    """Replaces the result backend's per-task hook (see ``CeleryExecutor.__init__``)."""


def _safe_url(url: str) -> str:
    """``url`` without its password (never logged nor put in a stop reason)."""
    from kombu.utils.url import maybe_sanitize_url

    return str(maybe_sanitize_url(url))


class CeleryExecutor:
    """Runs each cycle's executions on Celery workers; the engine stays the merger.

    ``broker_url``: where tasks go (``amqp://user:pass@host:5672//`` for RabbitMQ,
    or ``redis://host:6379/0``); ``backend_url``: where replies come back (a
    key-value backend such as ``redis://host:6379/1``); ``queue``: the queue the
    workers consume (``converge worker --queue``); ``references``: suggestor name →
    ``module:attr`` for suggestors not defined at module level (job files fill
    it); ``ship``: how a task gets the context: ``"backend"`` (default) appends the
    cycle's new facts to a list in the Redis result backend and sends its key and
    length, workers fetch only what they have not seen; ``"context"`` sends every
    fact with each task (no Redis needed beyond results); ``"dependencies"`` sends
    only the facts of the keys the suggestor declares (right only when it reads
    nothing else). Every mode gives a worker the context as of the cycle's start.

    Faults: an unreachable broker or backend raises
    :class:`engine.ExecutorUnavailable` (the run stops with
    ``Error(error_category="external")``); a suggestor that cannot be referenced,
    or that a worker cannot import, raises :class:`engine.ConfigurationError`
    (``Error(error_category="configuration")``). Tasks past the run's remaining
    time budget or of a cancelled run are revoked (the worker process running one
    is terminated) and their outcome is the ``TIMED_OUT`` / ``CANCELLED`` marker,
    as is a task revoked on its worker (expired there: ``TIMED_OUT``): cut work,
    which the engine never takes for a fixed point and runs again in the next
    cycle, after a resume too.
    """

    def __init__(
        self,
        broker_url: str,
        backend_url: str,
        *,
        queue: str = DEFAULT_QUEUE,
        references: Mapping[str, str] | None = None,
        ship: Ship = "backend",
    ) -> None:
        if ship not in SHIP_MODES:
            raise ConfigurationError(f"ship must be one of {', '.join(SHIP_MODES)}, got {ship!r}")
        if ship == "backend" and not backend_url.startswith(("redis://", "rediss://")):
            raise ConfigurationError(
                f"ship='backend' needs a Redis result backend, not {backend_url!r}"
            )
        if not queue:
            raise ConfigurationError("queue must be a non-empty name")
        self.broker_url = broker_url
        self.backend_url = backend_url
        self.queue = queue
        self.references = dict(references or {})
        self.ship = ship
        self.app = celery_app(broker_url, backend_url)
        self._task = self.app.tasks[TASK_NAME]
        # replies are read with get_many (batched MGETs): the pub/sub subscription the
        # Redis backend opens for every task sent would cost two round trips a task
        self.app.backend.on_task_call = _no_subscription
        self._refs: dict[str, str] = {}
        self._shipped: dict[int, _Shipped] = {}  # per run's context (by id), most recent last
        self._lock = threading.Lock()  # runs of one engine may run in several threads
        self._keys: list[str] = []  # the backend lists written, deleted at close()
        self._unread: list[str] = []  # tasks revoked before their reply was read

    def __repr__(self) -> str:
        return (
            f"CeleryExecutor(broker={_safe_url(self.broker_url)!r}, "
            f"backend={_safe_url(self.backend_url)!r}, queue={self.queue!r})"
        )

    def reference(self, s: Suggestor) -> str:
        """The ``module:attr`` a worker imports for ``s``. Raises ConfigurationError."""
        ref = self._refs.get(s.name)
        if ref is None:
            ref = self._refs[s.name] = reference_of(s, self.references)
        return ref

    # -- one cycle ---------------------------------------------------------------------
    def execute(self, work: CycleWork) -> list[Any]:
        """Send one task per suggestor of ``work``, wait for every reply, return the
        outcomes in order (see :class:`engine.Executor`)."""
        refs = [self.reference(s) for s in work.suggestors]
        deadline = None
        if work.remaining_s is not None:
            deadline = time.monotonic() + work.remaining_s
        facts = self._facts(work)
        # what is left of the run's budgets, as the suggestors would see in-process
        left = encode_remaining(work.context.remaining_budget())
        outcomes: list[Any] = [NOT_DONE] * len(refs)
        pending: dict[str, int] = {}
        try:
            with self.app.producer_or_acquire() as producer:
                for slot, (s, ref) in enumerate(zip(work.suggestors, refs, strict=True)):
                    args = [ref, s.name, work.cycle, facts(s), work.remaining_s, left]
                    result = self._task.apply_async(
                        args,
                        queue=self.queue,
                        producer=producer,
                        expires=work.remaining_s,
                        argsrepr=f"[{ref!r}, {s.name!r}, {work.cycle}]",  # no fact in logs
                        kwargsrepr="{}",
                        retry_policy={"max_retries": 2, "interval_start": 0.1},
                    )
                    pending[result.id] = slot
        except Exception as exc:
            self._revoke(list(pending))
            raise ExecutorUnavailable(
                f"broker {_safe_url(self.broker_url)} unreachable: {type(exc).__name__}: {exc}"
            ) from exc
        names = [s.name for s in work.suggestors]
        read: list[str] = []
        try:
            self._wait(work, deadline, pending, outcomes, names, read)
        finally:
            self._forget(read)
        return outcomes

    def _facts(self, work: CycleWork) -> Any:
        """``facts(suggestor)``: the facts to send with its task (JSON-ready)."""
        ctx = work.context
        with self._lock:
            shipped = self._shipped.pop(id(ctx), None)
            if shipped is None or shipped.context is not ctx:  # a run not seen before
                key = f"converge:facts:{work.run_id}:{uuid.uuid4().hex[:12]}"
                shipped = _Shipped(ctx, key)
            self._shipped[id(ctx)] = shipped
            while len(self._shipped) > RUNS_KEPT:
                del self._shipped[next(iter(self._shipped))]
        encoded = shipped.encoded
        if len(encoded) < len(ctx):  # the context only grows: encode the new facts
            encoded.extend(fact_to_dict(f) for f in ctx.facts()[len(encoded) :])
        if self.ship == "backend":
            self._push(shipped)
            where = {"key": shipped.key, "count": len(encoded)}
            return lambda s: where
        if self.ship == "context":
            return lambda s: encoded
        by_key: dict[str, list[dict[str, Any]]] = {}
        for d in encoded:
            by_key.setdefault(d["key"], []).append(d)

        def of(s: Suggestor) -> list[dict[str, Any]]:
            deps = s.dependencies
            if not deps:
                return encoded
            if len(deps) == 1:
                return by_key.get(next(iter(deps)), [])
            return [d for d in encoded if d["key"] in deps]

        return of

    def _push(self, shipped: _Shipped) -> None:
        """Append the run's facts not yet in its list in the backend."""
        encoded = shipped.encoded
        if shipped.pushed == len(encoded):
            return
        client = self.app.backend.client
        try:
            with client.pipeline() as pipe:
                pipe.rpush(shipped.key, *(json.dumps(d) for d in encoded[shipped.pushed :]))
                pipe.expire(shipped.key, FACTS_TTL_S)
                pipe.execute()
        except Exception as exc:
            raise ExecutorUnavailable(
                f"result backend {_safe_url(self.backend_url)} unreachable: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if shipped.pushed == 0:
            with self._lock:
                self._keys.append(shipped.key)
        shipped.pushed = len(encoded)

    def _wait(
        self,
        work: CycleWork,
        deadline: float | None,
        pending: dict[str, int],
        outcomes: list[Any],
        names: list[str],
        read: list[str],
    ) -> None:
        backend = self.app.backend
        first_stop = len(outcomes)  # the first slot whose outcome stops the run
        while pending:
            if first_stop < len(outcomes) and NOT_DONE not in outcomes[:first_stop]:
                # collection stops at that slot: what comes after is never merged
                self._cut(pending, outcomes, NOT_DONE)
                return
            if work.is_cancelled():
                self._cut(pending, outcomes, CANCELLED)
                return
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                self._cut(pending, outcomes, TIMED_OUT)
                return
            window = WAKE_S if deadline is None else min(WAKE_S, deadline - now)
            try:
                for task_id, meta in backend.get_many(
                    list(pending), timeout=window, interval=POLL_S
                ):
                    slot = pending.pop(task_id)
                    read.append(task_id)
                    out = outcomes[slot] = self._outcome(meta, names[slot])
                    record_replied_usage(meta.get("result"), work.context)
                    if slot < first_stop and _stops(out, work.stop_on_error):
                        first_stop = slot
            except (TimeoutError, CeleryTimeout):  # nothing new within the window
                continue
            except (ConfigurationError, ExecutorUnavailable):
                self._revoke(list(pending))
                raise
            except Exception as exc:
                self._revoke(list(pending))
                raise ExecutorUnavailable(
                    f"result backend {_safe_url(self.backend_url)} unreachable: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc

    @staticmethod
    def _outcome(meta: Mapping[str, Any], name: str) -> Any:
        status = meta.get("status")
        if status == "SUCCESS":
            return outcome_of(meta.get("result"), name)
        if status == "REVOKED":
            # revoked on its worker before the engine cut it: it expired there (its
            # expiry is the run's deadline, read on the worker's clock) or someone
            # revoked it. Work cut, as at the deadline or a cancel: the engine runs
            # it again in the next cycle, after a resume too
            return TIMED_OUT if "expired" in str(meta.get("result")) else CANCELLED
        raise ExecutorUnavailable(
            f"the task of suggestor {name!r} ended {meta.get('status')} on its worker: "
            f"{meta.get('result')!r}"
        )

    def _cut(self, pending: dict[str, int], outcomes: list[Any], marker: Any) -> None:
        self._revoke(list(pending))
        for slot in pending.values():
            outcomes[slot] = marker
        pending.clear()

    def _revoke(self, task_ids: list[str]) -> None:
        """Revoke tasks: dropped from the queue, terminated where they run."""
        if not task_ids:
            return
        with self._lock:
            self._unread.extend(task_ids)
        # when the broker is gone, the tasks' expiry drops them instead
        with contextlib.suppress(Exception):
            self.app.control.revoke(task_ids, terminate=True)

    def _forget(self, task_ids: list[str]) -> None:
        """Delete the replies read (they expire anyway after ``result_expires``)."""
        if not task_ids:
            return
        backend = self.app.backend
        with contextlib.suppress(Exception):
            backend.client.delete(*(backend.get_key_for_task(t) for t in task_ids))

    def close(self) -> None:
        """Delete what this executor left in the backend (facts lists, replies of
        revoked tasks written so far); release the connections."""
        with self._lock:
            keys, self._keys = self._keys, []
            unread, self._unread = self._unread, []
        keys += [self.app.backend.get_key_for_task(t) for t in unread]
        if keys:
            with contextlib.suppress(Exception):
                self.app.backend.client.delete(*keys)
        self.app.close()
