"""Whether the server at a base URL serves an agent's model: :func:`check_served`.

Before the first call of a run to an OpenAI-compatible server at a base URL (an
:class:`~converge.agents.endpoint.EndpointChatModel`), ``GET {base}/models``
(:data:`LIST_TIMEOUT_S`, no retry). A server that lists its models and not the
agent's refuses it before any chat call: ``Error(error_category="configuration")``
naming the model, the base URL and the names served (llama-cpp-python's server
answers any name it is asked for, with the one model it has). A server that cannot
be reached stops the run with ``Error(error_category="external")`` naming the base
URL and the model. A server that gives no list (404, an answer that is not one)
is called as before. The answer is kept for the rest of the run (per
:class:`~engine.Context`); concurrent first calls of a run share one request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from pydantic_ai.models import Model

from converge.agents.endpoint import EndpointChatModel
from converge.agents.pricing import model_label
from engine import Context, Error, ErrorCategory

__all__ = ["LIST_TIMEOUT_S", "Listing", "base_url_of", "check_served", "list_models"]

LIST_TIMEOUT_S = 5.0
"""Seconds the ``GET {base}/models`` of :func:`check_served` may take."""


@dataclass(frozen=True)
class Listing:
    """What ``GET {base}/models`` gave: the ``names`` served (None: no list), or
    why the server could not be reached (``unreachable``)."""

    names: tuple[str, ...] | None = None
    unreachable: str | None = None


_LISTED: WeakKeyDictionary[Context, dict[str, asyncio.Task[Listing]]] = WeakKeyDictionary()
"""Per run (its context), per base URL: the listing asked for."""


def base_url_of(model: Model) -> str | None:
    """The base URL of the server ``model`` is called at (no trailing slash), or
    None for a model that is not on an OpenAI-compatible server's base URL."""
    if not isinstance(model, EndpointChatModel):
        return None
    return str(model.base_url).rstrip("/")


async def list_models(model: EndpointChatModel) -> Listing:
    """``GET {base}/models`` with ``model``'s base URL and API key, at most
    :data:`LIST_TIMEOUT_S` seconds, no retry, on a client of its own closed
    afterwards: ``model``'s HTTP client may hold connections of an event loop
    that is gone (an agent used by several runs, each on its loop), which
    pydantic-ai replaces only when a run of the agent starts."""
    import openai

    sdk = model.client
    try:
        async with openai.AsyncOpenAI(
            base_url=sdk.base_url, api_key=sdk.api_key, timeout=LIST_TIMEOUT_S, max_retries=0
        ) as client:
            page = await client.models.list()
            names = tuple(str(m.id) for m in page.data)
    except openai.APIConnectionError as exc:  # refused, reset, timed out
        return Listing(unreachable=f"{type(exc).__name__}: {exc}")
    except (openai.APIError, AttributeError, TypeError, ValueError):
        return Listing()  # no list there: the chat call will tell
    return Listing(names)


async def check_served(model: Model, ctx: Context, name: str) -> Error | None:
    """Why the agent ``name`` must not call ``model`` in ``ctx``'s run (see the
    module docstring), or None (a model not at a base URL: None)."""
    base = base_url_of(model)
    if base is None:
        return None
    assert isinstance(model, EndpointChatModel)
    listing = await _listing(model, base, ctx)
    label = model_label(model)
    if listing.unreachable is not None:
        return Error(
            message=f"{name}: model {label} at {base} failed: the server cannot be "
            f"reached: {listing.unreachable}",
            error_category=ErrorCategory.EXTERNAL,
        )
    if listing.names is None or model.model_name in listing.names:
        return None
    return Error(
        message=f"{name}: model {label}: the server at {base} does not serve "
        f"{model.model_name!r} (it serves {_names(listing.names)})",
        error_category=ErrorCategory.CONFIGURATION,
    )


async def _listing(model: EndpointChatModel, base: str, ctx: Context) -> Listing:
    """The run's listing of ``base``: asked once, shared by concurrent callers; one
    that found the server unreachable is asked again next time."""
    per_base = _LISTED.setdefault(ctx, {})
    task = per_base.get(base)
    loop = asyncio.get_running_loop()
    if task is None or (task.get_loop() is not loop and not task.done()):
        task = per_base[base] = loop.create_task(list_models(model))
    listing = await asyncio.shield(task)
    if listing.unreachable is not None and per_base.get(base) is task:
        del per_base[base]
    return listing


def _names(names: Sequence[str]) -> str:
    """The names served, quoted, or ``no model``."""
    return ", ".join(repr(n) for n in names) if names else "no model"
