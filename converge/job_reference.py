"""The reference of job-file keys, generated from the pydantic models.

:func:`job_file_reference` renders one Markdown table per model of a job file
(:class:`~converge.jobs.JobSpec`, :class:`~engine.Budget`, the gate specs,
:class:`~converge.reports.ReportSpec`): every field with its type, default and
meaning. ``docs/job-files.md`` holds its output between two markers, and a test
checks the page is current and that every field has a description — a key added
to a model without one fails the test.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from converge.jobs import (
    AgentSpec,
    CelerySpec,
    GateSpec,
    HitlSpec,
    JobSpec,
    MinConfidenceSpec,
    SchemaSpec,
)
from converge.reports import ReportSpec
from engine import Budget

__all__ = ["DESCRIPTIONS", "MODELS", "job_file_reference", "undocumented", "write_reference"]

MODELS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("top level", JobSpec),
    ("budget", Budget),
    ("gates[]", GateSpec),
    ("gates[].hitl", HitlSpec),
    ("gates[].schema", SchemaSpec),
    ("gates[].min_confidence", MinConfidenceSpec),
    ("report[]", ReportSpec),
    ("agents[]", AgentSpec),
    ("executor.celery", CelerySpec),
)
"""Each table of the reference: where its keys sit in a job file, and the model."""

DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("JobSpec", "name"): "The job's name (recorded with each run; `converge runs --job`).",
    ("JobSpec", "description"): "One sentence on what the job does.",
    ("JobSpec", "suggestors"): (
        "`module:attribute` references: a suggestor, a list of them, or a class / "
        "factory called with no arguments."
    ),
    ("JobSpec", "budget"): "Limits of a run (the `budget` table below).",
    ("JobSpec", "executor"): (
        "Where the suggestors execute: absent = in-process; `{celery: {...}}` on Celery "
        "workers (the `executor.celery` table below, docs/scale-out.md)."
    ),
    ("CelerySpec", "broker"): "The broker URL (RabbitMQ `amqp://`, Redis), or `$NAME`.",
    ("CelerySpec", "backend"): "The result backend URL (Redis), or `$NAME`.",
    ("CelerySpec", "queue"): "The Celery queue the workers consume.",
    ("CelerySpec", "ship"): (
        "How the context reaches workers: `backend` (new facts through the result "
        "backend), `context` (in every task) or `dependencies` (only the keys read)."
    ),
    ("JobSpec", "criteria"): (
        "References to criteria (`id`, `required`, `evaluate(ctx)`): the job is done "
        "when every required one is met."
    ),
    ("JobSpec", "invariants"): (
        "References to invariants (`name`, `invariant_class`, `check(ctx)`): rules "
        "that must never break."
    ),
    ("JobSpec", "gates"): "Promotion and human-in-the-loop gates (the `gates[]` tables).",
    ("JobSpec", "stop_conditions"): (
        "Stop conditions, each `{type: ..., ...}`: every type is in `docs/stop-conditions.md`."
    ),
    ("JobSpec", "initial"): "Input facts: `{key: [content, ...]}`, promoted before cycle 1.",
    ("JobSpec", "on_error"): (
        "`stop`: a failing suggestor stops the run (`Error`); `continue`: it is recorded "
        "and the run goes on."
    ),
    ("JobSpec", "max_concurrency"): "Suggestors run at once in the async driver (at least 1).",
    ("JobSpec", "report"): (
        "Tables `converge run` prints after its summary and `converge report` renders "
        "(the `report[]` table)."
    ),
    ("Budget", "max_cycles"): "Cycles (never exceeded); null or 0: unlimited.",
    ("Budget", "max_facts"): "Facts in the context; the run stops once it holds more.",
    ("Budget", "max_tokens"): "Input + output tokens of LLM suggestors.",
    ("Budget", "max_seconds"): "Seconds of wall-clock time, pauses at gates excluded.",
    ("Budget", "max_cost_usd"): "USD spent by LLM suggestors.",
    ("Budget", "max_invocations"): "Suggestor executions in total (never exceeded).",
    ("Budget", "per_suggestor"): "Executions per suggestor, by name (never exceeded).",
    ("GateSpec", "hitl"): "A human-in-the-loop gate (`gates[].hitl`).",
    ("GateSpec", "schema_"): "Validate the content of one key with a pydantic model.",
    ("GateSpec", "min_confidence"): "Drop or stop on proposals below a confidence.",
    ("GateSpec", "promotion"): "A reference to your own `PromotionGate`.",
    ("HitlSpec", "keys"): "Only proposals of these keys wait for a person.",
    ("HitlSpec", "suggestors"): "Only proposals of these suggestors.",
    ("HitlSpec", "confidence_at_most"): "Only proposals with this confidence or less (0..1).",
    ("HitlSpec", "when"): "A reference to `predicate(proposal, ctx) -> bool`.",
    ("HitlSpec", "summary"): (
        "What the person is asked; `{key}`, `{content[field]}`, `{suggestor}` are filled in."
    ),
    ("HitlSpec", "timeout_s"): "Seconds before the gate decides itself (`on_timeout`).",
    ("HitlSpec", "on_timeout"): "The decision taken at the timeout.",
    ("HitlSpec", "name"): "The gate policy's name (shown with its gates).",
    ("SchemaSpec", "key"): "The fact key whose proposals are validated.",
    ("SchemaSpec", "model"): "A reference to a pydantic model (not called).",
    ("SchemaSpec", "on_reject"): "`stop` the run, or `drop` the proposal.",
    ("MinConfidenceSpec", "threshold"): "Proposals below this confidence are rejected (0..1).",
    ("MinConfidenceSpec", "keys"): "Only proposals of these keys (default: all).",
    ("MinConfidenceSpec", "on_reject"): "`drop` the proposal, or `stop` the run.",
}
"""Descriptions of the fields that carry none in their model (``Field(description=...)``
wins when present), by ``(model name, field name)``."""

BEGIN = "<!-- generated by converge.job_reference: do not edit below -->"
END = "<!-- end of generated reference -->"


def _type(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation)
    text = re.sub(r"\b(?:typing|converge\.\w+|engine\.\w+)\.", "", text)
    text = text.replace("NoneType", "null")
    return re.sub(r"Literal\[([^\]]*)\]", lambda m: m.group(1).replace(", ", " | "), text)


def _default(info: Any) -> str:
    if info.is_required():
        return "**required**"
    if info.default_factory is not None:
        value = info.default_factory()
        if isinstance(value, BaseModel):
            return "(see below)"
        return f"`{value!r}`" if value not in ([], {}) else "empty"
    if info.default is PydanticUndefined or info.default is None:
        return "null"
    return f"`{info.default!r}`"


def _description(model: type[BaseModel], field: str, info: Any) -> str | None:
    return info.description or DESCRIPTIONS.get((model.__name__, field))


def undocumented() -> list[str]:
    """``Model.field`` of every field with no description (empty when all have one)."""
    return [
        f"{model.__name__}.{name}"
        for _, model in MODELS
        for name, info in model.model_fields.items()
        if not _description(model, name, info)
    ]


def job_file_reference() -> str:
    """The Markdown tables of every job-file key (see the module docstring)."""
    parts: list[str] = []
    for where, model in MODELS:
        lines = [
            f"### `{where}`",
            "",
            "| key | type | default | meaning |",
            "|---|---|---|---|",
        ]
        for name, info in model.model_fields.items():
            key = info.alias or name
            desc = (_description(model, name, info) or "").replace("|", "\\|")
            type_text = _type(info.annotation).replace("|", "\\|")
            lines.append(f"| `{key}` | `{type_text}` | {_default(info)} | {desc} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def write_reference(path: str | Path) -> bool:
    """Replace the generated part of ``path`` (between the markers); True if it changed."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = f"{head}{BEGIN}\n\n{job_file_reference()}\n{END}{tail}"
    if new != text:
        p.write_text(new, encoding="utf-8")
        return True
    return False
