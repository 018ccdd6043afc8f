"""The mutable state of one run, and its checkpoint (a JSON-ready snapshot).

A checkpoint holds everything needed to go on from a pause or a resumable stop
in another process: the facts, counters, usage, dirty keys, the suggestors whose
execution was cut (eligible again in the next cycle), the rest of the cycle's
merge and the pending gate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from engine.budget import Budget
from engine.context import Context
from engine.criterion import CriterionReport
from engine.effect import Usage
from engine.errors import ResumeError
from engine.facts import Fact, Proposal, Provenance, content_key
from engine.hitl import GateDecision
from engine.integrity import MerkleFrontier, merkle_scheme
from engine.result import ContinuationRecord
from engine.stop import StopReason, parse_stop_reason, stop_reason_to_dict
from engine.store import AuditEvent, BatchItem, GateRecord

CHECKPOINT_VERSION = 2
"""Version 2 stores facts as compact rows (see :func:`fact_row`): half the JSON of
version 1's dicts, and rows rebuild with no per-field lookups (resume ≤ 100 ms at 10k facts)."""


@dataclass
class PendingGate:
    """The gate a paused run waits on, where its proposal sits in the merge."""

    record: GateRecord
    effect_index: int
    proposal_index: int
    decision: GateDecision | None = None


