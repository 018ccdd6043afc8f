"""A model string resolved against an OpenAI-compatible endpoint: :func:`resolve_model`.

pydantic-ai resolves ``openai:NAME`` to OpenAI's Responses API (``POST
/v1/responses``), which llama.cpp's server, llama-cpp-python's, vLLM and Ollama
do not serve. With a base URL (an agent's ``base_url``, or
``$CONVERGE_MODEL_BASE_URL``), ``openai:NAME`` and ``openai-chat:NAME`` reach
the chat-completions endpoint of that server instead, need no API key (a local
server takes any; an ``OPENAI_API_KEY`` that is set is still sent) and send
``max_tokens`` (local servers ignore OpenAI's ``max_completion_tokens``). A
structured output whose only tool is the output tool names it in ``tool_choice``
(``{"type": "function", "function": {"name": "final_result"}}``, the same
constraint as ``required`` there): llama.cpp's ``gemma`` chat format ignores
``required``, and enforces a named tool by grammar. An assistant message sent
back (a retry after a malformed answer, a tool call's turn) carries its
``content`` as a string, ``""`` rather than ``null``: llama-cpp-python's server
refuses ``null`` with a 500.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic_ai.models import Model, ModelRequestParameters, infer_model
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.settings import ModelSettings

__all__ = ["BASE_URL_ENV", "OPENAI_PREFIXES", "EndpointChatModel", "resolve_model"]

BASE_URL_ENV = "CONVERGE_MODEL_BASE_URL"
"""The environment variable giving the base URL of an OpenAI-compatible server."""

OPENAI_PREFIXES = ("openai:", "openai-chat:")
"""The model strings a base URL applies to."""

NO_KEY = "not-needed"
"""The API key sent to a server at a base URL when ``OPENAI_API_KEY`` is unset."""


class EndpointChatModel(OpenAIChatModel):
    """pydantic-ai's chat-completions model on an OpenAI-compatible server, naming
    the output tool in ``tool_choice`` when it is the only tool (unless the
    settings' ``extra_body`` gives a ``tool_choice``)."""

    def prepare_request(
        self,
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> tuple[ModelSettings | None, ModelRequestParameters]:
        """pydantic-ai's preparation, then the named output tool (see the class)."""
        settings, params = super().prepare_request(model_settings, model_request_parameters)
        if (
            params.output_mode != "tool"
            or params.allow_text_output
            or params.function_tools
            or len(params.output_tools) != 1
        ):
            return settings, params
        body = dict(settings or {}).get("extra_body") or {}
        if not isinstance(body, dict) or "tool_choice" in body:
            return settings, params
        named = {"type": "function", "function": {"name": params.output_tools[0].name}}
        merged: dict[str, Any] = {**(settings or {}), "extra_body": {**body, "tool_choice": named}}
        return merged, params  # type: ignore[return-value]

    async def _map_messages(self, *args: Any, **kwargs: Any) -> Any:
        """pydantic-ai's messages, an assistant's ``content: null`` sent as ``""``."""
        # pydantic-ai's private method: it has no public hook on the chat messages it
        # sends (checked on 2.68); the one site tests/test_architecture.py allows
        mapped = await super()._map_messages(*args, **kwargs)
        for message in mapped:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return mapped


def resolve_model(
    model: str | Model,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Model:
    """The pydantic-ai model of ``model``.

    ``base_url`` (else ``$CONVERGE_MODEL_BASE_URL``, e.g.
    ``http://127.0.0.1:8080/v1``) applies to ``openai:NAME`` / ``openai-chat:NAME``:
    an :class:`EndpointChatModel` on that server's chat completions. Any other model
    string is pydantic-ai's ``infer_model``. Raises ``ValueError`` when an explicit
    ``base_url`` is given for a model that is not ``openai:``; pydantic-ai's own
    errors (unknown provider, missing API key or package) propagate.
    """
    if isinstance(model, Model):
        return model
    env = os.environ if environ is None else environ
    base = (base_url or env.get(BASE_URL_ENV, "")).strip()
    if not base:
        return infer_model(model)
    if not model.startswith(OPENAI_PREFIXES):
        if base_url:
            raise ValueError(
                f"base_url applies to openai:NAME models (an OpenAI-compatible server), "
                f"not to {model!r}"
            )
        return infer_model(model)
    from pydantic_ai.providers.openai import OpenAIProvider

    name = model.split(":", 1)[1]
    provider = OpenAIProvider(base_url=base, api_key=env.get("OPENAI_API_KEY") or NO_KEY)
    profile: dict[str, Any] = dict(provider.model_profile(name) or {})
    profile["openai_chat_supports_max_completion_tokens"] = False
    return EndpointChatModel(name, provider=provider, profile=profile)  # type: ignore[arg-type]
