"""A run in memory, in owned parts, and its checkpoint (a JSON-ready snapshot).

:class:`Run` is the run's identity (id, budget), its facts (a :class:`Context`
and the engine's :class:`~engine.context.FactIndex` behind it), the events not
recorded yet, and five parts (:mod:`engine._cycle.run_parts`), each with its own
mutators and its own slice of the checkpoint:

- :class:`Cursor`: where the run is: its cycle, the keys changed, the work cut,
  the merge in progress, the signals and criteria of the last judgement;
- :class:`Spend`: what it used: tokens and USD, invocations, streaks, time, the
  budget continuations;
- :class:`Gating`: its human gates: the one it waits on, the proposal approved,
  the contents rejected;
- :class:`Integrity`: the facts' Merkle root, kept as it goes;
- :class:`Recovery`: what a resume after a crash must not record twice, and the
  fencing epoch of this process's claim.

A checkpoint holds everything needed to go on from a pause or a resumable stop in
another process; it is the sum of the slices (:data:`CHECKPOINT_VERSION`).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import Any, Protocol

from engine._cycle.run_parts import Cursor, Gating, Integrity, PendingGate, Recovery, Spend
from engine.budget import Budget
from engine.context import Context, FactIndex
from engine.errors import ResumeError
from engine.facts import Fact, Provenance, fact_row
from engine.hashing.merkle import SALTED
from engine.store import BatchItem, GateRecord

__all__ = [
    "CHECKPOINT_VERSION",
    "Cursor",
    "Gating",
    "Integrity",
    "PendingGate",
    "Recovery",
    "Run",
    "Spend",
]


class Listener(Protocol):
    """Who a streamed run hands its events to (:mod:`engine._cycle.streaming`)."""

    def recorded(self, run_id: str, events: Sequence[BatchItem], last_seq: int | None) -> None:
        """``events`` were recorded, the last of them at ``last_seq`` in the run's
        chain (None: not numbered, the engine has no store)."""


CHECKPOINT_VERSION = 2
"""Version 2 stores facts as compact rows (see :func:`fact_row`): half the JSON of
version 1's dicts, and rows rebuild with no per-field lookups (resume ≤ 100 ms at 10k facts)."""

_ORDER = [
    "version",
    "run_id",
    "suggestors",
    "budget",
    "facts",
    "facts_count",
    "cycle",
    "usage",
    "invocations",
    "invocations_by",
    "history",
    "streaks",
    "last_error",
    "last_suggestors",
    "dirty",
    "cut",
    "rejected",
    "pending_signals",
    "merge_effects",
    "merge_pos",
    "cycle_new",
    "pending_gate",
    "gates_opened",
    "elapsed_ms",
    "continuations",
    "merkle",
    "facts_merkle",
]
"""The checkpoint's keys in the order it has always been written (its text is hashed)."""


