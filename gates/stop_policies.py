"""The built-in stop policies: one stateless class per kind of stop condition.

Each reads the run-scoped :class:`RunStats` the engine hands it after a cycle
and returns a :class:`StopDecision` (carrying the ``StopReason`` variant it stops
with) or None. A limit of ``0`` disables its policy (awaken's rule). The specs
that build them from JSON/YAML are in :mod:`gates.stop_specs`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from engine.policy import RunStats, StopDecision
from engine.stop import (
    ConsecutiveErrorsExceeded,
    CostBudgetExhausted,
    CycleBudgetExhausted,
    Finished,
    InvocationBudgetExhausted,
    LoopDetected,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
)

__all__ = [
    "ConsecutiveErrors",
    "ContentMatch",
    "CostBudget",
    "InvocationBudget",
    "LoopDetection",
    "MaxRounds",
    "StopOnSuggestor",
    "Timeout",
    "TokenBudget",
]

# Plain (non-frozen) dataclasses: the StopPolicy protocol declares a settable ``id``.


@dataclass(slots=True)
class MaxRounds:
    """Stops once ``rounds`` cycles ran → ``CycleBudgetExhausted`` (awaken's MaxRounds).

    Checked after a cycle; lowered into ``Budget.max_cycles`` it is exact instead
    (a run that reaches a fixed point in the next cycle still converges).
    """

    rounds: int
    id: str = "max_rounds"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.cycle >= rounds`` (0 disables)."""
        if not self.rounds or stats.cycle < self.rounds:
            return None
        reason = CycleBudgetExhausted(cycles_executed=stats.cycle, limit=self.rounds)
        return StopDecision("max_rounds", str(reason), reason)


@dataclass(slots=True)
class Timeout:
    """Stops once the run took more than ``seconds`` → ``TimeBudgetExhausted``.

    Checked between cycles (it cannot cancel work in flight; lowered into
    ``Budget.max_seconds``, ``arun`` cancels async suggestors at the limit).
    """

    seconds: float
    id: str = "timeout"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.elapsed_ms > seconds * 1000`` (0 disables)."""
        if not self.seconds or stats.elapsed_ms <= self.seconds * 1000:
            return None
        reason = TimeBudgetExhausted(duration_ms=stats.elapsed_ms, limit_ms=_ms(self.seconds))
        return StopDecision("timeout", str(reason), reason)


@dataclass(slots=True)
class TokenBudget:
    """Stops once input + output tokens exceed ``max_total`` → ``TokenBudgetExhausted``."""

    max_total: int
    id: str = "token_budget"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.total_tokens > max_total`` (awaken: ``total > max``; 0 disables)."""
        used = stats.total_tokens
        if not self.max_total or used <= self.max_total:
            return None
        reason = TokenBudgetExhausted(tokens_consumed=used, limit=self.max_total)
        return StopDecision("token_budget", str(reason), reason)


@dataclass(slots=True)
class ConsecutiveErrors:
    """Stops when one suggestor failed ``max`` times in a row → ``ConsecutiveErrorsExceeded``.

    The engine keeps one streak per suggestor; that suggestor's next success
    resets it. Only meaningful with ``Engine(on_error="continue")``: with
    ``"stop"`` the first failure already ends the run with ``Error``.
    """

    max: int
    id: str = "consecutive_errors"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.consecutive_errors >= max`` (awaken's rule; 0 disables)."""
        if not self.max or stats.consecutive_errors < self.max:
            return None
        reason = ConsecutiveErrorsExceeded(
            errors=stats.consecutive_errors, limit=self.max, last_error=stats.last_error or ""
        )
        return StopDecision("consecutive_errors", str(reason), reason)


@dataclass(slots=True)
class StopOnSuggestor:
    """Ends the run with ``Finished`` after suggestor ``name`` ran (tirea's StopOnTool)."""

    name: str
    id: str = "stop_on_suggestor"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``name`` is among ``stats.last_suggestors`` (executed last cycle)."""
        if not self.name or self.name not in stats.last_suggestors:
            return None
        reason = Finished(suggestor=self.name, message=f"ran in cycle {stats.cycle}")
        return StopDecision("stop_on_suggestor", str(reason), reason)


@dataclass(slots=True)
class ContentMatch:
    """Stops when a fact promoted in the last cycle matches ``pattern`` → ``PolicyStopped``.

    ``pattern`` is a Python regular expression searched (``re.search``) in each new
    fact's content: strings as they are, any other content as canonical JSON
    (sorted keys, no spaces). ``key`` limits the search to facts of that key.
    The stop is ``PolicyStopped(policy_id, code="content_match", detail)``.
    Raises ``re.error`` for an invalid pattern.
    """

    pattern: str
    key: str | None = None
    id: str = "content_match"
    _regex: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._regex = re.compile(self.pattern)

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Search every fact of ``stats.last_fact_contents`` (of ``key`` when set)."""
        if not self.pattern:
            return None
        ids: tuple[str, ...] = stats.last_facts
        if len(ids) != len(stats.last_fact_contents):
            ids = ()
        for i, (key, content) in enumerate(stats.last_fact_contents):
            if self.key is not None and key != self.key:
                continue
            text = content if isinstance(content, str) else _canonical_json(content)
            m = self._regex.search(text)
            if m is not None:
                where = f"fact {ids[i]}" if ids else f"a fact of key {key!r}"
                detail = f"{self.pattern!r} matched {m.group(0)!r} in {where}"
                return StopDecision("content_match", detail)
        return None


@dataclass(slots=True)
class LoopDetection:
    """Stops when the last ``2 * window`` invocations repeat → ``LoopDetected``.

    Fires when the tail of ``stats.invocation_history`` (suggestor names, one per
    invocation) is periodic with a period ``p <= window``: ``h[i] == h[i + p]`` for
    every ``i`` of ``h = history[-2 * window:]``. So a 2-cycle (a, b, a, b...) and
    a 3-cycle both fire within a window of 4, while a chain of distinct suggestors,
    or any sequence that is not periodic, never does. ``pattern`` is the repeating
    unit, as it first appears in that tail. Cost: O(window²) per check at worst.
    """

    window: int
    id: str = "loop_detection"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop on the shortest period ``p <= window`` of the last ``2 * window`` names."""
        w = self.window
        if not w:
            return None
        history = stats.invocation_history
        n = 2 * w
        if len(history) < n:
            return None
        tail = list(history[-n:])
        for p in range(1, w + 1):
            if all(tail[i] == tail[i + p] for i in range(n - p)):
                reason = LoopDetected(window=w, pattern=tail[:p])
                return StopDecision("loop_detection", str(reason), reason)
        return None


@dataclass(slots=True)
class CostBudget:
    """Stops once the cost reported by suggestors exceeds ``max_usd`` → ``CostBudgetExhausted``."""

    max_usd: float
    id: str = "cost_budget"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Stop when ``stats.cost_usd > max_usd`` (0 disables)."""
        if not self.max_usd or stats.cost_usd <= self.max_usd:
            return None
        reason = CostBudgetExhausted(cost_usd=stats.cost_usd, limit_usd=self.max_usd)
        return StopDecision("cost_budget", str(reason), reason)


@dataclass(slots=True)
class InvocationBudget:
    """Stops once invocations reach ``max_total`` (or a suggestor its ``per_suggestor``
    limit) → ``InvocationBudgetExhausted``.

    A policy runs after a cycle and cannot refuse an invocation, so it stops the
    run as soon as a count *reaches* its limit; lowered into the budget
    (``max_invocations``/``per_suggestor``) the engine refuses the invocation
    beyond the limit instead, exactly.
    """

    max_total: int = 0
    per_suggestor: dict[str, int] = field(default_factory=dict)
    id: str = "invocation_budget"

    def evaluate(self, stats: RunStats) -> StopDecision | None:
        """Total first, then each limited suggestor in the order given (0 disables)."""
        reason: InvocationBudgetExhausted | None = None
        if self.max_total and stats.invocations >= self.max_total:
            reason = InvocationBudgetExhausted(invocations=stats.invocations, limit=self.max_total)
        else:
            for name, limit in self.per_suggestor.items():
                used = stats.invocations_by_suggestor.get(name, 0)
                if limit and used >= limit:
                    reason = InvocationBudgetExhausted(
                        invocations=used, limit=limit, suggestor=name
                    )
                    break
        if reason is None:
            return None
        return StopDecision("invocation_budget", str(reason), reason)


def _canonical_json(content: Any) -> str:
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)
