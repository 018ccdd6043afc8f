"""Journeys through the real ``converge serve`` (its inbox and its pool of worker
processes), the JSON API, the pages and the real ``converge`` commands (issue 53,
"where the parts meet"), on SQLite and PostgreSQL.

A model-based test as an explicit seeded random walk (hypothesis' state machines
start with a degenerate example and shrink by running journeys again, each a
server and dozens of processes): each journey's steps are drawn from the seed
before it starts (:func:`plan`), so a seed gives the same journeys every time,
the timing of the processes aside. The steps (:mod:`tests.journeys.journey`): run
and submit jobs, fork runs (API and command), decide gates (API, the gate page's
form, the command), comment, cancel (API and command), resume, replay, follow a
run's event stream, and kill -9 a worker while it runs a run. After every step
:class:`tests.journeys.checks.Checker` checks what users rely on (its docstring);
at the end every run must come to rest, every gate still pending is decided
through ``converge approve`` by an approver, and every stream must end.

``CONVERGE_JOURNEY_SEED`` (53) draws the plan: ``CONVERGE_JOURNEY_EXAMPLES`` (2)
journeys of ``CONVERGE_JOURNEY_STEPS`` (8) steps, test ids ``sqlite-53.1``...; a
failure prints the seed, the steps and what each did.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.hitlfixtures import STORES
from tests.journeys.checks import Journal
from tests.journeys.journey import STEPS, Journey
from tests.journeys.world import DECIDERS, LEASE_S, PEOPLE, RUNNERS

SEED = int(os.environ.get("CONVERGE_JOURNEY_SEED", "53"))
EXAMPLES = int(os.environ.get("CONVERGE_JOURNEY_EXAMPLES", "2"))
LENGTH = int(os.environ.get("CONVERGE_JOURNEY_STEPS", "8"))

PICK = range(10_000)
"""Which of the candidates (runs, gates) a step takes, modulo their number."""
CHOICES: dict[str, dict[str, Any]] = {
    "run": {"job": ("gated", "beat", "chain", "budget"), "who": RUNNERS},
    "submit": {"job": ("gated", "beat", "chain", "budget"), "who": RUNNERS},
    "fork": {"pick": PICK, "cycle": PICK, "who": RUNNERS, "via": ("api", "cli")},
    "decide": {
        "pick": PICK,
        "approve": (True, False),
        "who": DECIDERS,
        "via": ("api", "form", "cli"),
    },
    "comment": {"pick": PICK, "who": tuple(sorted(PEOPLE)), "via": ("api", "cli")},
    "cancel": {"pick": PICK, "who": RUNNERS, "via": ("api", "cli")},
    "resume": {"pick": PICK, "who": RUNNERS},
    "replay": {"pick": PICK},
    "follow": {"pick": PICK, "who": tuple(sorted(PEOPLE)), "since": ("start", "middle", "end")},
    "kill_worker": {"pick": PICK, "pool": (True, False)},
}
"""Each step and what its arguments are drawn from."""
assert set(CHOICES) == set(STEPS)


@dataclass(frozen=True)
class Step:
    """One step of a journey: a method of :class:`Journey` and its arguments."""

    name: str
    args: dict[str, Any]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"


def _deck() -> list[tuple[str, dict[str, Any]]]:
    """Every kind of step, once in each of its ways (``via``, ``pool``)."""
    deck: list[tuple[str, dict[str, Any]]] = []
    for name in STEPS:
        ways = [k for k in ("via", "pool") if k in CHOICES[name]]
        if not ways:
            deck.append((name, {}))
        for way in ways:
            deck += [(name, {way: value}) for value in CHOICES[name][way]]
    return deck


DECK = _deck()
"""16 steps: run, submit, fork (API, command), decide (API, form, command), comment
(API, command), cancel (API, command), resume, replay, follow, kill a worker (of
the pool, of a submitted run)."""


def plan(seed: int, journeys: int, length: int) -> list[list[Step]]:
    """``journeys`` journeys of ``length`` steps drawn from ``seed``: shuffled
    :data:`DECK` after shuffled deck, cut in journeys (so that 2 journeys of 8 take
    every step in every way), each step's other arguments drawn from :data:`CHOICES`."""
    rng = random.Random(seed)
    drawn: list[tuple[str, dict[str, Any]]] = []
    while len(drawn) < journeys * length:
        deck = list(DECK)
        rng.shuffle(deck)
        drawn += deck
    steps = [
        Step(name, {arg: fixed.get(arg, rng.choice(c)) for arg, c in CHOICES[name].items()})
        for name, fixed in drawn[: journeys * length]
    ]
    return [steps[n * length : (n + 1) * length] for n in range(journeys)]


PLAN = plan(SEED, EXAMPLES, LENGTH)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("number", range(1, EXAMPLES + 1), ids=lambda n: f"{SEED}.{n}")
@pytest.mark.parametrize("kind", STORES)
def test_journey(kind: str, number: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Journey ``number`` of the seed's plan on a store of ``kind``: every check holds
    after each step and at the end."""
    monkeypatch.setenv("CONVERGE_LEASE_S", str(LEASE_S))  # the checks' commands too
    steps = PLAN[number - 1]
    journal = Journal(f"{SEED}.{number}", kind)
    journal.step("the steps: " + "; ".join(str(s) for s in steps))
    journey = Journey(kind, tmp_path, journal)
    try:
        journey.checker.check()
        for step in steps:
            journal.step(f"step {step}")
            getattr(journey, step.name)(**step.args)
            journey.checker.check()
        journey.finish()
    finally:
        journey.close()
    took = time.monotonic() - journal.started
    journal.step(f"done in {took:.0f} s; API answers {journey.world.answered()}")


def test_a_seed_plans_the_same_journeys_which_take_every_step_in_every_way() -> None:
    assert len(DECK) == 16
    assert plan(7, 2, 8) == plan(7, 2, 8) != plan(8, 2, 8)
    ways = {(s.name, s.args.get("via"), s.args.get("pool")) for j in plan(7, 2, 8) for s in j}
    assert len(ways) == len(DECK)
