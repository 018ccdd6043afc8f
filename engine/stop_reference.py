"""Reference views of the stop vocabulary: the exhaustive category match and the
generated table of ``docs/stop-reasons.md``.

``stop_category_of`` is the exhaustive ``match`` over :data:`StopReason` that
``mypy`` checks with ``assert_never`` (a new variant without a case fails the type
check); ``stop_reasons_markdown`` renders docs/stop-reasons.md's table from the code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, assert_never

from pydantic import BaseModel

from engine import stop
from engine.stop import ALL_VARIANTS, StopReason
from engine.stop_categories import EXIT_CODES, PRIORITIES, StopCategory


def stop_category_of(reason: StopReason) -> StopCategory:
    """The category of a stop reason, via an exhaustive match (mypy checks it)."""
    match reason:
        case stop.Converged() | stop.CriteriaMet() | stop.Finished():
            return StopCategory.SUCCESS
        case stop.UserCancelled() | stop.StopRequested():
            return StopCategory.CANCELLED
        case (
            stop.CycleBudgetExhausted()
            | stop.FactBudgetExhausted()
            | stop.TokenBudgetExhausted()
            | stop.TimeBudgetExhausted()
            | stop.CostBudgetExhausted()
            | stop.InvocationBudgetExhausted()
        ):
            return StopCategory.BUDGET
        case stop.InvariantViolated() | stop.PromotionRejected() | stop.CriteriaUnmet():
            return StopCategory.VALIDATION
        case stop.Error() | stop.ConsecutiveErrorsExceeded() | stop.AgentRefused():
            return StopCategory.ERROR
        case stop.LoopDetected() | stop.PolicyStopped():
            return StopCategory.POLICY
        case stop.HitlGatePending():
            return StopCategory.HITL
        case stop.HumanInterventionRequired():
            return StopCategory.HUMAN
        case _:
            assert_never(reason)


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and not getattr(annotation, "__args__", None):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def variant_signature(variant: type[BaseModel]) -> str:
    """``Name(field: type, ...)`` of a variant, ``kind`` left out (as in docs/stop-reasons.md)."""
    fields = ", ".join(
        f"{name}: {_type_name(info.annotation)}"
        for name, info in variant.model_fields.items()
        if name != "kind"
    )
    return f"{variant.__name__}({fields})"


STOP_REASONS_DOC_HEADER = """\
# Stop reasons

<!-- Generated from engine/stop.py by engine.stop_reference.stop_reasons_markdown(); do not edit.
Regenerate: .venv/bin/python -c "import engine.stop_reference as s; s.write_stop_reasons_doc()" -->

Every run ends with exactly one `StopReason` variant (`engine/stop.py`).
`kind` is the stable machine code (the JSON discriminator), `category` decides every
predicate, `priority` picks the stop reason when several conditions fire at one check
(lower is more urgent), and the exit code is what `converge run` returns.

Predicates: `is_success()` (success and cancelled), `is_budget_exhausted()`,
`is_validation_failure()`, `is_error()`, `is_hitl_pending()`,
`is_human_intervention_required()`, `is_cancelled()`, `is_policy_stop()`,
`was_force_stopped()` (every category but success, hitl and human) and
`is_resumable()` (budget, policy, hitl, cancelled).
"""


def stop_reasons_markdown() -> str:
    """The §5 table of every variant, generated from the code (``docs/stop-reasons.md``).

    Columns: variant with its fields, ``kind``, category, priority, CLI exit code,
    meaning and recovery (the class docstring's first line and its advice).
    """
    lines = [
        STOP_REASONS_DOC_HEADER,
        "| variant (fields) | kind | category | priority | exit code | meaning / recovery |",
        "|---|---|---|---|---|---|",
    ]
    for v in ALL_VARIANTS:
        doc = (v.__doc__ or "").strip().splitlines()[0]
        kind = v.model_fields["kind"].default
        sig = variant_signature(v).replace("|", "\\|")
        lines.append(
            f"| `{sig}` | `{kind}` | {v.category_.value} | {PRIORITIES[v.category_]} "
            f"| {EXIT_CODES[v.category_]} | {doc} {v.advice} |"
        )
    return "\n".join(lines) + "\n"


def write_stop_reasons_doc(path: str = "docs/stop-reasons.md") -> None:
    """Write :func:`stop_reasons_markdown` to ``path`` (run from the repository root)."""
    Path(path).write_text(stop_reasons_markdown(), encoding="utf-8")
