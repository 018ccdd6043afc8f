"""The engine: the cycle loop of DESIGN.md §4, run to a typed stop.

A run alternates *cycles*: find the eligible suggestors (those reading a key that
changed in the previous cycle, plus the dependency-free ones), execute them
(sync ones in registration order, async ones concurrently), merge their
proposals in registration order (dedupe, promotion gates, HITL gates, promotion),
then check invariants, budgets, stop policies and criteria. Every end is one
``StopReason``; whatever ends the run, the facts promoted so far are returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from hashlib import sha256
from math import isfinite
from typing import Any, Literal

from engine.budget import Budget, BudgetStatus
from engine.collector import CollectorFreeze, bulk_load
from engine.context import Context
from engine.criterion import Blocked, Criterion, CriterionReport, Met
from engine.effect import NO_USAGE, Effect, Usage
from engine.errors import (
    ConfigurationError,
    GateAlreadyDecided,
    GateNotFound,
    ResumeError,
    RunNotFound,
    StoreError,
)
from engine.facts import (
    INPUT_SOURCE,
    Fact,
    Proposal,
    Provenance,
    content_key,
    fact_json,
    fact_to_dict,
)
from engine.hitl import GateDecision, HitlPolicy
from engine.integrity import fact_leaf, root_of_leaves
from engine.invariant import Invariant
from engine.policy import Continue, HistoryView, RunStats, StopPolicy
from engine.promotion import PromotionGate
from engine.result import ContinuationRecord, RunResult
from engine.run_state import PendingGate, RunState, drop_replayed
from engine.stop import (
    AgentRefused,
    Converged,
    CostBudgetExhausted,
    CriteriaMet,
    CriteriaUnmet,
    CycleBudgetExhausted,
    Error,
    ErrorCategory,
    FactBudgetExhausted,
    HitlGatePending,
    HumanInterventionRequired,
    InvariantClass,
    InvariantViolated,
    InvocationBudgetExhausted,
    PolicyStopped,
    PromotionRejected,
    StopCategory,
    StopReason,
    StopRequested,
    TimeBudgetExhausted,
    TokenBudgetExhausted,
    UserCancelled,
    stop_reason_to_dict,
)
from engine.store import AuditEvent, GateRecord, RunHeader, RunOutcome, RunStore
from engine.suggestor import FunctionSuggestor, StopRun, Suggestor, is_async_suggestor

OnStop = Callable[[Sequence[StopReason], RunStats], Continue | None]

_OVERRIDABLE = (StopCategory.BUDGET, StopCategory.POLICY)
_BUDGET_FIELDS: dict[str, str] = {
    "cycle_budget_exhausted": "max_cycles",
    "fact_budget_exhausted": "max_facts",
    "token_budget_exhausted": "max_tokens",
    "time_budget_exhausted": "max_seconds",
    "cost_budget_exhausted": "max_cost_usd",
    "invocation_budget_exhausted": "max_invocations",
}


class _Marker:
    """Outcome markers of async executions."""

    def __init__(self, name: str) -> None:
        self.name = name


_TIMED_OUT = _Marker("timed out")  # cancelled at the time budget
_CANCELLED = _Marker("cancelled")  # cancelled by Engine.cancel()

CANCEL_POLL_S = 0.05
"""How often (seconds) in-flight async work checks for ``Engine.cancel()``."""
_NOT_DONE = _Marker("not done")


class Engine:
    """Runs registered suggestors over a shared context until a typed stop.

    ``budget`` (default :class:`Budget`), ``criteria``, ``invariants``, ``gates``
    (promotion gates and HITL policies, told apart by protocol), ``stop_policies``,
    ``store`` (a :class:`RunStore`; None = nothing written), ``on_error``
    (``"stop"`` → ``Error``; ``"continue"`` → recorded, counted as a consecutive
    error), ``on_stop`` (a continuation override for budget and policy stops),
    ``max_concurrency`` (async executions in flight), ``clock`` (seconds, monotonic;
    injectable for tests), ``job_name``/``job_spec`` (recorded with the run),
    ``progress(cycle, budget_percent)`` (called after each cycle that goes on).

    Raises :class:`ConfigurationError` for bad arguments.
    """

    def __init__(
        self,
        budget: Budget | None = None,
        criteria: Iterable[Criterion] = (),
        invariants: Iterable[Invariant] = (),
        gates: Iterable[PromotionGate | HitlPolicy] = (),
        stop_policies: Iterable[StopPolicy] = (),
        store: RunStore | None = None,
        on_error: Literal["stop", "continue"] = "stop",
        on_stop: OnStop | None = None,
        *,
        max_concurrency: int = 64,
        clock: Callable[[], float] | None = None,
        job_name: str | None = None,
        job_spec: dict[str, Any] | None = None,
        progress: Callable[[int, float], None] | None = None,
    ) -> None:
        if on_error not in ("stop", "continue"):
            raise ConfigurationError(f"on_error must be 'stop' or 'continue', got {on_error!r}")
        if max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.budget = budget if budget is not None else Budget()
        self.criteria: list[Criterion] = list(criteria)
        invs = list(invariants)
        self.invariants = invs
        self._structural = [i for i in invs if i.invariant_class == InvariantClass.STRUCTURAL]
        self._semantic = [i for i in invs if i.invariant_class == InvariantClass.SEMANTIC]
        self._acceptance = [i for i in invs if i.invariant_class == InvariantClass.ACCEPTANCE]
        self.promotion_gates: list[PromotionGate] = []
        self.hitl_policies: list[HitlPolicy] = []
        for g in gates:
            if hasattr(g, "match"):
                self.hitl_policies.append(g)  # type: ignore[arg-type]
            elif hasattr(g, "check"):
                self.promotion_gates.append(g)
            else:
                raise ConfigurationError(f"{g!r} is neither a PromotionGate nor a HitlPolicy")
        self.stop_policies: list[StopPolicy] = list(stop_policies)
        self.store = store
        self.on_error = on_error
        self.on_stop = on_stop
        self.max_concurrency = max_concurrency
        self._clock = clock or time.monotonic
        self.job_name = job_name
        self.job_spec = job_spec
        self.progress = progress
        self._suggestors: list[Suggestor] = []
        self._index: dict[str, int] = {}
        self._async: list[bool] = []
        self._execute: list[Callable[[Context], Any]] = []
        self._names: list[str] = []
        self._accepts: list[Callable[[Context], bool] | None] = []
        self._any_async = False
        self._subscribers: dict[str, list[int]] = {}
        self._dependency_free: list[int] = []
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        self._active: set[str] = set()
        self._paused: dict[str, RunState] = {}
        self._stopped: dict[str, RunState] = {}
        self._decided: dict[str, tuple[str, str, float]] = {}

    # -- registration ------------------------------------------------------------
    def register(self, *suggestors: Suggestor) -> Engine:
        """Add suggestors; their order of registration is the merge order.

        Raises :class:`ConfigurationError` for a duplicate name or an object that
        is not a suggestor. Returns the engine, for chaining.
        """
        for s in suggestors:
            name = getattr(s, "name", None)
            if not isinstance(name, str) or not name:
                raise ConfigurationError(f"{s!r} has no suggestor name")
            if not callable(getattr(s, "execute", None)) or not callable(
                getattr(s, "accepts", None)
            ):
                raise ConfigurationError(f"suggestor {name!r} lacks execute(ctx) or accepts(ctx)")
            if name in self._index:
                raise ConfigurationError(f"suggestor name {name!r} is registered twice")
            deps: frozenset[str] = frozenset(getattr(s, "dependencies", ()) or ())
            i = len(self._suggestors)
            self._suggestors.append(s)
            self._names.append(name)
            self._index[name] = i
            self._async.append(is_async_suggestor(s))
            # decorator suggestors are called without their wrapper's extra frame
            plain = type(s) is FunctionSuggestor
            self._execute.append(s._fn if plain else s.execute)  # type: ignore[attr-defined]
            self._accepts.append(None if plain and s._accepts is None else s.accepts)  # type: ignore[attr-defined]
            self._any_async = self._any_async or self._async[-1]
            if deps:
                for key in deps:
                    self._subscribers.setdefault(key, []).append(i)
            else:
                self._dependency_free.append(i)
        return self

    @property
    def suggestor_names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(s.name for s in self._suggestors)

    # -- control -------------------------------------------------------------------
    def cancel(self, run_id: str | None = None) -> None:
        """Ask a run (or every run of this engine in flight) to stop.

        Thread-safe. Sync work finishes its cycle; in-flight async suggestors are
        cancelled within ``CANCEL_POLL_S`` (50 ms). The run ends with
        ``UserCancelled`` and keeps the facts promoted before.
        """
        with self._lock:
            if run_id is None:
                # the runs in flight, not the ones started later
                self._cancelled.update(self._active)
            else:
                self._cancelled.add(run_id)

    def _is_cancelled(self, run_id: str) -> bool:
        return run_id in self._cancelled

    # -- entry points ------------------------------------------------------------
    def run(
        self, initial: Mapping[str, Iterable[Any]] | None = None, run_id: str | None = None
    ) -> RunResult:
        """Run to a stop. ``initial`` maps keys to lists of contents (provenance "input").

        Async suggestors run on a private event loop; sync ones take a fast path
        with none. Never raises for a suggestor's failure (the run stops instead);
        raises :class:`ConfigurationError` for bad ``initial`` input.
        """
        st = self._start(initial, run_id)
        return self._drive_sync(st)

    async def arun(
        self, initial: Mapping[str, Iterable[Any]] | None = None, run_id: str | None = None
    ) -> RunResult:
        """Like :meth:`run`, inside the caller's event loop.

        ``max_seconds`` is enforced by cancelling in-flight async executions.
        """
        st = self._start(initial, run_id)
        return await self._drive_async(st)

    def resume(self, gate_id: str, decision: GateDecision) -> RunResult:
        """Decide a pending HITL gate and continue its run to the next stop.

        Approve → the proposal is promoted; reject → it is dropped and recorded
        (a ``hitl.rejected`` diagnostic fact). Works in this process without a
        store, or from the store in another process. Raises ``GateNotFound``,
        ``GateAlreadyDecided``, ``GateExpired``, ``ResumeError`` or ``RunBusy``.
        """
        st = self._load_paused(gate_id, decision)
        return self._drive_sync(st)

    async def aresume(self, gate_id: str, decision: GateDecision) -> RunResult:
        """Async form of :meth:`resume`."""
        st = self._load_paused(gate_id, decision)
        return await self._drive_async(st)

    def resume_run(self, run_id: str, budget: Budget | None = None) -> RunResult:
        """Continue a run stopped by a budget, a policy or a cancel, with ``budget``.

        The answer to "I hit the limit, keep what was done and go on": the facts,
        counters and usage carry over; only the budget changes. Raises
        ``RunNotFound`` or ``ResumeError`` (run not resumable, other suggestors).
        """
        st = self._load_stopped(run_id, budget)
        return self._drive_sync(st)

    # -- run set-up ----------------------------------------------------------------
    def _start(self, initial: Mapping[str, Iterable[Any]] | None, run_id: str | None) -> RunState:
        st = RunState(run_id or uuid.uuid4().hex[:16], self.budget)
        st.leg_started = self._clock()
        st.wall_started = time.time()
        with self._lock:
            self._cancelled.discard(st.run_id)
            self._active.add(st.run_id)
        ctx = st.context
        events = st.events if self.store is not None else None
        if initial:
            if not isinstance(initial, Mapping):
                raise ConfigurationError("initial must map keys to lists of contents")
            for key, contents in initial.items():
                if not isinstance(key, str) or not key:
                    raise ConfigurationError(f"initial key {key!r} must be a non-empty string")
                if isinstance(contents, str | bytes) or not isinstance(contents, Iterable):
                    raise ConfigurationError(
                        f"initial[{key!r}] must be a list of contents, "
                        f"got {type(contents).__name__}"
                    )
                for j, content in enumerate(contents):
                    try:
                        identity = (key, content_key(content))
                    except (TypeError, ValueError) as exc:
                        raise ConfigurationError(
                            f"initial[{key!r}][{j}] is not JSON-serialisable: {exc}"
                        ) from exc
                    if ctx._has_identity(identity):
                        continue
                    fact = Fact(
                        ctx._next_id(key),
                        key,
                        content,
                        1.0,
                        Provenance(INPUT_SOURCE, 0, f"input/{key}/{j}"),
                    )
                    ctx._promote(fact, identity)
                    st.dirty.add(key)
        if self.store is not None and events is not None:
            events.append(
                AuditEvent(
                    "run_started",
                    0,
                    {
                        "run_id": st.run_id,
                        "job": self.job_name,
                        "suggestors": list(self.suggestor_names),
                        "budget": st.budget.model_dump(mode="json"),
                        "initial_facts": [fact_to_dict(f) for f in ctx],
                    },
                    time.time(),
                )
            )
            header = RunHeader(
                st.run_id, self.job_name, self.job_spec, self.suggestor_names, st.wall_started
            )
            self._store_call(st, lambda s: s.start_run(header, self._take_events(st)))
        return st

    # -- the loop ----------------------------------------------------------------
    def _drive_sync(self, st: RunState) -> RunResult:
        runner: asyncio.Runner | None = None
        freezer = CollectorFreeze()
        try:
            # the sync loop inlines _begin_cycle/_end_cycle: it is W1's hot path
            while True:
                if st.pending_gate is not None or st.merge_effects:
                    done = self._finish_merge_and_check(st)
                    if done is not None:
                        return done
                    continue
                step = self._prelude(st)
                if isinstance(step, RunResult):
                    return step
                if self._any_async and any(self._async[i] for i in step):
                    if runner is None:
                        runner = asyncio.Runner()
                    outcomes = runner.run(self._execute_async(st, step))
                else:
                    outcomes = self._execute_sync(st, step)
                self._collect(st, step, outcomes)
                done = self._finish_merge_and_check(st)
                if done is not None:
                    return done
                if freezer.owned:
                    freezer.promoted(len(st.cycle_new))
        finally:
            freezer.release()
            if runner is not None:
                runner.close()
            with self._lock:
                self._active.discard(st.run_id)

    async def _drive_async(self, st: RunState) -> RunResult:
        freezer = CollectorFreeze()
        try:
            while True:
                step = self._begin_cycle(st)
                if step is None:
                    continue
                if isinstance(step, RunResult):
                    return step
                if self._any_async and any(self._async[i] for i in step):
                    outcomes = await self._execute_async(st, step)
                else:
                    outcomes = self._execute_sync(st, step)
                done = self._end_cycle(st, step, outcomes, freezer)
                if done is not None:
                    return done
        finally:
            freezer.release()
            with self._lock:
                self._active.discard(st.run_id)

    def _begin_cycle(self, st: RunState) -> list[int] | RunResult | None:
        """The eligible suggestors of the next cycle, or the run's end; None after
        finishing a merge interrupted by a pause (the loop then goes on)."""
        if st.pending_gate is not None or st.merge_effects:
            return self._finish_merge_and_check(st)
        return self._prelude(st)

    def _end_cycle(
        self, st: RunState, eligible: list[int], outcomes: list[Any], freezer: CollectorFreeze
    ) -> RunResult | None:
        """Collect, merge and check the cycle; the run's end, or None to go on."""
        self._collect(st, eligible, outcomes)
        done = self._finish_merge_and_check(st)
        if done is None:
            freezer.promoted(len(st.cycle_new))
        return done

    def _prelude(self, st: RunState) -> list[int] | RunResult:
        """Checks before a cycle, then the eligible suggestors (registration order)."""
        if st.run_id in self._cancelled:
            return self._stop(st, [UserCancelled()])
        budget = st.budget
        if budget.max_seconds:
            elapsed = self._elapsed_ms(st)
            if elapsed > budget.max_seconds * 1000:
                r = self._stop_or_continue(
                    st, [TimeBudgetExhausted(duration_ms=elapsed, limit_ms=_ms(budget.max_seconds))]
                )
                if r is not None:
                    return r
        ctx = st.context
        ctx.cycle = st.cycle + 1
        dirty = st.dirty
        eligible = self._eligible(st)
        if eligible is None:  # accepts() raised and on_error="stop"
            signals = st.pending_signals
            st.pending_signals = []
            return self._stop(st, signals)
        if not eligible:
            return self._fixed_point(st, list(st.pending_signals))
        if budget.max_cycles and st.cycle >= budget.max_cycles:
            st.dirty = dirty  # kept: a resumed run wakes the same subscribers
            r = self._stop_or_continue(
                st, [CycleBudgetExhausted(cycles_executed=st.cycle, limit=budget.max_cycles)]
            )
            if r is not None:
                ctx.cycle = st.cycle
                return r
            st.dirty = set()
        st.cycle += 1
        if self.store is not None:
            st.events.append(
                AuditEvent(
                    "cycle_started",
                    st.cycle,
                    {"eligible": [self._suggestors[i].name for i in eligible]},
                    time.time(),
                )
            )
        return eligible

    def _eligible(self, st: RunState) -> list[int] | None:
        """Eligible suggestors in registration order; None when ``accepts`` raised and
        ``on_error="stop"`` (the ``Error`` is in ``st.pending_signals``)."""
        ctx = st.context
        dirty = st.dirty
        subs = self._subscribers
        st.dirty = set()
        ordered: list[int]
        if len(dirty) == 1 and not self._dependency_free:
            # one changed key: its subscribers are already in registration order
            for key in dirty:
                ordered = subs.get(key) or []
        else:
            candidates: set[int] = set(self._dependency_free)
            for key in dirty:
                s = subs.get(key)
                if s is not None:
                    candidates.update(s)
            ordered = sorted(candidates)
        if not ordered:
            return []
        accepts = self._accepts
        out: list[int] = []
        for i in ordered:
            accept = accepts[i]
            if accept is None:
                out.append(i)
                continue
            try:
                ok = accept(ctx)
            except Exception as exc:
                # a failing accepts() counts as a failed execution of that suggestor
                msg = f"accepts raised {type(exc).__name__}: {exc}"
                if self._record_failure(st, self._suggestors[i].name, msg):
                    return None
                continue
            if ok:
                out.append(i)
        return out

    # -- execution -----------------------------------------------------------------
    def _admit(self, st: RunState, eligible: list[int]) -> list[int]:
        """Drop invocations past the invocation budget (never exceeded)."""
        budget = st.budget
        limit_total = budget.max_invocations
        per = budget.per_suggestor
        if not limit_total and not per:
            return eligible
        admitted: list[int] = []
        total = st.invocations
        for i in eligible:
            name = self._suggestors[i].name
            if limit_total and total >= limit_total:
                st.pending_signals.append(
                    InvocationBudgetExhausted(invocations=total, limit=limit_total)
                )
                break
            lim = per.get(name)
            used = st.invocations_by.get(name, 0)
            if lim and used >= lim:
                st.pending_signals.append(
                    InvocationBudgetExhausted(invocations=used, limit=lim, suggestor=name)
                )
                break
            admitted.append(i)
            total += 1
        return admitted

    def _execute_sync(self, st: RunState, eligible: list[int]) -> list[Any]:
        ctx = st.context
        outcomes: list[Any] = []
        stop_on_error = self.on_error == "stop"
        execute = self._execute
        budget = st.budget
        if budget.max_invocations or budget.per_suggestor:
            eligible = self._admit(st, eligible)
        for i in eligible:
            try:
                out = execute[i](ctx)
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                outcomes.append(exc)
                if stop_on_error or isinstance(exc, StopRun):
                    break
                continue
            outcomes.append(out)
            if type(out) is Effect and out.refusal is not None:
                break
        return outcomes

    async def _execute_async(self, st: RunState, eligible: list[int]) -> list[Any]:
        admitted = self._admit(st, eligible)
        ctx = st.context
        outcomes: list[Any] = [_NOT_DONE] * len(admitted)
        sem = asyncio.Semaphore(self.max_concurrency)

        async def one(slot: int, i: int) -> None:
            async with sem:
                try:
                    res = self._suggestors[i].execute(ctx)
                    if asyncio.iscoroutine(res) or isinstance(res, asyncio.Future):
                        res = await res
                    outcomes[slot] = res
                except asyncio.CancelledError:
                    outcomes[slot] = _TIMED_OUT
                    raise
                except Exception as exc:
                    outcomes[slot] = exc

        # sync suggestors run inline in registration order; async ones concurrently
        tasks: list[asyncio.Task[None]] = []
        for slot, i in enumerate(admitted):
            if self._async[i]:
                tasks.append(asyncio.ensure_future(one(slot, i)))
        for slot, i in enumerate(admitted):
            if not self._async[i]:
                try:
                    outcomes[slot] = self._suggestors[i].execute(ctx)
                except Exception as exc:
                    outcomes[slot] = exc
        if tasks:
            loop = asyncio.get_running_loop()
            end = None
            if st.budget.max_seconds:
                end = loop.time() + max(0.0, st.budget.max_seconds - self._elapsed_ms(st) / 1000)
            pending: set[asyncio.Task[None]] = set(tasks)
            cancelled = False
            # wake up now and then so that cancel() interrupts work in flight
            while pending:
                wait_s = CANCEL_POLL_S if end is None else min(CANCEL_POLL_S, end - loop.time())
                _, pending = await asyncio.wait(pending, timeout=max(0.0, wait_s))
                if not pending:
                    break
                if st.run_id in self._cancelled:
                    cancelled = True
                    break
                if end is not None and loop.time() >= end:
                    break
            if pending:
                for t in pending:
                    t.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                cut = _CANCELLED if cancelled else _TIMED_OUT
                for slot in range(len(outcomes)):
                    if outcomes[slot] is _NOT_DONE or outcomes[slot] is _TIMED_OUT:
                        outcomes[slot] = cut
        # keep the admitted order so _collect pairs outcomes with suggestors
        st.admitted = admitted
        return outcomes

    def _collect(self, st: RunState, eligible: list[int], outcomes: list[Any]) -> None:
        """Turn outcomes into effects to merge, in registration order; record failures."""
        admitted = st.admitted if st.admitted is not None else eligible
        st.admitted = None
        store = self.store is not None
        events = st.events
        effects: list[tuple[str, list[Proposal]]] = []
        last: list[str] = []
        usage_in = usage_out = 0
        cost = 0.0
        timed_out = cancelled = False
        names = self._names
        for slot, out in enumerate(outcomes):
            name = names[admitted[slot]]
            if out is _TIMED_OUT:
                timed_out = True
                continue
            if out is _CANCELLED:  # cut by cancel(): what was merged so far is kept
                if not cancelled:
                    cancelled = True
                    st.pending_signals.append(UserCancelled())
                continue
            last.append(name)
            st.invocations += 1
            st.invocations_by[name] = st.invocations_by.get(name, 0) + 1
            st.history.append(name)
            if isinstance(out, BaseException):
                if isinstance(out, StopRun):
                    st.pending_signals.append(
                        StopRequested(
                            source=name, message=str(out.message), context=_jsonable(out.context)
                        )
                    )
                    if store:
                        events.append(
                            AuditEvent(
                                "suggestor_executed",
                                st.cycle,
                                {"suggestor": name, "stop_requested": out.message},
                                time.time(),
                            )
                        )
                    break
                if self._record_failure(st, name, f"{type(out).__name__}: {out}"):
                    break
                continue
            # the common case, a plain list of proposals, builds no Effect
            plain = type(out) is list
            if plain:
                for p in out:
                    if type(p) is not Proposal:
                        plain = False
                        break
            if plain:
                proposals: list[Proposal] = out
                u = NO_USAGE
                refusal = None
            else:
                effect = out if type(out) is Effect else _normalise(out)
                if effect is None:
                    msg = f"returned {type(out).__name__}, expected an Effect or a list of Proposal"
                    if self._record_failure(st, name, msg):
                        break
                    continue
                u = effect.usage
                if type(u) is not Usage:
                    msg = f"returned usage of type {type(u).__name__}, expected a Usage"
                    if self._record_failure(st, name, msg):
                        break
                    continue
                proposals, refusal = effect.proposals, effect.refusal
                usage_in += u.input_tokens
                usage_out += u.output_tokens
                cost += u.cost_usd
            if st.streaks:
                st.streaks.pop(name, None)
            if store:
                events.append(
                    AuditEvent(
                        "suggestor_executed",
                        st.cycle,
                        {
                            "suggestor": name,
                            "proposals": len(proposals),
                            "usage": [u.input_tokens, u.output_tokens, u.cost_usd],
                            **({"refusal": refusal} if refusal is not None else {}),
                        },
                        time.time(),
                    )
                )
            if refusal is not None:
                st.pending_signals.append(AgentRefused(agent_id=name, reason=refusal))
                break
            if proposals:
                effects.append((name, proposals))
        if usage_in or usage_out or cost:
            st.usage = Usage(
                st.usage.input_tokens + usage_in,
                st.usage.output_tokens + usage_out,
                st.usage.cost_usd + cost,
            )
        if timed_out:
            limit_ms = _ms(st.budget.max_seconds or 0)
            # the event loop's timer may fire a hair before our clock reads the deadline
            elapsed = max(self._elapsed_ms(st), limit_ms)
            st.pending_signals.append(TimeBudgetExhausted(duration_ms=elapsed, limit_ms=limit_ms))
        st.last_suggestors = tuple(last)
        st.merge_effects = effects
        st.merge_pos = (0, 0)
        st.cycle_new = []

    def _record_failure(self, st: RunState, name: str, message: str) -> bool:
        """Record a failed execution; True when the run must stop (on_error="stop")."""
        st.streaks[name] = st.streaks.get(name, 0) + 1
        st.last_error = f"{name}: {message}"
        if self.store is not None:
            st.events.append(
                AuditEvent(
                    "suggestor_failed",
                    st.cycle,
                    {"suggestor": name, "error": message, "streak": st.streaks[name]},
                    time.time(),
                )
            )
        if self.on_error == "stop":
            st.pending_signals.append(
                Error(message=f"{name}: {message}", error_category=ErrorCategory.SUGGESTOR)
            )
            return True
        return False

    # -- merge -------------------------------------------------------------------
    def _merge(self, st: RunState) -> StopReason | None:
        """Promote the cycle's proposals in registration order; a stop or a pause ends it."""
        ctx = st.context
        cycle = st.cycle
        new = st.cycle_new
        gates = self.promotion_gates
        hitl = self.hitl_policies
        store = self.store is not None
        events = st.events
        rejected = st.rejected
        has = ctx._identities
        add_identity = has.add
        by_key = ctx._by_key
        facts_append = ctx._facts.append
        new_append = new.append
        tuple_new = tuple.__new__
        effects = st.merge_effects
        start_i, start_j = st.merge_pos
        if store:
            leaf_append = st.leaves.append
            if len(st.leaves) != len(ctx._facts):
                _catch_up_leaves(st)  # the leaves of input or checkpointed facts
        for ei in range(start_i, len(effects)):
            name, proposals = effects[ei]
            j0 = start_j if ei == start_i else 0
            prefix = f"{name}/{cycle}/{ei}."
            for pj in range(j0, len(proposals)):
                p = proposals[pj]
                try:
                    if type(p) is not Proposal:
                        raise TypeError(f"expected a Proposal, got {type(p).__name__}")
                    key, content, confidence, parents, given_id = p
                    if type(key) is not str or not key:
                        raise ValueError(f"key must be a non-empty string, got {key!r}")
                    if not 0.0 <= confidence <= 1.0:
                        raise ValueError(f"confidence must be within 0..1, got {confidence!r}")
                    c = type(content)
                    if c is float and not isfinite(content):
                        raise ValueError(f"content must be finite JSON, got {content!r}")
                    if c is str or c is int or c is float:
                        identity = (key, content)
                    else:
                        identity = (key, content_key(content))
                except (TypeError, ValueError) as exc:
                    st.merge_effects = []
                    return Error(
                        message=f"{name}: invalid proposal {pj}: {exc}",
                        error_category=ErrorCategory.SUGGESTOR,
                    )
                if identity in has or (rejected and identity in rejected):
                    continue
                pid = given_id or prefix + str(pj)
                if gates:
                    verdict = self._check_gates(st, p, pid, name)
                    if verdict is not None:
                        if isinstance(verdict, str):
                            continue
                        st.merge_effects = []
                        return verdict
                if hitl:
                    if st.approved_once is not None and st.approved_once == (ei, pj):
                        st.approved_once = None
                    else:
                        opened = self._maybe_open_gate(st, p, pid, name, ei, pj)
                        if opened is not None:
                            return opened
                # built with tuple.__new__: the named tuples' own __new__ costs 2x more
                prov = tuple_new(Provenance, (name, cycle, pid, parents))
                bucket = by_key.get(key)
                if bucket is None:
                    fact = tuple_new(Fact, (f"{key}#0", key, content, confidence, prov))
                    by_key[key] = [fact]
                else:
                    fact = tuple_new(Fact, (f"{key}#{len(bucket)}", key, content, confidence, prov))
                    bucket.append(fact)
                facts_append(fact)
                add_identity(identity)
                new_append(fact)
                if store:
                    # one canonical JSON per fact: the event's payload and its Merkle leaf
                    text = fact_json(fact)
                    leaf_append(sha256(text.encode()).digest())
                    events.append(AuditEvent("fact_promoted", cycle, None, time.time(), fact, text))
        st.merge_effects = []
        st.merge_pos = (0, 0)
        return None

    def _check_gates(
        self, st: RunState, p: Proposal, pid: str, name: str
    ) -> StopReason | str | None:
        for gate in self.promotion_gates:
            try:
                rejection = gate.check(p, name, st.context)
            except Exception as exc:
                rejection_reason = f"gate {gate.name} raised {type(exc).__name__}: {exc}"
            else:
                if rejection is None:
                    continue
                rejection_reason = f"{gate.name}: {rejection.reason}"
            if self.store is not None:
                st.events.append(
                    AuditEvent(
                        "proposal_rejected",
                        st.cycle,
                        {
                            "proposal_id": pid,
                            "suggestor": name,
                            "key": p.key,
                            "gate": gate.name,
                            "reason": rejection_reason,
                            "on_reject": gate.on_reject,
                        },
                        time.time(),
                    )
                )
            if gate.on_reject == "drop":
                st.dropped += 1
                return "drop"
            return PromotionRejected(proposal_id=pid, reason=rejection_reason)
        return None

    def _maybe_open_gate(
        self, st: RunState, p: Proposal, pid: str, name: str, ei: int, pj: int
    ) -> StopReason | None:
        for policy in self.hitl_policies:
            try:
                summary = policy.match(p, name, st.context)
            except Exception as exc:
                st.merge_effects = []
                return Error(
                    message=f"hitl policy {policy.name} raised {type(exc).__name__}: {exc}",
                    error_category=ErrorCategory.CONFIGURATION,
                )
            if summary is None:
                continue
            st.gates_opened += 1
            gate_id = f"{st.run_id}-g{st.gates_opened}"
            now = time.time()
            timeout = policy.timeout_s
            record = GateRecord(
                gate_id=gate_id,
                run_id=st.run_id,
                proposal_id=pid,
                proposal={
                    "key": p.key,
                    "content": p.content,
                    "confidence": p.confidence,
                    "parents": list(p.parents),
                    "id": p.id,
                },
                suggestor=name,
                summary=summary,
                cycle=st.cycle,
                policy=policy.name,
                opened_at=now,
                expires_at=(now + timeout) if timeout else None,
                on_timeout=policy.on_timeout,
            )
            st.pending_gate = PendingGate(record, ei, pj)
            st.merge_pos = (ei, pj)
            return HitlGatePending(
                gate_id=gate_id, proposal_id=pid, summary=summary, agent_id=name, cycle=st.cycle
            )
        return None

    # -- after the merge -----------------------------------------------------------
    def _finish_merge_and_check(self, st: RunState) -> RunResult | None:
        pg = st.pending_gate
        if pg is not None:
            if pg.decision is None:
                raise ResumeError(f"run {st.run_id} waits on gate {pg.record.gate_id}")
            self._apply_decision(st)
        stop = self._merge(st)
        if stop is not None:
            if isinstance(stop, HitlGatePending):
                return self._pause(st, stop)
            st.pending_signals.append(stop)
        return self._after_merge(st)

    def _after_merge(self, st: RunState) -> RunResult | None:
        ctx = st.context
        signals: list[StopReason] = list(st.pending_signals)
        st.pending_signals = []
        new = st.cycle_new
        for fact in new:
            st.dirty.add(fact.key)
        if self._structural:
            signals.extend(self._check_invariants(st, self._structural))
        if not new:
            if signals and not all(s.category in _OVERRIDABLE for s in signals):
                return self._stop(st, signals)
            return self._fixed_point(st, signals)
        if self._semantic:
            signals.extend(self._check_invariants(st, self._semantic))
        budget = st.budget
        if budget.max_facts and len(ctx) > budget.max_facts:
            signals.append(FactBudgetExhausted(facts_count=len(ctx), limit=budget.max_facts))
        if budget.max_tokens:
            used = st.usage.input_tokens + st.usage.output_tokens
            if used > budget.max_tokens:
                signals.append(TokenBudgetExhausted(tokens_consumed=used, limit=budget.max_tokens))
        if budget.max_cost_usd and st.usage.cost_usd > budget.max_cost_usd:
            signals.append(
                CostBudgetExhausted(cost_usd=st.usage.cost_usd, limit_usd=budget.max_cost_usd)
            )
        if self.stop_policies:
            signals.extend(self._evaluate_policies(st))
        if self.criteria and not any(s.category is StopCategory.VALIDATION for s in signals):
            met = self._criteria_met_early(st)
            if met is not None:
                signals.append(met)
        if signals:
            stopped = self._stop_or_continue(st, signals)
            if stopped is not None:
                return stopped
        if self.store is not None and st.events:
            self._flush(st)
        if self.progress is not None:
            self.progress(st.cycle, self._budget_status(st, self._elapsed_ms(st)).percent)
        return None

    def _check_invariants(self, st: RunState, invariants: list[Invariant]) -> list[StopReason]:
        out: list[StopReason] = []
        for inv in invariants:
            try:
                violation = inv.check(st.context)
            except Exception as exc:
                reason = f"check raised {type(exc).__name__}: {exc}"
            else:
                if violation is None:
                    continue
                reason = violation.reason
            sig = InvariantViolated(
                invariant_class=InvariantClass(inv.invariant_class), name=inv.name, reason=reason
            )
            if self.store is not None:
                st.events.append(
                    AuditEvent(
                        "invariant_violated", st.cycle, stop_reason_to_dict(sig), time.time()
                    )
                )
            out.append(sig)
        return out

    def _evaluate_policies(self, st: RunState) -> list[StopReason]:
        stats = self._stats(st)
        out: list[StopReason] = []
        for policy in self.stop_policies:
            try:
                decision = policy.evaluate(stats)
            except Exception as exc:
                out.append(
                    Error(
                        message=f"stop policy {policy.id} raised {type(exc).__name__}: {exc}",
                        error_category=ErrorCategory.CONFIGURATION,
                    )
                )
                continue
            if decision is None:
                continue
            if decision.reason is not None:
                out.append(decision.reason)
            else:
                out.append(
                    PolicyStopped(policy_id=policy.id, code=decision.code, detail=decision.detail)
                )
        return out

    def _evaluate_criteria(self, st: RunState) -> list[tuple[Criterion, Any]]:
        results: list[tuple[Criterion, Any]] = []
        for c in self.criteria:
            try:
                results.append((c, c.evaluate(st.context)))
            except Exception as exc:
                from engine.criterion import Unmet

                results.append((c, Unmet(f"evaluate raised {type(exc).__name__}: {exc}")))
        st.criteria_reports = tuple(CriterionReport.of(c, r) for c, r in results)
        return results

    def _criteria_met_early(self, st: RunState) -> StopReason | None:
        required = [c for c in self.criteria if getattr(c, "required", True)]
        if not required:
            return None
        results = self._evaluate_criteria(st)
        if all(isinstance(r, Met) for c, r in results if getattr(c, "required", True)):
            if self._acceptance and self._check_invariants(st, self._acceptance):
                return None
            return CriteriaMet(criteria=[c.id for c in required])
        return None

    def _fixed_point(self, st: RunState, signals: list[StopReason]) -> RunResult:
        """No new fact: acceptance invariants, then criteria decide the stop."""
        if self._acceptance:
            signals.extend(self._check_invariants(st, self._acceptance))
        if self.criteria:
            results = self._evaluate_criteria(st)
            required = [(c, r) for c, r in results if getattr(c, "required", True)]
            if not required:
                signals.append(Converged())
            elif all(isinstance(r, Met) for _, r in required):
                signals.append(CriteriaMet(criteria=[c.id for c, _ in required]))
            else:
                blocked = [(c, r) for c, r in required if isinstance(r, Blocked)]
                unmet = [c.id for c, r in required if not isinstance(r, Met | Blocked)]
                if unmet:
                    signals.append(CriteriaUnmet(criteria=unmet))
                if blocked:
                    signals.append(
                        HumanInterventionRequired(
                            criteria=[c.id for c, _ in blocked],
                            approval_refs=[r.approval_ref for _, r in blocked if r.approval_ref],
                        )
                    )
        else:
            signals.append(Converged())
        return self._stop(st, signals)

    # -- stopping ------------------------------------------------------------------
    def _stop_or_continue(self, st: RunState, signals: list[StopReason]) -> RunResult | None:
        """Stop with the most urgent signal, unless ``on_stop`` continues a budget/policy stop."""
        ordered = _order(signals)
        top = ordered[0]
        if self.on_stop is not None and top.category in _OVERRIDABLE:
            keys = [_signal_key(s) for s in ordered]
            if not any(k in st.exhausted_overrides for k in keys):
                decision = None
                with contextlib.suppress(Exception):
                    decision = self.on_stop(ordered, self._stats(st))
                if isinstance(decision, Continue):
                    raised = decision.budget is not None and _raises(
                        st.budget, decision.budget, ordered
                    )
                    if decision.budget is not None:
                        st.budget = decision.budget
                    if not raised:
                        st.exhausted_overrides.update(keys)
                    record = ContinuationRecord(st.cycle, tuple(keys), decision.note, raised)
                    st.continuations.append(record)
                    if self.store is not None:
                        st.events.append(
                            AuditEvent(
                                "run_continued",
                                st.cycle,
                                {
                                    "signals": [stop_reason_to_dict(s) for s in ordered],
                                    "note": decision.note,
                                    "budget": st.budget.model_dump(mode="json"),
                                    "budget_raised": raised,
                                },
                                time.time(),
                            )
                        )
                        self._flush(st)
                    return None
        return self._stop(st, ordered)

    def _stop(self, st: RunState, signals: list[StopReason]) -> RunResult:
        ordered = _order(signals)
        reason = ordered[0]
        if not st.criteria_reports and self.criteria:
            self._evaluate_criteria(st)
        result = self._result(st, reason, tuple(ordered))
        if self.store is not None:
            for s in ordered:
                st.events.append(
                    AuditEvent("stop_signal", st.cycle, stop_reason_to_dict(s), time.time())
                )
            st.events.append(
                AuditEvent(
                    "run_stopped",
                    st.cycle,
                    {
                        "kind": reason.kind_code(),
                        "category": reason.category.value,
                        "reason": stop_reason_to_dict(reason),
                        "budget_status": result.budget_status.model_dump(mode="json"),
                    },
                    time.time(),
                )
            )
            outcome = self._outcome(st, "stopped", reason, result)
            checkpoint = st.to_checkpoint(self.suggestor_names) if reason.is_resumable() else None
            events = self._take_events(st)
            try:
                self.store.finish_run(st.run_id, events, outcome, checkpoint)
            except StoreError as exc:
                err = Error(
                    message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE
                )
                return self._result(st, err, (err, *ordered))
        if reason.is_resumable():
            self._stopped[st.run_id] = st
        return result

    def _pause(self, st: RunState, reason: HitlGatePending) -> RunResult:
        assert st.pending_gate is not None
        st.elapsed_before_ms = self._elapsed_ms(st)
        result = self._result(st, reason, (reason,))
        self._paused[reason.gate_id] = st
        if self.store is not None:
            rec = st.pending_gate.record
            st.events.append(
                AuditEvent(
                    "gate_opened",
                    st.cycle,
                    {
                        "gate_id": rec.gate_id,
                        "proposal_id": rec.proposal_id,
                        "proposal": rec.proposal,
                        "suggestor": rec.suggestor,
                        "summary": rec.summary,
                        "policy": rec.policy,
                    },
                    time.time(),
                )
            )
            st.events.append(
                AuditEvent("run_paused", st.cycle, stop_reason_to_dict(reason), time.time())
            )
            outcome = self._outcome(st, "paused", reason, result)
            checkpoint = st.to_checkpoint(self.suggestor_names)
            events = self._take_events(st)
            try:
                self.store.pause_run(st.run_id, events, outcome, rec, checkpoint)
            except StoreError as exc:
                err = Error(
                    message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE
                )
                return self._result(st, err, (err, reason))
        return result

    def _result(
        self, st: RunState, reason: StopReason, signals: tuple[StopReason, ...]
    ) -> RunResult:
        elapsed = self._elapsed_ms(st) if st.pending_gate is None else st.elapsed_before_ms
        st.context.cycle = st.cycle
        return RunResult(
            run_id=st.run_id,
            stop_reason=reason,
            signals=signals,
            context=st.context,
            cycles=st.cycle,
            usage=st.usage,
            budget_status=self._budget_status(st, elapsed),
            criteria=st.criteria_reports,
            duration_ms=elapsed,
            continuations=tuple(st.continuations),
        )

    def _outcome(
        self, st: RunState, status: str, reason: StopReason, result: RunResult
    ) -> RunOutcome:
        return RunOutcome(
            status=status,
            stop_reason=reason,
            cycles=st.cycle,
            facts_count=len(st.context),
            facts_root=_facts_root(st),
            usage=st.usage,
            duration_ms=result.duration_ms,
            ended_at=time.time(),
        )

    # -- resume --------------------------------------------------------------------
    def _load_paused(self, gate_id: str, decision: GateDecision) -> RunState:
        if not isinstance(decision, GateDecision):
            raise ResumeError(f"decision must be a GateDecision, got {type(decision).__name__}")
        st = self._paused.get(gate_id)
        if self.store is None:
            if st is None:
                done = self._decided.get(gate_id)
                if done is not None:
                    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(done[2]))
                    raise GateAlreadyDecided(gate_id, done[0], done[1], at)
                raise GateNotFound(f"no pending gate {gate_id!r} in this engine (and no store)")
            del self._paused[gate_id]
            status = "approved" if decision.approved else "rejected"
            self._decided[gate_id] = (status, decision.by, time.time())
        else:
            from engine.resume import load_paused_from_store

            with bulk_load():
                st = load_paused_from_store(self, gate_id, decision, st)
            self._paused.pop(gate_id, None)
        assert st.pending_gate is not None
        st.pending_gate.decision = decision
        st.leg_started = self._clock()
        with self._lock:
            self._active.add(st.run_id)
        return st

    def _load_stopped(self, run_id: str, budget: Budget | None) -> RunState:
        st = self._stopped.pop(run_id, None)
        if st is None and self.store is not None:
            from engine.resume import load_stopped_from_store

            with bulk_load():
                st = load_stopped_from_store(self, run_id)
        if st is None:
            raise RunNotFound(f"no resumable run {run_id!r} in this engine or its store")
        if budget is not None:
            st.budget = budget
        st.exhausted_overrides.clear()
        st.criteria_reports = ()
        st.leg_started = self._clock()
        with self._lock:
            self._cancelled.discard(run_id)
            self._active.add(run_id)
        if self.store is not None:
            st.events.append(
                AuditEvent(
                    "run_resumed",
                    st.cycle,
                    {"budget": st.budget.model_dump(mode="json"), "from": st.resumed_from},
                    time.time(),
                )
            )
        return st

    def _apply_decision(self, st: RunState) -> None:
        pg = st.pending_gate
        assert pg is not None and pg.decision is not None
        decision = pg.decision
        rec = pg.record
        st.pending_gate = None
        if self.store is not None:
            st.events.append(
                AuditEvent(
                    "gate_decided",
                    st.cycle,
                    {
                        "gate_id": rec.gate_id,
                        "approved": decision.approved,
                        "by": decision.by,
                        "reason": decision.reason,
                    },
                    time.time(),
                )
            )
            st.events.append(
                AuditEvent("run_resumed", st.cycle, {"gate_id": rec.gate_id}, time.time())
            )
        if decision.approved:
            st.approved_once = (pg.effect_index, pg.proposal_index)
            st.merge_pos = (pg.effect_index, pg.proposal_index)
            return
        # rejected: remember it so the same proposal never reopens a gate, skip it
        key = rec.proposal["key"]
        content = rec.proposal["content"]
        st.remember_rejected(key, content)
        st.merge_pos = (pg.effect_index, pg.proposal_index + 1)
        diag = Proposal(
            "hitl.rejected",
            {
                "gate_id": rec.gate_id,
                "proposal_id": rec.proposal_id,
                "key": key,
                "content": content,
                "by": decision.by,
                "reason": decision.reason,
            },
        )
        st.merge_effects.append(("hitl", [diag]))

    # -- helpers ---------------------------------------------------------------------
    def _elapsed_ms(self, st: RunState) -> int:
        return st.elapsed_before_ms + int((self._clock() - st.leg_started) * 1000)

    def _stats(self, st: RunState) -> RunStats:
        return RunStats(
            cycle=st.cycle,
            total_input_tokens=st.usage.input_tokens,
            total_output_tokens=st.usage.output_tokens,
            cost_usd=st.usage.cost_usd,
            elapsed_ms=self._elapsed_ms(st),
            consecutive_errors=max(st.streaks.values(), default=0),
            last_error=st.last_error,
            last_suggestors=st.last_suggestors,
            last_facts=tuple(f.id for f in st.cycle_new),
            last_fact_contents=tuple((f.key, f.content) for f in st.cycle_new),
            facts_count=len(st.context),
            invocations=st.invocations,
            invocations_by_suggestor=dict(st.invocations_by),
            invocation_history=HistoryView(st.history, len(st.history)),
        )

    def stats(self, result: RunResult) -> RunStats | None:
        """The last :class:`RunStats` of a run kept by this engine (stopped or paused)."""
        st = self._stopped.get(result.run_id)
        if st is None:
            st = next((s for s in self._paused.values() if s.run_id == result.run_id), None)
        return self._stats(st) if st is not None else None

    def _budget_status(self, st: RunState, elapsed_ms: int) -> BudgetStatus:
        used = {
            "cycles": st.cycle,
            "facts": len(st.context),
            "tokens": st.usage.input_tokens + st.usage.output_tokens,
            "seconds": elapsed_ms / 1000,
            "cost_usd": st.usage.cost_usd,
            "invocations": st.invocations,
        }
        return BudgetStatus.compute(st.budget, used, st.invocations_by)

    def _take_events(self, st: RunState) -> list[AuditEvent]:
        events = st.events
        st.events = []
        if st.replayed or st.replayed_gates:
            # crash recovery: what the dead process recorded is not recorded twice
            return drop_replayed(st, events)
        return events

    def _flush(self, st: RunState) -> None:
        events = self._take_events(st)
        if events:
            self._store_call(st, lambda s: s.append_events(st.run_id, events))

    def _store_call(self, st: RunState, fn: Callable[[RunStore], None]) -> None:
        assert self.store is not None
        try:
            fn(self.store)
        except StoreError as exc:
            st.pending_signals.append(
                Error(message=f"audit store failed: {exc}", error_category=ErrorCategory.STORAGE)
            )


