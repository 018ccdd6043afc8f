"""The web's side of the access policy (:mod:`converge.access`): the person of a
request, and its questions asked with the request's client in the access log.

Routes take a :class:`Person` (``Depends(api_person)`` for the JSON API,
``Depends(page_person)`` for the pages) and ask, in their worker thread, with
:func:`ask_run` / :func:`ask_gate` (a refusal: 403, logged, nothing written) or
filter with :func:`converge.access.check`. No route compares roles or groups
itself (tests/test_access_matrix.py walks them).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from audit.people import Principal
from converge.access import (
    Action,
    GateView,
    Person,
    Resource,
    RunView,
    ask,
    gate_view,
    person_of,
    run_view,
)
from converge.web.auth import api_principal, page_principal, store_of
from engine import GateRecord

__all__ = [
    "ApiPerson",
    "PagePerson",
    "api_person",
    "ask_gate",
    "ask_on",
    "ask_run",
    "client_of",
    "page_person",
]


def client_of(request: Request) -> str:
    """The request's client address (the proxy's forwarded one when believed)."""
    return request.client.host if request.client else "unknown"


async def api_person(request: Request, who: Annotated[Principal, Depends(api_principal)]) -> Person:
    """The bearer token's person, with their role and groups (401 without a token)."""
    return person_of(who)


async def page_person(
    request: Request, who: Annotated[Principal, Depends(page_principal)]
) -> Person:
    """The signed-in person of the pages (the sign-in page otherwise)."""
    return person_of(who)


ApiPerson = Annotated[Person, Depends(api_person)]
"""A JSON route's parameter: the bearer token's person (:func:`api_person`)."""
PagePerson = Annotated[Person, Depends(page_person)]
"""A page's parameter: the signed-in person (:func:`page_person`)."""


def ask_on(request: Request, person: Person, action: Action, resource: Resource) -> None:
    """Ask the policy (in a worker thread): 403 when refused, in the access log."""
    ask(store_of(request), person, action, resource, client=client_of(request))


def ask_run(request: Request, person: Person, action: Action, run_id: str) -> RunView:
    """``action`` on run ``run_id`` as ``person``: its view when allowed; raises
    ``RunNotFound`` (404) or ``NotAllowed`` (403, logged)."""
    run = run_view(store_of(request), run_id)
    ask_on(request, person, action, run)
    return run


def ask_gate(request: Request, person: Person, action: Action, gate: GateRecord) -> GateView:
    """``action`` on ``gate`` as ``person`` now: its view when allowed; raises
    ``NotAllowed`` (403, logged)."""
    view = gate_view(gate, run_view(store_of(request), gate.run_id), request.app.state.clock())
    ask_on(request, person, action, view)
    return view
