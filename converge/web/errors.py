"""Errors of the library as HTTP answers: a status and one clear message.

Every refusal of the JSON API has the body ``{"detail": "what is wrong"}``
(:class:`Problem`); a 422 adds ``errors``, one ``"where: what"`` line per problem
(:class:`InvalidRequest`), whether FastAPI's validation or a gate's value hook
refused the request. :func:`answers` documents them in the OpenAPI document.
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException
from pydantic import BaseModel

from converge.errors import ApplicationError, InvalidValue, MissingReason
from engine.errors import (
    ConvergeError,
    DuplicateVote,
    NotFound,
    RedactionError,
    ResumeError,
    UnverifiedParent,
)


class Problem(BaseModel):
    """The body of a refused request (400, 401, 403, 404, 409, 413, 429): one message."""

    detail: str


class InvalidRequest(BaseModel):
    """The body of a 422: ``detail`` names every field in one line, ``errors`` has one
    ``"location: message"`` per problem (``"query.status: Input should be ..."``)."""

    detail: str
    errors: list[str]


class Unprocessable(HTTPException):
    """A 422 for one field (``body.value``...) with its message."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(422, message)
        self.errors = [f"{field}: {message}"]


WHEN: dict[int, str] = {
    400: "The request cannot be carried out (the message says why); nothing was recorded.",
    401: "No bearer token, or an unknown one.",
    403: (
        "The access policy refuses this person this action (docs/access.md): a role that "
        "may not (a viewer deciding, forking or cancelling), a run its job hides from "
        "them, a gate restricted to its approvers, or four eyes."
    ),
    404: "Unknown gate, run or fact.",
    409: (
        "The gate is decided already (the message names who and when), its quorum is "
        "reached, it expired, this person voted on it already, its run is busy, the "
        "run to fork does not verify up to the fork point (the message names the seq), "
        "or the fact to redact was redacted already, its run is not stopped or paused, "
        "or its run's chain format cannot redact."
    ),
    413: "A body over 64 KiB (announced or streamed); nothing was recorded.",
    429: (
        "Too many failed sign-ins or unknown tokens from this client: wait for Retry-After seconds."
    ),
    422: (
        "A wrong type, a missing or unknown field, a bad filter value (the message names "
        "the field), or a value the gate policy's hook refuses; nothing was recorded."
    ),
}
"""When each refusal is answered: its description in the OpenAPI document."""


def answers(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route that may refuse with ``statuses`` (keys of
    :data:`WHEN`): each with its body model and when it is answered. A route that
    authenticates (401) may also answer 429 (too many failures from the client)."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in (*statuses, 429) if 401 in statuses else statuses:
        entry: dict[str, Any] = {
            "model": InvalidRequest if status == 422 else Problem,
            "description": WHEN[status],
        }
        if status == 429:
            entry["headers"] = {
                "Retry-After": {"description": "Seconds", "schema": {"type": "string"}}
            }
        if status == 401:
            entry["headers"] = {
                "WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}
            }
        out[status] = entry
    return out


_UNPROCESSABLE_FIELD: dict[type[ApplicationError], str] = {
    InvalidValue: "body.value",
    MissingReason: "body.reason",
}
"""The request field each 422 of the application names."""


def http_error(exc: ConvergeError) -> HTTPException:
    """The answer to ``exc``: an application error's own ``http_status`` (403 not an
    approver of the gate or four eyes, 422 a value the gate's hook refused or a
    missing required reason...); of the engine's, 404 an unknown gate or run, 409
    decided, expired, already voted, busy, a fork's parent that does not verify, a
    redaction refused; 400 otherwise."""
    if isinstance(exc, ApplicationError):
        field = _UNPROCESSABLE_FIELD.get(type(exc))
        if field is not None:
            return Unprocessable(field, str(exc))
        return HTTPException(exc.http_status, str(exc))
    if isinstance(exc, NotFound):
        return HTTPException(404, str(exc))
    if isinstance(exc, DuplicateVote | ResumeError | UnverifiedParent | RedactionError):
        return HTTPException(409, str(exc))
    return HTTPException(400, str(exc))
