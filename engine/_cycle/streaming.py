"""Streamed runs: the drivers of ``Engine.stream`` and ``astream`` (docs/streaming.md).

A streamed run has a listener (:class:`EventBuffer`): each batch of events the
run records (``engine._cycle.recording.emit``, after the store wrote it, or at
once with no store) becomes typed :mod:`engine.events` values in the buffer, and
the driver yields them after each step of the cycle, then the run's result. The
drivers are :func:`engine._cycle.steps.drive_sync` / ``drive_async`` walked one
step at a time (never the plain loop, which records nothing); a run nobody
streams has no listener and pays nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from engine._cycle.cycling import Answer, End
from engine._cycle.execute import Execute
from engine._cycle.prelude import next_step
from engine._cycle.run import Run
from engine._cycle.steps import begin_leg, first_step
from engine.events import RunEvent, run_event
from engine.result import RunResult
from engine.settings import EngineSettings
from engine.store import BatchItem, expand_events

__all__ = ["EventBuffer", "stream_async", "stream_sync"]


class EventBuffer:
    """The listener of a streamed run: its recorded events as typed values, until
    the driver takes them."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def recorded(self, run_id: str, events: Sequence[BatchItem], last_seq: int | None) -> None:
        """``events`` were recorded, the last at ``last_seq`` (None: no store): each
        one's seq counts back from it."""
        items = expand_events(events)
        n = len(items)
        push = self.events.append
        for i, ev in enumerate(items):
            seq = None if last_seq is None else last_seq - (n - 1 - i)
            push(run_event(run_id, seq, ev.kind, ev.cycle, ev.ts, ev.payload, ev.fact))

    def take(self) -> list[RunEvent]:
        """The events recorded since the last take, oldest first."""
        taken = self.events
        self.events = []
        return taken


def stream_sync(
    settings: EngineSettings, run: Run, buffer: EventBuffer
) -> Iterator[RunEvent | RunResult]:
    """Walk the run's steps on this thread, yielding its events after each step, then
    its result. Closed early (the caller stopped iterating), the run is cancelled
    and walked to its stop (``UserCancelled``, recorded) before the close returns."""
    cycle = begin_leg(settings, run)
    step = first_step(run)
    answer: Answer = step
    try:
        yield from buffer.take()
        while True:
            answer = step.run(cycle)
            yield from buffer.take()
            if isinstance(answer, End):
                yield answer.result
                return
            step = next_step(answer)
    except GeneratorExit:
        settings.runs.cancel(run.run_id)
        while not isinstance(answer, End):  # walked on to its stop, recorded
            step = next_step(answer)
            answer = step.run(cycle)
        raise
    finally:
        cycle.close()


async def stream_async(
    settings: EngineSettings, run: Run, buffer: EventBuffer
) -> AsyncIterator[RunEvent | RunResult]:
    """As :func:`stream_sync`, inside the caller's event loop (as ``drive_async``)."""
    cycle = begin_leg(settings, run)
    step = first_step(run)
    answer: Answer = step
    try:
        for event in buffer.take():
            yield event
        while True:
            answer = await step.arun(cycle) if isinstance(step, Execute) else step.run(cycle)
            for event in buffer.take():
                yield event
            if isinstance(answer, End):
                yield answer.result
                return
            step = next_step(answer)
    except GeneratorExit:
        settings.runs.cancel(run.run_id)
        while not isinstance(answer, End):
            step = next_step(answer)
            answer = await step.arun(cycle) if isinstance(step, Execute) else step.run(cycle)
        raise
    finally:
        cycle.close()
