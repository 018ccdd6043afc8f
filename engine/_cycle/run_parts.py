"""The owned parts of a :class:`~engine._cycle.run.Run`, each with its own verbs
(its fields change through them only) and its own slice of the checkpoint:
:class:`~engine._cycle.cursor.Cursor` (where the run is), :class:`Spend` (what it
used), :class:`Gating` (its human gates), :class:`Integrity` (the facts' Merkle
root as it goes) and :class:`Recovery` (what a resume after a crash must not
record twice)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any

from engine._cycle.cursor import Cursor
from engine._cycle.spend import Spend
from engine.errors import ResumeError
from engine.facts import Fact, content_key, fact_json
from engine.hashing.commitment import commitment
from engine.hashing.merkle import (
    LEGACY,
    RFC6962,
    SALTED,
    MerkleFrontier,
    commitment_leaf,
    fact_leaf,
    merkle_scheme,
)
from engine.hitl import GateDecision
from engine.store import AuditEvent, GateRecord

__all__ = ["Cursor", "Gating", "Integrity", "PendingGate", "Recovery", "Spend"]


@dataclass(frozen=True, slots=True)
class PendingGate:
    """The gate a paused run waits on, where its proposal sits in the merge, and the
    decision taken on it (None until one is)."""

    record: GateRecord
    effect_index: int
    proposal_index: int
    decision: GateDecision | None = None


class Gating:
    """The run's human gates: the ``pending_gate`` it waits on, the proposal
    ``approved_once`` (its merge lets it through once), how many gates it opened
    (``gates_opened``: gate ids are ``{run_id}-g{n}``) and the contents a human
    rejected (never a gate again)."""

    __slots__ = ("_approved_once", "_gates_opened", "_pending_gate", "_rejected", "_rejected_items")

    def __init__(self) -> None:
        self._pending_gate: PendingGate | None = None
        self._approved_once: tuple[int, int] | None = None
        self._gates_opened = 0
        self._rejected: set[tuple[str, Any]] = set()
        self._rejected_items: list[tuple[str, Any]] = []

    @property
    def pending_gate(self) -> PendingGate | None:
        return self._pending_gate

    @property
    def approved_once(self) -> tuple[int, int] | None:
        return self._approved_once

    @property
    def gates_opened(self) -> int:
        return self._gates_opened

    @property
    def rejected(self) -> AbstractSet[tuple[str, Any]]:
        """The (key, content key) identities a human rejected."""
        return self._rejected

    def remember_rejected(self, key: str, content: Any) -> None:
        """Record a rejected (key, content) so it never reopens a gate."""
        self._rejected_items.append((key, content))
        self._rejected.add((key, content_key(content)))

    def open_gate(self, run_id: str) -> str:
        """One more gate opens: its id (``{run_id}-g{n}``)."""
        self._gates_opened += 1
        return f"{run_id}-g{self._gates_opened}"

    def wait_on(self, gate: PendingGate) -> None:
        """The run pauses on ``gate``."""
        self._pending_gate = gate

    def decide(self, decision: GateDecision) -> None:
        """The gate the run waits on is decided (applied when its merge goes on)."""
        assert self._pending_gate is not None
        self._pending_gate = replace(self._pending_gate, decision=decision)

    def apply_decision(self) -> PendingGate:
        """The run no longer waits: the decided gate, for its merge to apply; an
        approval lets its proposal through once."""
        pg = self._pending_gate
        assert pg is not None and pg.decision is not None
        self._pending_gate = None
        if pg.decision.approved:
            self._approved_once = (pg.effect_index, pg.proposal_index)
        return pg

    def pass_approved(self, pos: tuple[int, int]) -> bool:
        """True (once) when the proposal at ``pos`` is the one a human approved."""
        if self._approved_once is not None and self._approved_once == pos:
            self._approved_once = None
            return True
        return False

    def slice(self) -> dict[str, Any]:
        """This part of the checkpoint."""
        pg = self._pending_gate
        return {
            "rejected": [[k, c] for k, c in self._rejected_items],
            "pending_gate": None
            if pg is None
            else {
                "gate_id": pg.record.gate_id,
                "effect_index": pg.effect_index,
                "proposal_index": pg.proposal_index,
            },
            "gates_opened": self._gates_opened,
        }

    @classmethod
    def of(cls, data: dict[str, Any], run_id: str, gate: GateRecord | None) -> Gating:
        """From a checkpoint; ``gate`` is the record of the gate it waits on. Raises
        ``ResumeError`` when the checkpoint waits on another gate."""
        self = cls.__new__(cls)
        self._rejected_items = [(k, c) for k, c in data.get("rejected", [])]
        self._rejected = {(k, content_key(c)) for k, c in self._rejected_items}
        self._pending_gate = None
        self._approved_once = None
        pg = data["pending_gate"]
        if pg is not None:
            if gate is None or gate.gate_id != pg["gate_id"]:
                raise ResumeError(
                    f"checkpoint of run {run_id} waits on gate {pg['gate_id']}, "
                    f"not {gate.gate_id if gate else None}"
                )
            self._pending_gate = PendingGate(
                gate, int(pg["effect_index"]), int(pg["proposal_index"])
            )
        self._gates_opened = int(data["gates_opened"])
        return self


class Integrity:
    """The facts' Merkle root, kept as the run goes: the leaves not folded yet
    and the ``frontier`` (its scheme is the run's for its whole life)."""

    __slots__ = ("_frontier", "_leaves", "seals")

    def __init__(self, scheme: str = RFC6962) -> None:
        self._leaves: list[bytes] = []
        self._frontier = MerkleFrontier(scheme=scheme)
        self.seals: dict[str, Any] = {}
        """(:data:`SALTED` runs) per fact id, its salt (hex) or, redacted, its
        ``{"commitment": C}``: what its leaf, event and checkpoint row commit with."""

    def seal(self, fact: Fact) -> Any:
        """The fact's salt (a new one for a fact that has none yet) or commitment."""
        seal = self.seals.get(fact.id)
        if seal is None:
            seal = self.seals[fact.id] = os.urandom(32).hex()
        return seal

    def commitment(self, fact: Fact) -> str:
        """The salted commitment of ``fact`` (hex), from its seal."""
        seal = self.seal(fact)
        if isinstance(seal, dict):
            return str(seal["commitment"])
        return commitment(seal, fact_json(fact))

    @property
    def frontier(self) -> MerkleFrontier:
        return self._frontier

    @property
    def scheme(self) -> str:
        """The run's Merkle scheme."""
        return self._frontier.scheme

    @property
    def waiting(self) -> int:
        """How many leaves wait to be folded."""
        return len(self._leaves)

    def leaf_adder(self) -> Callable[[bytes], None]:
        """The append of the leaves not folded yet (the store merge's hot loop)."""
        return self._leaves.append

    def fold_leaves(self) -> None:
        """Fold the leaves gathered so far into the Merkle frontier."""
        self._frontier.extend(self._leaves)
        self._leaves.clear()

    def root(self, facts: list[Fact]) -> str:
        """The Merkle root (hex) of ``facts``, the run's facts in promotion order, kept
        incrementally: each stop or pause hashes only the facts promoted since the
        previous one (and those promoted without a leaf: input, old checkpoints)."""
        frontier = self._frontier
        leaves = self._leaves
        scheme = frontier.scheme
        for i in range(frontier.count + len(leaves), len(facts)):
            if scheme == SALTED:
                leaves.append(commitment_leaf(self.commitment(facts[i])))
            else:
                leaves.append(fact_leaf(facts[i], scheme))
        frontier.extend(leaves)
        leaves.clear()
        return frontier.root()

    def covers(self, facts_count: int) -> bool:
        """True when the frontier and the leaves cover ``facts_count`` facts."""
        return self._frontier.count + len(self._leaves) == facts_count

    def slice(self, facts_count: int) -> dict[str, Any]:
        """This part of the checkpoint: the frontier when the leaves cover every
        fact (else None: a resume recomputes it), and the scheme."""
        merkle = None
        if self.covers(facts_count):
            self.fold_leaves()
            merkle = self._frontier.to_json()
        return {"merkle": merkle, "facts_merkle": self._frontier.scheme}

    @classmethod
    def of(
        cls, data: dict[str, Any], facts_count: int, seals: dict[str, Any] | None = None
    ) -> Integrity:
        """From a checkpoint (absent scheme: LEGACY) and, for a :data:`SALTED` run, its
        facts' ``seals``; a frontier that does not cover ``facts_count`` facts is left
        for the resume to recompute."""
        self = cls.__new__(cls)
        self._leaves = []
        self.seals = {} if seals is None else seals
        named = data.get("facts_merkle")
        named = LEGACY if named is None else named
        merkle = data.get("merkle")
        frontier = None if merkle is None else MerkleFrontier.from_json(merkle)
        if frontier is None or frontier.count != facts_count or frontier.scheme != named:
            frontier = MerkleFrontier(scheme=merkle_scheme(data.get("facts_merkle")))
        self._frontier = frontier
        return self


class Recovery:
    """What a resume must know: what a dead process recorded after the checkpoint
    (``replayed`` facts by id, ``replayed_gates``), so that the replayed cycles do
    not record them twice, and its executions of those cycles (:meth:`execution`,
    what ``Context.recorded_execution`` gives the suggestors); where the resume
    came from (``resumed_from``: ``stop``, ``crash`` or ``queued``: the first leg
    of a fork recorded for a worker);
    whether the checkpoint's objects were frozen (:mod:`engine._cycle.collector`); the
    store's fencing ``epoch`` of this process's claim; and whether checkpoints carry
    every fact (``facts_inline``: after a crash replay, or from one that did)."""

    __slots__ = (
        "_epoch",
        "_executions",
        "_facts_inline",
        "_frozen_on_load",
        "_replayed",
        "_replayed_gates",
        "_resumed_from",
    )

    def __init__(self, *, facts_inline: bool = False) -> None:
        self._replayed: dict[str, dict[str, Any]] = {}
        self._replayed_gates: set[str] = set()
        self._executions: dict[tuple[int, str], dict[str, Any]] = {}
        self._resumed_from = "stop"
        self._frozen_on_load = False
        self._epoch = 0
        self._facts_inline = facts_inline

    @property
    def replaying(self) -> bool:
        """True while replayed facts or gates wait to be met again."""
        return bool(self._replayed or self._replayed_gates)

    @property
    def replayed(self) -> Mapping[str, dict[str, Any]]:
        """The facts the dead process recorded after the checkpoint, by id (their
        salts reused by a format-2 run's replay)."""
        return self._replayed

    @property
    def resumed_from(self) -> str:
        return self._resumed_from

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def facts_inline(self) -> bool:
        return self._facts_inline

    def claimed(self, epoch: int) -> None:
        """This process claimed the run in the store at fencing ``epoch``."""
        self._epoch = epoch

    def loaded(self, froze: bool) -> None:
        """The run was loaded; ``froze``: its objects were frozen then."""
        self._frozen_on_load = froze

    def take_frozen(self) -> bool:
        """Whether the load froze the run's objects (for the driver's freezer to
        adopt), forgotten here."""
        froze = self._frozen_on_load
        self._frozen_on_load = False
        return froze

    def after_crash(self) -> None:
        """The run resumes after its process died: its checkpoints carry every fact
        from now on (the replayed cycles' facts are chunked out of order)."""
        self._resumed_from = "crash"
        self._facts_inline = True

    def from_queue(self) -> None:
        """The run's first leg starts here: a fork recorded ``queued`` for a worker."""
        self._resumed_from = "queued"

    def replays_fact(self, fid: str, payload: dict[str, Any]) -> None:
        """The dead process recorded fact ``fid`` (its event's ``payload``)."""
        self._replayed[fid] = payload

    def replays_execution(self, cycle: int, suggestor: str, payload: dict[str, Any]) -> None:
        """The dead process recorded ``suggestor``'s execution in ``cycle`` (its
        ``suggestor_executed`` event's ``payload``; the first one kept)."""
        self._executions.setdefault((cycle, suggestor), payload)

    @property
    def recorded_executions(self) -> bool:
        """Whether the dead process recorded executions this recovery runs again."""
        return bool(self._executions)

    def execution(self, cycle: int, suggestor: str) -> dict[str, Any] | None:
        """What the dead process recorded of ``suggestor``'s execution in ``cycle``,
        or None (see :meth:`replays_execution`)."""
        return self._executions.get((cycle, suggestor))

    def replays_gate(self, gate_id: str) -> None:
        """The dead process recorded the resume of gate ``gate_id``."""
        self._replayed_gates.add(gate_id)

    def drop_replayed(self, events: list[AuditEvent]) -> tuple[list[AuditEvent], list[str]]:
        """``events`` without those a crashed process recorded already, and the ids
        of the replayed facts that differ from their record.

        A ``fact_promoted`` whose fact (id and content) is in :attr:`replayed` and a
        gate ``run_resumed`` of a gate in :attr:`replayed_gates` are dropped once
        each. A replayed fact whose content differs (a non-deterministic suggestor)
        is dropped too and its id returned: a fact id is recorded at most once per
        run, and the caller stops the run (``Error(storage)``).
        """
        kept: list[AuditEvent] = []
        differ: list[str] = []
        for ev in events:
            kind = ev.kind
            if kind == "fact_promoted":
                fid = ev.payload.get("id", "")
                recorded = self._replayed.pop(fid, None)
                if recorded is not None:
                    recorded = {k: v for k, v in recorded.items() if k != "salt"}  # format 2
                    if recorded != json.loads(json.dumps(ev.payload)):
                        differ.append(str(fid))
                    continue
            elif (
                kind == "run_resumed"
                and "gate_id" in ev.payload
                and ev.payload["gate_id"] in self._replayed_gates
            ):
                self._replayed_gates.discard(ev.payload["gate_id"])
                continue
            kept.append(ev)
        return kept, differ
