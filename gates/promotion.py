"""Promotion gates: validators every proposal passes before it becomes a fact.

``on_reject="stop"`` ends the run with ``PromotionRejected``; ``"drop"`` drops the
proposal, records a ``proposal_rejected`` audit event and goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, PydanticSchemaGenerationError, TypeAdapter, ValidationError

from engine.context import Context
from engine.errors import ConfigurationError
from engine.facts import Proposal
from engine.promotion import OnReject, Rejection


def _check_on_reject(value: str) -> None:
    if value not in ("stop", "drop"):
        raise ValueError(f"on_reject must be 'stop' or 'drop', got {value!r}")


class ContentSchema:
    """Validates the content of proposals on ``key`` against a pydantic model or type.

    ``schema`` is a ``BaseModel`` subclass or any type pydantic understands
    (``dict[str, int]``...). The first validation error is the rejection reason.
    Raises :class:`ConfigurationError` when pydantic cannot build a validator for it.
    """

    def __init__(self, key: str, schema: Any, *, on_reject: OnReject = "stop") -> None:
        _check_on_reject(on_reject)
        self.key = key
        self.name = f"schema:{key}"
        self.on_reject: OnReject = on_reject
        try:
            self._adapter: TypeAdapter[Any] = TypeAdapter(schema)
        except (PydanticSchemaGenerationError, AttributeError, TypeError) as exc:
            raise ConfigurationError(
                f"schema for {key!r}: {schema!r} is not a type pydantic can validate"
            ) from exc
        self._is_model = isinstance(schema, type) and issubclass(schema, BaseModel)

    def check(self, proposal: Proposal, suggestor: str, ctx: Context) -> Rejection | None:
        """Rejects content the schema does not accept (strict for models)."""
        if proposal.key != self.key:
            return None
        try:
            self._adapter.validate_python(proposal.content)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"]) or "content"
            return Rejection(f"{loc}: {first['msg']}")
        return None


@dataclass
class MinConfidence:
    """Rejects proposals whose confidence is below ``threshold`` (on ``keys``, or all)."""

    threshold: float
    keys: Iterable[str] | None = None
    on_reject: OnReject = "drop"
    name: str = "min_confidence"
    _keys: frozenset[str] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        _check_on_reject(self.on_reject)
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"threshold must be within 0..1, got {self.threshold}")
        self._keys = None if self.keys is None else frozenset(self.keys)

    def check(self, proposal: Proposal, suggestor: str, ctx: Context) -> Rejection | None:
        """Rejects a proposal under the threshold."""
        if self._keys is not None and proposal.key not in self._keys:
            return None
        if proposal.confidence < self.threshold:
            return Rejection(f"confidence {proposal.confidence} < {self.threshold}")
        return None


class CallableGate:
    """Any callable ``(proposal, suggestor, ctx)`` as a gate.

    It returns ``None``/``True`` (accept), ``False`` or a reason string (reject), or
    a :class:`Rejection`.
    """

    def __init__(
        self,
        fn: Callable[[Proposal, str, Context], Any],
        name: str,
        *,
        on_reject: OnReject = "stop",
    ) -> None:
        _check_on_reject(on_reject)
        self.fn = fn
        self.name = name
        self.on_reject: OnReject = on_reject

    def check(self, proposal: Proposal, suggestor: str, ctx: Context) -> Rejection | None:
        """Calls the function and normalises its answer."""
        out = self.fn(proposal, suggestor, ctx)
        if out is None or out is True:
            return None
        if isinstance(out, Rejection):
            return out
        if out is False:
            return Rejection("rejected")
        return Rejection(str(out))


def promotion_gate(
    *, name: str | None = None, on_reject: OnReject = "stop"
) -> Callable[[Callable[[Proposal, str, Context], Any]], CallableGate]:
    """Decorate ``fn(proposal, suggestor, ctx)`` into a promotion gate."""

    def wrap(fn: Callable[[Proposal, str, Context], Any]) -> CallableGate:
        return CallableGate(fn, name or fn.__name__, on_reject=on_reject)

    return wrap
