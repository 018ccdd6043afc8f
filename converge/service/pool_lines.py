"""The line protocol between ``converge serve``'s pool (:class:`~converge.service.LocalRunPool`)
and its processes (``converge worker --runs-from-stdin``): one JSON object per line,
so that no run id (a newline in it included) splits a message.

- a message, pool → process: ``{"action": "run" | "resume", "run_id": ID}``;
- its answer, process → pool: the line :data:`POOL_DONE`, a space and
  ``{"run_id": ID, "code": N}`` (``N``: ``converge worker --run``'s exit code for
  that run; ``run_id`` null and code 2 for a line that is no message).

Anything else the process writes on stdout is its runs' own output: the pool relays
it. An answer counts only when it names the run the pool sent, so a suggestor
printing a line that looks like one cannot end another run's message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from converge.run_queue import Action

__all__ = [
    "POOL_DONE",
    "Answer",
    "Message",
    "answer_line",
    "message_line",
    "read_answer",
    "read_message",
]

POOL_DONE = "converge-pool done"
"""What an answer line begins with (then a space and its JSON object)."""


@dataclass(frozen=True, slots=True)
class Message:
    """A run message: what to do (``action``) with which run."""

    action: Action
    run_id: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer to a message: the run it was about (None: not a message) and the
    exit code of its leg there."""

    run_id: str | None
    code: int


def message_line(action: Action, run_id: str) -> str:
    """The line (newline included) that sends ``action`` on ``run_id``."""
    return json.dumps({"action": action, "run_id": run_id}) + "\n"


def read_message(line: str) -> Message | None:
    """The message of ``line``; None when it is none (not JSON, another shape)."""
    try:
        data: Any = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    action, run_id = data.get("action"), data.get("run_id")
    if action not in ("run", "resume") or not isinstance(run_id, str) or not run_id:
        return None
    return Message("resume" if action == "resume" else "run", run_id)


def answer_line(run_id: str | None, code: int) -> str:
    """The answer line (no newline) to the message about ``run_id``."""
    return f"{POOL_DONE} {json.dumps({'run_id': run_id, 'code': code})}"


def read_answer(line: str) -> Answer | None:
    """The answer ``line`` carries; None when it is none (the run's own output)."""
    if not line.startswith(POOL_DONE + " "):
        return None
    try:
        data: Any = json.loads(line[len(POOL_DONE) + 1 :])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    run_id, code = data.get("run_id"), data.get("code")
    if not (run_id is None or isinstance(run_id, str)) or type(code) is not int:
        return None
    return Answer(run_id, code)
