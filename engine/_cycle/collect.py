"""Collecting a cycle's outcomes into effects to merge (docs/concepts.md (step 4)).

Each outcome (a list of proposals, an :class:`Effect`, an exception, a marker)
is paired with its suggestor in registration order: usage is added up,
invocations counted, failures recorded (``on_error``), ``StopRun`` and refusals
become signals, and what is left is the cycle's list of effects for the merge.
The eligible suggestors whose execution was cut (timed out, cancelled, not
admitted by the invocation budget) go to ``Run.cut``: the cycle is then no
fixed point (:func:`engine._cycle.judge.after_merge`) and they are eligible again in
the next cycle, after a resume too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from traceback import format_exception
from typing import Any

from engine._cycle.accounting import elapsed_ms, ms
from engine._cycle.cycling import Cycling
from engine._cycle.merge import MERGE, Merge
from engine._cycle.run import Run
from engine.effect import NO_USAGE, Effect, Usage, usage_problem
from engine.errors import StopRun
from engine.executor import CANCELLED, NOT_DONE, TIMED_OUT
from engine.facts import Proposal, proposal_to_dict
from engine.safe_json import json_safe
from engine.settings import EngineSettings
from engine.stop import (
    AgentRefused,
    Error,
    ErrorCategory,
    InvocationBudgetExhausted,
    StopReason,
    StopRequested,
    TimeBudgetExhausted,
    UserCancelled,
    stop_reason_to_dict,
)
from engine.store import AuditEvent

Outcome = object
"""What one suggestor's call came to, as given: its return value (a list of
``Proposal``, an ``Effect``, a ``Proposal``, None; anything else is refused here),
the exception it raised, or ``NOT_DONE`` / ``CANCELLED`` / ``TIMED_OUT``."""


@dataclass(slots=True)
class Collect:
    """The step that turns the ``outcomes`` of the ``eligible`` suggestors into
    effects to merge, in registration order: usage, failures, ``StopRun``,
    refusals."""

    eligible: list[int]
    outcomes: list[Outcome] = field(default_factory=list)

    def run(self, cycle: Cycling) -> Merge:
        """Collect, then merge."""
        settings, run, eligible, outcomes = cycle.settings, cycle.run, self.eligible, self.outcomes
        admitted = run.cursor.take_admitted()
        if admitted is None:
            admitted = eligible
        store = settings.store is not None or run.listener is not None
        spend = run.spend
        effects: list[tuple[str, list[Proposal]]] = []
        last: list[str] = []
        usage_in = usage_out = 0
        cost = 0.0
        timed_out = cancelled = False
        names = settings.registry.names
        records = settings.registry.records_effect  # not deterministic: the proposals are recorded
        cut: list[str] = []  # eligible but not run to the end: eligible again next cycle
        for slot, out in enumerate(outcomes):
            name = names[admitted[slot]]
            if out is TIMED_OUT or out is CANCELLED:
                cut.append(name)
                if out is TIMED_OUT:
                    timed_out = True
                elif not cancelled:  # cut by cancel(): what was merged so far is kept
                    cancelled = True
                    run.cursor.signal(UserCancelled())
                continue
            last.append(name)
            spend.count_invocation(name)
            if isinstance(out, BaseException) or out is NOT_DONE:
                if _failed(settings, run, name, out, store):
                    break
                continue
            # the common case, a plain list of proposals, builds no Effect
            listed = out if type(out) is list else None
            if listed is not None:
                for p in listed:
                    if type(p) is not Proposal:
                        listed = None
                        break
            if listed is not None:
                proposals: list[Proposal] = listed
                u = NO_USAGE
                refusal: Any = None
                signal: StopReason | None = None
                inner: dict[str, Any] | None = None
            else:
                unpacked = _unpack(settings, run, name, out, last)
                if isinstance(unpacked, bool):  # a failure: True when the run stops
                    if unpacked:
                        break
                    continue
                u, proposals, refusal, signal, inner = unpacked
                usage_in += u.input_tokens
                usage_out += u.output_tokens
                cost += u.cost_usd
            spend.end_streak(name)
            if store:
                payload: dict[str, Any] = {
                    "suggestor": name,
                    "proposals": len(proposals),
                    "usage": [u.input_tokens, u.output_tokens, u.cost_usd],
                    **({"refusal": refusal} if refusal is not None else {}),
                    **(inner or {}),
                }
                if records[admitted[slot]]:
                    payload["effect"] = _effect_record(proposals, signal)
                run.record(AuditEvent("suggestor_executed", run.cursor.cycle, payload, time.time()))
            if refusal is not None:
                run.cursor.signal(AgentRefused(agent_id=name, reason=refusal))
                break
            if proposals:
                effects.append((name, proposals))
        usage_in, usage_out, cost = _recorded_usage(run, store, usage_in, usage_out, cost)
        if usage_in or usage_out or cost:
            spend.add_usage(Usage(usage_in, usage_out, cost))
        if timed_out:
            limit_ms = ms(run.budget.max_seconds or 0)
            # the event loop's timer may fire a hair before our clock reads the deadline
            elapsed = max(elapsed_ms(settings, run), limit_ms)
            run.cursor.signal(TimeBudgetExhausted(duration_ms=elapsed, limit_ms=limit_ms))
        if len(admitted) < len(eligible):  # the invocation budget admitted a prefix
            cut.extend(names[i] for i in eligible[len(admitted) :])
        run.cursor.collected(effects, tuple(last), cut)
        return MERGE


Unpacked = tuple[Usage, list[Proposal], Any, StopReason | None, dict[str, Any] | None]
"""An effect's usage, proposals, refusal (JSON-safe), signal and inner activity."""