class RunState:
    """Everything that changes while a run goes on (engine-internal)."""

    def __init__(self, run_id: str, budget: Budget) -> None:
        self.run_id = run_id
        self.budget = budget
        self.context = Context()
        self.cycle = 0
        self.usage = Usage()
        self.invocations = 0
        self.invocations_by: dict[str, int] = {}
        self.history: list[str] = []
        self.streaks: dict[str, int] = {}
        self.last_error: str | None = None
        self.last_suggestors: tuple[str, ...] = ()
        self.dirty: set[str] = set()
        # eligible suggestors whose execution was cut (time budget, cancel, revoked
        # task, invocation budget): eligible again in the next cycle, after a resume too
        self.cut: list[str] = []
        self.rejected: set[tuple[str, Any]] = set()
        self.rejected_items: list[tuple[str, Any]] = []
        self.pending_signals: list[StopReason] = []
        self.merge_effects: list[tuple[str, list[Proposal]]] = []
        self.merge_pos: tuple[int, int] = (0, 0)
        self.cycle_new: list[Fact] = []
        self.admitted: list[int] | None = None
        self.pending_gate: PendingGate | None = None
        self.approved_once: tuple[int, int] | None = None
        self.gates_opened = 0
        self.dropped = 0
        self.exhausted_overrides: set[str] = set()
        self.continuations: list[ContinuationRecord] = []
        self.criteria_reports: tuple[CriterionReport, ...] = ()
        self.events: list[BatchItem] = []  # PromotedFacts batches among them
        self.leg_started = 0.0
        self.wall_started = 0.0
        self.elapsed_before_ms = 0
        # the facts' Merkle root, kept as it goes: leaves not folded yet, and the frontier
        self.leaves: list[bytes] = []
        self.frontier = MerkleFrontier()
        # crash recovery: what a dead process recorded after the checkpoint, so that
        # the replayed cycles do not record the same facts or decision twice
        self.replayed: dict[str, dict[str, Any]] = {}
        self.replayed_gates: set[str] = set()
        self.resumed_from = "stop"
        self.frozen_on_load = False  # its checkpoint's objects were frozen (engine.collector)
        self.epoch = 0  # the store's fencing epoch of this process's claim on the run
        # checkpoints carry every fact (not a reference to the store's fact chunks):
        # after a crash replay, or from a checkpoint that carried them
        self.facts_inline = False

    # -- checkpoint --------------------------------------------------------------
    def to_checkpoint(
        self, suggestors: Sequence[str], *, with_facts: bool = True
    ) -> dict[str, Any]:
        """A JSON-ready snapshot of the run: its facts in promotion order as rows, or
        with ``with_facts=False`` only their number (``"facts": None``,
        ``"facts_count"``: a store that keeps fact chunks fills them in)."""
        pg = self.pending_gate
        return {
            "version": CHECKPOINT_VERSION,
            "run_id": self.run_id,
            "suggestors": list(suggestors),
            "budget": self.budget.model_dump(mode="json"),
            "facts": [fact_row(f) for f in self.context] if with_facts else None,
            "facts_count": len(self.context),
            "cycle": self.cycle,
            "usage": [self.usage.input_tokens, self.usage.output_tokens, self.usage.cost_usd],
            "invocations": self.invocations,
            "invocations_by": self.invocations_by,
            "history": self.history,
            "streaks": self.streaks,
            "last_error": self.last_error,
            "last_suggestors": list(self.last_suggestors),
            "dirty": sorted(self.dirty),
            "cut": list(self.cut),
            "rejected": [[k, c] for k, c in self.rejected_contents()],
            "pending_signals": [stop_reason_to_dict(s) for s in self.pending_signals],
            "merge_effects": [
                [name, [_proposal_to_dict(p) for p in proposals]]
                for name, proposals in self.merge_effects
            ],
            "merge_pos": list(self.merge_pos),
            "cycle_new": [f.id for f in self.cycle_new],
            "pending_gate": None
            if pg is None
            else {
                "gate_id": pg.record.gate_id,
                "effect_index": pg.effect_index,
                "proposal_index": pg.proposal_index,
            },
            "gates_opened": self.gates_opened,
            "elapsed_ms": self.elapsed_before_ms,
            "continuations": [
                [k.cycle, list(k.signals), k.note, k.budget_raised] for k in self.continuations
            ],
            "merkle": self._merkle(),
            "facts_merkle": self.frontier.scheme,
        }

    def _merkle(self) -> list[object] | None:
        """The facts' Merkle frontier, when the leaves cover every fact (else None:
        a resume recomputes it)."""
        if self.frontier.count + len(self.leaves) != len(self.context):
            return None
        self.fold_leaves()
        return self.frontier.to_json()

    def fold_leaves(self) -> None:
        """Fold the leaves gathered so far into the Merkle frontier."""
        self.frontier.extend(self.leaves)
        self.leaves.clear()

    def rejected_contents(self) -> list[tuple[str, Any]]:
        """The (key, content) pairs a human rejected in this run."""
        return list(self.rejected_items)

    def remember_rejected(self, key: str, content: Any) -> None:
        """Record a rejected (key, content) so it never reopens a gate."""
        self.rejected_items.append((key, content))
        self.rejected.add((key, content_key(content)))

    @staticmethod
    def from_checkpoint(data: dict[str, Any], gate: GateRecord | None = None) -> RunState:
        """Rebuild a run from :meth:`to_checkpoint`; raises ``ResumeError`` if corrupted."""
        try:
            if data.get("version") != CHECKPOINT_VERSION:
                raise ResumeError(f"checkpoint version {data.get('version')!r} is not supported")
            st = RunState(str(data["run_id"]), Budget.model_validate(data["budget"]))
            ctx = st.context
            rows = data["facts"]
            if rows and type(rows[0]) is dict:
                # fact dicts first: a fork's inherited facts (engine.fork), also in
                # its store's fact chunks; then the rows of the facts promoted since
                dicts = _dict_prefix(rows)
                _load_fact_dicts(ctx, rows[:dicts] if dicts < len(rows) else rows)
                if dicts < len(rows):
                    _load_facts(ctx, rows[dicts:])
            else:
                _load_facts(ctx, rows)
            st.facts_inline = not data.get("facts_from_chunks", False)
            st.cycle = int(data["cycle"])
            ctx.cycle = st.cycle
            i, o, c = data["usage"]
            st.usage = Usage(int(i), int(o), float(c))
            st.invocations = int(data["invocations"])
            st.invocations_by = {str(k): int(v) for k, v in data["invocations_by"].items()}
            st.history = [str(h) for h in data["history"]]
            st.streaks = {str(k): int(v) for k, v in data["streaks"].items()}
            st.last_error = data["last_error"]
            st.last_suggestors = tuple(data["last_suggestors"])
            st.dirty = set(data["dirty"])
            cut = data.get("cut", [])  # absent from checkpoints written before it was kept
            if type(cut) is not list:
                raise ValueError(f"cut is a {type(cut).__name__}, not a list")
            st.cut = [str(n) for n in cut]
            for key, content in data.get("rejected", []):
                st.remember_rejected(key, content)
            st.pending_signals = [parse_stop_reason(s) for s in data["pending_signals"]]
            st.merge_effects = [
                (str(name), [_proposal_from_dict(p) for p in proposals])
                for name, proposals in data["merge_effects"]
            ]
            st.merge_pos = (int(data["merge_pos"][0]), int(data["merge_pos"][1]))
            new_ids = set(data["cycle_new"])
            st.cycle_new = [f for f in ctx._facts if f.id in new_ids] if new_ids else []
            if len(st.cycle_new) != len(new_ids):
                raise ResumeError("corrupted checkpoint: cycle_new names unknown facts")
            pg = data["pending_gate"]
            if pg is not None:
                if gate is None or gate.gate_id != pg["gate_id"]:
                    raise ResumeError(
                        f"checkpoint of run {st.run_id} waits on gate {pg['gate_id']}, "
                        f"not {gate.gate_id if gate else None}"
                    )
                st.pending_gate = PendingGate(
                    gate, int(pg["effect_index"]), int(pg["proposal_index"])
                )
            # the facts root's scheme is the run's for its whole life (absent: LEGACY)
            st.frontier = MerkleFrontier(scheme=merkle_scheme(data.get("facts_merkle")))
            merkle = data.get("merkle")
            if merkle is not None:
                frontier = MerkleFrontier.from_json(merkle)
                if frontier.count == len(ctx) and frontier.scheme == st.frontier.scheme:
                    st.frontier = frontier
            st.gates_opened = int(data["gates_opened"])
            st.elapsed_before_ms = int(data["elapsed_ms"])
            st.continuations = [
                ContinuationRecord(int(c), tuple(s), str(n), bool(r))
                for c, s, n, r in data["continuations"]
            ]
            return st
        except ResumeError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ResumeError(f"corrupted checkpoint: {type(exc).__name__}: {exc}") from exc


