"""A recorded run up to one of its cycles, read back for a fork (``Engine.fork``).

:func:`read_history` reads, in one snapshot, the run's ``run_started`` payload,
the facts promoted up to the cycle (their chained JSON texts too: the Merkle
leaves' data) and the other events of those cycles that the fork rebuilds its
counters from; it refuses (``ResumeError``) a cycle the run never reached and a
chain with gaps (a cycle whose start is missing, a fact id out of its key's order).
"""

from __future__ import annotations

from typing import Any

from orjson import loads
from sqlalchemy import select

from audit.core import StoreCore
from audit.queries import get_run
from audit.tables import audit_events
from engine.errors import ResumeError
from engine.facts import canonical_json
from engine.store import AuditEvent, RunHistory

COUNTED = ("cycle_started", "suggestor_executed", "suggestor_failed", "usage_recorded")
"""The events a fork rebuilds its counters from (besides the facts)."""


def read_history(store: StoreCore, run_id: str, until_cycle: int) -> RunHistory:
    """The run ``run_id`` as recorded up to ``until_cycle`` (see :class:`RunHistory`).

    Raises ``RunNotFound``, or ``ResumeError`` naming why the store cannot rebuild
    that cycle (negative, beyond the run's cycles, events missing).
    """
    if type(until_cycle) is not int or until_cycle < 0:
        raise ResumeError(f"cycle {until_cycle!r}: give a cycle number >= 0")
    run = get_run(store, run_id)
    ev = audit_events.c
    base = select(ev.seq, ev.kind, ev.cycle, ev.ts, ev.payload).where(ev.run_id == run_id)
    with store._tx(write=False) as conn:
        first = conn.execute(base.where(ev.seq == 1)).one_or_none()
        highest = conn.execute(
            select(ev.cycle).where(ev.run_id == run_id).order_by(ev.cycle.desc()).limit(1)
        ).scalar()
        facts_rows = conn.execute(
            select(ev.payload)
            .where(ev.run_id == run_id, ev.kind == "fact_promoted", ev.cycle <= until_cycle)
            .order_by(ev.seq)
        ).all()
        other_rows = conn.execute(
            base.where(ev.kind.in_(COUNTED), ev.cycle <= until_cycle).order_by(ev.seq)
        ).all()
    if first is None or first.kind != "run_started":
        raise ResumeError(f"run {run_id} has no run_started event: cannot rebuild any cycle")
    cycles = max(run.cycles, highest or 0)
    if until_cycle > cycles:
        raise ResumeError(
            f"run {run_id} recorded {cycles} cycle(s): cannot fork it at cycle {until_cycle}"
        )
    started: dict[str, Any] = loads(first.payload)
    initial = started.get("initial_facts") or []
    texts = [canonical_json(f) for f in initial]
    facts: list[dict[str, Any]] = list(initial)
    for (text,) in facts_rows:
        texts.append(text)
        facts.append(loads(text))
    events = [AuditEvent(r.kind, r.cycle, loads(r.payload), r.ts) for r in other_rows]
    _check_complete(run_id, until_cycle, facts, events)
    return RunHistory(run_id, until_cycle, cycles, run.status, started, facts, texts, events)


def _check_complete(
    run_id: str, cycle: int, facts: list[dict[str, Any]], events: list[AuditEvent]
) -> None:
    """``ResumeError`` when a cycle start or a fact of cycles 1..``cycle`` is missing."""
    started = sorted({e.cycle for e in events if e.kind == "cycle_started"})
    if started != list(range(1, cycle + 1)):
        missing = sorted(set(range(1, cycle + 1)) - set(started))
        raise ResumeError(
            f"run {run_id}: the events of cycle(s) {missing[:5]} are missing from the "
            f"store: cannot rebuild cycle {cycle} (run `converge verify {run_id}`)"
        )
    seen: dict[str, int] = {}
    for f in facts:
        key = f.get("key")
        n = seen.get(key, 0)  # type: ignore[arg-type]
        if f.get("id") != f"{key}#{n}":
            raise ResumeError(
                f"run {run_id}: fact {f.get('id')!r} follows {n} fact(s) of key {key!r}: "
                f"facts are missing from the store, cannot rebuild cycle {cycle}"
            )
        seen[str(key)] = n + 1