def _failed(
    settings: EngineSettings, run: Run, name: str, out: BaseException | object, store: bool
) -> bool:
    """An execution that raised (``StopRun`` among them) or ended without a result;
    True when the run must stop."""
    if isinstance(out, StopRun):
        _stop_requested(run, name, out, store)
        return True
    if isinstance(out, BaseException):
        return record_failure(settings, run, name, describe(out), out)
    # a task that ended without an outcome
    return record_failure(settings, run, name, "the execution ended without a result")


def _unpack(
    settings: EngineSettings, run: Run, name: str, out: Outcome, last: list[str]
) -> Unpacked | bool:
    """What an outcome other than a plain list of proposals carries; a bool when it
    is no valid effect (a failure recorded: True when the run must stop)."""
    effect = out if type(out) is Effect else _normalise(out)
    if effect is None:
        msg = f"returned {type(out).__name__}, expected an Effect or a list of Proposal"
        return record_failure(settings, run, name, msg)
    problem = _invalid_effect(effect)
    if problem is not None:
        return record_failure(settings, run, name, problem)
    proposals, refusal, signal = effect.proposals, effect.refusal, effect.signal
    if type(proposals) is not list:
        proposals = list(proposals)
    if refusal is not None:
        refusal = json_safe(refusal)
    inner = None
    if effect.tool_calls or effect.signal is not None or effect.audit:
        inner = _inner_activity(run, name, effect, last)
    return effect.usage, proposals, refusal, signal, inner


def _recorded_usage(
    run: Run, store: bool, usage_in: int, usage_out: int, cost: float
) -> tuple[int, int, float]:
    """The totals with the usage spent by executions that raised or were cut
    (``Context.record_usage``) added, each recorded as ``usage_recorded``."""
    recorded = run.facts.recorded
    if not recorded:
        return usage_in, usage_out, cost
    taken = recorded[:]
    recorded.clear()
    for name, u in taken:
        usage_in += u.input_tokens
        usage_out += u.output_tokens
        cost += u.cost_usd
        if store:
            run.record(
                AuditEvent(
                    "usage_recorded",
                    run.cursor.cycle,
                    {"suggestor": name, "usage": [u.input_tokens, u.output_tokens, u.cost_usd]},
                    time.time(),
                )
            )
    return usage_in, usage_out, cost


