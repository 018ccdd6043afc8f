"""HITL gates in one process: pause, approve, reject, decide once, checkpoints."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import (
    Budget,
    Context,
    Converged,
    Engine,
    GateAlreadyDecided,
    GateDecision,
    GateNotFound,
    HitlGatePending,
    Proposal,
    ResumeError,
    RunResult,
    suggestor,
)
from engine._cycle.run import Run
from gates import require_approval
from tests.hitlfixtures import SCANNED, count


@suggestor(name="scan", dependencies=["seed"])
def scan(ctx: Context) -> list[Proposal]:
    """:func:`tests.hitlfixtures.scan`'s and a second package of unknown license."""
    return [*SCANNED, Proposal("license.unknown", {"name": "d"})]


def make_engine(**kw: Any) -> Engine:
    gate = require_approval(keys=["license.unknown"], summary="Classify {content[name]}")
    engine = Engine(gates=[gate], **kw)
    engine.register(scan, count)
    return engine


def contents(result: RunResult) -> list[tuple[str, Any]]:
    return [(f.key, f.content) for f in result.context]


def test_a_matching_proposal_pauses_the_run_with_the_facts_merged_before_it() -> None:
    result = make_engine().run({"seed": [1]})
    reason = result.stop_reason
    assert isinstance(reason, HitlGatePending)
    assert reason.summary == "Classify b"
    assert reason.agent_id == "scan" and reason.cycle == 1
    assert reason.proposal_id == "scan/1/0.1"
    assert reason.is_hitl_pending() and not reason.was_force_stopped()
    assert contents(result) == [("seed", 1), ("package", "a")]


