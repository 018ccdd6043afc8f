"""What a :class:`~engine._cycle.run.Run` used (:class:`Spend`): tokens and USD,
invocations, error streaks, time, the budget continuations; its fields change only
through its verbs, named for what happens."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

from engine.effect import Usage
from engine.result import ContinuationRecord


class Spend:
    """What the run used: ``usage`` (tokens, USD), ``invocations`` in all and
    ``invocations_by`` suggestor, the ``history`` of invocations, error
    ``streaks``, the ``last_error``, facts ``dropped``, the budgets an ``on_stop``
    continued past (``exhausted_overrides``, ``continuations``), and time: the
    current leg's start (``leg_started``, the engine's clock, seconds; and
    ``wall_started``, unix seconds) and the ms of the legs before
    (``elapsed_before_ms``)."""

    __slots__ = (
        "_continuations",
        "_dropped",
        "_elapsed_before_ms",
        "_exhausted_overrides",
        "_history",
        "_invocations",
        "_invocations_by",
        "_last_error",
        "_leg_started",
        "_streaks",
        "_usage",
        "_wall_started",
    )

    def __init__(self) -> None:
        self._usage = Usage()
        self._invocations = 0
        self._invocations_by: dict[str, int] = {}
        self._history: list[str] = []
        self._streaks: dict[str, int] = {}
        self._last_error: str | None = None
        self._dropped = 0
        self._exhausted_overrides: set[str] = set()
        self._continuations: list[ContinuationRecord] = []
        self._leg_started = 0.0
        self._wall_started = 0.0
        self._elapsed_before_ms = 0

    # -- what the others read ------------------------------------------------------
    @property
    def usage(self) -> Usage:
        return self._usage

    @property
    def invocations(self) -> int:
        return self._invocations

    @property
    def invocations_by(self) -> Mapping[str, int]:
        return self._invocations_by

    @property
    def history(self) -> Sequence[str]:
        return self._history

    @property
    def streaks(self) -> Mapping[str, int]:
        return self._streaks

    @property
    def last_error(self) -> str | None:
        return self._last_error

    @property
    def exhausted_overrides(self) -> AbstractSet[str]:
        return self._exhausted_overrides

    @property
    def continuations(self) -> Sequence[ContinuationRecord]:
        return self._continuations

    @property
    def leg_started(self) -> float:
        return self._leg_started

    @property
    def wall_started(self) -> float:
        return self._wall_started

    @property
    def elapsed_before_ms(self) -> int:
        return self._elapsed_before_ms

    # -- what happens --------------------------------------------------------------
    def count_invocation(self, name: str) -> int:
        """``name`` (a suggestor, or ``NAME.TOOL``) was invoked once more; its count."""
        self._invocations += 1
        by = self._invocations_by
        used = by[name] = by.get(name, 0) + 1
        self._history.append(name)
        return used

    def ran_cleanly(self, names: Sequence[str]) -> None:
        """Each of ``names`` was invoked once and returned plain proposals (its error
        streak ends): the plain loop's count of a cycle."""
        by = self._invocations_by
        history = self._history
        for name in names:
            by[name] = by.get(name, 0) + 1
            history.append(name)
        self._invocations += len(names)
        streaks = self._streaks
        if streaks:
            for name in names:
                streaks.pop(name, None)

    def ran_one_cleanly(self, name: str) -> None:
        """:meth:`ran_cleanly` for one suggestor (the plain loop's usual cycle)."""
        by = self._invocations_by
        by[name] = by.get(name, 0) + 1
        self._history.append(name)
        self._invocations += 1
        if self._streaks:
            self._streaks.pop(name, None)

    def end_streak(self, name: str) -> None:
        """``name`` ran without an error: its error streak ends."""
        if self._streaks:
            self._streaks.pop(name, None)

    def count_failure(self, name: str, message: str) -> int:
        """``name`` failed with ``message``; its error streak now."""
        streak = self._streaks[name] = self._streaks.get(name, 0) + 1
        self._last_error = f"{name}: {message}"
        return streak

    def add_usage(self, usage: Usage) -> None:
        """Tokens and USD spent."""
        u = self._usage
        self._usage = Usage(
            u.input_tokens + usage.input_tokens,
            u.output_tokens + usage.output_tokens,
            u.cost_usd + usage.cost_usd,
        )

    def count_drop(self) -> None:
        """A promotion gate dropped a proposal."""
        self._dropped += 1

    def continued(self, record: ContinuationRecord, overridden: Iterable[str] = ()) -> None:
        """``on_stop`` continued the run (``record``), past the budget stops
        ``overridden`` when it raised no budget (they do not stop it again)."""
        self._exhausted_overrides.update(overridden)
        self._continuations.append(record)

    def forget_overrides(self) -> None:
        """A new leg: the budgets continued past stop the run again."""
        self._exhausted_overrides.clear()

    def start_leg(self, now: float, wall: float | None = None) -> None:
        """A leg starts at ``now`` (the engine's clock) and ``wall`` (unix seconds,
        when the run's own start)."""
        self._leg_started = now
        if wall is not None:
            self._wall_started = wall

    def stop_clock(self, elapsed_ms: int) -> None:
        """The run paused ``elapsed_ms`` after its start: its clock stops there."""
        self._elapsed_before_ms = elapsed_ms

    # -- the checkpoint ------------------------------------------------------------
    def slice(self) -> dict[str, Any]:
        """This part of the checkpoint."""
        u = self._usage
        return {
            "usage": [u.input_tokens, u.output_tokens, u.cost_usd],
            "invocations": self._invocations,
            "invocations_by": self._invocations_by,
            "history": self._history,
            "streaks": self._streaks,
            "last_error": self._last_error,
            "elapsed_ms": self._elapsed_before_ms,
            "continuations": [
                [k.cycle, list(k.signals), k.note, k.budget_raised] for k in self._continuations
            ],
        }

    @classmethod
    def of(cls, data: dict[str, Any]) -> Spend:
        """From a checkpoint (raises KeyError, TypeError or ValueError)."""
        self = cls.__new__(cls)
        i, o, c = data["usage"]
        self._usage = Usage(int(i), int(o), float(c))
        self._invocations = int(data["invocations"])
        self._invocations_by = {str(k): int(v) for k, v in data["invocations_by"].items()}
        self._history = [str(h) for h in data["history"]]
        self._streaks = {str(k): int(v) for k, v in data["streaks"].items()}
        self._last_error = data["last_error"]
        self._elapsed_before_ms = int(data["elapsed_ms"])
        self._continuations = [
            ContinuationRecord(int(c), tuple(s), str(n), bool(r))
            for c, s, n, r in data["continuations"]
        ]
        self._dropped = 0
        self._exhausted_overrides = set()
        self._leg_started = self._wall_started = 0.0
        return self
