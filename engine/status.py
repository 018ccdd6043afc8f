"""The statuses of a run and of a HITL gate, as the store, the CLI and the web name them.

Both are ``StrEnum``: a member equals its string (``RunStatus.PAUSED == "paused"``),
so the ``status`` columns, the events' payloads and JSON hold the plain string,
and a status read back from the store compares equal to its member.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["GateStatus", "RunStatus"]


class RunStatus(StrEnum):
    """Where a run is: what the ``runs.status`` column holds, or ``crashed`` (inferred)."""

    QUEUED = "queued"
    """Submitted (``converge submit``): recorded before any message about it, not yet
    taken by a worker (no events yet)."""
    RUNNING = "running"
    """A process is driving it (its writer's pid and host are on the row)."""
    PAUSED = "paused"
    """Waiting on a HITL gate; a decision resumes it."""
    STOPPED = "stopped"
    """Ended with a stop reason: resumable or not, as its category says."""
    CRASHED = "crashed"
    """``running`` with a writer process that is dead (kill -9): never stored, a
    reader infers it from the row's pid and host, and a claim takes the run over."""


class GateStatus(StrEnum):
    """Where a HITL gate is: the ``gates.status`` column; decided once, by compare-and-set."""

    PENDING = "pending"
    """Waiting for a person's decision (or its deadline)."""
    APPROVED = "approved"
    """Approved: the proposal (or the value given with it) is promoted."""
    REJECTED = "rejected"
    """Rejected: the proposal is dropped, and recorded."""
    EXPIRED = "expired"
    """Its ``timeout_s`` passed and its ``on_timeout`` policy decided it."""
