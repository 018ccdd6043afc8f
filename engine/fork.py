"""Forking a recorded run: a new run from the state after cycle N of another.

``Engine.fork(run_id, cycle, budget)`` reads the parent run from the engine's
store (:class:`engine.store.RunHistoryStore`: its ``run_started``, the facts
promoted up to and including ``cycle`` and the events of cycles 1..``cycle``),
rebuilds the state after that cycle and runs it under this engine's suggestors
(the job may differ from the parent's) to a new stop, as a new run with its own
id. What is rebuilt:

- the facts, with their ids, contents and provenance (they keep naming the
  parent's suggestors and cycles), in promotion order; the facts root is the
  parent's at that cycle, under the parent's Merkle scheme;
- the cycle number, usage, invocations (per suggestor, tool calls included), the
  invocation history, failure streaks and last error, the suggestors of the last
  cycle;
- the keys cycle N promoted (dirty: their subscribers run in the next cycle) and
  the suggestors eligible in cycle N that did not run (cut: eligible again).

The store verifies the parent's hash chain up to the fork point before anything
is written (``UnverifiedParent`` names the first bad ``seq``); its verified head
goes into the fork's link. :meth:`Engine.record_fork` records the fork without
driving it (``queued``, with a checkpoint at the fork point) for a worker.

Not carried over: elapsed time (the fork's time budget counts its own time), the
parent's gates (a gate pending at cycle N is not reopened; rejected contents are
not remembered) and continuations. The parent is only read.

A fork refers to its parent's facts, it does not copy them (issue 46). Its
``run_started`` carries no ``initial_facts``; its ``forked_from`` is::

    {run, cycle, facts_root, parent_head: {seq, chain_hash},
     facts: {count, frontier}}

``parent_head``: the parent's last event of cycles up to ``cycle`` and its chain
hash, verified by the store before anything is written; ``facts``: the facts
frontier at the fork point, their ``count`` and the Merkle frontier of their
leaves (:meth:`MerkleFrontier.to_json`: O(log count) hashes, its root
``facts_root``). So the fork's ``run_started`` is O(1) in the parent's facts
(O(log n) hashes), and the fork's chain proves its facts roots alone (the
frontier extends with its own facts, parent or not). Whoever loads the fork's
state (run, resume, fork again, show, diff, export) reads the parent's facts up
to ``count`` from the parent's verified events and checks them against
``facts_root``; a parent gone raises ``ParentMissing``. The fork's ``runs`` row
names the parent (``parent_run_id``) and counts the inherited facts in its
``facts_count``.
"""

from __future__ import annotations

import time
from typing import Any

from engine._cycle.collector import bulk_load
from engine._cycle.recording import start_in_store
from engine._cycle.run import CHECKPOINT_VERSION, Run
from engine._cycle.start import new_run_id
from engine.budget import Budget
from engine.errors import ForkError, ResumeError, UnverifiedParent
from engine.hashing.merkle import MerkleFrontier, fact_text_leaves, merkle_scheme
from engine.settings import EngineSettings
from engine.store import AuditEvent, RunHistory, RunHistoryStore

__all__ = ["ForkError", "UnverifiedParent", "fork_link", "load_fork", "state_at"]


def load_fork(
    settings: EngineSettings,
    run_id: str,
    cycle: int,
    budget: Budget | None = None,
    *,
    queued: bool = False,
) -> Run:
    """The state after ``cycle`` of the stored run ``run_id``, as a new run of this
    engine (recorded: its ``run_started`` with the fork's link), to drive to a stop;
    ``queued``: recorded with a checkpoint at the fork point and left ``queued``
    for another process (not in flight here).

    ``budget`` (None: the engine's own) is the fork's, a total as in any run (cycles
    and facts inherited count). Raises :class:`ForkError` (with the reason the
    store gives; :class:`UnverifiedParent` when the parent's chain fails up to
    ``cycle``), ``RunNotFound``, or for ``queued`` a ``StoreError``.
    """
    store = settings.store
    if store is None:
        raise ForkError("Engine.fork reads the parent run from a store: give Engine(store=...)")
    if not isinstance(store, RunHistoryStore):
        raise ForkError(f"store {type(store).__name__} cannot read a run's history (run_history)")
    if queued and getattr(store, "save_checkpoint", None) is None:
        raise ForkError(f"store {type(store).__name__} keeps no checkpoint: cannot queue a fork")
    if type(cycle) is not int or cycle < 0:
        raise ForkError(f"cycle {cycle!r}: give a cycle number >= 0")
    try:
        with bulk_load() as load:
            history = store.run_history(run_id, cycle)
            run = state_at(history, new_run_id(), budget or settings.budget)
    except ResumeError as exc:
        raise ForkError(str(exc)) from None
    if queued:
        load.give_back()
    run.recovery.loaded(load.froze)
    if not queued:
        run.spend.start_leg(settings.clock(), time.time())
        settings.runs.enter(run.run_id, clear_cancel=True)
    try:
        _record_start(settings, run, history, queued)
    except BaseException:
        load.give_back()  # the run is never driven: nothing releases the freeze else
        raise
    return run


