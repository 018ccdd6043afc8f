"""What ``converge watch RUN`` prints: a run's events, one line each, as they are committed.

:func:`watch_events` reads the run's events after the last one printed every
:data:`POLL_S` (the process running it may be a worker, a server's pool or another
CLI: the store is what they share) and prints each: a cycle, a suggestor's usage,
the facts a cycle promoted (one line per batch read), a gate opened or decided,
a pause, a resume, the stop. It follows a paused run through its decision and
resume until the run stops (with ``until_pause``: until it waits on a person).
``as_json``: each event as one JSON line (``StoredEvent.to_dict``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from itertools import groupby

from audit.queries import RunRow, StoredEvent
from audit.store import SqlRunStore
from converge.access import Person, Sight, sight
from converge.cli.events import payload_summary
from engine.events import (
    CycleStarted,
    GateDecided,
    GateOpened,
    RunEvent,
    RunPaused,
    RunResumed,
    RunStarted,
    RunStopped,
    SuggestorExecuted,
    SuggestorFailed,
    UsageRecorded,
    run_event,
)
from engine.result import counted
from engine.status import GateStatus, RunStatus

__all__ = ["POLL_S", "event_line", "watch_events"]

POLL_S = 0.05
"""How often (seconds) ``converge watch`` reads the run's new events."""
BATCH = 1000
"""Events read at most per query."""


def _usage(e: SuggestorExecuted | UsageRecorded) -> str:
    u = e.usage
    cost = f", ${u.cost_usd:.4f}" if u.cost_usd else ""
    return f"{u.input_tokens}+{u.output_tokens} tokens{cost}"


def event_line(e: RunEvent) -> str:
    """One line of an event (not ``fact_promoted``: see :func:`facts_line`)."""
    where = f"cycle {e.cycle}"
    match e:
        case RunStarted():
            job = e.job or "no job"
            n, facts = len(e.suggestors), e.initial_facts
            return (
                f"run {e.run_id} started: {job}, {counted(n, 'suggestor')}, "
                f"{counted(facts, 'initial fact')}"
            )
        case CycleStarted():
            return f"{where} started: {', '.join(e.eligible) or 'no suggestor'}"
        case SuggestorExecuted():
            return f"{where} · {e.suggestor}: {counted(e.proposals, 'proposal')}, {_usage(e)}"
        case SuggestorFailed():
            return f"{where} · {e.suggestor} failed: {e.error}"
        case UsageRecorded():
            return f"{where} · {e.suggestor} used {_usage(e)}"
        case GateOpened():
            return f"{where} · gate {e.gate_id} opened: {e.summary} ({e.suggestor})"
        case GateDecided():
            return f"gate {e.gate_id} {e.status} by {e.by or '?'}"
        case RunPaused():
            done = f"{counted(e.cycles, 'cycle')}, {counted(e.facts_count, 'fact')}"
            return f"paused after {done}: {e.reason}"
        case RunResumed():
            return "resumed" + (f" after gate {e.gate_id}" if e.gate_id else "")
        case RunStopped():
            r = e.reason
            return (
                f"stopped: {r.kind_code()} ({r.category.value}, exit {r.exit_code}) after "
                f"{counted(e.cycles, 'cycle')}, {counted(e.facts_count, 'fact')}"
            )
    return f"{where} · {e.kind}: {payload_summary(e.payload)}"


def facts_line(cycle: int, keys: list[str]) -> str:
    """One line for the facts a cycle promoted: how many, per key."""
    per_key = ", ".join(f"{k} {n}" for k, n in Counter(keys).most_common())
    return f"cycle {cycle} · {counted(len(keys), 'fact')} promoted ({per_key})"


def _lines(events: list[StoredEvent]) -> list[str]:
    out: list[str] = []
    for promoted, group in groupby(events, key=lambda e: (e.kind == "fact_promoted", e.cycle)):
        batch = list(group)
        if promoted[0]:
            keys = [str(e.payload.get("key", "?")) for e in batch]
            out.append(facts_line(promoted[1], keys))
            continue
        for e in batch:
            out.append(event_line(run_event(e.run_id, e.seq, e.kind, e.cycle, e.ts, e.payload)))
    return out


def _waits(store: SqlRunStore, run_id: str) -> bool:
    return any(g.run_id == run_id and g.status == GateStatus.PENDING for g in store.gates(True))


def _as_seen(event: StoredEvent, seen: Sight) -> StoredEvent:
    """``event`` as a person sees it: its payload cut where it names a gate they may
    not read, and then no hash (docs/access.md)."""
    payload = seen(event.payload)
    return event if payload is event.payload else replace(event, payload=payload, hash="")


def watch_events(
    store: SqlRunStore,
    run_id: str,
    write: Callable[[str], None],
    *,
    as_json: bool = False,
    until_pause: bool = False,
    timeout: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    wait: Callable[[float], None] = time.sleep,
    person: Person | None = None,
) -> RunRow | None:
    """Print the run's events from the first (``write`` each line) until it stops
    (or, with ``until_pause``, waits on a person); its row then, or None when
    ``timeout`` seconds passed first; given ``person``, each event as they may see
    it (docs/access.md). Raises ``RunNotFound`` or ``StoreError``."""
    started = clock()
    last = 0
    seen = sight(store, person, [run_id])
    while True:
        events = store.events(run_id, after=last, limit=BATCH)
        if person is not None:
            if any(e.kind == "gate_opened" for e in events):
                seen = sight(store, person, [run_id])  # the gates opened since, known now
            events = [_as_seen(e, seen) for e in events]
        if events:
            last = events[-1].seq
            if as_json:
                for e in events:
                    write(json.dumps(e.to_dict(), separators=(",", ":")))
            else:
                for line in _lines(events):
                    write(line)
        if len(events) == BATCH:
            continue
        row = store.run(run_id)
        if row.last_seq <= last:  # all printed: has it stopped, or does it wait?
            if row.status == RunStatus.STOPPED:
                return row
            if until_pause and row.status == RunStatus.PAUSED and _waits(store, run_id):
                return row
        if timeout is not None and clock() - started >= timeout:
            return None
        wait(POLL_S)
