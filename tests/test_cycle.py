"""The cycle of DESIGN.md §4: eligibility, duplicates, fixed point, invariants, gates."""

from __future__ import annotations

from typing import Any

import pytest

from criteria import KeyPresent, criterion, invariant
from engine import (
    Blocked,
    Budget,
    Context,
    Converged,
    CriteriaMet,
    CriteriaUnmet,
    Effect,
    Engine,
    HumanInterventionRequired,
    InvariantClass,
    InvariantViolated,
    Met,
    PromotionRejected,
    Proposal,
    RunResult,
    StopReason,
    Unmet,
    suggestor,
)
from engine.promotion import OnReject
from gates import promotion_gate


class Recorder:
    """A suggestor that logs the cycles it ran in and proposes what it is told."""

    def __init__(
        self,
        name: str,
        deps: tuple[str, ...] = (),
        propose: Any = None,
        accept: Any = None,
    ) -> None:
        self.name = name
        self.dependencies = frozenset(deps)
        self.cycles: list[int] = []
        self._propose = propose or (lambda ctx: [])
        self._accept = accept

    def accepts(self, ctx: Context) -> bool:
        return True if self._accept is None else bool(self._accept(ctx))

    def execute(self, ctx: Context) -> Effect:
        self.cycles.append(ctx.cycle)
        return Effect(list(self._propose(ctx)))


def once(key: str, content: Any) -> Any:
    """Propose ``key=content`` every time (a duplicate after the first)."""
    return lambda ctx: [Proposal(key, content)]


# -- eligibility -------------------------------------------------------------------


def test_a_suggestor_runs_only_in_cycles_after_one_of_its_keys_changed() -> None:
    a = Recorder("a", ("x",), once("y", 1))
    b = Recorder("b", ("y",), once("z", 1))
    idle = Recorder("idle", ("never",), once("w", 1))
    engine = Engine()
    engine.register(a, b, idle)
    r = engine.run({"x": [0]})
    assert r.stop_reason == Converged()
    assert a.cycles == [1] and b.cycles == [2] and idle.cycles == []
    assert r.cycles == 2


def test_in_cycle_one_every_key_present_in_the_input_is_dirty() -> None:
    on_x = Recorder("on_x", ("x",))
    on_y = Recorder("on_y", ("y",))
    on_z = Recorder("on_z", ("z",))
    engine = Engine()
    engine.register(on_x, on_y, on_z)
    engine.run({"x": [1], "y": [2]})
    assert on_x.cycles == [1] and on_y.cycles == [1] and on_z.cycles == []


def test_dependency_free_suggestors_are_considered_every_cycle() -> None:
    chain = Recorder("chain", ("n",), lambda ctx: [Proposal("n", len(ctx.get("n")))])
    chain_limit = Recorder(
        "stopper", (), accept=lambda ctx: True, propose=lambda ctx: []
    )  # reads nothing: woken every cycle
    engine = Engine(budget=Budget(max_cycles=4))
    engine.register(chain, chain_limit)
    r = engine.run({"n": [0]})
    assert r.cycles == 4
    assert chain_limit.cycles == [1, 2, 3, 4]


def test_a_suggestor_whose_accepts_is_false_is_skipped() -> None:
    picky = Recorder("picky", ("x",), once("y", 1), accept=lambda ctx: ctx.has("ready"))
    engine = Engine()
    engine.register(picky)
    r = engine.run({"x": [0]})
    assert picky.cycles == [] and not r.context.has("y")
    assert r.stop_reason == Converged() and r.cycles == 0

    picky2 = Recorder("picky", ("x",), once("y", 1), accept=lambda ctx: ctx.has("ready"))
    engine2 = Engine()
    engine2.register(picky2)
    assert engine2.run({"x": [0], "ready": [True]}).context.has("y")


def test_accepts_sees_the_cycle_about_to_run() -> None:
    seen: list[int] = []

    def accept(ctx: Context) -> bool:
        seen.append(ctx.cycle)
        return True

    s = Recorder("s", (), accept=accept)
    engine = Engine()
    engine.register(s)
    engine.run()
    assert seen == [1]


# -- duplicates and the fixed point --------------------------------------------------


def test_a_duplicate_proposal_is_not_a_new_fact_and_does_not_wake_subscribers() -> None:
    dup = Recorder("dup", ("x",), lambda ctx: [Proposal("x", 0), Proposal("x", 0.0)])
    listener = Recorder("listener", ("x",))
    engine = Engine()
    engine.register(dup, listener)
    r = engine.run({"x": [0]})
    assert [f.id for f in r.context] == ["x#0"]
    # both ran in cycle 1 (x was input); the duplicate woke nobody for cycle 2
    assert dup.cycles == [1] and listener.cycles == [1]
    assert r.stop_reason == Converged() and r.cycles == 1


