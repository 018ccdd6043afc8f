"""Recording: what a run does, counted from what the engine already hands out.

- :func:`meter_store`: the store's writes of a run's events (``start_run``,
  ``append_events``, ``save_checkpoint``, ``pause_run``, ``finish_run``) are timed
  (``converge_store_commit_seconds``) and their events counted once written: runs
  started, cycles, facts promoted, gates opened, runs stopped by kind and
  category, tokens by model and direction (``suggestor_executed`` and
  ``usage_recorded`` events, the model of the suggestor named);
- :func:`instrument`: an engine's suggestors timed
  (``converge_suggestor_seconds{suggestor}``) and its store metered;
- :func:`gate_decided`, :func:`takeover`: the wait of a gate its decision ended and a run
  sent again because its lease expired.

The engine is not changed: the store is the one the engine writes through, and each
suggestor is wrapped by :class:`TimedSuggestor`, which forwards every other
attribute to it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from converge.metrics import _families as families
from engine import Context, Engine, GateRecord, Suggestor
from engine.registry import SuggestorRegistry
from engine.store import BatchItem, PromotedFacts
from engine.suggestor import is_async_suggestor

__all__ = [
    "MODELS",
    "TimedSuggestor",
    "count_events",
    "gate_decided",
    "instrument",
    "meter_store",
    "takeover",
]

WRITES = ("start_run", "append_events", "save_checkpoint", "pause_run", "finish_run")
"""The store methods that write a run's events; each takes its events second."""
NO_MODEL = "none"
"""The ``model`` label of tokens a suggestor without a model reported."""
MODELS: dict[str, str] = {}
"""Suggestor name → model name, of the engines :func:`instrument` saw in this process."""
_METERED = "_converge_metered"


def count_events(events: Sequence[BatchItem]) -> None:
    """Count one written batch of a run's events (see the module)."""
    facts = cycles = 0
    for ev in events:
        kind = ev.kind
        if isinstance(ev, PromotedFacts):
            facts += len(ev)
        elif kind == "fact_promoted":
            facts += 1
        elif kind == "cycle_started":
            cycles += 1
        elif kind in ("suggestor_executed", "usage_recorded"):
            _tokens(ev.payload)
        elif kind == "run_started":
            families.RUNS_STARTED.inc()
        elif kind == "gate_opened":
            families.GATES_OPENED.inc()
        elif kind == "run_stopped":
            payload = ev.payload
            families.RUNS_STOPPED.labels(
                str(payload.get("kind")), str(payload.get("category"))
            ).inc()
    if facts:
        families.FACTS_PROMOTED.inc(facts)
    if cycles:
        families.CYCLES.inc(cycles)


def _tokens(payload: dict[str, Any]) -> None:
    usage = payload.get("usage")
    if not isinstance(usage, list) or len(usage) < 2:
        return
    model = MODELS.get(str(payload.get("suggestor")), NO_MODEL)
    for direction, tokens in (("input", usage[0]), ("output", usage[1])):
        if isinstance(tokens, int) and tokens > 0:
            families.MODEL_TOKENS.labels(model, direction).inc(tokens)


def meter_store(store: Any) -> Any:
    """``store`` (a ``RunStore``) with its event writes timed and counted; once per
    store (a second call changes nothing). Returns the store."""
    if getattr(store, _METERED, False):
        return store
    for name in WRITES:
        method = getattr(store, name, None)
        if method is not None:
            setattr(store, name, _metered(method))
    setattr(store, _METERED, True)
    return store


def _metered(method: Callable[..., None]) -> Callable[..., None]:
    observe = families.STORE_COMMIT_SECONDS.observe

    @functools.wraps(method)
    def write(run_id: Any, events: Sequence[BatchItem], *args: Any, **kwargs: Any) -> None:
        started = time.perf_counter()
        method(run_id, events, *args, **kwargs)
        observe(time.perf_counter() - started)
        count_events(events)

    return write


class TimedSuggestor:
    """A suggestor whose every execution is observed in
    ``converge_suggestor_seconds{suggestor}``, raised or not; any other attribute is
    the wrapped suggestor's."""

    def __init__(self, inner: Suggestor) -> None:
        self.inner = inner
        self.name = inner.name
        self.dependencies = frozenset(getattr(inner, "dependencies", ()) or ())
        self.is_async = is_async_suggestor(inner)
        self._seconds = families.SUGGESTOR_SECONDS.labels(inner.name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def accepts(self, ctx: Context) -> bool:
        """Delegates to the wrapped suggestor."""
        return bool(self.inner.accepts(ctx))

    def execute(self, ctx: Context) -> Any:
        """The wrapped execution, timed (a coroutine for an async suggestor)."""
        if self.is_async:
            return self._execute_async(ctx)
        started = time.perf_counter()
        try:
            return self.inner.execute(ctx)
        finally:
            self._seconds.observe(time.perf_counter() - started)

    async def _execute_async(self, ctx: Context) -> Any:
        started = time.perf_counter()
        try:
            return await self.inner.execute(ctx)
        finally:
            self._seconds.observe(time.perf_counter() - started)


def _model_of(s: Suggestor) -> str | None:
    model = getattr(getattr(s, "agent", None), "model", None)
    if model is None:
        return None
    return str(getattr(model, "model_name", model))


def instrument(engine: Engine) -> Engine:
    """Time every suggestor registered on ``engine`` (registration order and the
    marks of nondeterminism kept), note their models, and meter its store. Returns
    the engine."""
    reg = engine.registry
    for s in reg.suggestors:
        model = _model_of(s)
        if model is not None:
            MODELS[s.name] = model
    registry = SuggestorRegistry()
    registry.add(*(TimedSuggestor(s) for s in reg.suggestors))
    registry.records_effect = list(reg.records_effect)
    engine.registry = registry
    if engine.store is not None:
        meter_store(engine.store)
    return engine


def gate_decided(gate: GateRecord) -> None:
    """Observe the wait of ``gate`` (opened → decided, seconds) once it is decided."""
    if gate.decided_at is not None and gate.opened_at:
        families.GATE_WAIT_SECONDS.observe(max(0.0, gate.decided_at - gate.opened_at))


def takeover() -> None:
    """Count one run sent again because its lease expired."""
    families.LEASE_TAKEOVERS.inc()
