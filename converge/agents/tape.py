"""Model responses recorded for replay, and played back without calling the model.

Recording: each agent run records, in its execution's ``suggestor_executed`` event
(``responses``: one list per agent run), every response the model gave, each with
the digest of the request it answered (:func:`exchanges`). What varies from one
call to the next and does not change what the agent does (timestamps, tool-call
ids) is left out, so two runs of a deterministic model record the same events, and
so are the fields at their defaults (None, zero counts).

Playback (``converge replay``): inside :func:`playing`, :func:`call_agent
<converge.agents.call_agent>` hands the agent a :class:`TapeModel` instead of its
model: the recorded responses of that execution's agent run, in order, with no
request sent. A request whose digest differs from the recorded one (another
prompt, a tool that returned something else) or past the recorded responses is
reported to the :class:`ModelTape` (its ``misses``); the first still gets the
recorded answer, the second raises :class:`TapeMissing`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models import Model
from pydantic_core import to_jsonable_python

from converge.agents.pricing import AnsweringModel, Ask
from converge.errors import TapeMissing
from engine import Context

__all__ = [
    "ModelTape",
    "TapeMiss",
    "TapeMissing",
    "TapeModel",
    "exchanges",
    "playing",
    "replaying",
    "request_digest",
    "response_json",
    "response_of",
    "taped",
]

_VOLATILE = frozenset({"timestamp", "tool_call_id", "run_id", "conversation_id"})
"""Keys of a response's JSON left out of the recording (see the module docstring)."""