def test_equal_json_content_is_a_duplicate_whatever_the_key_order() -> None:
    s = Recorder("s", ("x",), lambda ctx: [Proposal("d", {"a": 1, "b": [2]})])
    t = Recorder("t", ("x",), lambda ctx: [Proposal("d", {"b": [2], "a": 1})])
    engine = Engine()
    engine.register(s, t)
    r = engine.run({"x": [0]})
    assert r.context.count("d") == 1
    assert r.context.get("d")[0].provenance.suggestor == "s"


def test_no_new_fact_is_a_fixed_point_that_converges_without_criteria() -> None:
    s = Recorder("s", (), once("y", 1))
    engine = Engine()
    engine.register(s)
    r = engine.run()
    assert r.stop_reason == Converged() and r.stop_reason.is_success()
    assert r.cycles == 2 and s.cycles == [1, 2]


def test_a_fixed_point_with_every_required_criterion_met_is_criteria_met() -> None:
    s = Recorder("s", ("x",), once("y", 1))
    engine = Engine(criteria=[KeyPresent("y"), KeyPresent("z", required=False)])
    engine.register(s)
    r = engine.run({"x": [0]})
    assert r.stop_reason == CriteriaMet(criteria=["y>=1"])
    assert [(c.id, c.outcome) for c in r.criteria] == [("y>=1", "met"), ("z>=1", "unmet")]


def test_criteria_met_stops_the_run_before_the_fixed_point() -> None:
    n = Recorder("n", ("n",), lambda ctx: [Proposal("n", ctx.count("n"))])
    engine = Engine(criteria=[KeyPresent("n", at_least=4)])
    engine.register(n)
    r = engine.run({"n": [0]})
    assert r.stop_reason == CriteriaMet(criteria=["n>=4"])
    assert r.cycles == 3 and r.context.count("n") == 4


def test_a_fixed_point_with_an_unmet_required_criterion_is_criteria_unmet() -> None:
    s = Recorder("s", ("x",), once("y", 1))
    engine = Engine(criteria=[KeyPresent("y"), KeyPresent("z")])
    engine.register(s)
    r = engine.run({"x": [0]})
    assert r.stop_reason == CriteriaUnmet(criteria=["z>=1"])
    assert r.stop_reason.exit_code == 4


def test_a_criterion_blocked_on_a_human_is_human_intervention_required() -> None:
    @criterion(id="signed")
    def signed(ctx: Context) -> Any:
        return Blocked("needs sign-off", approval_ref="LEGAL-7")

    @criterion(id="present")
    def present(ctx: Context) -> Any:
        return Met() if ctx.has("y") else Unmet("no y")

    s = Recorder("s", ("x",), once("y", 1))
    engine = Engine(criteria=[present, signed])
    engine.register(s)
    r = engine.run({"x": [0]})
    assert r.stop_reason == HumanInterventionRequired(
        criteria=["signed"], approval_refs=["LEGAL-7"]
    )
    assert r.stop_reason.exit_code == 11 and r.context.has("y")


# -- invariants ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("invariant_class", "checked_in"),
    [
        pytest.param("structural", [1, 2], id="structural-after-every-merge"),
        pytest.param("semantic", [1], id="semantic-only-after-merges-adding-facts"),
    ],
)
def test_an_invariant_is_checked_after_the_merges_its_class_names(
    invariant_class: str, checked_in: list[int]
) -> None:
    # cycle 2 merges nothing new: a structural invariant is checked then, a semantic one not
    calls: list[int] = []

    @invariant(name="count_calls", invariant_class=invariant_class)
    def count_calls(ctx: Context) -> bool:
        calls.append(ctx.cycle)
        return True

    s = Recorder("s", (), once("y", 1))
    engine = Engine(invariants=[count_calls])
    engine.register(s)
    r = engine.run()
    assert r.cycles == 2 and calls == checked_in


def test_an_acceptance_invariant_is_checked_at_the_fixed_point() -> None:
    @invariant(name="no_forbidden", invariant_class="acceptance")
    def no_forbidden(ctx: Context) -> Any:
        return "forbidden present" if ctx.has("forbidden") else None

    s = Recorder("s", (), once("forbidden", 1))
    engine = Engine(invariants=[no_forbidden])
    engine.register(s)
    r = engine.run()
    assert r.stop_reason == InvariantViolated(
        invariant_class=InvariantClass.ACCEPTANCE, name="no_forbidden", reason="forbidden present"
    )


