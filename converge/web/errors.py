"""Errors of the library as HTTP answers: a status and one clear message."""

from __future__ import annotations

from fastapi import HTTPException

from audit.approvals import DuplicateVote
from engine import (
    ConvergeError,
    GateAlreadyDecided,
    GateExpired,
    GateNotFound,
    ResumeError,
    RunBusy,
    RunNotFound,
)


def http_error(exc: ConvergeError) -> HTTPException:
    """404 unknown gate or run; 409 decided, expired, already voted, busy; 400 otherwise."""
    if isinstance(exc, GateNotFound | RunNotFound):
        return HTTPException(404, str(exc))
    if isinstance(exc, GateAlreadyDecided | GateExpired | DuplicateVote | RunBusy | ResumeError):
        return HTTPException(409, str(exc))
    return HTTPException(400, str(exc))
