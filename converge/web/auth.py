"""Who is asking: API tokens (``Authorization: Bearer``), the page login, CSRF.

The API takes a bearer token; the pages take the same token once on ``/login``
and keep it in an HttpOnly, SameSite=Strict cookie. Every form carries a CSRF
token: an HMAC, under a secret of this app, of the session token's hash, so a
page of another site cannot post a decision. What each person may do is the
access policy's (:mod:`converge.access`, asked by :mod:`converge.web.asking`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from functools import partial
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from audit.people import Principal, authenticate, log_access, token_hash
from audit.store import SqlRunStore
from converge.errors import LoginRequired
from converge.logs import note
from converge.web.limits import FailureLimiter

SESSION_COOKIE = "converge_session"
LOGIN_CSRF_COOKIE = "converge_login_csrf"
WEB_SECRET_ENV = "CONVERGE_WEB_SECRET"
"""The key of the forms' CSRF tokens, shared by the servers of one store behind a
proxy (a form rendered by one is posted to another); unset, each app draws its own."""


def shared_secret() -> bytes | None:
    """``$CONVERGE_WEB_SECRET`` as bytes (None when unset or empty)."""
    value = os.environ.get(WEB_SECRET_ENV, "")
    return value.encode() if value else None


def store_of(request: Request) -> SqlRunStore:
    """The audit store the app was created with."""
    store: SqlRunStore = request.app.state.store
    return store


BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="An API token of `converge token add NAME` (approver or viewer).",
)
"""The API's security scheme (in the OpenAPI document): ``Authorization: Bearer TOKEN``."""


async def api_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> Principal:
    """The person of the bearer token; 401 when it is missing or unknown."""
    token = "" if credentials is None else credentials.credentials
    if not token.strip():
        raise HTTPException(
            401,
            "authentication required: send 'Authorization: Bearer TOKEN' "
            "(create one with `converge token add NAME`)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return await checked_token(request, token.strip(), "api")


async def checked_token(request: Request, token: str, action: str) -> Principal:
    """The person of ``token``, under the app's failure limit (429 with Retry-After
    while this client is over it); every failure goes to the access log. Raises
    401 for an unknown, expired or revoked token."""
    store = store_of(request)
    client = request.client.host if request.client else "unknown"
    limiter: FailureLimiter = request.app.state.limiter
    wait = await run_in_threadpool(limiter.retry_after, client)
    if wait is not None:
        await run_in_threadpool(
            partial(
                log_access,
                store,
                action,
                "429",
                client=client,
                detail="over the failure limit",
                ts=limiter.clock(),
            )
        )
        raise HTTPException(
            429,
            f"too many failed sign-ins from {client}: try again in {wait} s",
            headers={"Retry-After": str(wait)},
        )
    who = await run_in_threadpool(authenticate, store, token, request.app.state.clock())
    if who is None:  # the row is the failure every server counts (FailureLimiter)
        await run_in_threadpool(
            partial(
                log_access,
                store,
                action,
                "401",
                client=client,
                detail="unknown, expired or revoked",
                ts=limiter.clock(),
            )
        )
        raise HTTPException(
            401, "unknown, expired or revoked API token", headers={"WWW-Authenticate": "Bearer"}
        )
    note(person=who.name)  # on this request's log lines, its access line included
    return who


async def page_principal(request: Request) -> Principal:
    """The person signed in on the pages; raises :class:`LoginRequired` otherwise."""
    token = request.cookies.get(SESSION_COOKIE)
    who = (
        None
        if not token
        else await run_in_threadpool(
            authenticate, store_of(request), token, request.app.state.clock()
        )
    )
    if who is None:
        raise LoginRequired()
    note(person=who.name)
    return who


def csrf_token(request: Request) -> str:
    """The CSRF token of this session's forms (empty without a session)."""
    token = request.cookies.get(SESSION_COOKIE) or ""
    secret: bytes = request.app.state.secret
    return hmac.new(secret, token_hash(token).encode(), hashlib.sha256).hexdigest()


def check_csrf(request: Request, sent: str | None) -> None:
    """403 unless ``sent`` is this session's CSRF token."""
    if not sent or not hmac.compare_digest(sent, csrf_token(request)):
        raise HTTPException(403, "invalid or missing CSRF token: reload the page and try again")
