"""What the steps of a cycle share: the leg of a run being driven, and the step
answers that are no step (docs/architecture.md).

Each step (``prelude.Prelude``, ``execute.Execute``, ``collect.Collect``,
``merge.Merge``, ``judge.Judge``) lives in the module named after it; its
``run(cycle)`` takes the :class:`Cycling` of the leg and returns the next step,
:data:`NEXT_CYCLE` (the driver starts the next cycle: a ``Prelude``, or the plain
loop when it can take it) or :class:`End` (the run stopped or paused). The drivers
that walk them are :mod:`engine._cycle.steps`'.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from engine._cycle.collector import CollectorFreeze
from engine._cycle.run import Run
from engine.result import RunResult
from engine.settings import EngineSettings


@dataclass(slots=True)
class Cycling:
    """One leg of a run being driven: ``settings`` (the engine's), ``run`` (its
    state), the collector ``freezer`` and, once an async suggestor runs on the sync
    driver, its event loop ``runner``; ``plain``: the engine may take the plain
    loop (:func:`engine._cycle.plain.plain_engine`)."""

    settings: EngineSettings
    run: Run
    freezer: CollectorFreeze
    plain: bool = False
    runner: asyncio.Runner | None = None

    def close(self) -> None:
        """End the leg, whatever stopped it: release the collector freeze, close the
        sync driver's event loop (when an async suggestor started one), and leave
        the run's entry in ``settings.runs``."""
        self.freezer.release()
        if self.runner is not None:
            self.runner.close()
        self.settings.runs.leave(self.run.run_id)


@dataclass(slots=True)
class End:
    """The run stopped or paused: its ``result``."""

    result: RunResult


class NextCycle:
    """The judged cycle goes on: the driver starts the next one."""

    __slots__ = ()


NEXT_CYCLE = NextCycle()


class Step(Protocol):
    """A step of a cycle (``Prelude``, ``Execute``, ``Collect``, ``Merge``, ``Judge``,
    the plain loop): it does its part of the cycle of ``cycle`` and answers what comes
    next."""

    def run(self, cycle: Cycling, /) -> Step | NextCycle | End:
        """Do this step's part of the cycle; the next step, :data:`NEXT_CYCLE` or :class:`End`."""
        ...


Answer = Step | NextCycle | End
"""What a step answers: the next step, the next cycle, or the run's end."""
