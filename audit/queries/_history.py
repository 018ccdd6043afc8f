"""A recorded run up to one of its cycles, read back for a fork (``Engine.fork``).

:func:`read_history` reads, in one snapshot, the run's ``run_started`` payload,
the facts promoted up to the cycle (their chained JSON texts too: the Merkle
leaves' data) and the other events of those cycles that the fork rebuilds its
counters from; it verifies the run's chain up to there first
(:func:`audit.queries._chain_head.verified_head`: ``UnverifiedParent`` names the
first bad seq) and refuses (``ResumeError``) a cycle the run never reached and a
chain with gaps (a cycle whose start is missing, a fact id out of its key's order).
A fork's cycles up to its fork point are its parent's: they are read from the
parent (a fork of a fork, from its parent's parent...). A fork refers to its
parent's facts instead of copying them (``forked_from.facts``: their count and
Merkle frontier, ``facts_root`` its root; :mod:`engine.fork`):
:func:`inherited_facts` reads them from the parent's verified events and checks
their count and root against the reference, so a parent changed since the fork
is refused (``ResumeError``) and a parent gone is ``ParentMissing``. Forks
recorded before issue 46 carry a copy (``initial_facts``), used as it is.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from sqlalchemy import select

from audit.cells import loads
from audit.core import StoreCore
from audit.queries._chain_head import parent_problem, verified_head
from audit.queries._pruned import pruned_note
from audit.queries._queries import get_run, read_events
from audit.tables import audit_events, runs
from engine.errors import CorruptRow, ParentMissing, ResumeError, RunNotFound, UnverifiedParent
from engine.facts import Fact, canonical_json, fact_from_dict
from engine.hashing.merkle import MerkleFrontier, fact_text_leaves, merkle_scheme
from engine.store import AuditEvent, RunHistory
from engine.wording import counted

COUNTED = ("cycle_started", "suggestor_executed", "suggestor_failed", "usage_recorded")
"""The events a fork rebuilds its counters from (besides the facts)."""


def read_history(store: StoreCore, run_id: str, until_cycle: int) -> RunHistory:
    """The run ``run_id`` as recorded up to ``until_cycle`` (see :class:`RunHistory`).

    A fork's cycles up to its fork point are its parent's: they are read from the
    parent (which a fork never changes), the fork's own events after them.

    Raises ``RunNotFound``, ``UnverifiedParent`` (the run's chain, or the chain its
    fork point's cycles come from, fails up to ``until_cycle``), or ``ResumeError``
    naming why the store cannot rebuild that cycle (negative, beyond the run's
    cycles, events missing, a fork whose parent is gone).
    """
    if type(until_cycle) is not int or until_cycle < 0:
        raise ResumeError(f"cycle {until_cycle!r}: give a cycle number >= 0")
    run = get_run(store, run_id)
    ev = audit_events.c
    with store.transaction(write=False) as conn:
        highest = conn.execute(
            select(ev.cycle).where(ev.run_id == run_id).order_by(ev.cycle.desc()).limit(1)
        ).scalar()
        cycles = max(run.cycles, highest or 0)
        if until_cycle > cycles:
            raise ResumeError(
                f"run {run_id} recorded {counted(int(cycles), 'cycle')}: "
                f"cannot fork it at cycle {until_cycle}"
            )
        # one read of the events up to the fork point: verified, then taken from
        report, chained, head = verified_head(store, conn, run_id, until_cycle)
    if not report.ok:
        raise UnverifiedParent(run_id, report.first_bad_seq, report.reason)
    rows = [r for r in chained[: head[0] if head else 0] if r.cycle <= until_cycle]
    first = rows[0] if rows else None
    if first is None or first.seq != 1 or first.kind != "run_started":
        raise ResumeError(f"run {run_id} has no run_started event: cannot rebuild any cycle")
    facts_rows = [(r.payload,) for r in rows if r.kind == "fact_promoted"]
    other_rows = [r for r in rows if r.kind in COUNTED]
    started: dict[str, Any] = loads(first.payload)
    initial = started.get("initial_facts") or []
    link = _fork_point(started)
    if link is not None and until_cycle < link[1]:
        # its cycles up to its fork point are its parent's: its chain up to the head
        # the fork read (past the cycle read here) must still end in that head
        found = parent_problem(store, started.get("forked_from"))
        if found is not None and found[1]:
            raise UnverifiedParent(run_id, 1, found[0])
    if link is not None and until_cycle <= link[1]:
        # before its fork point a fork is its parent: the same facts and counters
        h = _parent_history(store, run_id, link[0], until_cycle)
        return RunHistory(
            run_id, until_cycle, cycles, run.status, started, h.facts, h.texts, h.events, head
        )
    events: list[AuditEvent] = []
    if link is not None:
        h = _parent_history(store, run_id, link[0], link[1])
        facts, texts = _taken(run_id, started, h)
        events = h.events
    else:
        facts = list(initial)
        texts = [canonical_json(f) for f in initial]  # as run_started chained them
    # the promoted facts' texts as chained: the Merkle leaves' data, a fork's payload
    taken = len(texts)
    texts += [row[0] for row in facts_rows]
    facts += map(loads, texts[taken:])
    events += [AuditEvent(r.kind, r.cycle, loads(r.payload), r.ts) for r in other_rows]
    _check_complete(run_id, until_cycle, facts, events)
    return RunHistory(run_id, until_cycle, cycles, run.status, started, facts, texts, events, head)


def _fork_point(started: dict[str, Any]) -> tuple[str, int] | None:
    """(parent, cycle) of a fork's ``run_started`` (None: the run is no fork)."""
    link = started.get("forked_from")
    if not isinstance(link, dict):
        return None
    parent, cycle = link.get("run"), link.get("cycle")
    if not isinstance(parent, str) or type(cycle) is not int:
        return None
    return parent, cycle


def inherited_facts(
    store: StoreCore, run_id: str, started: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The facts the run ``run_id`` (whose ``run_started`` payload is ``started``)
    took from its parent, as (fact dicts, chained texts) in promotion order:
    nothing for a run that is no fork, the copy of a fork recorded before issue 46,
    else the parent's facts up to the fork point read from its verified events and
    checked against ``forked_from.facts`` (count and Merkle root).

    Raises ``ParentMissing`` (the parent is gone), ``UnverifiedParent`` (its chain
    fails, or no longer ends in the ``parent_head`` the fork read) or
    ``ResumeError`` (its facts are not those the fork refers to).
    """
    link = _fork_point(started)
    if link is None:
        initial = list(started.get("initial_facts") or ())
        return initial, [canonical_json(f) for f in initial]
    return _taken(run_id, started, _parent_history(store, run_id, link[0], link[1]))


def _taken(
    run_id: str, started: dict[str, Any], parent: RunHistory
) -> tuple[list[dict[str, Any]], list[str]]:
    """The facts fork ``run_id`` took from ``parent`` (its history at the fork point,
    its chain verified), checked against the fork's reference: the parent's head
    (``UnverifiedParent`` when another), the facts' count and Merkle root
    (``ResumeError`` when they differ)."""
    copied = started.get("initial_facts")
    link: dict[str, Any] = started["forked_from"]
    ref = link.get("facts")
    count = len(copied) if copied else ref.get("count") if isinstance(ref, dict) else None
    head = link.get("parent_head")
    if isinstance(head, dict) and parent.head != (head.get("seq"), head.get("chain_hash")):
        # the parent's chain verifies up to the fork point but no longer ends in the
        # head the fork read: it was re-chained since
        seq = head.get("seq")
        why = f"parent run {parent.run_id} changed since the fork: seq {seq}: head mismatch"
        raise UnverifiedParent(run_id, 1, why)
    if len(parent.texts) != count:
        raise ResumeError(
            f"run {run_id} took {count} fact(s) from run {parent.run_id}, which holds "
            f"{len(parent.texts)} at cycle {parent.cycle}: cannot rebuild the fork"
        )
    if copied:  # a fork recorded before issue 46: its copy, as chained
        return list(copied), list(parent.texts)
    scheme = merkle_scheme(started.get("facts_merkle"))
    frontier = MerkleFrontier(scheme=scheme)
    frontier.extend(fact_text_leaves(parent.texts, scheme))
    if frontier.root() != link.get("facts_root"):
        raise ResumeError(
            f"run {run_id}: the facts of its parent run {parent.run_id} up to cycle "
            f"{parent.cycle} are not the ones it forked from (facts root differs)"
        )
    return list(parent.facts), list(parent.texts)


def _parent_history(store: StoreCore, run_id: str, parent: str, cycle: int) -> RunHistory:
    """The history of a fork's parent up to ``cycle`` (``ParentMissing`` when gone)."""
    try:
        return read_history(store, parent, cycle)
    except RunNotFound:
        raise ParentMissing(run_id, parent, pruned_note(store, parent)) from None


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
    seen: dict[Any, int] = {}
    get = seen.get
    try:
        for key, fid in map(itemgetter("key", "id"), facts):
            n = get(key, 0)
            if fid != f"{key}#{n}":
                raise ResumeError(
                    f"run {run_id}: fact {fid!r} follows {n} fact(s) of key {key!r}: "
                    f"facts are missing from the store, cannot rebuild cycle {cycle}"
                )
            seen[key] = n + 1
    except (KeyError, TypeError) as exc:  # a payload that is no fact
        raise ResumeError(
            f"run {run_id}: a fact_promoted event holds no fact ({exc!r}): "
            f"cannot rebuild cycle {cycle} (run `converge verify {run_id}`)"
        ) from None


def read_facts(
    store: StoreCore,
    run_id: str,
    key: str | None = None,
) -> list[Fact]:
    """The run's facts in promotion order: the initial ones (a fork's, those it
    refers to in its parent: :func:`inherited_facts`), then every ``fact_promoted``
    (only those of ``key`` when given); raises ``RunNotFound``, ``CorruptRow`` for a
    payload that holds no fact, and for a fork ``ParentMissing`` (its parent gone)."""
    with store.transaction(write=False) as conn:
        known = conn.execute(select(runs.c.run_id).where(runs.c.run_id == run_id)).scalar()
    if known is None:  # the facts are the events': a row that cannot be read is no matter
        raise RunNotFound(f"no run {run_id!r} in audit store {store.shown}")
    out: list[Fact] = []
    for ev in read_events(store, run_id, kinds=("run_started", "fact_promoted")):
        try:
            if ev.kind == "run_started":
                dicts = ev.payload.get("initial_facts") or []
                if not dicts and "forked_from" in ev.payload:
                    # a fork refers to its parent's facts
                    dicts = inherited_facts(store, run_id, ev.payload)[0]
                found = [fact_from_dict(d) for d in dicts]
            else:
                found = [fact_from_dict(ev.payload)]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            where = f"run {run_id} event {ev.seq}"
            raise CorruptRow("audit_events", where, "payload", f"no fact ({exc!r})") from exc
        out.extend(f for f in found if key is None or f.key == key)
    return out