def test_approving_every_gate_promotes_the_proposals_and_the_run_converges() -> None:
    engine = make_engine()
    first = engine.run({"seed": [1]})
    assert isinstance(first.stop_reason, HitlGatePending)
    second = engine.resume(first.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert isinstance(second.stop_reason, HitlGatePending)
    assert second.stop_reason.summary == "Classify d"
    final = engine.resume(second.stop_reason.gate_id, GateDecision.approve(by="alice"))
    assert final.stop_reason == Converged()
    assert contents(final) == [
        ("seed", 1),
        ("package", "a"),
        ("license.unknown", {"name": "b"}),
        ("package", "c"),
        ("license.unknown", {"name": "d"}),
        ("summary", {"unknown": 2, "packages": 2}),
    ]


def test_rejecting_drops_the_proposal_and_records_a_diagnostic_fact() -> None:
    engine = make_engine()
    first = engine.run({"seed": [1]})
    assert isinstance(first.stop_reason, HitlGatePending)
    second = engine.resume(
        first.stop_reason.gate_id, GateDecision.reject(by="bob", reason="not ours")
    )
    assert isinstance(second.stop_reason, HitlGatePending)
    final = engine.resume(second.stop_reason.gate_id, GateDecision.approve(by="bob"))
    assert final.stop_reason == Converged()
    keys = [f.key for f in final.context]
    assert keys.count("license.unknown") == 1
    [diag] = final.context.get("hitl.rejected")
    assert diag.content["content"] == {"name": "b"}
    assert diag.content["by"] == "bob" and diag.content["reason"] == "not ours"
    assert diag.provenance.suggestor == "hitl"


def test_a_rejected_proposal_never_reopens_a_gate() -> None:
    @suggestor(name="insist")
    def insist(ctx: Context) -> list[Proposal]:
        return [Proposal("risky", "x")]

    engine = Engine(gates=[require_approval(keys=["risky"])], budget=Budget(max_cycles=10))
    engine.register(insist)
    first = engine.run()
    assert isinstance(first.stop_reason, HitlGatePending)
    final = engine.resume(first.stop_reason.gate_id, GateDecision.reject(by="carol"))
    assert final.stop_reason == Converged()
    assert not final.context.has("risky")


def test_a_gate_is_decided_exactly_once() -> None:
    engine = make_engine()
    first = engine.run({"seed": [1]})
    assert isinstance(first.stop_reason, HitlGatePending)
    gate_id = first.stop_reason.gate_id
    engine.resume(gate_id, GateDecision.approve(by="alice"))
    with pytest.raises(GateAlreadyDecided) as info:
        engine.resume(gate_id, GateDecision.reject(by="mallory"))
    assert info.value.by == "alice" and info.value.status == "approved"


def test_an_unknown_gate_is_a_typed_error() -> None:
    with pytest.raises(GateNotFound):
        make_engine().resume("no-such-gate", GateDecision.approve(by="x"))


def test_resume_rejects_a_decision_that_is_not_a_gate_decision() -> None:
    engine = make_engine()
    first = engine.run({"seed": [1]})
    assert isinstance(first.stop_reason, HitlGatePending)
    with pytest.raises(ResumeError):
        engine.resume(first.stop_reason.gate_id, True)  # type: ignore[arg-type]


def test_paused_time_does_not_count_against_the_time_budget() -> None:
    now = [0.0]
    engine = make_engine(budget=Budget(max_seconds=5), clock=lambda: now[0])
    first = engine.run({"seed": [1]})
    assert isinstance(first.stop_reason, HitlGatePending)
    now[0] += 3600.0  # an hour waiting for a human
    second = engine.resume(first.stop_reason.gate_id, GateDecision.approve(by="a"))
    assert isinstance(second.stop_reason, HitlGatePending)
    final = engine.resume(second.stop_reason.gate_id, GateDecision.approve(by="a"))
    assert final.stop_reason == Converged()
    assert final.duration_ms < 5000


def test_the_same_decisions_give_the_same_facts_as_an_uninterrupted_run() -> None:
    decisions = [GateDecision.approve(by="a"), GateDecision.reject(by="a")]
    runs = []
    for _ in range(2):
        engine = make_engine()
        result = engine.run({"seed": [1]}, run_id="fixed")
        for d in decisions:
            assert isinstance(result.stop_reason, HitlGatePending)
            result = engine.resume(result.stop_reason.gate_id, d)
        runs.append(result)
    assert [f for f in runs[0].context] == [f for f in runs[1].context]
    assert runs[0].facts_root == runs[1].facts_root


def test_a_checkpoint_survives_json_and_resumes_to_the_same_facts() -> None:
    engine = make_engine()
    first = engine.run({"seed": [1]}, run_id="cp")
    assert isinstance(first.stop_reason, HitlGatePending)
    state = engine.runs.paused[first.stop_reason.gate_id]
    gate = state.gating.pending_gate
    assert gate is not None
    data = json.loads(json.dumps(state.to_checkpoint(engine.suggestor_names)))
    restored = Run.from_checkpoint(data, gate.record)
    assert restored.context.facts() == state.context.facts()
    assert restored.cursor.merge_effects == state.cursor.merge_effects
    assert restored.cursor.merge_pos == state.cursor.merge_pos
    assert restored.cursor.cycle == state.cursor.cycle
    assert restored.cursor.dirty == state.cursor.dirty


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d.pop("facts"),
        lambda d: d.update(version=99),
        lambda d: d.update(usage="lots"),
        lambda d: d.update(cycle_new=["nope#7"]),
    ],
)
def test_a_corrupted_checkpoint_is_a_resume_error(damage: Any) -> None:
    engine = make_engine()
    first = engine.run({"seed": [1]})
    assert isinstance(first.stop_reason, HitlGatePending)
    state = engine.runs.paused[first.stop_reason.gate_id]
    assert state.gating.pending_gate is not None
    data = json.loads(json.dumps(state.to_checkpoint(engine.suggestor_names)))
    damage(data)
    with pytest.raises(ResumeError):
        Run.from_checkpoint(data, state.gating.pending_gate.record)