def _normalise(out: Any) -> Effect | None:
    if isinstance(out, Effect):
        return out
    if out is None:
        return Effect()
    if isinstance(out, Proposal):
        return Effect([out])
    if isinstance(out, list | tuple) and all(isinstance(p, Proposal) for p in out):
        return Effect(list(out))
    return None


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` if JSON-serialisable, else a copy with the odd values as their repr."""
    try:
        json.dumps(data)
        return data
    except (TypeError, ValueError):
        out: dict[str, Any] = json.loads(json.dumps(data, default=repr))
        return out


def _order(signals: list[StopReason]) -> list[StopReason]:
    """Most urgent first: priority, then evaluation order (sort is stable)."""
    seen: set[str] = set()
    unique: list[StopReason] = []
    for s in signals:
        k = s.model_dump_json()
        if k not in seen:
            seen.add(k)
            unique.append(s)
    return sorted(unique, key=lambda s: s.priority)


def _signal_key(s: StopReason) -> str:
    if isinstance(s, PolicyStopped):
        return f"{s.kind}:{s.policy_id}"
    return s.kind_code()


def _raises(old: Budget, new: Budget, signals: list[StopReason]) -> bool:
    """True when ``new`` raises the limit of every budget dimension that fired."""
    fired = [s for s in signals if s.kind_code() in _BUDGET_FIELDS]
    if not fired:
        return False
    for s in fired:
        before: float | None
        after: float | None
        if isinstance(s, InvocationBudgetExhausted) and s.suggestor is not None:
            before = old.per_suggestor.get(s.suggestor) or None
            after = new.per_suggestor.get(s.suggestor) or None
        else:
            fld = _BUDGET_FIELDS[s.kind_code()]
            before, after = old.limit(fld), new.limit(fld)
        # a signal whose limit is not the budget's came from a stop policy
        # (gates.policies): raising the budget cannot lift it
        if before is None or not _same_limit(s, before):
            return False
        if after is not None and after <= before:
            return False
    return True


def _same_limit(signal: StopReason, limit: float) -> bool:
    """True when a budget signal's own limit is ``limit`` (the budget's, in its unit)."""
    if isinstance(signal, TimeBudgetExhausted):
        return signal.limit_ms == _ms(limit)
    if isinstance(signal, CostBudgetExhausted):
        return abs(signal.limit_usd - limit) < 1e-9
    own = getattr(signal, "limit", None)
    return own is None or own == limit


def _facts_root(st: RunState) -> str:
    """The Merkle root of the run's facts; leaves are cached, so each stop or pause
    hashes only the facts promoted since the previous one."""
    _catch_up_leaves(st)
    return root_of_leaves(st.leaves)


def _catch_up_leaves(st: RunState) -> None:
    leaves = st.leaves
    facts = st.context._facts
    for i in range(len(leaves), len(facts)):
        leaves.append(fact_leaf(facts[i]))


def _ms(seconds: float) -> int:
    return round(seconds * 1000)
