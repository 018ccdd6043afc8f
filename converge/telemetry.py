"""OpenTelemetry traces of runs (docs/agents.md, extra ``otel``).

Off unless asked (``converge run --otel``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set). A run is a span
``invoke_workflow {job}``; each execution of a suggestor is a child span,
``invoke_agent {name}`` for an LLM agent and ``execute_tool {name}`` otherwise,
with the OpenTelemetry GenAI attributes:

==============================  ==================================================
attribute                       value
==============================  ==================================================
``gen_ai.operation.name``       ``invoke_workflow``, ``invoke_agent`` or ``execute_tool``
``gen_ai.agent.name``           the suggestor's name (the job's on the run span)
``gen_ai.conversation.id``      the run id
``gen_ai.usage.input_tokens``   tokens of the execution (of the run on the run span)
``gen_ai.usage.output_tokens``  likewise
``converge.stop_reason``        on the run span: the stop's ``kind``
``converge.stop_category``      on the run span: its category
==============================  ==================================================

Under an agent's span, each model request it makes is a span ``chat {model}``
(:mod:`converge.agents.spans`) with that response's tokens. An execution that
fails or is cut still carries the tokens it recorded (``ctx.record_usage``) and
ends with status ERROR.

The exporter is OTLP over HTTP, configured by the standard ``OTEL_*`` variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``,
``OTEL_SERVICE_NAME``...), so Jaeger, Langfuse and Phoenix receive the traces.
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from engine import ConfigurationError, Context, Effect, Engine, RunResult, Suggestor
from engine.registry import SuggestorRegistry
from engine.suggestor import is_async_suggestor

try:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SimpleSpanProcessor,
        SpanExporter,
    )
    from opentelemetry.trace import Span, Status, StatusCode, Tracer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigurationError(
        f"traces need the 'otel' extra: pip install 'converge-engine[otel]' ({exc.name} is missing)"
    ) from exc

__all__ = ["ENDPOINT_VARIABLES", "TracedSuggestor", "Tracing", "current_tracer", "requested"]

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
"""Either one set turns tracing on without ``--otel``."""

_RUN_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "converge_run_id", default=None
)
_TRACER: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar(
    "converge_tracer", default=None
)


def current_tracer() -> Tracer | None:
    """The tracer of the traced execution in progress (None outside one): where an
    agent opens the spans of its model requests."""
    return _TRACER.get()


def requested(flag: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    """True when ``flag`` (``--otel``) is given or an OTLP endpoint variable is set."""
    env = os.environ if environ is None else environ
    return flag or any(env.get(v) for v in ENDPOINT_VARIABLES)


class TracedSuggestor:
    """A suggestor whose every execution is a span (``invoke_agent`` for an agent,
    i.e. an object with ``gen_ai_operation = "invoke_agent"``; ``execute_tool``
    otherwise) carrying the usage of the :class:`Effect` it returned."""

    def __init__(self, inner: Suggestor, tracer: Tracer) -> None:
        self.inner = inner
        self.tracer = tracer
        self.name = inner.name
        self.dependencies = frozenset(getattr(inner, "dependencies", ()) or ())
        self.is_async = is_async_suggestor(inner)
        self.operation = str(getattr(inner, "gen_ai_operation", "execute_tool"))

    def accepts(self, ctx: Context) -> bool:
        """Delegates to the wrapped suggestor."""
        return bool(self.inner.accepts(ctx))

    def execute(self, ctx: Context) -> Any:
        """The wrapped execution inside a span (a coroutine for an async suggestor)."""
        if self.is_async:
            return self._execute_async(ctx)
        with self._traced(ctx) as span:
            out = self.inner.execute(ctx)
            _record_effect(span, out)
            return out

    async def _execute_async(self, ctx: Context) -> Any:
        with self._traced(ctx) as span:
            out = await self.inner.execute(ctx)
            _record_effect(span, out)
            return out

    @contextmanager
    def _traced(self, ctx: Context) -> Iterator[Span]:
        """The execution's span, current (and its tracer, for the model requests
        inside); when the execution raises or is cut, the span gets the tokens it
        recorded and status ERROR."""
        recorded_before = len(ctx.recorded_usage())
        token = _TRACER.set(self.tracer)
        try:
            with self._span(ctx) as span:
                try:
                    yield span
                except BaseException as exc:
                    _record_failure(span, exc, ctx, self.name, recorded_before)
                    raise
        finally:
            _TRACER.reset(token)

    def _span(self, ctx: Context) -> Any:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": self.operation,
            "gen_ai.agent.name": self.name,
            "converge.cycle": ctx.cycle,
        }
        if self.operation == "execute_tool":
            attributes["gen_ai.tool.name"] = self.name
        run_id = _RUN_ID.get()
        if run_id is not None:
            attributes["gen_ai.conversation.id"] = run_id
        model = getattr(getattr(self.inner, "agent", None), "model", None)
        if model is not None:
            attributes["gen_ai.request.model"] = str(getattr(model, "model_name", model))
        return self.tracer.start_as_current_span(
            f"{self.operation} {self.name}",
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        )


def _record_failure(span: Span, exc: BaseException, ctx: Context, name: str, since: int) -> None:
    """Status ERROR, and the tokens the execution recorded before it raised or was cut."""
    recorded = [u for who, u in ctx.recorded_usage()[since:] if who == name]
    span.set_attribute("gen_ai.usage.input_tokens", sum(u.input_tokens for u in recorded))
    span.set_attribute("gen_ai.usage.output_tokens", sum(u.output_tokens for u in recorded))
    span.set_attribute("converge.cost_usd", sum(u.cost_usd for u in recorded))
    if isinstance(exc, asyncio.CancelledError):
        span.set_status(Status(StatusCode.ERROR, "cut: cancelled or out of time"))
    else:
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


def _record_effect(span: Span, out: Any) -> None:
    if isinstance(out, Effect):
        span.set_attribute("gen_ai.usage.input_tokens", out.usage.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", out.usage.output_tokens)
        span.set_attribute("converge.cost_usd", out.usage.cost_usd)
        span.set_attribute("converge.proposals", len(out.proposals))
        if out.tool_calls:
            span.set_attribute("converge.tool_calls", list(out.tool_calls))
        if out.signal is not None:
            span.set_attribute("converge.signal", out.signal.kind_code())
            if out.signal.is_error():
                span.set_status(Status(StatusCode.ERROR, str(out.signal)))
    elif isinstance(out, list):
        span.set_attribute("converge.proposals", len(out))


class Tracing:
    """Traces of runs: a tracer provider, the instrumentation of an engine and the
    run span. ``Tracing.start()`` exports over OTLP/HTTP (``OTEL_*`` variables);
    ``Tracing.start(exporter)`` to any SDK exporter (tests use the in-memory one).
    Call :meth:`shutdown` to flush."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("converge")

    @staticmethod
    def start(exporter: SpanExporter | None = None) -> Tracing:
        """A provider named by ``OTEL_SERVICE_NAME`` (default ``converge``)."""
        resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "converge"}
        )
        provider = TracerProvider(resource=resource)
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        return Tracing(provider)

    def instrument(self, engine: Engine) -> Engine:
        """Wrap every suggestor registered on ``engine`` so each execution is a span
        (registration order kept). Returns the engine."""
        wrapped = [TracedSuggestor(s, self.tracer) for s in engine.registry.suggestors]
        registry = SuggestorRegistry()
        registry.add(*wrapped)
        registry.records_effect = list(engine.registry.records_effect)  # marks by name kept
        engine.registry = registry
        return engine

    def run(
        self,
        engine: Engine,
        job: str,
        initial: Mapping[str, Iterable[Any]] | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        """``engine.run`` inside the span ``invoke_workflow {job}``, whose attributes
        end with the stop reason's kind and category and the run's usage."""
        run_id = run_id or uuid.uuid4().hex[:16]
        token = _RUN_ID.set(run_id)
        try:
            with self.tracer.start_as_current_span(
                f"invoke_workflow {job}",
                attributes={
                    "gen_ai.operation.name": "invoke_workflow",
                    "gen_ai.agent.name": job,
                    "gen_ai.conversation.id": run_id,
                },
            ) as span:
                result = engine.run(initial, run_id=run_id)
                _record_result(span, result)
                return result
        finally:
            _RUN_ID.reset(token)

    def shutdown(self) -> None:
        """Flush and stop the exporter."""
        self.provider.shutdown()


def _record_result(span: Span, result: RunResult) -> None:
    reason = result.stop_reason
    span.set_attribute("converge.stop_reason", reason.kind_code())
    span.set_attribute("converge.stop_category", str(reason.category))
    span.set_attribute("converge.cycles", result.cycles)
    span.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
    span.set_attribute("converge.cost_usd", result.usage.cost_usd)
    if reason.is_error():
        span.set_status(Status(StatusCode.ERROR, str(reason)))
