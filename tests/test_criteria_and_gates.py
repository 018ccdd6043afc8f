"""Ready-made criteria, invariants and promotion gates, inside real runs."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from criteria import AllFactsSatisfy, KeyPresent, MaxFactsPerKey, criterion, invariant
from engine import (
    Blocked,
    Converged,
    CriteriaMet,
    CriteriaUnmet,
    Engine,
    HumanInterventionRequired,
    InvariantViolated,
    PromotionRejected,
    Proposal,
    suggestor,
)
from gates import ContentSchema, MinConfidence, promotion_gate


@suggestor(name="numbers", dependencies=["seed"])
def numbers(ctx):  # type: ignore[no-untyped-def]
    return [Proposal("num", i, confidence=0.1 * (i + 1)) for i in range(5)]


def _run(**kw):  # type: ignore[no-untyped-def]
    engine = Engine(**kw)
    engine.register(numbers)
    return engine.run({"seed": [0]})


def test_key_present_is_met_once_enough_facts_exist() -> None:
    assert isinstance(_run(criteria=[KeyPresent("num", at_least=5)]).stop_reason, CriteriaMet)
    r = _run(criteria=[KeyPresent("num", at_least=6)])
    assert r.stop_reason == CriteriaUnmet(criteria=["num>=6"])
    assert r.criteria[0].reason == "5 fact(s) on 'num', need 6"


def test_all_facts_satisfy_checks_every_fact_of_a_key() -> None:
    ok = AllFactsSatisfy("num", lambda f: f.content < 5, id="small")
    bad = AllFactsSatisfy("num", lambda f: f.content < 4, id="smaller")
    assert _run(criteria=[ok]).stop_reason == CriteriaMet(criteria=["small"])
    assert _run(criteria=[bad]).stop_reason == CriteriaUnmet(criteria=["smaller"])


def test_an_optional_criterion_does_not_decide_the_stop() -> None:
    optional = KeyPresent("missing", required=False)
    assert _run(criteria=[optional]).stop_reason == Converged()


def test_a_blocked_callable_criterion_asks_for_a_human() -> None:
    @criterion(id="signed_off")
    def signed_off(ctx):  # type: ignore[no-untyped-def]
        return Blocked("needs legal sign-off", approval_ref="LEGAL-42")

    r = _run(criteria=[signed_off])
    assert r.stop_reason == HumanInterventionRequired(
        criteria=["signed_off"], approval_refs=["LEGAL-42"]
    )


def test_a_callable_invariant_violation_stops_the_run_and_keeps_the_context() -> None:
    @invariant(name="below_three", invariant_class="semantic")
    def below_three(ctx):  # type: ignore[no-untyped-def]
        big = [f for f in ctx.get("num") if f.content >= 3]
        return f"{len(big)} numbers >= 3" if big else None

    r = _run(invariants=[below_three])
    assert r.stop_reason == InvariantViolated(
        invariant_class="semantic", name="below_three", reason="2 numbers >= 3"
    )
    assert r.context.count("num") == 5


def test_max_facts_per_key_is_structural() -> None:
    r = _run(invariants=[MaxFactsPerKey(3)])
    assert isinstance(r.stop_reason, InvariantViolated)
    assert r.stop_reason.invariant_class == "structural"


class Point(BaseModel):
    x: int
    y: int


def test_content_schema_rejects_content_that_does_not_fit() -> None:
    @suggestor(name="points", dependencies=["seed"])
    def points(ctx):  # type: ignore[no-untyped-def]
        return [Proposal("point", {"x": 1, "y": 2}), Proposal("point", {"x": "far"})]

    engine = Engine(gates=[ContentSchema("point", Point)])
    engine.register(points)
    r = engine.run({"seed": [0]})
    assert isinstance(r.stop_reason, PromotionRejected)
    assert r.stop_reason.proposal_id == "points/1/0.1"
    assert "schema:point: x: Input should be a valid integer" in r.stop_reason.reason
    assert [f.content for f in r.context.get("point")] == [{"x": 1, "y": 2}]


def test_min_confidence_drops_weak_proposals_and_goes_on() -> None:
    r = _run(gates=[MinConfidence(0.3)])
    assert r.stop_reason == Converged()
    assert [f.content for f in r.context.get("num")] == [2, 3, 4]


def test_a_callable_gate_can_stop_the_run() -> None:
    @promotion_gate(name="no_odd", on_reject="stop")
    def no_odd(p, suggestor_name, ctx):  # type: ignore[no-untyped-def]
        return "odd" if p.key == "num" and p.content % 2 else None

    r = _run(gates=[no_odd])
    assert r.stop_reason == PromotionRejected(proposal_id="numbers/1/0.1", reason="no_odd: odd")
    assert [f.content for f in r.context.get("num")] == [0]


def test_gate_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="on_reject"):
        MinConfidence(0.5, on_reject="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threshold"):
        MinConfidence(1.5)