def request_digest(message: ModelMessage) -> str:
    """The SHA-256 (hex) of what a request asks: its instructions and, per part, its
    kind, tool name and content (timestamps and ids aside)."""
    parts = [
        [
            getattr(part, "part_kind", type(part).__name__),
            getattr(part, "tool_name", None),
            getattr(part, "content", None),
        ]
        for part in getattr(message, "parts", ())
    ]
    data = {"instructions": getattr(message, "instructions", None), "parts": parts}
    text = json.dumps(to_jsonable_python(data, fallback=str), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _stripped(data: dict[str, Any]) -> dict[str, Any]:
    """A response's JSON without its volatile keys and the None values of the
    response and of its parts, and its usage without zero counts (what the parts
    carry, e.g. a tool call's arguments, is kept as it is)."""

    def kept(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if v is not None and k not in _VOLATILE}

    out = kept(data)
    parts = out.get("parts")
    if isinstance(parts, list):
        out["parts"] = [kept(p) if isinstance(p, dict) else p for p in parts]
    usage = out.get("usage")
    if isinstance(usage, dict):
        out["usage"] = {k: v for k, v in usage.items() if v}
    return out


def exchanges(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """The responses of one agent run, each ``{"request": digest, "response": JSON}``
    (the digest of the request just before it; the response as pydantic-ai's
    message JSON, without its volatile keys)."""
    out: list[dict[str, Any]] = []
    asked: str | None = None
    for m in messages:
        if isinstance(m, ModelRequest):
            asked = request_digest(m)
        elif isinstance(m, ModelResponse):
            out.append({"request": asked, "response": response_json(m)})
    return out


_PLAIN_PARTS = (TextPart, ToolCallPart)
"""Response parts whose fields are plain JSON: encoded without pydantic-ai's adapter."""


def response_json(response: ModelResponse) -> dict[str, Any]:
    """pydantic-ai's JSON of ``response`` (``ModelMessagesTypeAdapter``'s) without
    its volatile keys and its defaults (:func:`_stripped`). A response of text and
    tool-call parts only is built from its fields directly: the same JSON, several
    times faster (one is recorded per model request)."""
    if not all(type(p) in _PLAIN_PARTS for p in response.parts):
        dumped = ModelMessagesTypeAdapter.dump_python([response], mode="json")[0]
        stripped: dict[str, Any] = _stripped(dumped)
        return stripped
    out: dict[str, Any] = {}
    for k, v in vars(response).items():
        if v is None or k in _VOLATILE:
            continue
        if k == "parts":
            v = [_set_fields(p) for p in v]
        elif k == "usage":
            v = {uk: uv for uk, uv in vars(v).items() if uv}
        out[k] = v
    data: dict[str, Any] = to_jsonable_python(out)
    return data


def _set_fields(part: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(part).items() if v is not None and k not in _VOLATILE}


def response_of(data: dict[str, Any]) -> ModelResponse:
    """The :class:`ModelResponse` a recorded exchange's ``response`` holds."""
    [message] = ModelMessagesTypeAdapter.validate_python([data])
    if not isinstance(message, ModelResponse):
        raise TypeError("a recorded response is not a model response")
    return message


@dataclass(frozen=True)
class TapeMiss:
    """A request the tape could not answer as recorded: in ``cycle``, by agent
    ``suggestor``, agent run ``run`` (from 1), request ``request`` (from 1); ``kind``
    ``request`` (another question: ``expected`` / ``got`` digests) or
    ``unrecorded`` (no recorded response)."""

    kind: str
    cycle: int
    suggestor: str
    run: int
    request: int
    expected: str | None
    got: str | None


@dataclass
class ModelTape:
    """The recorded agent runs of a run, by ``(cycle, suggestor)``: each a list of
    exchanges (:func:`exchanges`). ``misses`` and ``served`` (responses given back)
    are filled as the replay goes."""

    runs: dict[tuple[int, str], list[list[dict[str, Any]]]]
    misses: list[TapeMiss] = field(default_factory=list)
    served: int = 0
    _next: dict[tuple[int, str], int] = field(default_factory=dict)

    def model_for(self, model: Model, ctx: Context, name: str) -> Model:
        """The model of the next agent run of ``name`` in ``ctx``'s cycle: a
        :class:`TapeModel` of its recorded responses, in ``model``'s stead."""
        key = (ctx.cycle, name)
        index = self._next.get(key, 0)
        self._next[key] = index + 1
        recorded = self.runs.get(key, [])
        run = recorded[index] if index < len(recorded) else None
        return TapeModel(model, self, key, index + 1, run)


class TapeModel(AnsweringModel):
    """``wrapped`` (its name, system and profile, so pricing and output handling are
    the same) answering from one recorded agent run instead of sending requests."""

    def __init__(
        self,
        wrapped: Model,
        tape: ModelTape,
        key: tuple[int, str],
        run_number: int,
        run: list[dict[str, Any]] | None,
    ) -> None:
        super().__init__(wrapped)
        self.tape = tape
        self.key = key
        self.run_number = run_number
        self.run = run
        self.asked = 0

    async def answer(self, messages: list[ModelMessage], ask: Ask) -> ModelResponse:
        """The next recorded response (never a request to the model); raises
        :class:`TapeMissing` past the recorded ones."""
        self.asked += 1
        cycle, name = self.key
        got = request_digest(messages[-1]) if messages else None
        if self.run is None or self.asked > len(self.run):
            self.tape.misses.append(
                TapeMiss("unrecorded", cycle, name, self.run_number, self.asked, None, got)
            )
            raise TapeMissing(
                f"{name}: no recorded response to request {self.asked} of its agent run "
                f"{self.run_number} in cycle {cycle}"
            )
        exchange = self.run[self.asked - 1]
        expected = exchange.get("request")
        if expected is not None and expected != got:
            self.tape.misses.append(
                TapeMiss("request", cycle, name, self.run_number, self.asked, expected, got)
            )
        self.tape.served += 1
        return response_of(exchange["response"])


_TAPE: ContextVar[ModelTape | None] = ContextVar("converge_model_tape", default=None)


@contextmanager
def playing(tape: ModelTape) -> Iterator[ModelTape]:
    """Agent runs inside answer from ``tape`` (:func:`taped`), calling no model."""
    token = _TAPE.set(tape)
    try:
        yield tape
    finally:
        _TAPE.reset(token)


def replaying() -> bool:
    """True inside :func:`playing`: agent runs call no model."""
    return _TAPE.get() is not None


def taped(model: Model, ctx: Context, name: str) -> Model:
    """``model``, or its :class:`TapeModel` while a tape is :func:`playing`."""
    tape = _TAPE.get()
    return model if tape is None else tape.model_for(model, ctx, name)
