"""What an engine is configured with: the parts every step of the cycle reads.

:class:`EngineSettings` is the base of :class:`engine.engine.Engine`; the steps of
the cycle (scheduling, execution, collection, merge, judgement, recording,
resume) are functions of it and of the run's :class:`~engine._cycle.run.Run`, so each can be
read and tested alone and none imports the façade.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from engine._cycle.runs import RunTable
from engine.budget import Budget
from engine.criterion import Criterion
from engine.errors import ConfigurationError
from engine.executor import Executor
from engine.hitl import HitlPolicy
from engine.invariant import Invariant
from engine.policy import Continue, RunStats, StopPolicy
from engine.promotion import PromotionGate
from engine.registry import SuggestorRegistry
from engine.stop import InvariantClass, StopReason
from engine.store import RunStore

OnStop = Callable[[Sequence[StopReason], RunStats], Continue | None]
"""``on_stop(signals, stats)``: return :class:`Continue` to go on after a budget or
policy stop (Cognesy's continuation override), or None to stop."""


CHECKPOINT_EVERY = 100
"""Default cycles between checkpoints of a run in flight (docs/performance.md)."""


class EngineSettings:
    """The configuration of an engine, its registered suggestors and its runs.

    ``budget`` (default :class:`Budget`), ``criteria``, ``invariants`` (also split
    by class into ``structural``, ``semantic``, ``acceptance``), ``gates``
    (promotion gates and HITL policies, told apart by protocol), ``stop_policies``,
    ``store`` (a :class:`RunStore`; None = nothing written), ``on_error``
    (``"stop"`` → ``Error``; ``"continue"`` → recorded, counted as a consecutive
    error), ``on_stop`` (a continuation override for budget and policy stops),
    ``max_concurrency`` (async executions in flight), ``clock`` (seconds, monotonic;
    injectable for tests), ``job_name``/``job_spec`` (recorded with the run),
    ``progress(cycle, budget_percent)`` (called after each cycle that goes on),
    ``checkpoint_every`` (cycles between the checkpoints of a run in flight, with a
    store, so that crash recovery replays at most that many; None = only at stops),
    ``checkpoint_at_start`` (also write a checkpoint of cycle 0 with the run's first
    events, in one transaction, so that a run killed before its first checkpoint is
    recovered like any other: what a run service sets for the runs it executes),
    ``executor`` (an :class:`engine.executor.Executor` running each cycle's
    executions elsewhere, e.g. ``converge.workers.CeleryExecutor``; None = in-process).

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
        checkpoint_every: int | None = CHECKPOINT_EVERY,
        checkpoint_at_start: bool = False,
        executor: Executor | None = None,
    ) -> None:
        if on_error not in ("stop", "continue"):
            raise ConfigurationError(f"on_error must be 'stop' or 'continue', got {on_error!r}")
        if checkpoint_every is not None and checkpoint_every < 1:
            raise ConfigurationError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
        if max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.budget = budget if budget is not None else Budget()
        self.criteria: list[Criterion] = list(criteria)
        self.invariants: list[Invariant] = list(invariants)
        self.structural = self._of_class(InvariantClass.STRUCTURAL)
        self.semantic = self._of_class(InvariantClass.SEMANTIC)
        self.acceptance = self._of_class(InvariantClass.ACCEPTANCE)
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
        self.clock = clock or time.monotonic
        self.job_name = job_name
        self.job_spec = job_spec
        self.progress = progress
        self.checkpoint_every = checkpoint_every
        self.checkpoint_at_start = checkpoint_at_start
        if executor is not None and not callable(getattr(executor, "execute", None)):
            raise ConfigurationError(f"executor {executor!r} has no execute(work) method")
        self.executor = executor
        self.registry = SuggestorRegistry()
        self.runs = RunTable()

    def _of_class(self, cls: InvariantClass) -> list[Invariant]:
        return [i for i in self.invariants if i.invariant_class == cls]

    @property
    def suggestor_names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self.registry.names)
