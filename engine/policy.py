"""Stop policies: custom conditions evaluated after each cycle (awaken's ``StopPolicy``).

Declarative specs and ready-made policies live in ``gates.policies``; the
protocol, the stats a policy reads and its decisions live here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, overload, runtime_checkable

from engine.budget import Budget
from engine.stop import StopReason


class HistoryView(Sequence[str]):
    """A read-only snapshot of the first ``length`` items of an append-only list.

    Built in O(1), so handing the run's invocation history to the policies after
    every cycle costs nothing, while a policy that keeps an old :class:`RunStats`
    still sees the history as it was then.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: Sequence[str], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            items = self._items
            return [items[i] for i in range(self._length)[index]]
        i = index + self._length if index < 0 else index
        if not 0 <= i < self._length:
            raise IndexError("history index out of range")
        return self._items[i]

    def __repr__(self) -> str:
        return f"HistoryView({self[:]!r})"


@dataclass(frozen=True, slots=True)
class RunStats:
    """A run-scoped snapshot handed to every stop policy after each cycle.

    ``cycle`` (cycles executed), ``total_input_tokens``/``total_output_tokens``
    (tokens), ``cost_usd`` (USD), ``elapsed_ms`` (ms, pauses excluded),
    ``consecutive_errors`` (the longest current streak of failed executions of
    any one suggestor; its next success resets it), ``last_error``,
    ``last_suggestors`` (names executed in the last cycle, registration order),
    ``last_facts`` (ids promoted in the last cycle), ``facts_count``,
    ``invocations`` (in total), ``invocations_by_suggestor``, and
    ``invocation_history`` (every invocation of the run, oldest first; read-only).
    Fresh for every run.
    """

    cycle: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    cost_usd: float = 0.0
    elapsed_ms: int = 0
    consecutive_errors: int = 0
    last_error: str | None = None
    last_suggestors: tuple[str, ...] = ()
    last_facts: tuple[str, ...] = ()
    last_fact_contents: tuple[tuple[str, object], ...] = ()
    facts_count: int = 0
    invocations: int = 0
    invocations_by_suggestor: dict[str, int] = field(default_factory=dict)
    invocation_history: Sequence[str] = ()

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.total_input_tokens + self.total_output_tokens


@dataclass(frozen=True, slots=True)
class StopDecision:
    """A policy's decision to stop (awaken's ``StopDecision::Stop { code, detail }``).

    Without ``reason`` the run stops with ``PolicyStopped(policy_id, code, detail)``;
    built-in policies set ``reason`` to a more precise variant (``LoopDetected``,
    ``Finished``, a budget variant...).
    """

    code: str
    detail: str
    reason: StopReason | None = None


@runtime_checkable
class StopPolicy(Protocol):
    """A stop condition over :class:`RunStats`; ``evaluate`` returns a decision or None."""

    id: str

    def evaluate(self, stats: RunStats) -> StopDecision | None: ...


@dataclass(frozen=True, slots=True)
class Continue:
    """An ``on_stop`` override: keep going (Cognesy's continuation request).

    ``budget`` replaces the run's budget (e.g. raised ``max_cycles``); ``note`` is
    recorded in the audit trail. Only budget and policy stops can be continued; the
    same condition firing again without a raised budget stops the run for good.
    """

    budget: Budget | None = None
    note: str = ""
