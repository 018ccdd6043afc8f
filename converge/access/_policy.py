"""The access policy: may this person do this to this resource? One pure function,
:func:`permits`, over values the surfaces gather; deny by default (OWASP ASVS 4.0
V4.1: access control enforced at one trusted point).

A person (:class:`Person`) has a role (the token's, or ``admin`` for whoever runs a
command on the database itself) and the groups the store puts them in. A role
grants a set of actions (:data:`GRANTS`, nested: viewer < runner < approver <
admin); the resource then narrows it:

- a run (:class:`RunView`) whose job says ``visible_to: [...]`` is seen only by
  those people and groups, and by admins;
- a gate (:class:`GateView`) with named approvers is read (its proposal, summary,
  rules, votes, comments, history) and commented on only by its approvers and its
  escalation group; anyone who sees its run sees that it exists and its status
  (:mod:`converge.access._views`); deciding it needs the approver role, a place
  among its approvers at that moment and, for a four-eyes gate, not having
  submitted, run, resumed or forked the run;
- the store itself (:data:`STORE`: people, tokens, settings) is managed by admins,
  who alone prune its runs (``converge prune``) and read the metrics of
  ``converge serve`` (unless its ``--metrics`` setting opens them:
  :mod:`converge.access._operations`).

Any action a rule below does not grant is refused, with a sentence saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

__all__ = [
    "GRANTS",
    "STORE",
    "Action",
    "GateView",
    "Person",
    "Resource",
    "Role",
    "RunView",
    "StoreScope",
    "Verdict",
    "permits",
]


class Role(StrEnum):
    """What a token lets its person do at most (``converge token add --role``)."""

    ADMIN = "admin"
    RUNNER = "runner"
    APPROVER = "approver"
    VIEWER = "viewer"


class Action(StrEnum):
    """Everything a surface does on a person's behalf."""

    SEE_RUN = "see_run"  # its row, stop, timeline, facts, lineage, report, events, diff
    FOLLOW_RUN = "follow_run"  # its live event stream
    EXPORT_RUN = "export_run"  # its proof bundle
    START_RUN = "start_run"  # run, submit or resume a run of a job
    FORK_RUN = "fork_run"
    CANCEL_RUN = "cancel_run"
    SEE_GATE = "see_gate"  # that it exists, and its status
    READ_GATE = "read_gate"  # its proposal, summary, rules, votes, comments, history
    COMMENT = "comment"
    DECIDE = "decide"
    MANAGE_PEOPLE = "manage_people"  # people, groups, tokens, the store's settings
    PRUNE = "prune"  # remove stopped runs (converge prune), their tombstones kept
    REDACT = "redact"  # erase a fact's content (converge redact), its commitment kept
    READ_METRICS = "read_metrics"  # GET /metrics of converge serve (docs/operations.md)


VERBS: Final[dict[Action, str]] = {
    Action.SEE_RUN: "see runs",
    Action.FOLLOW_RUN: "follow runs",
    Action.EXPORT_RUN: "export runs' proof bundles",
    Action.START_RUN: "run, submit or resume runs",
    Action.FORK_RUN: "fork runs",
    Action.CANCEL_RUN: "cancel runs",
    Action.SEE_GATE: "see gates",
    Action.READ_GATE: "read gates",
    Action.COMMENT: "comment on gates",
    Action.DECIDE: "decide gates",
    Action.MANAGE_PEOPLE: "manage people, tokens and settings",
    Action.PRUNE: "prune runs",
    Action.REDACT: "redact facts",
    Action.READ_METRICS: "read the metrics",
}
"""Each action as the end of "may not ...", in refusals and in docs/access.md."""
_ON_GATE: Final[dict[Action, str]] = {Action.READ_GATE: "read", Action.COMMENT: "comment on"}

_READ = frozenset(
    {
        Action.SEE_RUN,
        Action.FOLLOW_RUN,
        Action.EXPORT_RUN,
        Action.SEE_GATE,
        Action.READ_GATE,
        Action.COMMENT,
    }
)
_RUN = _READ | {Action.START_RUN, Action.FORK_RUN, Action.CANCEL_RUN}
_DECIDE = _RUN | {Action.DECIDE}
GRANTS: Final[dict[Role, frozenset[Action]]] = {
    Role.VIEWER: _READ,
    Role.RUNNER: _RUN,
    Role.APPROVER: _DECIDE,
    Role.ADMIN: _DECIDE | {Action.MANAGE_PEOPLE, Action.PRUNE, Action.REDACT, Action.READ_METRICS},
}
"""The actions each role grants at most; the resource may narrow them (see the module)."""


@dataclass(frozen=True, slots=True)
class Person:
    """Who asks: ``name``, ``role`` and the ``groups`` the store puts them in."""

    name: str
    role: Role
    groups: frozenset[str] = frozenset()

    def named_in(self, names: frozenset[str]) -> bool:
        """Whether ``names`` (people and groups) names this person or a group of theirs."""
        return self.name in names or not self.groups.isdisjoint(names)


