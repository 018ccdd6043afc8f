"""The access policy as a pure function (issue 54): deny by default, the role table of
docs/access.md is the code's, and what a resource says narrows what a role grants."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from converge.access import (
    GRANTS,
    STORE,
    VERBS,
    Action,
    GateView,
    Person,
    Role,
    RunView,
    event_as_seen,
    gate_stub,
    permits,
    redacted,
)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "access.md"
ROW_ACTIONS = {
    "see a run": Action.SEE_RUN,
    "follow a run": Action.FOLLOW_RUN,
    "export a run's proof bundle": Action.EXPORT_RUN,
    "see a gate": Action.SEE_GATE,
    "read a gate": Action.READ_GATE,
    "comment on a gate": Action.COMMENT,
    "run, submit or resume a run": Action.START_RUN,
    "fork a run": Action.FORK_RUN,
    "cancel a run": Action.CANCEL_RUN,
    "decide a gate": Action.DECIDE,
    "manage people, groups, tokens and the store's settings": Action.MANAGE_PEOPLE,
    "prune runs": Action.PRUNE,
    "redact facts": Action.REDACT,
    "read the metrics": Action.READ_METRICS,
}
"""The docs table's rows (their text before any parenthesis) and the actions they name."""


def doc_table() -> dict[Action, dict[Role, bool]]:
    """docs/access.md's role table: for each action, whether each role may."""
    text = DOC.read_text()
    block = text.split("<!-- access-table")[1].split("<!-- /access-table -->")[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    roles = [Role(h) for h in header[1:]]
    table: dict[Action, dict[Role, bool]] = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        name = re.sub(r"\s*\(.*\)$", "", cells[0])
        table[ROW_ACTIONS[name]] = {r: c == "yes" for r, c in zip(roles, cells[1:], strict=True)}
    return table


def resource_for(action: Action) -> RunView | GateView | object:
    """An unrestricted resource ``action`` applies to."""
    if action in (Action.MANAGE_PEOPLE, Action.PRUNE, Action.REDACT, Action.READ_METRICS):
        return STORE
    run = RunView("r1")
    if action in (Action.SEE_GATE, Action.READ_GATE, Action.COMMENT, Action.DECIDE):
        return GateView("r1-g1", run)
    return run


def test_the_role_table_of_the_docs_is_the_policy_on_an_unrestricted_run() -> None:
    table = doc_table()

    assert set(table) == set(Action)
    for action, by_role in table.items():
        for role, allowed in by_role.items():
            verdict = permits(Person("p", role), action, resource_for(action))  # type: ignore[arg-type]
            assert verdict.allowed is allowed, (action, role, verdict.reason)
            assert (action in GRANTS[role]) is allowed


def test_every_action_has_a_sentence_for_its_refusal() -> None:
    assert set(VERBS) == set(Action)
    refused = permits(Person("victor", Role.VIEWER), Action.DECIDE, GateView("g", RunView("r")))
    assert not refused and refused.reason == "victor has a viewer token: it may not decide gates"


@given(
    role=st.sampled_from(list(Role)),
    action=st.sampled_from(list(Action)),
    kind=st.sampled_from(["run", "gate", "store"]),
)
def test_an_action_that_does_not_apply_to_the_resource_is_refused(
    role: Role, action: Action, kind: str
) -> None:
    resource = {"run": RunView("r"), "gate": GateView("g", RunView("r")), "store": STORE}[kind]
    applies = {
        "run": {
            Action.SEE_RUN,
            Action.FOLLOW_RUN,
            Action.EXPORT_RUN,
            Action.START_RUN,
            Action.FORK_RUN,
            Action.CANCEL_RUN,
        },
        "gate": {Action.SEE_GATE, Action.READ_GATE, Action.COMMENT, Action.DECIDE},
        "store": {Action.MANAGE_PEOPLE, Action.PRUNE, Action.REDACT, Action.READ_METRICS},
    }[kind]
    verdict = permits(Person("p", role), action, resource)
    if action not in applies:
        assert not verdict.allowed  # deny by default: no rule, no access
    else:
        assert verdict.allowed is (action in GRANTS[role])


def test_a_jobs_visible_to_hides_its_runs_and_gates_from_everyone_else_but_admins() -> None:
    run = RunView("r", visible_to=frozenset({"legal"}))
    gate = GateView("g", run)
    member = Person("lena", Role.VIEWER, frozenset({"legal"}))
    outsider = Person("oscar", Role.APPROVER)
    admin = Person("ada", Role.ADMIN)

    for action in (Action.SEE_RUN, Action.FOLLOW_RUN, Action.EXPORT_RUN, Action.FORK_RUN):
        assert not permits(outsider, action, run)
        assert permits(admin, action, run)
    assert permits(member, Action.SEE_RUN, run) and not permits(member, Action.FORK_RUN, run)
    refused = permits(outsider, Action.SEE_GATE, gate)
    assert not refused and "shows its runs only to legal" in refused.reason


def test_a_gate_with_approvers_is_read_by_them_and_only_seen_by_the_others() -> None:
    gate = GateView(
        "g", RunView("r"), readers=frozenset({"legal", "esc"}), deciders=frozenset({"legal"})
    )
    lena = Person("lena", Role.APPROVER, frozenset({"legal"}))
    eve = Person("eve", Role.APPROVER, frozenset({"esc"}))
    admin = Person("ada", Role.ADMIN)

    assert permits(lena, Action.READ_GATE, gate) and permits(lena, Action.DECIDE, gate)
    assert permits(eve, Action.COMMENT, gate)  # the escalation group reads it
    assert not permits(eve, Action.DECIDE, gate)  # and decides once escalated only
    for action in (Action.READ_GATE, Action.COMMENT, Action.DECIDE):
        assert not permits(admin, action, gate)  # named approvers: need to know, admins too
    assert permits(admin, Action.SEE_GATE, gate)
    assert "its approvers are legal" in permits(admin, Action.DECIDE, gate).reason


def test_four_eyes_refuses_the_runs_own_people() -> None:
    gate = GateView("g", RunView("r", actors=frozenset({"alice"})), four_eyes=True)
    assert not permits(Person("alice", Role.APPROVER), Action.DECIDE, gate)
    assert permits(Person("bob", Role.APPROVER), Action.DECIDE, gate)
    assert permits(Person("alice", Role.APPROVER), Action.COMMENT, gate)


def test_a_restricted_gate_shows_its_existence_and_status_nothing_else() -> None:
    gate = {
        "gate_id": "r-g1",
        "run_id": "r",
        "status": "pending",
        "summary": "Classify acme-secret",
        "proposal": {"content": {"name": "acme-secret"}},
        "rules": {"approvers": ["legal"]},
        "comments": [{"text": "looks like GPL"}],
        "opened_at": 1.0,
    }
    event = {"seq": 3, "kind": "gate_opened", "payload": dict(gate), "hash": "ab" * 32}
    paused = {"kind": "run_paused", "payload": {"reason": {"gate_id": "r-g1", "summary": "x"}}}

    assert gate_stub(gate) == {
        "gate_id": "r-g1",
        "run_id": "r",
        "status": "pending",
        "opened_at": 1.0,
        "restricted": True,
    }
    seen = event_as_seen(event, {"r-g1"})
    assert "acme-secret" not in repr(seen) and seen["hash"] is None and seen["restricted"]
    assert redacted(paused, {"r-g1"})["payload"]["reason"] == {
        "gate_id": "r-g1",
        "restricted": True,
    }
    assert redacted(paused, {"other"}) is paused  # nothing named: the same value, no copy