def _inner_activity(run: Run, name: str, effect: Effect, last: list[str]) -> dict[str, Any]:
    """What an execution reported from inside (see :class:`Effect`): each tool call is
    an invocation ``NAME.TOOL`` (past its ``per_suggestor`` limit it stops the run:
    the engine cannot refuse a call made inside); its signal joins the pending
    signals; the details returned go to its ``suggestor_executed`` event."""
    per = run.budget.per_suggestor
    for tool in effect.tool_calls:
        invocation = f"{name}.{tool}"
        last.append(invocation)
        used = run.spend.count_invocation(invocation)
        limit = per.get(invocation)
        if limit and used == limit + 1:
            run.cursor.signal(
                InvocationBudgetExhausted(invocations=used, limit=limit, suggestor=invocation)
            )
    if effect.signal is not None:
        run.cursor.signal(effect.signal)
    details: dict[str, Any] = json_safe(dict(effect.audit)) if effect.audit else {}
    if effect.tool_calls:
        details["tool_calls"] = list(effect.tool_calls)
    return details


def _effect_record(proposals: list[Proposal], signal: StopReason | None) -> dict[str, Any]:
    """What replay needs of a non-deterministic suggestor's execution besides what its
    event records anyway (usage, tool calls, refusal, audit details): its proposals
    and the stop it signalled."""
    record: dict[str, Any] = {"proposals": json_safe([proposal_to_dict(p) for p in proposals])}
    if signal is not None:
        record["signal"] = stop_reason_to_dict(signal)
    return record


def _invalid_effect(effect: Effect) -> str | None:
    """What is wrong with an effect a suggestor returned, or None."""
    problem = usage_problem(effect.usage)
    if problem is not None:
        return f"returned {problem}"
    if type(effect.proposals) not in (list, tuple):
        got = type(effect.proposals).__name__
        return f"returned an Effect whose proposals are a {got}, expected a list of Proposal"
    r = effect.refusal
    if r is not None and type(r) is not str:
        return f"returned a refusal of type {type(r).__name__}, expected a string"
    return None


def describe(exc: BaseException) -> str:
    """``"Type: message"`` of an exception, even when its ``__str__`` fails."""
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    return f"{type(exc).__name__}: {text}"


def _stop_requested(run: Run, name: str, out: StopRun, store: bool) -> None:
    context = json_safe(getattr(out, "context", None) or {})
    if not isinstance(context, dict):
        context = {"context": context}
    message = json_safe(str(getattr(out, "message", "")))
    run.cursor.signal(StopRequested(source=name, message=message, context=context))
    if store:
        run.record(
            AuditEvent(
                "suggestor_executed",
                run.cursor.cycle,
                {"suggestor": name, "stop_requested": message},
                time.time(),
            )
        )


def record_failure(
    settings: EngineSettings, run: Run, name: str, message: str, exc: BaseException | None = None
) -> bool:
    """Record a failed execution (with ``exc``'s traceback in the audit event when it
    raised); True when the run must stop (``on_error="stop"``)."""
    message = json_safe(message)
    streak = run.spend.count_failure(name, message)
    if settings.store is not None or run.listener is not None:
        run.record(
            AuditEvent(
                "suggestor_failed",
                run.cursor.cycle,
                {
                    "suggestor": name,
                    "error": message,
                    "streak": streak,
                    **({"traceback": _traceback(exc)} if exc is not None else {}),
                },
                time.time(),
            )
        )
    if settings.on_error == "stop":
        run.cursor.signal(
            Error(message=f"{name}: {message}", error_category=ErrorCategory.SUGGESTOR)
        )
        return True
    return False


def _normalise(out: Outcome) -> Effect | None:
    if isinstance(out, Effect):
        return out
    if out is None:
        return Effect()
    if isinstance(out, Proposal):
        return Effect([out])
    if isinstance(out, list | tuple) and all(isinstance(p, Proposal) for p in out):
        return Effect(list(out))
    return None


def _traceback(exc: BaseException) -> str:
    """The exception's traceback as recordable text; an exception rebuilt from another
    process (an executor's worker) carries the text of where it was raised."""
    remote = getattr(exc, "traceback_text", None)
    text: str = json_safe(
        remote if isinstance(remote, str) and remote else "".join(format_exception(exc))
    )
    return text
