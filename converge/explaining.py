"""The explanation of a stop, with what the run's last cycles show.

A stop reason's own :meth:`~engine.stop.CycleBudgetExhausted.explain` cannot know
whether a run that spent its cycles was going round or still getting somewhere.
The audit trail does: how many proposals each cycle's suggestors returned and how
many became facts (a proposal equal to a fact already there is dropped). Over the
last :data:`WINDOW` cycles, :func:`explain_stop` says

- ``oscillating`` only when facts repeat: some proposals re-proposed facts already
  there (neither promoted nor rejected by a gate): those suggestors need changing
  (or ``loop_detection``), not more cycles;
- else, when each of those cycles promoted new facts: progress in each of the last
  N cycles, and more cycles may help (``converge resume RUN --add-cycles N``).

``converge run`` (:func:`explain_result`), ``converge show`` and the run page and
``GET /api/runs/{id}`` (:func:`explain_stop` over the run's timeline) print it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine import RunResult, RunStore, StopReason
from engine.result import counted
from engine.stop import CycleBudgetExhausted

if TYPE_CHECKING:
    from audit.queries import CycleSummary

__all__ = ["WINDOW", "CycleCounts", "counts_of", "explain_result", "explain_stop"]

WINDOW = 5
"""The last cycles an explanation looks at."""


@dataclass(frozen=True, slots=True)
class CycleCounts:
    """One cycle's counts: proposals returned (None: unknown, the run was not
    recorded), facts promoted, proposals a promotion gate rejected."""

    cycle: int
    proposed: int | None
    promoted: int
    rejected: int = 0

    @property
    def repeated(self) -> int:
        """Proposals that were neither promoted nor rejected: facts already there."""
        if self.proposed is None:
            return 0
        return max(0, self.proposed - self.promoted - self.rejected)


def explain_stop(reason: StopReason, cycles: Iterable[CycleCounts]) -> str:
    """``reason.explain()``, its advice told by ``cycles`` (the run's, any order) when
    a cycle budget stopped it (see the module's docstring)."""
    if not isinstance(reason, CycleBudgetExhausted):
        return reason.explain()
    last = sorted(
        (c for c in cycles if 1 <= c.cycle <= reason.cycles_executed), key=lambda c: c.cycle
    )[-WINDOW:]
    head = f"{reason} [{reason.kind_code()}, {reason.category.value}]."
    n = len(last)
    repeated = sum(c.repeated for c in last)
    if repeated:
        return (
            f"{head} No fixed point, and facts repeat: the last {counted(n, 'cycle')} "
            f"re-proposed {counted(repeated, 'fact')} already there. Oscillating "
            "suggestors need changing (or loop_detection), not more cycles."
        )
    if last and all(c.promoted for c in last):
        counts = sorted({c.promoted for c in last})
        each = (
            f"{counted(counts[0], 'new fact')} each"
            if len(counts) == 1
            else ", ".join(str(c.promoted) for c in last) + " new facts"
        )
        return (
            f"{head} No fixed point yet, with progress in each of the last "
            f"{counted(n, 'cycle')} ({each}): more cycles may help "
            "(converge resume RUN --add-cycles N)."
        )
    return reason.explain()


def counts_of(timeline: Iterable[CycleSummary]) -> list[CycleCounts]:
    """:class:`CycleCounts` of a run's timeline (``audit.queries.timeline``)."""
    return [CycleCounts(c.cycle, c.proposed, c.promoted, len(c.rejected)) for c in timeline]


def explain_result(result: RunResult, store: RunStore | None = None) -> str:
    """The explanation of ``result``'s stop (:func:`explain_stop`): its promotions per
    cycle from its facts' provenance, and with the ``store`` it was recorded in, the
    proposals each cycle returned and those a gate rejected (without one, repeats
    cannot be told: only progress is)."""
    reason = result.stop_reason
    if not isinstance(reason, CycleBudgetExhausted):
        return reason.explain()
    promoted = Counter(f.provenance.cycle for f in result.context)
    proposed: Counter[int] | None = None
    rejected: Counter[int] = Counter()
    events = getattr(store, "events", None)
    if events is not None:
        proposed = Counter()
        first = max(1, reason.cycles_executed - WINDOW + 1)
        for e in events(result.run_id, ("suggestor_executed", "proposal_rejected")):
            if e.cycle < first:
                continue
            if e.kind == "suggestor_executed":
                proposed[e.cycle] += int(e.payload.get("proposals") or 0)
            else:
                rejected[e.cycle] += 1
    cycles: Sequence[CycleCounts] = [
        CycleCounts(c, None if proposed is None else proposed[c], promoted[c], rejected[c])
        for c in range(1, reason.cycles_executed + 1)
    ]
    return explain_stop(reason, cycles)
