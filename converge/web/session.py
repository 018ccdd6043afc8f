"""Signing in to the pages with an API token (``/login``, ``/logout``).

The login form is protected by a double-submit CSRF token (a random cookie the
form must repeat); the session cookie holds the token, HttpOnly and SameSite=Strict.
"""

from __future__ import annotations

import hmac
import logging
import secrets

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from audit.people import Principal
from converge.web.auth import LOGIN_CSRF_COOKIE, SESSION_COOKIE, check_csrf, checked_token

router = APIRouter()
log = logging.getLogger("converge.web")

LOGIN_FIELDS = frozenset({"csrf", "token", "next"})


def _safe_next(target: str | None) -> str:
    """Only a path of this site: never an absolute URL an attacker chose."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str = "/") -> Response:
    """The sign-in form (an API token from ``converge token add``)."""
    csrf = secrets.token_urlsafe(24)
    response: Response = request.app.state.render(
        request, "login.html", who=None, csrf=csrf, next=_safe_next(next), error=None
    )
    response.set_cookie(LOGIN_CSRF_COOKIE, csrf, httponly=True, samesite="strict")
    return response


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the token; on success set the session cookie and go to ``next``."""
    form = await request.form()
    unknown = sorted(set(form.keys()) - LOGIN_FIELDS)
    if unknown:
        raise HTTPException(400, f"unknown form field(s): {', '.join(unknown)}")
    sent, token, target = (form.get(k) for k in ("csrf", "token", "next"))
    expected = request.cookies.get(LOGIN_CSRF_COOKIE) or ""
    if not isinstance(sent, str) or not expected or not hmac.compare_digest(sent, expected):
        raise HTTPException(403, "invalid or missing CSRF token: reload the sign-in page")
    if not isinstance(token, str) or not token.strip():
        raise HTTPException(400, "token is required")
    token = token.strip()
    try:
        who: Principal | None = await checked_token(request, token, "login")
    except HTTPException as exc:
        if exc.status_code != 401:
            raise
        who = None
    if who is None:
        log.warning("sign-in refused: unknown token", extra={"event": "sign_in_refused"})
        csrf = secrets.token_urlsafe(24)
        response: Response = request.app.state.render(
            request,
            "login.html",
            who=None,
            csrf=csrf,
            next=_safe_next(target if isinstance(target, str) else None),
            error="unknown token",
            status_code=401,
        )
        response.set_cookie(LOGIN_CSRF_COOKIE, csrf, httponly=True, samesite="strict")
        return response
    log.info("%s signed in", who.name, extra={"event": "signed_in", "person": who.name})
    response = RedirectResponse(
        _safe_next(target if isinstance(target, str) else None), status_code=303
    )
    # Secure whenever the inbox is served over https (behind a TLS proxy)
    secure = request.url.scheme == "https"
    response.set_cookie(SESSION_COOKIE, token, httponly=True, samesite="strict", secure=secure)
    response.delete_cookie(LOGIN_CSRF_COOKIE)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session (CSRF-checked, so another site cannot sign you out)."""
    form = await request.form()
    sent = form.get("csrf")
    check_csrf(request, sent if isinstance(sent, str) else None)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE)
    return response