def fork_link(history: RunHistory, run: Run) -> dict[str, Any]:
    """``{run, cycle, facts_root, facts, parent_head}``: the parent, the cycle forked
    at, the root of the facts taken from it, their frontier ``{count, frontier}``
    (the Merkle frontier's JSON, O(log count) hashes) and ``{seq, chain_hash}`` of
    the parent's last event read, its chain verified up to there (left out when
    the store gave no verified head): the ``forked_from`` of the fork's
    ``run_started``, O(1) in the parent's facts."""
    frontier = run.integrity.frontier
    link: dict[str, Any] = {
        "run": history.run_id,
        "cycle": history.cycle,
        "facts_root": frontier.root(),
        "facts": {"count": frontier.count, "frontier": frontier.to_json()},
    }
    if history.head is not None:
        link["parent_head"] = {"seq": history.head[0], "chain_hash": history.head[1]}
    return link


def state_at(history: RunHistory, run_id: str, budget: Budget) -> Run:
    """The :class:`Run` after ``history.cycle``, under ``run_id`` and ``budget``.

    Raises ``ResumeError`` when the recorded facts or events do not make a state.
    """
    try:
        scheme = merkle_scheme(history.started.get("facts_merkle"))
    except ValueError as exc:
        raise ResumeError(f"run {history.run_id}: {exc}") from None
    frontier = MerkleFrontier(scheme=scheme)
    frontier.extend(fact_text_leaves(history.texts, scheme))
    n = history.cycle
    data: dict[str, Any] = {
        "version": CHECKPOINT_VERSION,
        "run_id": run_id,
        "suggestors": [],
        "budget": budget.model_dump(mode="json"),
        "facts": history.facts,
        "facts_from_chunks": True,
        "cycle": n,
        "rejected": [],
        "pending_signals": [],
        "merge_effects": [],
        "merge_pos": [0, 0],
        "cycle_new": [],
        "pending_gate": None,
        "gates_opened": 0,
        "elapsed_ms": 0,
        "continuations": [],
        "merkle": frontier.to_json(),
        "facts_merkle": scheme,
        "dirty": _promoted_in(history.facts, n),
        **_counters(history.events, n),
    }
    return Run.from_checkpoint(data)


def _promoted_in(facts: list[dict[str, Any]], n: int) -> list[str]:
    """The keys of the facts promoted in cycle ``n``: the last ones (promotion order)."""
    keys: set[str] = set()
    for f in reversed(facts):
        if f["provenance"]["cycle"] != n:
            break
        keys.add(f["key"])
    return sorted(keys)


def _counters(events: list[AuditEvent], n: int) -> dict[str, Any]:
    """The checkpoint fields of the counters, rebuilt from the events of cycles 1..n."""
    usage = [0, 0, 0.0]
    invocations = 0
    by: dict[str, int] = {}
    history: list[str] = []
    streaks: dict[str, int] = {}
    last_error: str | None = None
    eligible: list[str] = []
    ran: list[str] = []  # names executed in cycle n
    last: list[str] = []  # invocations of cycle n, tool calls included
    cycle_usage = [0, 0, 0.0]
    current = 0

    def close_cycle() -> None:
        usage[0] += cycle_usage[0]
        usage[1] += cycle_usage[1]
        usage[2] += cycle_usage[2]
        cycle_usage[:] = [0, 0, 0.0]

    def invoke(name: str, cycle: int) -> None:
        nonlocal invocations
        invocations += 1
        by[name] = by.get(name, 0) + 1
        history.append(name)
        if cycle == n:
            last.append(name)

    for ev in events:
        p = ev.payload
        if ev.cycle != current:
            close_cycle()
            current = ev.cycle
        kind = ev.kind
        if kind == "cycle_started":
            if ev.cycle == n:
                eligible = [str(x) for x in p.get("eligible", [])]
            continue
        if kind == "usage_recorded":
            _add(cycle_usage, p.get("usage"))
            continue
        name = str(p.get("suggestor"))
        if kind == "suggestor_failed" and str(p.get("error", "")).startswith("accepts raised"):
            # accepts() failed: counted as a failure, never as an invocation
            streaks[name] = int(p.get("streak", 1))
            last_error = f"{name}: {p.get('error')}"
            continue
        invoke(name, ev.cycle)
        if ev.cycle == n:
            ran.append(name)
        if kind == "suggestor_failed":
            streaks[name] = int(p.get("streak", 1))
            last_error = f"{name}: {p.get('error')}"
            continue
        for tool in p.get("tool_calls", ()):
            invoke(f"{name}.{tool}", ev.cycle)
        streaks.pop(name, None)
        _add(cycle_usage, p.get("usage"))
    close_cycle()
    return {
        "usage": usage,
        "invocations": invocations,
        "invocations_by": by,
        "history": history,
        "streaks": streaks,
        "last_error": last_error,
        "last_suggestors": last,
        "cut": [name for name in eligible if name not in ran],
    }


def _add(total: list[Any], usage: Any) -> None:
    """Add a recorded ``[input_tokens, output_tokens, cost_usd]`` to ``total``."""
    if isinstance(usage, list) and len(usage) == 3:
        total[0] += int(usage[0])
        total[1] += int(usage[1])
        total[2] += float(usage[2])


def _record_start(
    settings: EngineSettings, run: Run, history: RunHistory, queued: bool = False
) -> None:
    """The fork's ``run_started`` (its link to the parent as ``forked_from``: a
    reference to the parent's facts, not a copy) and its ``runs`` row
    (``parent_run_id``)."""
    if settings.store is None:
        return
    payload = {
        "run_id": run.run_id,
        "job": settings.job_name,
        "suggestors": list(settings.suggestor_names),
        "budget": run.budget.model_dump(mode="json"),
        "facts_merkle": run.integrity.scheme,
        "forked_from": fork_link(history, run),
    }
    run.record(AuditEvent("run_started", 0, payload, time.time()))
    start_in_store(settings, run, parent_run_id=history.run_id, queued=queued)
