"""Errors of the library as HTTP answers: a status and one clear message."""

from __future__ import annotations

from fastapi import HTTPException

from audit.approvals import DuplicateVote
from converge.decisions import InvalidValue
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
    """404 unknown gate or run; 409 decided, expired, already voted, busy; 422 a value
    the gate's hook refused; 400 otherwise."""
    if isinstance(exc, GateNotFound | RunNotFound):
        return HTTPException(404, str(exc))
    if isinstance(exc, GateAlreadyDecided | GateExpired | DuplicateVote | RunBusy | ResumeError):
        return HTTPException(409, str(exc))
    if isinstance(exc, InvalidValue):
        return HTTPException(422, str(exc))
    return HTTPException(400, str(exc))
