"""Agent runs of a cycle that a crash recovery runs again, answered from what the
dead process recorded: :func:`recovered`.

When the process running a run dies (kill -9, a lost host, a worker cut off), the
run's next holder goes on from its last checkpoint and runs again the cycles the
dead process recorded since (``engine/_cycle/resume.py``). Each agent execution
of those cycles recorded the model's responses of its agent runs (``responses``,
:mod:`converge.agents.tape`), which ``ctx.recorded_execution(name)`` gives back
during the recovery. :func:`recovered` hands each agent run a
:class:`RecordedRun`: a request that asks what the recorded one asked (the same
request digest) gets the recorded response, without calling the model; from the
first request that asks something else (or past the recorded ones) the agent run
calls its model. So no model call of a recorded cycle is paid twice, and the
recovered run promotes what the dead process promoted.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model

from converge.agents.pricing import AnsweringModel, Ask
from converge.agents.tape import request_digest, response_of
from engine import Context

__all__ = ["RecordedRun", "recovered"]

_TAKEN: WeakKeyDictionary[Context, dict[tuple[int, str], int]] = WeakKeyDictionary()
"""Per run (its context), per (cycle, agent): how many recorded agent runs were handed out."""


def recovered(model: Model, ctx: Context, name: str) -> Model:
    """``model``, or a :class:`RecordedRun` of it answering this agent run of ``name``
    from the responses a dead process recorded in ``ctx``'s cycle (the agent's
    next recorded run in that cycle: an execution's runs are taken in order)."""
    payload = ctx.recorded_execution(name)
    if payload is None:
        return model
    runs = payload.get("responses")
    if not isinstance(runs, list):
        return model
    taken = _TAKEN.setdefault(ctx, {})
    key = (ctx.cycle, name)
    index = taken.get(key, 0)
    taken[key] = index + 1
    run = runs[index] if index < len(runs) else None
    if not isinstance(run, list) or not run:
        return model
    return RecordedRun(model, run)


class RecordedRun(AnsweringModel):
    """``wrapped`` answering from one recorded agent run (its exchanges, as
    :func:`converge.agents.tape.exchanges` records them) while the requests ask
    what they asked then; the model itself from the first one that does not."""

    def __init__(self, wrapped: Model, run: list[dict[str, Any]]) -> None:
        super().__init__(wrapped)
        self.run = run
        self.asked = 0
        self.answered = 0
        self.live = False

    async def answer(self, messages: list[ModelMessage], ask: Ask) -> ModelResponse:
        """The recorded response to this request, or the model's (see the class)."""
        self.asked += 1
        if not self.live and self.asked <= len(self.run):
            exchange = self.run[self.asked - 1]
            expected = exchange.get("request")
            got = request_digest(messages[-1]) if messages else None
            if expected is None or expected == got:
                self.answered += 1
                return response_of(exchange["response"])
        self.live = True  # another question: the recorded answers no longer apply
        return await ask()
