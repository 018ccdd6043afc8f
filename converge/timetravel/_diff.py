"""The difference between two recorded runs: their stops, facts and budget use.

:func:`snapshot` reads what a diff needs of one run from a store (a
:class:`RunSnapshot`); :func:`diff_runs` compares two snapshots, from one store or
two, and is pure. ``converge diff RUN_A RUN_B [--json]`` prints its result
(:mod:`converge.cli.timetravel`). Facts are matched by id, then (those left) by
key and content: a fact whose id is in both runs with other content is
*changed*; the rest are only in A or only in B. Each run is verified: one whose
chain fails is named first among the reasons (its facts are not its record).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.queries import StoredEvent
from audit.store import SqlRunStore
from engine.errors import ForkError, ResumeError
from engine.facts import Fact, content_key, fact_to_dict
from engine.result import counted

__all__ = ["RunDiff", "RunSnapshot", "diff_runs", "snapshot"]


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """One run as a diff sees it.

    ``stop``: ``{kind, category, message}`` (None while it has not stopped);
    ``budget``: ``{dimension: {used, limit, percent}}`` of its last ``run_stopped``
    (empty when none); ``forked_from``: ``{run, cycle, facts_root}`` of a fork;
    ``unverified``: why the run's chain does not verify (``seq N: reason``; None
    when it does): its facts are then not what was recorded.
    """

    run_id: str
    job: str | None
    status: str
    stop: dict[str, Any] | None
    cycles: int
    facts_root: str | None
    facts: tuple[Fact, ...]
    budget: dict[str, dict[str, Any]] = field(default_factory=dict)
    forked_from: dict[str, Any] | None = None
    unverified: str | None = None

    def header(self) -> dict[str, Any]:
        """The JSON-ready summary of the run (its facts counted, not listed)."""
        return {
            "run_id": self.run_id,
            "job": self.job,
            "status": self.status,
            "stop": self.stop,
            "cycles": self.cycles,
            "facts_count": len(self.facts),
            "facts_root": self.facts_root,
            "forked_from": self.forked_from,
            "verified": self.unverified is None,
            "unverified": self.unverified,
        }


@dataclass(frozen=True, slots=True)
class RunDiff:
    """What differs between run A and run B.

    ``only_a`` / ``only_b``: facts of one run matched in the other neither by id nor
    by key and content; ``changed``: ``(a, b)`` pairs of facts with one id and
    other contents; ``common``: how many facts match; ``why``: sentences saying
    why the stops differ (or that they do not); ``budget``: per dimension,
    ``(A's {used, limit}, B's)``; ``diverged_at``: the first cycle whose facts
    differ (None when none do).
    """

    a: RunSnapshot
    b: RunSnapshot
    only_a: tuple[Fact, ...]
    only_b: tuple[Fact, ...]
    changed: tuple[tuple[Fact, Fact], ...]
    common: int
    why: tuple[str, ...]
    budget: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]]
    diverged_at: int | None

    @property
    def same(self) -> bool:
        """The same stop and the same facts."""
        return (
            not self.only_a
            and not self.only_b
            and not self.changed
            and _stop_key(self.a) == _stop_key(self.b)
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``converge diff --json``."""
        return {
            "a": self.a.header(),
            "b": self.b.header(),
            "same": self.same,
            "same_stop": _stop_key(self.a) == _stop_key(self.b),
            "why": list(self.why),
            "diverged_at_cycle": self.diverged_at,
            "facts": {
                "common": self.common,
                "only_a": [fact_to_dict(f) for f in self.only_a],
                "only_b": [fact_to_dict(f) for f in self.only_b],
                "changed": [
                    {"id": fa.id, "key": fa.key, "a": fa.content, "b": fb.content}
                    for fa, fb in self.changed
                ],
            },
            "budget": {name: {"a": a, "b": b} for name, (a, b) in self.budget.items()},
        }


def snapshot(store: SqlRunStore, run_id: str) -> RunSnapshot:
    """The run ``run_id`` of ``store`` as a diff needs it, verified (``RunNotFound``).

    A fork whose parent no longer holds the facts it refers to (changed since the
    fork, or deleted) has no facts to compare: none, and its verify says why.
    """
    row = store.run(run_id)
    check = store.verify(run_id)
    unverified = None if check.ok else f"seq {check.first_bad_seq}: {check.reason}"
    try:
        facts = tuple(store.facts(run_id))
    except (ResumeError, ForkError) as exc:
        if row.parent_run_id is None:
            raise
        facts, unverified = (), unverified or str(exc)
    events = store.events(run_id, kinds=("run_started", "run_stopped"))
    stop = None
    if row.stop_reason is not None:
        stop = {
            "kind": row.kind,
            "category": row.category,
            "message": str(row.stop_reason),
        }
    return RunSnapshot(
        run_id=row.run_id,
        job=row.job,
        status=row.status,
        stop=stop,
        cycles=row.cycles,
        facts_root=row.facts_root,
        facts=facts,
        budget=_budget(events),
        forked_from=_forked_from(events),
        unverified=unverified,
    )


