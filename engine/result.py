"""The result of a run: why it stopped, what it produced, what it used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.budget import BudgetStatus
from engine.context import Context
from engine.criterion import CriterionReport
from engine.effect import Usage
from engine.facts import Fact, fact_to_dict
from engine.hashing.merkle import facts_root
from engine.stop import StopReason, stop_reason_to_dict
from engine.wording import counted as counted  # its home: engine.wording (no model to build)


@dataclass(frozen=True, slots=True)
class ContinuationRecord:
    """One ``on_stop`` override: the signals it continued past, at which cycle."""

    cycle: int
    signals: tuple[str, ...]
    note: str
    budget_raised: bool


@dataclass(frozen=True)
class RunResult:
    """Everything a run returns, whatever stopped it (partial results are the rule).

    ``stop_reason`` is the most urgent of ``signals`` (every stop condition that
    fired at the final check). ``context`` holds the facts promoted so far;
    ``usage`` the tokens and USD used; ``budget_status`` the use of each budget
    dimension; ``criteria`` the outcome of each criterion at the end;
    ``duration_ms`` the run time in ms, pauses excluded.
    """

    run_id: str
    stop_reason: StopReason
    signals: tuple[StopReason, ...]
    context: Context
    cycles: int
    usage: Usage
    budget_status: BudgetStatus
    criteria: tuple[CriterionReport, ...] = ()
    duration_ms: int = 0
    continuations: tuple[ContinuationRecord, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def facts_root(self) -> str:
        """sha256 Merkle root (hex) over the facts in promotion order."""
        return facts_root(self.context)

    @property
    def facts(self) -> list[Fact]:
        """Every fact promoted, in promotion order."""
        return self.context.facts()

    def explain(self) -> str:
        """A human summary: the stop, every signal, budget status, criteria, overrides."""
        lines = [
            f"Run {self.run_id} stopped after {counted(self.cycles, 'cycle')}: {self.stop_reason}"
        ]
        lines.append(f"  {self.stop_reason.explain()}")
        if len(self.signals) > 1:
            lines.append("Signals (most urgent first):")
            lines.extend(f"  - {s.kind_code()}: {s}" for s in self.signals)
        lines.append(
            f"Budget: {self.budget_status.summary()} (overall {self.budget_status.percent:.1f}%)"
        )
        if self.criteria:
            lines.append("Criteria:")
            for c in self.criteria:
                extra = f" ({c.reason})" if c.reason else ""
                lines.append(f"  - {c.id}{'' if c.required else ' [optional]'}: {c.outcome}{extra}")
        if self.continuations:
            lines.append("Continuations:")
            for k in self.continuations:
                how = "budget raised" if k.budget_raised else "no budget change"
                note = f": {k.note}" if k.note else ""
                lines.append(f"  - cycle {k.cycle}, past {', '.join(k.signals)} ({how}){note}")
        u = self.usage
        lines.append(
            f"Facts: {len(self.context)}; usage: {u.input_tokens}+{u.output_tokens} tokens, "
            f"${u.cost_usd:.4f}; {self.duration_ms} ms"
        )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (``--json`` output of ``converge run``)."""
        return {
            "run_id": self.run_id,
            "stop_reason": stop_reason_to_dict(self.stop_reason),
            "signals": [stop_reason_to_dict(s) for s in self.signals],
            "cycles": self.cycles,
            "facts_count": len(self.context),
            "facts_root": self.facts_root,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
                "cost_usd": self.usage.cost_usd,
            },
            "budget_status": self.budget_status.model_dump(mode="json"),
            "criteria": [
                {"id": c.id, "required": c.required, "outcome": c.outcome, "reason": c.reason}
                for c in self.criteria
            ],
            "duration_ms": self.duration_ms,
            "exit_code": self.stop_reason.exit_code,
        }

    def facts_as_dicts(self) -> list[dict[str, Any]]:
        """Every fact as a JSON-ready dict."""
        return [fact_to_dict(f) for f in self.context]