class Run:
    """Everything that changes while a run goes on (engine-internal): ``run_id``,
    ``budget``, the ``facts`` (:class:`FactIndex`) behind its ``context``, the
    ``events`` gathered for the next batch (``PromotedFacts`` among them) and its
    parts ``cursor``, ``spend``, ``gating``, ``integrity`` and ``recovery``. Only
    its budget and its events change after it is built, through its verbs."""

    __slots__ = (
        "_budget",
        "_events",
        "context",
        "cursor",
        "facts",
        "gating",
        "integrity",
        "listener",
        "recovery",
        "run_id",
        "spend",
    )

    def __init__(self, run_id: str, budget: Budget) -> None:
        self.run_id = run_id
        self._budget = budget
        self.facts = FactIndex()
        self.context = Context(self.facts)
        self._events: list[BatchItem] = []
        self.listener: Listener | None = None
        """Who streams the run's events as they are recorded (None: nobody)."""
        self.cursor = Cursor()
        self.spend = Spend()
        self.gating = Gating()
        self.integrity = Integrity()
        self.recovery = Recovery()

    @property
    def budget(self) -> Budget:
        return self._budget

    @property
    def events(self) -> Sequence[BatchItem]:
        """The events gathered for the next batch."""
        return self._events

    def commit_by_salts(self) -> None:
        """The facts of this new run are committed by salted commitments (a store of
        chain format 2): its facts tree is :data:`SALTED`'s."""
        self.integrity = Integrity(SALTED)

    def stream_to(self, listener: Listener | None) -> None:
        """Hand the run's events to ``listener`` as they are recorded from now on."""
        self.listener = listener

    def adopt_budget(self, budget: Budget) -> None:
        """The run goes on under ``budget`` (a continuation's, a resume's)."""
        self._budget = budget

    def record(self, event: BatchItem) -> None:
        """``event`` joins the next batch."""
        self._events.append(event)

    def withdraw(self, event: BatchItem) -> None:
        """``event``, the last one gathered, is not recorded after all (an empty batch)."""
        if self._events and self._events[-1] is event:
            self._events.pop()

    def take_events(self) -> list[BatchItem]:
        """The events gathered so far, handed to the store's batch (none left)."""
        events = self._events
        self._events = []
        return events

    def to_checkpoint(
        self, suggestors: Sequence[str], *, with_facts: bool = True
    ) -> dict[str, Any]:
        """A JSON-ready snapshot of the run: its facts in promotion order as rows, or
        with ``with_facts=False`` only their number (``"facts": None``,
        ``"facts_count"``: a store that keeps fact chunks fills them in)."""
        facts = self.facts.facts
        parts: dict[str, Any] = {
            "version": CHECKPOINT_VERSION,
            "run_id": self.run_id,
            "suggestors": list(suggestors),
            "budget": self.budget.model_dump(mode="json"),
            "facts": self._rows(facts) if with_facts else None,
            "facts_count": len(facts),
            **self.cursor.slice(),
            **self.spend.slice(),
            **self.gating.slice(),
            **self.integrity.slice(len(facts)),
        }
        return {k: parts[k] for k in _ORDER}

    def _rows(self, facts: Sequence[Fact]) -> list[list[Any]]:
        """The facts as checkpoint rows; of chain format 2 each with its seal last."""
        if self.integrity.scheme != SALTED:
            return [fact_row(f) for f in facts]
        seal = self.integrity.seal
        return [[*fact_row(f), seal(f)] for f in facts]

    @classmethod
    def from_checkpoint(
        cls,
        data: dict[str, Any],
        gate: GateRecord | None = None,
        suggestors: Sequence[str] | None = None,
    ) -> Run:
        """Rebuild a run from :meth:`to_checkpoint`, to go on with ``suggestors`` (the
        engine's; None: not checked): raises ``ResumeError`` naming the suggestors
        missing or extra, or when the checkpoint is corrupted."""
        try:
            recorded = set(data.get("suggestors", []))
            if suggestors is not None and recorded != set(suggestors):
                missing = sorted(recorded - set(suggestors))
                extra = sorted(set(suggestors) - recorded)
                raise ResumeError(
                    "the engine's suggestors differ from the run's: "
                    f"missing {missing or 'none'}, extra {extra or 'none'}"
                )
            if data.get("version") != CHECKPOINT_VERSION:
                raise ResumeError(f"checkpoint version {data.get('version')!r} is not supported")
            self = cls.__new__(cls)  # its parts from the checkpoint, not from scratch
            self.run_id = str(data["run_id"])
            self._budget = Budget.model_validate(data["budget"])
            rows = data["facts"]
            # fact dicts first: a fork's inherited facts (engine.fork), also in its
            # store's fact chunks; then the rows (fact_row) of the facts promoted since
            dicts = dict_prefix(rows) if rows and type(rows[0]) is dict else 0
            facts = facts_of_dicts(rows[:dicts]) if dicts else []
            push = facts.append
            new = tuple.__new__  # as the merge: skips the named tuples' own __new__
            seals: dict[str, Any] = (
                dict_seals(rows[:dicts]) if dicts and data.get("facts_merkle") == SALTED else {}
            )
            for row in rows[dicts:] if dicts else rows:
                if len(row) == 9:  # chain format 2: the fact's salt (or commitment) last
                    fid, key, content, confidence, sug, cycle, pid, parents, seals[row[0]] = row
                else:
                    fid, key, content, confidence, sug, cycle, pid, parents = row
                if type(fid) is not str or type(key) is not str or type(cycle) is not int:
                    raise ValueError(f"bad fact row {fid!r}")
                prov = new(Provenance, (sug, cycle, pid, tuple(parents)))
                push(new(Fact, (fid, key, content, float(confidence), prov)))
            self.facts = FactIndex(facts)
            self.context = Context(self.facts)
            self._events = []
            self.listener = None
            self.cursor = Cursor.of(data, facts)
            self.context.cycle = self.cursor.cycle
            self.spend = Spend.of(data)
            self.gating = Gating.of(data, self.run_id, gate)
            self.recovery = Recovery(facts_inline=not data.get("facts_from_chunks", False))
            self.integrity = Integrity.of(data, len(facts), seals)
            return self
        except ResumeError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ResumeError(f"corrupted checkpoint: {type(exc).__name__}: {exc}") from exc


# -- a fork's inherited facts in a checkpoint: fact dicts, before the rows -----------


def dict_prefix(rows: list[Any]) -> int:
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


def dict_seals(dicts: list[Any]) -> dict[str, Any]:
    """Per fact id, the seal of facts given as dicts of chain format 2 (a fork's
    inherited facts as stored by its parent): its ``salt``, or ``{"commitment": C}``
    once redacted; a fact with neither has none (a new salt would be drawn)."""
    seals: dict[str, Any] = {}
    for d in dicts:
        if "salt" in d:
            seals[d["id"]] = d["salt"]
        elif "commitment" in d:
            seals[d["id"]] = {"commitment": d["commitment"]}
    return seals


def facts_of_dicts(dicts: list[Any]) -> list[Fact]:
    """Facts given as :func:`engine.facts.fact_to_dict` output, in order (raises ValueError,
    KeyError or TypeError for other shapes)."""
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
    return built
