"""``CeleryExecutor``: a run's executions as Celery tasks (DESIGN.md §13).

Each cycle, one task per admitted suggestor goes to the queue; workers run them
in any order and on any machine; the engine reads the replies back from the
result backend and hands them to collection in registration order, so the facts,
their ids, ``facts_root`` and the audit events equal an in-process run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any, Literal

from converge.workers.app import DEFAULT_QUEUE, TASK_NAME, CeleryTimeout, celery_app
from converge.workers.references import reference_of
from converge.workers.wire import outcome_of
from engine import ConfigurationError, ExecutorUnavailable, Suggestor, fact_to_dict
from engine.executor import CANCELLED, NOT_DONE, TIMED_OUT, CycleWork

__all__ = ["CeleryExecutor"]

POLL_S = 0.002
"""Seconds between two reads of the result backend while replies are missing."""
WAKE_S = 0.05
"""Longest wait (seconds) before checking ``Engine.cancel()`` and the deadline again."""


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
    it); ``ship``: ``"context"`` sends every fact of the context with each task
    (right for any suggestor), ``"dependencies"`` only the facts of the keys the
    suggestor declares (smaller tasks; right only when it reads nothing else).

    Faults: an unreachable broker or backend raises
    :class:`engine.ExecutorUnavailable` (the run stops with
    ``Error(error_category="external")``); a suggestor that cannot be referenced,
    or that a worker cannot import, raises :class:`engine.ConfigurationError`
    (``Error(error_category="configuration")``). Tasks past the run's remaining
    time budget or of a cancelled run are revoked (the worker process running one
    is terminated).
    """

    def __init__(
        self,
        broker_url: str,
        backend_url: str,
        *,
        queue: str = DEFAULT_QUEUE,
        references: Mapping[str, str] | None = None,
        ship: Literal["context", "dependencies"] = "context",
    ) -> None:
        if ship not in ("context", "dependencies"):
            raise ConfigurationError(f"ship must be 'context' or 'dependencies', got {ship!r}")
        if not queue:
            raise ConfigurationError("queue must be a non-empty name")
        self.broker_url = broker_url
        self.backend_url = backend_url
        self.queue = queue
        self.references = dict(references or {})
        self.ship = ship
        self.app = celery_app(broker_url, backend_url)
        self._task = self.app.tasks[TASK_NAME]
        self._refs: dict[str, str] = {}
        self._encoded: list[dict[str, Any]] = []  # the context's facts, JSON-ready
        self._encoded_run: str | None = None

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
        outcomes: list[Any] = [NOT_DONE] * len(refs)
        pending: dict[str, int] = {}
        try:
            with self.app.producer_or_acquire() as producer:
                for slot, (s, ref) in enumerate(zip(work.suggestors, refs, strict=True)):
                    args = [ref, s.name, work.cycle, facts(s), work.remaining_s]
                    result = self._task.apply_async(
                        args,
                        queue=self.queue,
                        producer=producer,
                        expires=work.remaining_s,
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
        """``facts(suggestor)``: the JSON-ready facts to send with its task."""
        ctx = work.context
        if self._encoded_run != work.run_id or len(self._encoded) > len(ctx):
            self._encoded_run, self._encoded = work.run_id, []
        encoded = self._encoded
        if len(encoded) < len(ctx):  # the context only grows: encode the new facts
            encoded.extend(fact_to_dict(f) for f in ctx.facts()[len(encoded) :])
        if self.ship == "context":
            return lambda s: encoded
        by_key: dict[str, list[dict[str, Any]]] = {}
        for d in encoded:
            by_key.setdefault(d["key"], []).append(d)

        def of(s: Suggestor) -> list[dict[str, Any]]:
            deps = s.dependencies
            if not deps:
                return encoded
            keys = sorted(deps)
            return (
                [d for d in encoded if d["key"] in deps]
                if len(keys) > 1
                else by_key.get(keys[0], [])
            )

        return of

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
        while pending:
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
                    outcomes[slot] = self._outcome(meta, names[slot])
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
        if meta.get("status") == "SUCCESS":
            return outcome_of(meta.get("result"), name)
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
        """Release the broker and backend connections."""
        self.app.close()
