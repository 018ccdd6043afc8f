"""A span for each model request of a traced agent run: :class:`RequestSpans`.

When a run is traced (:mod:`converge.telemetry`, extra ``otel``), each model
request an agent makes is a span ``chat {model}`` under the execution's
``invoke_agent`` span, with the OpenTelemetry GenAI attributes of the request
(``gen_ai.operation.name = chat``, ``gen_ai.request.model``,
``gen_ai.provider.name``, ``gen_ai.usage.input_tokens`` /
``output_tokens`` of that response, ``gen_ai.response.model``,
``gen_ai.response.finish_reasons``); a request that fails or is cut ends with
status ERROR. Untraced runs add nothing: :func:`request_spans` is None.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model

from converge.agents.pricing import Price, cost_usd

__all__ = ["RequestSpans", "request_spans"]


def request_spans(model: Model, price: Price | None) -> RequestSpans | None:
    """The capability that traces ``model``'s requests, when the current execution
    is traced (:func:`converge.telemetry.current_tracer`); None otherwise."""
    telemetry = sys.modules.get("converge.telemetry")  # never imported: nothing traced
    tracer = None if telemetry is None else telemetry.current_tracer()
    return None if tracer is None else RequestSpans(tracer, model, price)


class RequestSpans(AbstractCapability[Any]):
    """A pydantic-ai capability: each model request inside a span ``chat {model}``."""

    def __init__(self, tracer: Any, model: Model, price: Price | None) -> None:
        self.tracer = tracer
        self.model = model
        self.price = price

    async def wrap_model_request(
        self, ctx: Any, *, request_context: Any, handler: Any
    ) -> ModelResponse:
        """The request inside its span; the response's usage on the span, status
        ERROR when it fails or is cut."""
        from opentelemetry.trace import Status, StatusCode

        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": self.model.model_name,
            "gen_ai.provider.name": self.model.system,
        }
        with self.tracer.start_as_current_span(
            f"chat {self.model.model_name}",
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                response: ModelResponse = await handler(request_context)
            except asyncio.CancelledError:
                span.set_status(Status(StatusCode.ERROR, "cut: cancelled or out of time"))
                raise
            except Exception as exc:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise
            usage = response.usage
            span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
            if self.price is not None:
                cost = cost_usd(usage.input_tokens, usage.output_tokens, self.price)
                span.set_attribute("converge.cost_usd", float(cost))
            elif usage.cost is not None:
                span.set_attribute("converge.cost_usd", float(usage.cost))
            if response.model_name:
                span.set_attribute("gen_ai.response.model", response.model_name)
            if response.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
            return response
