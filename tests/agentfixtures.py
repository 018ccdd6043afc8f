"""Helpers for the agent tests: a model request that never gets its answer, and a
run cancelled once it waits on one (no sleep: the request says when it started)."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai.messages import ModelResponse

from engine import Engine, RunResult


async def never_answers(started: asyncio.Event) -> ModelResponse:
    """A model request that never gets its answer; sets ``started`` first."""
    started.set()
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


def cancelled_once_started(
    engine: Engine, started: asyncio.Event, initial: dict[str, list[Any]], run_id: str
) -> RunResult:
    """Run ``engine`` on ``initial`` as ``run_id`` and cancel it once ``started`` is set."""

    async def scenario() -> RunResult:
        task = asyncio.ensure_future(engine.arun(initial, run_id=run_id))
        await started.wait()
        engine.cancel(run_id)
        return await task

    return asyncio.run(scenario())
