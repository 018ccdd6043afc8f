"""What an agent's model costs: a fixed price per million tokens, or genai-prices.

A ``price`` given to an agent (``(usd_per_million_input, usd_per_million_output)``)
overrides genai-prices; :class:`PricedModel` makes pydantic-ai's own ``cost_limit``
see it (an :class:`AnsweringModel`: a wrapped model whose requests one method
answers, as the models that answer from a recording are). :func:`priceable` says
whether genai-prices knows a model at all; :func:`reports_no_cost` whether its
responses can carry their own cost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal
from functools import partial

import genai_prices
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

__all__ = [
    "AnsweringModel",
    "Ask",
    "Price",
    "PricedModel",
    "cost_usd",
    "model_label",
    "priceable",
    "reports_no_cost",
]

Price = tuple[float, float]
"""``(usd_per_million_input_tokens, usd_per_million_output_tokens)``."""

Ask = Callable[[], Awaitable[ModelResponse]]
"""Sends the request being answered to the wrapped model (:class:`AnsweringModel`)."""


class AnsweringModel(WrapperModel):
    """``wrapped``, each request answered by :meth:`answer` (which may ask the wrapped
    model): :class:`PricedModel`, and the models that answer from a recording
    (:class:`converge.agents.tape.TapeModel`,
    :class:`converge.agents.recovered.RecordedRun`)."""

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """:meth:`answer`'s response to this request."""
        ask = partial(super().request, messages, model_settings, model_request_parameters)
        return await self.answer(messages, ask)

    async def answer(self, messages: list[ModelMessage], ask: Ask) -> ModelResponse:
        """The response to ``messages`` (the last one the request); ``ask()`` sends the
        request to the wrapped model. This one: the wrapped model's."""
        return await ask()


class PricedModel(AnsweringModel):
    """A model whose responses carry the cost of ``price`` (per million tokens), so
    pydantic-ai's ``cost_limit`` applies to models genai-prices does not know."""

    def __init__(self, wrapped: Model, price: Price) -> None:
        super().__init__(wrapped)
        self.price = price

    async def answer(self, messages: list[ModelMessage], ask: Ask) -> ModelResponse:
        """The wrapped model's response, its usage priced at ``price``."""
        response = await ask()
        response.usage.cost = cost_usd(
            response.usage.input_tokens, response.usage.output_tokens, self.price
        )
        return response


def cost_usd(input_tokens: int, output_tokens: int, price: Price) -> Decimal:
    """USD of ``input_tokens`` and ``output_tokens`` at ``price`` (per million tokens)."""
    usd_in, usd_out = (Decimal(str(p)) for p in price)
    return (input_tokens * usd_in + output_tokens * usd_out) / Decimal(1_000_000)


def model_label(model: Model) -> str:
    """``system:model_name`` of a pydantic-ai model, as error messages name it."""
    return f"{model.system}:{model.model_name}"


def priceable(model: Model) -> bool:
    """True when genai-prices knows this model's price (by provider, else by name)."""
    probe = genai_prices.Usage(input_tokens=1, output_tokens=1)
    for provider in (model.system, None):
        try:
            genai_prices.calc_price(probe, model.model_name, provider_id=provider)
            return True
        except (LookupError, ValueError):
            continue
    return False


def reports_no_cost(model: Model) -> bool:
    """True for a model whose responses never carry a cost (pydantic-ai's offline
    ``TestModel``). Any other model's response may carry the cost its server
    reported (``RequestUsage.cost``, e.g. a gateway's), so it is not refused up
    front under a cost budget: its first response tells."""
    from pydantic_ai.models.test import TestModel

    return isinstance(model, TestModel)
