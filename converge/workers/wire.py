"""What travels between the engine and a worker, as JSON (docs/scale-out.md).

A task carries the suggestor's ``module:attr`` reference, its name, the cycle,
the facts it may read (``fact_to_dict`` form), the remaining time budget and what
is left of the run's budgets (:func:`encode_remaining`, the worker context's
``remaining_budget()``, so agents cap their calls there too). It
returns one *reply*: ``{"effect": {proposals, usage, refusal}}`` (with
``tool_calls``, ``signal`` and ``audit`` when the effect has them),
``{"raised": {type, message}}`` for an exception of the suggestor's own code,
``{"stop_run": {message, context}}`` for :class:`StopRun`, ``{"returned": type}``
for a value that is neither an ``Effect`` nor proposals, or ``{"unusable":
message}`` when the worker cannot import or run the reference at all. Any reply
may also carry ``recorded``: ``[[suggestor, input_tokens, output_tokens,
cost_usd], ...]``, the usage the execution recorded with ``ctx.record_usage``.
:func:`outcome_of` turns a reply back into the outcome an in-process execution
would have produced, so collection, merge and the audit trail are the same.
"""

from __future__ import annotations

import traceback
from typing import Any

from converge.errors import RemoteSuggestorError
from engine import (
    Budget,
    ConfigurationError,
    Context,
    Effect,
    Proposal,
    RemainingBudget,
    StopRun,
    Usage,
    parse_stop_reason,
)
from engine.safe_json import json_safe
from engine.stop import stop_reason_to_dict

__all__ = [
    "RemoteSuggestorError",
    "decode_remaining",
    "encode_output",
    "encode_remaining",
    "outcome_of",
    "record_replied_usage",
    "with_recorded_usage",
]


_remote_types: dict[str, type[RemoteSuggestorError]] = {}


def _remote_type(name: str) -> type[RemoteSuggestorError]:
    cls = _remote_types.get(name)
    if cls is None:
        cls = type(name, (RemoteSuggestorError,), {"__module__": __name__})
        _remote_types[name] = cls
    return cls


def encode_output(out: Any) -> dict[str, Any]:
    """The reply for what ``execute(ctx)`` returned on a worker."""
    if isinstance(out, Effect):
        proposals: Any = out.proposals
        usage = out.usage
        refusal = out.refusal
    elif out is None:
        proposals, usage, refusal = [], Usage(), None
    elif isinstance(out, Proposal):
        proposals, usage, refusal = [out], Usage(), None
    elif isinstance(out, list | tuple) and all(isinstance(p, Proposal) for p in out):
        proposals, usage, refusal = list(out), Usage(), None
    else:
        return {"returned": type(out).__name__}
    if not isinstance(usage, Usage):
        return {"returned_usage": type(usage).__name__}
    encoded: dict[str, Any] = {
        "proposals": [[p.key, p.content, p.confidence, list(p.parents), p.id] for p in proposals],
        "usage": [usage.input_tokens, usage.output_tokens, usage.cost_usd],
        "refusal": refusal,
    }
    if isinstance(out, Effect):
        # what an agent reports of its own loop: tools it called, a stop inside
        if out.tool_calls:
            encoded["tool_calls"] = list(out.tool_calls)
        if out.signal is not None:
            encoded["signal"] = stop_reason_to_dict(out.signal)
        if out.audit:
            encoded["audit"] = json_safe(dict(out.audit))
    return {"effect": encoded}


def encode_exception(exc: BaseException) -> dict[str, Any]:
    """The reply for an exception raised by the suggestor on a worker."""
    if isinstance(exc, StopRun):
        return {"stop_run": {"message": exc.message, "context": exc.context}}
    return {
        "raised": {
            "type": type(exc).__name__,
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
        }
    }