def _even_numbers_run(at_least: int) -> RunResult:
    """Numbers 0, 1, 2... up to 6, criteria met at ``at_least`` of them, under an
    acceptance invariant that wants an even count."""

    @invariant(name="even", invariant_class="acceptance")
    def even(ctx: Context) -> bool:
        return ctx.count("n") % 2 == 0

    n = Recorder(
        "n", ("n",), lambda ctx: [Proposal("n", ctx.count("n"))] if ctx.count("n") < 6 else []
    )
    engine = Engine(criteria=[KeyPresent("n", at_least=at_least)], invariants=[even])
    engine.register(n)
    return engine.run({"n": [0]})


def test_an_acceptance_invariant_failing_when_the_criteria_are_met_stops_the_run() -> None:
    # DESIGN.md §4 step 6: criteria met before the fixed point are accepted only
    # after the acceptance invariants; a violation is the stop, not a hidden delay
    r = _even_numbers_run(at_least=3)
    assert isinstance(r.stop_reason, InvariantViolated)
    assert r.stop_reason.invariant_class == InvariantClass.ACCEPTANCE
    assert r.stop_reason.name == "even"
    assert r.context.count("n") == 3  # stopped where the criteria were met, facts kept


def test_criteria_met_with_the_acceptance_invariants_holding_stop_the_run_early() -> None:
    r = _even_numbers_run(at_least=4)
    assert r.stop_reason == CriteriaMet(criteria=["n>=4"])
    assert r.context.count("n") == 4


def test_a_violated_invariant_stops_the_run_and_keeps_the_context_for_forensics() -> None:
    @invariant(name="small", invariant_class="semantic")
    def small(ctx: Context) -> Any:
        big = [f.id for f in ctx.get("n") if f.content >= 3]
        return f"too big: {big}" if big else None

    n = Recorder("n", ("n",), lambda ctx: [Proposal("n", ctx.count("n"))])
    engine = Engine(invariants=[small])
    engine.register(n)
    r = engine.run({"n": [0]})
    assert r.stop_reason == InvariantViolated(
        invariant_class=InvariantClass.SEMANTIC, name="small", reason="too big: ['n#3']"
    )
    assert [f.content for f in r.context.get("n")] == [0, 1, 2, 3]
    assert r.stop_reason.is_validation_failure() and not r.stop_reason.is_resumable()


# -- promotion gates --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("on_reject", "stop", "promoted"),
    [
        pytest.param(
            "stop",
            PromotionRejected(proposal_id="s/1/0.1", reason="no_negatives: negative"),
            [1],  # the proposal before it was promoted, the one after it was not
            id="stop-stops-with-promotion-rejected",
        ),
        pytest.param("drop", Converged(), [1, 2], id="drop-drops-and-goes-on"),
    ],
)
def test_a_promotion_gate_that_rejects_does_what_its_on_reject_says(
    on_reject: OnReject, stop: StopReason, promoted: list[int]
) -> None:
    @promotion_gate(name="no_negatives", on_reject=on_reject)
    def no_negatives(p: Proposal, suggestor: str, ctx: Context) -> Any:
        return "negative" if isinstance(p.content, int) and p.content < 0 else None

    s = Recorder("s", ("x",), lambda ctx: [Proposal("v", 1), Proposal("v", -1), Proposal("v", 2)])
    engine = Engine(gates=[no_negatives])
    engine.register(s)
    r = engine.run({"x": [0]})
    assert r.stop_reason == stop
    assert [f.content for f in r.context.get("v")] == promoted


# -- provenance -----------------------------------------------------------------------------


def test_every_fact_says_which_suggestor_proposed_it_in_which_cycle_from_which_proposal() -> None:
    @suggestor(name="double", dependencies=["n"])
    def double(ctx: Context) -> list[Proposal]:
        return [
            Proposal("n", f.content * 2, parents=(f.id,)) for f in ctx.get("n") if f.content < 5
        ]

    engine = Engine()
    engine.register(double)
    r = engine.run({"n": [3]})
    facts = r.context.facts()
    assert [(f.id, f.content) for f in facts] == [("n#0", 3), ("n#1", 6)]
    assert facts[0].provenance == ("input", 0, "input/n/0", ())
    assert facts[1].provenance == ("double", 1, "double/1/0.0", ("n#0",))


def test_unmet_and_blocked_criteria_at_once_stop_with_criteria_unmet_and_keep_both_signals() -> (
    None
):
    @criterion(id="signed")
    def signed(ctx: Context) -> Any:
        return Blocked("needs sign-off", approval_ref="LEGAL-7")

    engine = Engine(criteria=[KeyPresent("z"), signed])
    engine.register(Recorder("s", ("x",), once("y", 1)))
    r = engine.run({"x": [0]})
    assert r.signals == (
        CriteriaUnmet(criteria=["z>=1"]),
        HumanInterventionRequired(criteria=["signed"], approval_refs=["LEGAL-7"]),
    )
