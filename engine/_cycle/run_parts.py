"""The owned parts of a :class:`~engine._cycle.run.Run`, each with its own mutators
and its own slice of the checkpoint: :class:`Cursor` (where the run is),
:class:`Spend` (what it used), :class:`Gating` (its human gates),
:class:`Integrity` (the facts' Merkle root as it goes) and :class:`Recovery`
(what a resume after a crash must not record twice)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.criterion import CriterionReport
from engine.effect import Usage
from engine.errors import ResumeError
from engine.facts import Fact, Proposal, content_key, proposal_to_dict
from engine.hashing.merkle import LEGACY, MerkleFrontier, fact_leaf, merkle_scheme
from engine.hitl import GateDecision
from engine.result import ContinuationRecord
from engine.stop import StopReason, parse_stop_reason, stop_reason_to_dict
from engine.store import AuditEvent, GateRecord


@dataclass
class PendingGate:
    """The gate a paused run waits on, where its proposal sits in the merge."""

    record: GateRecord
    effect_index: int
    proposal_index: int
    decision: GateDecision | None = None


class Cursor:
    """Where the run is: ``cycle`` (0 before the first), the ``dirty`` keys changed
    since the last cycle, the suggestors whose execution was ``cut`` (eligible again
    in the next cycle), the merge in progress (``merge_effects`` from
    ``merge_pos``), the facts promoted this cycle (``cycle_new``), the suggestors
    ``admitted`` by the invocation budget, the stop signals pending and the
    criteria reports of the last judgement."""

    __slots__ = (
        "admitted",
        "criteria_reports",
        "cut",
        "cycle",
        "cycle_new",
        "dirty",
        "last_suggestors",
        "merge_effects",
        "merge_pos",
        "pending_signals",
    )

    def __init__(self) -> None:
        self.cycle = 0
        self.dirty: set[str] = set()
        self.cut: list[str] = []
        self.last_suggestors: tuple[str, ...] = ()
        self.pending_signals: list[StopReason] = []
        self.merge_effects: list[tuple[str, list[Proposal]]] = []
        self.merge_pos: tuple[int, int] = (0, 0)
        self.cycle_new: list[Fact] = []
        self.admitted: list[int] | None = None
        self.criteria_reports: tuple[CriterionReport, ...] = ()

    def slice(self) -> dict[str, Any]:
        """This part of the checkpoint."""
        return {
            "cycle": self.cycle,
            "last_suggestors": list(self.last_suggestors),
            "dirty": sorted(self.dirty),
            "cut": list(self.cut),
            "pending_signals": [stop_reason_to_dict(s) for s in self.pending_signals],
            "merge_effects": [
                [name, [proposal_to_dict(p) for p in proposals]]
                for name, proposals in self.merge_effects
            ],
            "merge_pos": list(self.merge_pos),
            "cycle_new": [f.id for f in self.cycle_new],
        }

    @classmethod
    def of(cls, data: dict[str, Any], facts: list[Fact]) -> Cursor:
        """From a checkpoint whose facts are ``facts`` (raises KeyError, TypeError,
        ValueError or ``ResumeError`` when it is corrupted)."""
        self = cls.__new__(cls)
        self.cycle = int(data["cycle"])
        self.last_suggestors = tuple(data["last_suggestors"])
        self.dirty = set(data["dirty"])
        cut = data.get("cut", [])  # absent from checkpoints written before it was kept
        if type(cut) is not list:
            raise ValueError(f"cut is a {type(cut).__name__}, not a list")
        self.cut = [str(n) for n in cut]
        self.pending_signals = [parse_stop_reason(s) for s in data["pending_signals"]]
        self.merge_effects = [
            (
                str(name),
                [
                    Proposal(
                        p["key"], p["content"], float(p["confidence"]), tuple(p["parents"]), p["id"]
                    )
                    for p in proposals
                ],
            )
            for name, proposals in data["merge_effects"]
        ]
        self.merge_pos = (int(data["merge_pos"][0]), int(data["merge_pos"][1]))
        new_ids = set(data["cycle_new"])
        self.cycle_new = [f for f in facts if f.id in new_ids] if new_ids else []
        if len(self.cycle_new) != len(new_ids):
            raise ResumeError("corrupted checkpoint: cycle_new names unknown facts")
        self.admitted = None
        self.criteria_reports = ()
        return self


class Spend:
    """What the run used: ``usage`` (tokens, USD), ``invocations`` in all and
    ``invocations_by`` suggestor, the ``history`` of invocations, error
    ``streaks``, the ``last_error``, facts ``dropped``, the budgets an ``on_stop``
    continued past (``exhausted_overrides``, ``continuations``), and time: the
    current leg's start (``leg_started``, the engine's clock, seconds; and
    ``wall_started``, unix seconds) and the ms of the legs before
    (``elapsed_before_ms``)."""

    __slots__ = (
        "continuations",
        "dropped",
        "elapsed_before_ms",
        "exhausted_overrides",
        "history",
        "invocations",
        "invocations_by",
        "last_error",
        "leg_started",
        "streaks",
        "usage",
        "wall_started",
    )

    def __init__(self) -> None:
        self.usage = Usage()
        self.invocations = 0
        self.invocations_by: dict[str, int] = {}
        self.history: list[str] = []
        self.streaks: dict[str, int] = {}
        self.last_error: str | None = None
        self.dropped = 0
        self.exhausted_overrides: set[str] = set()
        self.continuations: list[ContinuationRecord] = []
        self.leg_started = 0.0
        self.wall_started = 0.0
        self.elapsed_before_ms = 0

    def slice(self) -> dict[str, Any]:
        """This part of the checkpoint."""
        u = self.usage
        return {
            "usage": [u.input_tokens, u.output_tokens, u.cost_usd],
            "invocations": self.invocations,
            "invocations_by": self.invocations_by,
            "history": self.history,
            "streaks": self.streaks,
            "last_error": self.last_error,
            "elapsed_ms": self.elapsed_before_ms,
            "continuations": [
                [k.cycle, list(k.signals), k.note, k.budget_raised] for k in self.continuations
            ],
        }

    @classmethod
    def of(cls, data: dict[str, Any]) -> Spend:
        """From a checkpoint (raises KeyError, TypeError or ValueError)."""
        self = cls.__new__(cls)
        i, o, c = data["usage"]
        self.usage = Usage(int(i), int(o), float(c))
        self.invocations = int(data["invocations"])
        self.invocations_by = {str(k): int(v) for k, v in data["invocations_by"].items()}
        self.history = [str(h) for h in data["history"]]
        self.streaks = {str(k): int(v) for k, v in data["streaks"].items()}
        self.last_error = data["last_error"]
        self.elapsed_before_ms = int(data["elapsed_ms"])
        self.continuations = [
            ContinuationRecord(int(c), tuple(s), str(n), bool(r))
            for c, s, n, r in data["continuations"]
        ]
        self.dropped = 0
        self.exhausted_overrides = set()
        self.leg_started = self.wall_started = 0.0
        return self


class Gating:
    """The run's human gates: the ``pending_gate`` it waits on, the proposal
    ``approved_once`` (its merge lets it through once), how many gates it opened
    (``gates_opened``: gate ids are ``{run_id}-g{n}``) and the contents a human
    rejected (never a gate again)."""

    __slots__ = ("approved_once", "gates_opened", "pending_gate", "rejected", "rejected_items")

    def __init__(self) -> None:
        self.pending_gate: PendingGate | None = None
        self.approved_once: tuple[int, int] | None = None
        self.gates_opened = 0
        self.rejected: set[tuple[str, Any]] = set()
        self.rejected_items: list[tuple[str, Any]] = []

    def remember_rejected(self, key: str, content: Any) -> None:
        """Record a rejected (key, content) so it never reopens a gate."""
        self.rejected_items.append((key, content))
        self.rejected.add((key, content_key(content)))

    def slice(self) -> dict[str, Any]:
        """This part of the checkpoint."""
        pg = self.pending_gate
        return {
            "rejected": [[k, c] for k, c in self.rejected_items],
            "pending_gate": None
            if pg is None
            else {
                "gate_id": pg.record.gate_id,
                "effect_index": pg.effect_index,
                "proposal_index": pg.proposal_index,
            },
            "gates_opened": self.gates_opened,
        }

    @classmethod
    def of(cls, data: dict[str, Any], run_id: str, gate: GateRecord | None) -> Gating:
        """From a checkpoint; ``gate`` is the record of the gate it waits on. Raises
        ``ResumeError`` when the checkpoint waits on another gate."""
        self = cls.__new__(cls)
        self.rejected_items = [(k, c) for k, c in data.get("rejected", [])]
        self.rejected = {(k, content_key(c)) for k, c in self.rejected_items}
        self.pending_gate = None
        self.approved_once = None
        pg = data["pending_gate"]
        if pg is not None:
            if gate is None or gate.gate_id != pg["gate_id"]:
                raise ResumeError(
                    f"checkpoint of run {run_id} waits on gate {pg['gate_id']}, "
                    f"not {gate.gate_id if gate else None}"
                )
            self.pending_gate = PendingGate(
                gate, int(pg["effect_index"]), int(pg["proposal_index"])
            )
        self.gates_opened = int(data["gates_opened"])
        return self


class Integrity:
    """The facts' Merkle root, kept as the run goes: the ``leaves`` not folded yet
    and the ``frontier`` (its scheme is the run's for its whole life)."""

    __slots__ = ("frontier", "leaves")

    def __init__(self) -> None:
        self.leaves: list[bytes] = []
        self.frontier = MerkleFrontier()

    def fold_leaves(self) -> None:
        """Fold the leaves gathered so far into the Merkle frontier."""
        self.frontier.extend(self.leaves)
        self.leaves.clear()

    def root(self, facts: list[Fact]) -> str:
        """The Merkle root (hex) of ``facts``, the run's facts in promotion order, kept
        incrementally: each stop or pause hashes only the facts promoted since the
        previous one (and those promoted without a leaf: input, old checkpoints)."""
        frontier = self.frontier
        leaves = self.leaves
        scheme = frontier.scheme
        for i in range(frontier.count + len(leaves), len(facts)):
            leaves.append(fact_leaf(facts[i], scheme))
        frontier.extend(leaves)
        leaves.clear()
        return frontier.root()

    def covers(self, facts_count: int) -> bool:
        """True when the frontier and the leaves cover ``facts_count`` facts."""
        return self.frontier.count + len(self.leaves) == facts_count

    def slice(self, facts_count: int) -> dict[str, Any]:
        """This part of the checkpoint: the frontier when the leaves cover every
        fact (else None: a resume recomputes it), and the scheme."""
        merkle = None
        if self.covers(facts_count):
            self.fold_leaves()
            merkle = self.frontier.to_json()
        return {"merkle": merkle, "facts_merkle": self.frontier.scheme}

    @classmethod
    def of(cls, data: dict[str, Any], facts_count: int) -> Integrity:
        """From a checkpoint (absent scheme: LEGACY); a frontier that does not cover
        ``facts_count`` facts is left for the resume to recompute."""
        self = cls.__new__(cls)
        self.leaves = []
        named = data.get("facts_merkle")
        named = LEGACY if named is None else named
        merkle = data.get("merkle")
        frontier = None if merkle is None else MerkleFrontier.from_json(merkle)
        if frontier is None or frontier.count != facts_count or frontier.scheme != named:
            frontier = MerkleFrontier(scheme=merkle_scheme(data.get("facts_merkle")))
        self.frontier = frontier
        return self


@dataclass(slots=True, eq=False)
class Recovery:
    """What a resume must know: what a dead process recorded after the checkpoint
    (``replayed`` facts by id, ``replayed_gates``), so that the replayed cycles do
    not record them twice; where the resume came from (``resumed_from``: ``stop`` or ``crash``);
    whether the checkpoint's objects were frozen (:mod:`engine._cycle.collector`); the
    store's fencing ``epoch`` of this process's claim; and whether checkpoints carry
    every fact (``facts_inline``: after a crash replay, or from one that did)."""

    replayed: dict[str, dict[str, Any]] = field(default_factory=dict)
    replayed_gates: set[str] = field(default_factory=set)
    resumed_from: str = "stop"
    frozen_on_load: bool = False
    epoch: int = 0
    facts_inline: bool = False

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
                recorded = self.replayed.pop(fid, None)
                if recorded is not None:
                    if recorded != json.loads(json.dumps(ev.payload)):
                        differ.append(str(fid))
                    continue
            elif (
                kind == "run_resumed"
                and "gate_id" in ev.payload
                and ev.payload["gate_id"] in self.replayed_gates
            ):
                self.replayed_gates.discard(ev.payload["gate_id"])
                continue
            kept.append(ev)
        return kept, differ