def _budget(events: list[StoredEvent]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for ev in events:
        status = ev.payload.get("budget_status") if ev.kind == "run_stopped" else None
        if isinstance(status, dict) and isinstance(status.get("dimensions"), dict):
            found = dict(status["dimensions"])
    return found


def _forked_from(events: list[StoredEvent]) -> dict[str, Any] | None:
    for ev in events:
        if ev.kind == "run_started":
            link = ev.payload.get("forked_from")
            return link if isinstance(link, dict) else None
    return None


def _stop_key(s: RunSnapshot) -> tuple[Any, ...]:
    return (None,) if s.stop is None else (s.stop.get("kind"), s.stop.get("category"))


def _identity(f: Fact) -> tuple[str, Any]:
    return f.key, content_key(f.content)


def diff_runs(a: RunSnapshot, b: RunSnapshot) -> RunDiff:
    """Compare two runs: stops, facts (by id, then by key and content), budget use."""
    by_id_b = {f.id: f for f in b.facts}
    matched_b: set[str] = set()
    changed: list[tuple[Fact, Fact]] = []
    left_a: list[Fact] = []
    common = 0
    for fa in a.facts:
        fb = by_id_b.get(fa.id)
        if fb is None:
            left_a.append(fa)
            continue
        matched_b.add(fb.id)
        if _identity(fa) == _identity(fb):
            common += 1
        else:
            changed.append((fa, fb))
    left_b = [f for f in b.facts if f.id not in matched_b]
    # facts with other ids but the same key and content still match
    pool: dict[tuple[str, Any], list[Fact]] = {}
    for f in left_b:
        pool.setdefault(_identity(f), []).append(f)
    only_a: list[Fact] = []
    for fa in left_a:
        same = pool.get(_identity(fa))
        if same:
            same.pop(0)
            common += 1
        else:
            only_a.append(fa)
    only_b = [f for found in pool.values() for f in found]
    order = {f.id: i for i, f in enumerate(b.facts)}
    only_b.sort(key=lambda f: order[f.id])
    cycles = [f.provenance.cycle for f in (*only_a, *only_b)]
    cycles += [min(fa.provenance.cycle, fb.provenance.cycle) for fa, fb in changed]
    diverged = min(cycles) if cycles else None
    budget = {
        name: (a.budget.get(name), b.budget.get(name)) for name in _dimensions(a.budget, b.budget)
    }
    return RunDiff(
        a=a,
        b=b,
        only_a=tuple(only_a),
        only_b=tuple(only_b),
        changed=tuple(changed),
        common=common,
        why=tuple(_why(a, b, diverged, budget)),
        budget=budget,
        diverged_at=diverged,
    )


def _dimensions(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    return [*a, *(name for name in b if name not in a)]


def _why(
    a: RunSnapshot,
    b: RunSnapshot,
    diverged: int | None,
    budget: dict[str, tuple[dict[str, Any] | None, dict[str, Any] | None]],
) -> list[str]:
    """Sentences on why the stops differ: a run that does not verify, the fork link,
    each stop, the budget limits that differ, the first cycle whose facts differ."""
    why = [
        f"{name} does not verify ({s.unverified}): its facts are not what it recorded"
        for s, name in ((a, "A"), (b, "B"))
        if s.unverified is not None
    ]
    for child, parent, name in ((b, a, "B"), (a, b, "A")):
        link = child.forked_from
        if link is not None and link.get("run") == parent.run_id:
            why.append(f"{name} is a fork of the other run at cycle {link.get('cycle')}")
    if _stop_key(a) == _stop_key(b):
        kind = "no stop yet" if a.stop is None else a.stop.get("kind")
        why.append(f"same stop: {kind}")
    else:
        why.append(f"A: {_stop_text(a)}; B: {_stop_text(b)}")
        for name, (da, db) in budget.items():
            la = None if da is None else da.get("limit")
            lb = None if db is None else db.get("limit")
            if la != lb:
                why.append(f"budget {name}: limit {_limit(la)} in A, {_limit(lb)} in B")
    if diverged is not None:
        why.append(f"facts differ from cycle {diverged}")
    elif a.facts_root == b.facts_root:
        why.append("same facts (same facts root)")
    return why


def _stop_text(s: RunSnapshot) -> str:
    if s.stop is None:
        return f"not stopped ({s.status})"
    return f"{s.stop.get('kind')} after {counted(s.cycles, 'cycle')} ({s.stop.get('message')})"


def _limit(value: Any) -> str:
    """A recorded limit as given: ``8`` (a budget status holds 8.0), ``0.5``, ``none``."""
    if value is None:
        return "none"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