def fact_row(f: Fact) -> list[Any]:
    """A fact as a checkpoint row: ``[id, key, content, confidence, suggestor, cycle,
    proposal_id, parents]``."""
    p = f.provenance
    return [f.id, f.key, f.content, f.confidence, p[0], p[1], p[2], list(p[3])]


def _dict_prefix(rows: list[Any]) -> int:
    """How many of ``rows`` are fact dicts: they come first (a fork's inherited
    facts), so a binary search finds the end (a row out of place fails its load)."""
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi) // 2
        if type(rows[mid]) is dict:
            lo = mid + 1
        else:
            hi = mid
    return lo


def _load_fact_dicts(ctx: Context, dicts: list[Any]) -> None:
    """Promote facts given as ``fact_to_dict`` output into ``ctx``, in order."""
    new = tuple.__new__  # as the engine's merge: skips the named tuples' own __new__
    fact_of = itemgetter("id", "key", "content", "confidence", "provenance")
    provenance_of = itemgetter("suggestor", "cycle", "proposal_id", "parents")
    built: list[Fact] = []
    push = built.append
    for fid, key, content, confidence, p in map(fact_of, dicts):
        sug, cycle, pid, parents = provenance_of(p)
        if type(fid) is not str or type(key) is not str or type(cycle) is not int:
            raise ValueError(f"bad fact {fid!r}")
        prov = new(Provenance, (sug, cycle, pid, tuple(parents)))
        push(new(Fact, (fid, key, content, float(confidence), prov)))
    _index_facts(ctx, built)


def _load_facts(ctx: Context, rows: list[Any]) -> None:
    """Promote checkpoint rows into ``ctx`` in order (the hot part of a resume)."""
    new = tuple.__new__
    built: list[Fact] = []
    push = built.append
    for fid, key, content, confidence, sug, cycle, pid, parents in rows:
        if type(fid) is not str or type(key) is not str or type(cycle) is not int:
            raise ValueError(f"bad fact row {fid!r}")
        prov = new(Provenance, (sug, cycle, pid, tuple(parents)))
        push(new(Fact, (fid, key, content, float(confidence), prov)))
    _index_facts(ctx, built)


def _index_facts(ctx: Context, facts: list[Fact]) -> None:
    """Append loaded facts to ``ctx`` and its indexes (by key, identities)."""
    ctx._facts.extend(facts)
    by_key = ctx._by_key
    identities = ctx._identities
    for fact in facts:
        key = fact[1]
        bucket = by_key.get(key)
        if bucket is None:
            by_key[key] = [fact]
        else:
            bucket.append(fact)
        content = fact[2]
        c = type(content)
        identities.add(
            (key, content if c is str or c is int or c is float else content_key(content))
        )
    ctx._by_id.clear()
    ctx._tuples.clear()


def drop_replayed(st: RunState, events: list[AuditEvent]) -> tuple[list[AuditEvent], list[str]]:
    """``events`` without those a crashed process recorded already (crash recovery),
    and the ids of the replayed facts that differ from their record.

    A ``fact_promoted`` whose fact (id and content) is in ``st.replayed`` and a
    gate ``run_resumed`` of a gate in ``st.replayed_gates`` are dropped once each.
    A replayed fact whose content differs (a non-deterministic suggestor) is
    dropped too and its id returned: a fact id is recorded at most once per run,
    and the caller stops the run (``Error(storage)``).
    """
    kept: list[AuditEvent] = []
    differ: list[str] = []
    for ev in events:
        kind = ev.kind
        if kind == "fact_promoted":
            fid = ev.payload.get("id", "")
            recorded = st.replayed.pop(fid, None)
            if recorded is not None:
                if recorded != json.loads(json.dumps(ev.payload)):
                    differ.append(str(fid))
                continue
        elif (
            kind == "run_resumed"
            and "gate_id" in ev.payload
            and ev.payload["gate_id"] in st.replayed_gates
        ):
            st.replayed_gates.discard(ev.payload["gate_id"])
            continue
        kept.append(ev)
    return kept, differ


def _proposal_to_dict(p: Proposal) -> dict[str, Any]:
    return {
        "key": p.key,
        "content": p.content,
        "confidence": p.confidence,
        "parents": list(p.parents),
        "id": p.id,
    }


def _proposal_from_dict(d: dict[str, Any]) -> Proposal:
    return Proposal(d["key"], d["content"], float(d["confidence"]), tuple(d["parents"]), d["id"])