@dataclass(frozen=True, slots=True)
class RunView:
    """What the policy needs of a run (or of a job about to run): ``visible_to``,
    the people and groups its job shows its runs to (None: everyone with access),
    and ``actors``, who submitted, ran, resumed or forked it (four eyes)."""

    run_id: str
    visible_to: frozenset[str] | None = None
    actors: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class GateView:
    """What the policy needs of a gate: its ``run``; ``readers``, the approvers and
    escalation group that may read it (None: whoever sees its run); ``deciders``,
    who may decide it now (None: any approver; escalation included once due);
    ``four_eyes``: its run's actors may not decide it."""

    gate_id: str
    run: RunView
    readers: frozenset[str] | None = None
    deciders: frozenset[str] | None = None
    four_eyes: bool = False


@dataclass(frozen=True, slots=True)
class StoreScope:
    """The audit store itself: its people, groups, tokens and settings."""

    name: str = "the audit store"


STORE: Final = StoreScope()
"""The resource of :attr:`Action.MANAGE_PEOPLE`, :attr:`Action.PRUNE`,
:attr:`Action.REDACT` and :attr:`Action.READ_METRICS`."""

Resource = RunView | GateView | StoreScope
"""What an action is done to."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The policy's answer: ``allowed``, and ``reason`` (why not, as one sentence a
    refusal shows; ``"allowed"`` otherwise)."""

    allowed: bool
    reason: str = "allowed"

    def __bool__(self) -> bool:
        return self.allowed


_ALLOWED: Final = Verdict(True)
_RUN_ACTIONS: Final = frozenset(
    {
        Action.SEE_RUN,
        Action.FOLLOW_RUN,
        Action.EXPORT_RUN,
        Action.START_RUN,
        Action.FORK_RUN,
        Action.CANCEL_RUN,
    }
)
_GATE_ACTIONS: Final = frozenset({Action.SEE_GATE, Action.READ_GATE, Action.COMMENT, Action.DECIDE})
_STORE_ACTIONS: Final = frozenset(
    {Action.MANAGE_PEOPLE, Action.PRUNE, Action.REDACT, Action.READ_METRICS}
)


def _names(names: frozenset[str]) -> str:
    return ", ".join(sorted(names)) or "nobody"


def _sees_run(person: Person, run: RunView) -> Verdict:
    if run.visible_to is None or person.role == Role.ADMIN or person.named_in(run.visible_to):
        return _ALLOWED
    return Verdict(
        False,
        f"{person.name} may not see run {run.run_id}: its job shows its runs only to "
        f"{_names(run.visible_to)}",
    )


def _on_gate(person: Person, action: Action, gate: GateView) -> Verdict:
    seen = _sees_run(person, gate.run)
    if not seen or action == Action.SEE_GATE:
        return seen
    if action == Action.DECIDE:
        return _decides(person, gate)
    if gate.readers is not None and not person.named_in(gate.readers):
        return Verdict(
            False,
            f"{person.name} may not {_ON_GATE[action]} gate {gate.gate_id}: it is "
            f"restricted to its approvers ({_names(gate.readers)})",
        )
    return _ALLOWED


def _decides(person: Person, gate: GateView) -> Verdict:
    if gate.deciders is not None and not person.named_in(gate.deciders):
        return Verdict(
            False,
            f"{person.name} may not decide gate {gate.gate_id}: its approvers are "
            f"{_names(gate.deciders)}",
        )
    if gate.four_eyes and person.name in gate.run.actors:
        return Verdict(
            False,
            f"{person.name} may not decide gate {gate.gate_id}: four eyes, and "
            f"{person.name} submitted or resumed its run; another person must decide",
        )
    return _ALLOWED


def permits(person: Person, action: Action, resource: Resource) -> Verdict:
    """May ``person`` do ``action`` to ``resource``? Pure: reads nothing, writes
    nothing; the same answer for the same values. Deny by default: an action the
    person's role does not grant, or one that does not apply to ``resource``
    (deciding a run), is refused."""
    if action not in GRANTS.get(person.role, frozenset()):
        return Verdict(
            False, f"{person.name} has a {person.role} token: it may not {VERBS[action]}"
        )
    if isinstance(resource, RunView) and action in _RUN_ACTIONS:
        return _sees_run(person, resource)
    if isinstance(resource, GateView) and action in _GATE_ACTIONS:
        return _on_gate(person, action, resource)
    if isinstance(resource, StoreScope) and action in _STORE_ACTIONS:
        return _ALLOWED
    return Verdict(False, f"no rule lets anyone {VERBS[action]} on {_describe(resource)}")


def _describe(resource: Resource) -> str:
    if isinstance(resource, RunView):
        return f"run {resource.run_id}"
    if isinstance(resource, GateView):
        return f"gate {resource.gate_id}"
    return resource.name