def with_recorded_usage(reply: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """``reply`` with the usage the execution recorded on the worker's context
    (``ctx.record_usage``: it raised or stopped after spending), as ``recorded``."""
    recorded = ctx.recorded_usage()
    if recorded:
        reply["recorded"] = [
            [name, u.input_tokens, u.output_tokens, u.cost_usd] for name, u in recorded
        ]
    return reply


def record_replied_usage(reply: Any, ctx: Context) -> None:
    """Record on the run's ``ctx`` the usage a worker's ``reply`` carries (see
    :func:`with_recorded_usage`); raises ``ConfigurationError`` when it is malformed."""
    recorded = reply.get("recorded") if isinstance(reply, dict) else None
    for entry in recorded or ():
        try:
            name, i, o, c = entry
            ctx.record_usage(str(name), Usage(i, o, c))
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"worker reply with bad recorded usage {entry!r}") from exc


def encode_remaining(left: RemainingBudget | None) -> dict[str, Any] | None:
    """What is left of the run's budgets, for a task (None: nothing to send)."""
    if left is None:
        return None
    return {
        "tokens": left.tokens,
        "cost_usd": left.cost_usd,
        "invocations": left.invocations,
        "seconds": left.seconds,
        "per_suggestor": dict(left.per_suggestor),
        "budget": None if left.budget is None else left.budget.model_dump(mode="json"),
    }


def decode_remaining(data: Any) -> RemainingBudget | None:
    """The :class:`RemainingBudget` :func:`encode_remaining` sent; raises
    ``ValueError`` or ``TypeError`` when ``data`` is not one."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise TypeError(f"remaining budget must be an object, got {type(data).__name__}")
    budget = data.get("budget")
    return RemainingBudget(
        tokens=_optional(data.get("tokens"), int),
        cost_usd=_optional(data.get("cost_usd"), float),
        invocations=_optional(data.get("invocations"), int),
        seconds=_optional(data.get("seconds"), float),
        per_suggestor={str(k): int(v) for k, v in (data.get("per_suggestor") or {}).items()},
        budget=None if budget is None else Budget.model_validate(budget),
    )


def _optional(value: Any, kind: type[int] | type[float]) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number or null, got {value!r}")
    return kind(value)


class _Returned:
    """Stands for a value of the wrong type a suggestor returned on a worker."""


def outcome_of(reply: Any, name: str) -> Any:
    """The in-process outcome equal to a worker's ``reply`` for suggestor ``name``.

    Raises :class:`ConfigurationError` when the worker could not use the
    suggestor's reference (``unusable``) or the reply is not one we know.
    """
    if not isinstance(reply, dict):
        raise ConfigurationError(f"worker reply for suggestor {name!r} is not an object")
    effect = reply.get("effect")
    if effect is not None:
        i, o, c = effect["usage"]
        proposals = [
            Proposal(key, content, confidence, tuple(parents), pid)
            for key, content, confidence, parents, pid in effect["proposals"]
        ]
        signal = effect.get("signal")
        return Effect(
            proposals,
            Usage(int(i), int(o), float(c)),
            effect["refusal"],
            tool_calls=tuple(str(t) for t in effect.get("tool_calls") or ()),
            signal=None if signal is None else parse_stop_reason(signal),
            audit=effect.get("audit") or None,
        )
    raised = reply.get("raised")
    if raised is not None:
        exc = _remote_type(str(raised["type"]))(str(raised["message"]))
        # the worker's own traceback, for the suggestor_failed event (engine._cycle.collect)
        exc.traceback_text = str(raised.get("traceback") or "")
        return exc
    stop = reply.get("stop_run")
    if stop is not None:
        return StopRun(str(stop["message"]), context=stop.get("context") or {})
    returned = reply.get("returned")
    if returned is not None:
        return type(str(returned), (_Returned,), {})()
    bad_usage = reply.get("returned_usage")
    if bad_usage is not None:
        return Effect(usage=type(str(bad_usage), (_Returned,), {})())
    unusable = reply.get("unusable")
    if unusable is not None:
        raise ConfigurationError(f"the worker cannot run suggestor {name!r}: {unusable}")
    raise ConfigurationError(f"worker reply for suggestor {name!r} is not understood: {reply!r}")
