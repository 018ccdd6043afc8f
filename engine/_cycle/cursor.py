"""Where a :class:`~engine._cycle.run.Run` is (:class:`Cursor`): its cycle, the keys
changed, the work cut, the merge in progress, the pending signals; its fields
change only through its verbs, named for what happens in the cycle."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from engine.criterion import CriterionReport
from engine.errors import ResumeError
from engine.facts import Fact, Proposal, proposal_to_dict
from engine.stop import StopReason, parse_stop_reason, stop_reason_to_dict

Effects = list[tuple[str, list[Proposal]]]
"""A cycle's effects to merge: (suggestor, its proposals), in registration order."""


class Cursor:
    """Where the run is: ``cycle`` (0 before the first), the ``dirty`` keys changed
    since the last cycle, the suggestors whose execution was ``cut`` (eligible again
    in the next cycle), the merge in progress (``merge_effects`` from
    ``merge_pos``), the facts promoted this cycle (``cycle_new``), the suggestors
    ``admitted`` by the invocation budget, the stop signals pending and the
    criteria reports of the last judgement."""

    __slots__ = (
        "_admitted",
        "_criteria_reports",
        "_cut",
        "_cycle",
        "_cycle_new",
        "_dirty",
        "_last_suggestors",
        "_merge_effects",
        "_merge_pos",
        "_pending_signals",
    )

    def __init__(self) -> None:
        self._cycle = 0
        self._dirty: set[str] = set()
        self._cut: list[str] = []
        self._last_suggestors: tuple[str, ...] = ()
        self._pending_signals: list[StopReason] = []
        self._merge_effects: Effects = []
        self._merge_pos: tuple[int, int] = (0, 0)
        self._cycle_new: list[Fact] = []
        self._admitted: list[int] | None = None
        self._criteria_reports: tuple[CriterionReport, ...] = ()

    # -- what the others read ------------------------------------------------------
    @property
    def cycle(self) -> int:
        return self._cycle

    @property
    def dirty(self) -> AbstractSet[str]:
        return self._dirty

    @property
    def cut(self) -> Sequence[str]:
        return self._cut

    @property
    def last_suggestors(self) -> tuple[str, ...]:
        return self._last_suggestors

    @property
    def pending_signals(self) -> Sequence[StopReason]:
        return self._pending_signals

    @property
    def merge_effects(self) -> Sequence[tuple[str, list[Proposal]]]:
        return self._merge_effects

    @property
    def merge_pos(self) -> tuple[int, int]:
        return self._merge_pos

    @property
    def cycle_new(self) -> Sequence[Fact]:
        return self._cycle_new

    @property
    def admitted(self) -> list[int] | None:
        return self._admitted

    @property
    def criteria_reports(self) -> tuple[CriterionReport, ...]:
        return self._criteria_reports

    # -- the cycle -----------------------------------------------------------------
    def take_wakers(self) -> tuple[set[str], list[str]]:
        """The dirty keys and the cut work that wake this cycle's suggestors, both
        emptied here (the prelude's)."""
        dirty, cut = self._dirty, self._cut
        self._dirty = set()
        if cut:
            self._cut = []
        return dirty, cut

    def put_back_wakers(self, dirty: set[str], cut: list[str]) -> None:
        """Keep ``dirty`` and ``cut``: the run stopped before the cycle they wake (a
        resumed run wakes the same subscribers and runs the work cut before)."""
        self._dirty = dirty
        self._cut = cut

    def advance(self) -> None:
        """The next cycle starts: its number goes up."""
        self._cycle += 1

    def keys_changing(self) -> set[str]:
        """The dirty keys, for the plain loop to empty at each cycle's start and its
        merge to add the keys it changes to (its hot loop)."""
        return self._dirty

    def ran_plain(self, cycle: int, suggestors: tuple[str, ...], new: list[Fact]) -> None:
        """The plain loop ran its cycles up to ``cycle``, whose ``suggestors`` ran and
        promoted ``new`` (it tells the cursor before anything else reads it)."""
        self._cycle = cycle
        self._last_suggestors = suggestors
        self._cycle_new = new

    def note_changed(self, keys: Iterable[str]) -> None:
        """``keys`` changed: the next cycle wakes their subscribers."""
        self._dirty.update(keys)

    def admit(self, admitted: list[int] | None) -> None:
        """Only ``admitted`` (a prefix of the eligible suggestors) run this cycle."""
        self._admitted = admitted

    def take_admitted(self) -> list[int] | None:
        """The suggestors admitted this cycle (None: all eligible), forgotten here."""
        admitted = self._admitted
        self._admitted = None
        return admitted

    def signal(self, reason: StopReason) -> None:
        """A stop signal for the next judgement."""
        self._pending_signals.append(reason)

    def take_signals(self) -> list[StopReason]:
        """The pending stop signals, handed to the judgement (none pending after)."""
        signals = self._pending_signals
        if signals:
            self._pending_signals = []
        return signals

    def judged(self, reports: tuple[CriterionReport, ...]) -> None:
        """The criteria reports of the last evaluation (``()``: forgotten)."""
        self._criteria_reports = reports

    # -- the merge -----------------------------------------------------------------
    def collected(self, effects: Effects, last_suggestors: tuple[str, ...], cut: list[str]) -> None:
        """The cycle's outcomes are collected: ``effects`` to merge from the start,
        the suggestors that ran, the work ``cut``; nothing promoted yet."""
        self._cut = cut
        self._last_suggestors = last_suggestors
        self._merge_effects = effects
        self._merge_pos = (0, 0)
        self._cycle_new = []

    def promotions(self) -> list[Fact]:
        """The list the merge appends this cycle's promoted facts to (its hot loop)."""
        return self._cycle_new

    def merge_from(self, pos: tuple[int, int], effects: Effects | None = None) -> None:
        """The merge goes on (or waits) at ``pos`` (effect, proposal), of ``effects``
        when given (the plain loop hands its merge over)."""
        if effects is not None:
            self._merge_effects = effects
        self._merge_pos = pos

    def add_to_merge(self, name: str, proposals: list[Proposal]) -> None:
        """One more effect at the end of the merge in progress."""
        self._merge_effects.append((name, proposals))

    def answer(self, effect_index: int, proposal_index: int, content: Any) -> None:
        """The proposal waiting at a gate gets ``content`` (a human's answer)."""
        proposals = self._merge_effects[effect_index][1]
        proposals[proposal_index] = proposals[proposal_index]._replace(content=content)

    def merge_done(self) -> None:
        """The merge went through every effect."""
        self._merge_effects = []
        self._merge_pos = (0, 0)

    def abandon_merge(self) -> None:
        """The merge stopped: its effects are dropped, its place kept for the record."""
        self._merge_effects = []

    # -- the checkpoint ------------------------------------------------------------
    def slice(self) -> dict[str, Any]:
        """This part of the checkpoint."""
        return {
            "cycle": self._cycle,
            "last_suggestors": list(self._last_suggestors),
            "dirty": sorted(self._dirty),
            "cut": list(self._cut),
            "pending_signals": [stop_reason_to_dict(s) for s in self._pending_signals],
            "merge_effects": [
                [name, [proposal_to_dict(p) for p in proposals]]
                for name, proposals in self._merge_effects
            ],
            "merge_pos": list(self._merge_pos),
            "cycle_new": [f.id for f in self._cycle_new],
        }

    @classmethod
    def of(cls, data: dict[str, Any], facts: list[Fact]) -> Cursor:
        """From a checkpoint whose facts are ``facts`` (raises KeyError, TypeError,
        ValueError or ``ResumeError`` when it is corrupted)."""
        self = cls.__new__(cls)
        self._cycle = int(data["cycle"])
        self._last_suggestors = tuple(data["last_suggestors"])
        self._dirty = set(data["dirty"])
        cut = data.get("cut", [])  # absent from checkpoints written before it was kept
        if type(cut) is not list:
            raise ValueError(f"cut is a {type(cut).__name__}, not a list")
        self._cut = [str(n) for n in cut]
        self._pending_signals = [parse_stop_reason(s) for s in data["pending_signals"]]
        self._merge_effects = [
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
        self._merge_pos = (int(data["merge_pos"][0]), int(data["merge_pos"][1]))
        new_ids = set(data["cycle_new"])
        self._cycle_new = [f for f in facts if f.id in new_ids] if new_ids else []
        if len(self._cycle_new) != len(new_ids):
            raise ResumeError("corrupted checkpoint: cycle_new names unknown facts")
        self._admitted = None
        self._criteria_reports = ()
        return self
