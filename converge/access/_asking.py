"""Asking the policy from a surface: gather what :func:`converge.access.permits` needs
from the store (the person's groups, a run's ``visible_to`` and actors, a gate's
rules), ask, and on a refusal write the access log and raise
:class:`converge.errors.NotAllowed` (HTTP 403, exit 2 on the command line) before
anything else is written.

Every ask is also noted in :data:`ASKED` when a caller set it (the route walk of
tests/test_access_matrix.py: a route that never asks fails it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from audit.queries import read_gates
from audit.store import SqlRunStore
from audit.tables import runs
from converge.access._policy import (
    Action,
    GateView,
    Person,
    Resource,
    Role,
    RunView,
    Verdict,
    permits,
)
from converge.access._rules import DecisionRules
from converge.access._views import event_as_seen, redacted
from converge.errors import NotAllowed
from engine import ConvergeError, GateRecord

if TYPE_CHECKING:  # the people room is imported where it is asked (a run's actors, a refusal)
    from audit.people import Principal

__all__ = [
    "ASKED",
    "Sight",
    "ask",
    "check",
    "decision_verdict",
    "gate_view",
    "job_view",
    "person_of",
    "run_view",
    "run_views",
    "seen_by",
    "sight",
    "visible_to_of",
]

ASKED: ContextVar[list[Action] | None] = ContextVar("converge_access_asked", default=None)
"""The actions asked about in this context, when a caller set a list here."""


def person_of(who: Principal) -> Person:
    """The person ``who`` is (a token's, with its role and groups, read with it; or
    the database's own user, role ``admin``). Raises ``ConvergeError`` for an
    unknown role."""
    try:
        role = Role(who.role)
    except ValueError:
        raise ConvergeError(f"{who.name} holds a token of unknown role {who.role!r}") from None
    return Person(who.name, role, who.groups)


def visible_to_of(job_spec: Any) -> frozenset[str] | None:
    """The ``visible_to`` of a recorded job (``RunHeader.job_spec``: ``{"path",
    "spec"}``), None when it names none or cannot be read."""
    spec = job_spec.get("spec") if isinstance(job_spec, dict) else None
    names = spec.get("visible_to") if isinstance(spec, dict) else None
    if not isinstance(names, list):
        return None
    return frozenset(str(n) for n in names)


def job_view(name: str, spec: dict[str, Any]) -> RunView:
    """A run about to start from job ``name`` (its raw ``spec``): who could see it."""
    return RunView(f"of job {name}", visible_to_of({"spec": spec}))


def run_view(store: SqlRunStore, run_id: str) -> RunView:
    """What the policy needs of run ``run_id``. Raises ``RunNotFound``."""
    from audit.people import actors_of

    header = store.get_run_header(run_id)
    return RunView(run_id, visible_to_of(header.job_spec), frozenset(actors_of(store, run_id)))


def run_views(store: SqlRunStore, run_ids: Iterable[str]) -> dict[str, RunView]:
    """:func:`run_view` of many runs in one query (actors left out: only what seeing
    them needs); a run that recorded no ``visible_to`` is visible to all."""
    wanted = list(dict.fromkeys(run_ids))
    views = {r: RunView(r) for r in wanted}
    with store.transaction(write=False) as conn:
        for start in range(0, len(wanted), 500):
            rows = conn.execute(
                select(runs.c.run_id, runs.c.job_spec).where(
                    runs.c.run_id.in_(wanted[start : start + 500]),
                    runs.c.job_spec.contains("visible_to"),
                )
            ).all()
            for run_id, text in rows:
                try:
                    views[run_id] = RunView(run_id, visible_to_of(json.loads(text)))
                except ValueError:
                    continue  # an unreadable cell: verify names it; the run stays listed
    return views


def gate_view(gate: GateRecord, run: RunView, now: float | None = None) -> GateView:
    """What the policy needs of ``gate`` (its recorded rules) at ``now`` (unix s)."""
    rules = DecisionRules.of(gate)
    at = time.time() if now is None else now
    readers = None if rules.approvers is None else rules.approvers | rules.escalate_to
    return GateView(gate.gate_id, run, readers, rules.approvers_at(gate, at), rules.four_eyes)


def decision_verdict(
    gate: GateRecord, person: Person, *, acted: bool, job_spec: Any, now: float
) -> Verdict:
    """May ``person`` decide ``gate`` at ``now`` (unix s)? ``acted``: they submitted,
    ran, resumed or forked its run (four eyes); ``job_spec``: its run's recorded job
    (``visible_to``). The decision path's one question (:func:`check`)."""
    run = RunView(
        gate.run_id, visible_to_of(job_spec), frozenset({person.name}) if acted else frozenset()
    )
    return check(person, Action.DECIDE, gate_view(gate, run, now))


def check(person: Person, action: Action, resource: Resource) -> Verdict:
    """:func:`permits`, noted in :data:`ASKED`; nothing is logged (a filter's ask)."""
    asked = ASKED.get()
    if asked is not None:
        asked.append(action)
    return permits(person, action, resource)


def ask(
    store: SqlRunStore,
    person: Person,
    action: Action,
    resource: Resource,
    *,
    client: str | None = None,
    target: str | None = None,
) -> None:
    """Refuse unless ``person`` may do ``action`` to ``resource``: the refusal goes to
    the access log (action, ``403``, who, from which ``client``, on which
    ``target``, why) and raises :class:`NotAllowed` before anything is written."""
    from audit.people import log_access

    verdict = check(person, action, resource)
    if verdict.allowed:
        return
    log_access(
        store,
        str(action),
        "403",
        client=client,
        name=person.name,
        target=target or _target(resource),
        detail=verdict.reason,
    )
    raise NotAllowed(verdict.reason)


def _target(resource: Resource) -> str | None:
    if isinstance(resource, RunView):
        return resource.run_id
    if isinstance(resource, GateView):
        return resource.gate_id
    return None


def hidden_gates(
    store: SqlRunStore, person: Person, run_ids: list[str], now: float | None = None
) -> list[GateRecord]:
    """The gates of runs ``run_ids`` that ``person`` may not read."""
    found = [g for g in read_gates(store, run_ids=run_ids) if isinstance(g, GateRecord)]
    views = {r: run_view(store, r) for r in run_ids}
    at = time.time() if now is None else now
    return [
        g for g in found if not check(person, Action.READ_GATE, gate_view(g, views[g.run_id], at))
    ]


class Sight:
    """What one person may see of some runs: a function of their JSON (a run's page,
    its events, facts, a diff, a text) that cuts each mapping naming a gate they may
    not read to its existence and status (:func:`converge.access.redacted`) and
    takes each such gate's summary out of every text (a stop, an explanation, a
    timeline)."""

    def __init__(self, hidden: list[GateRecord]) -> None:
        self.hidden = hidden
        self._ids = {g.gate_id for g in hidden}
        self._texts = [g.summary for g in hidden if g.summary]

    def __call__(self, data: Any) -> Any:
        if not self.hidden:
            return data
        return _without_texts(redacted(data, self._ids), self._texts)

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        """An event (``StoredEvent.to_dict()``) as seen: :func:`event_as_seen`, texts too."""
        if not self.hidden:
            return event
        seen: dict[str, Any] = _without_texts(event_as_seen(event, self._ids), self._texts)
        return seen


def sight(
    store: SqlRunStore, person: Person | None, run_ids: list[str], now: float | None = None
) -> Sight:
    """What ``person`` may see of runs ``run_ids`` (everything for None: whoever holds
    the database)."""
    return Sight([] if person is None else hidden_gates(store, person, run_ids, now))


def seen_by(
    store: SqlRunStore,
    person: Person | None,
    data: Any,
    run_ids: list[str],
    now: float | None = None,
) -> Any:
    """``data`` (JSON of runs ``run_ids``) as ``person`` may see it (:class:`Sight`)."""
    return sight(store, person, run_ids, now)(data)


def _without_texts(value: Any, texts: list[str]) -> Any:
    if isinstance(value, str):
        for text in texts:
            value = value.replace(text, "(restricted)")
        return value
    if isinstance(value, dict):
        return {k: _without_texts(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_texts(v, texts) for v in value]
    return value
