"""The console's session: log in with an API token, log out, and what the other pages need of it.

- ``GET /console``: go to the queue.
- ``GET/POST /console/login``, ``POST /console/logout``: exchange an API token for a signed,
  HttpOnly, SameSite=Strict session cookie (see ``services/api/console/session.py``).

Every other page takes the session through :data:`SESSION_DEP`; every POST reads its fields
with :func:`form_str` and checks the session's CSRF token.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from services.api.console import session as sessions
from services.api.errors import record_security_event
from services.api.routes.console.render import render

SESSION_DEP = Depends(sessions.require_session)

router = APIRouter(prefix="/console", include_in_schema=False)


# --- login ------------------------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
async def console_home() -> Response:
    """Go to the queue."""
    return RedirectResponse("/console/queue", 303)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str | None = None) -> Response:
    """The login form: one field for an API token (reviewer or admin); logged in, go on."""
    if sessions.read_session(request) is not None:
        return RedirectResponse(sessions.safe_next(next), 303)
    return _login_form(request, next_path=sessions.safe_next(next))


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """Check the token and the form's CSRF token; issue the session cookie."""
    form = await request.form()
    next_path = sessions.safe_next(form_str(form.get("next")))
    secret = sessions.console_secret(request)
    if secret is None:
        return _login_form(request, next_path=next_path, status=503,
                           error="The console is disabled: set OVERSEER_CONSOLE_SESSION_SECRET.")
    if not sessions.check_login_csrf(secret, request, form_str(form.get("csrf_token"))):
        return _login_form(request, next_path=next_path, status=403,
                           error="The login form expired. Please try again.")
    token = (form_str(form.get("token")) or "").strip()
    grant = sessions.grant_for_token(request, token) if token else None
    if grant is None:
        await record_security_event(request, "unauthenticated", 401)
        return _login_form(request, next_path=next_path, status=401, error="Unknown token.")
    if sessions.grant_expired(grant):
        await record_security_event(request, "token_expired", 401)
        return _login_form(request, next_path=next_path, status=401, error="This token has expired.")
    if grant["role"] not in sessions.CONSOLE_ROLES:
        await record_security_event(request, "forbidden", 403)
        return _login_form(request, next_path=next_path, status=403,
                           error="The console is for reviewers and admins; this token may not use it.")
    settings = request.app.state.settings
    value, _ = sessions.issue_session(secret, token, grant, settings.console_session_seconds)
    response = RedirectResponse(next_path, 303)
    response.set_cookie(sessions.COOKIE, value, max_age=int(settings.console_session_seconds),
                        path=sessions.COOKIE_PATH, httponly=True, samesite="strict",
                        secure=_secure(request))
    response.delete_cookie(sessions.LOGIN_COOKIE, path=sessions.COOKIE_PATH)
    return response


@router.post("/logout")
async def logout(request: Request, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """End the session (clears the cookie)."""
    form = await request.form()
    sessions.check_csrf(session, request, form_str(form.get("csrf_token")))
    response = RedirectResponse("/console/login", 303)
    response.delete_cookie(sessions.COOKIE, path=sessions.COOKIE_PATH, httponly=True,
                           samesite="strict", secure=_secure(request))
    return response


# --- helpers ----------------------------------------------------------------------------------


def _login_form(request: Request, *, next_path: str, status: int = 200,
                error: str | None = None) -> HTMLResponse:
    secret = sessions.console_secret(request)
    nonce = request.cookies.get(sessions.LOGIN_COOKIE) or sessions.login_nonce()
    response = render(request, None, "login.html", {
        "next_path": next_path, "error": error, "disabled": secret is None,
        "login_token": sessions.login_form_token(secret, nonce) if secret else "",
    }, status=status)
    response.set_cookie(sessions.LOGIN_COOKIE, nonce, max_age=sessions.LOGIN_NONCE_SECONDS,
                        path=sessions.COOKIE_PATH, httponly=True, samesite="strict",
                        secure=_secure(request))
    return response


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.app.state.settings.environment == "production"


def form_str(value: Any) -> str | None:
    """A form field's value when it is text, else None (absent, or an uploaded file).

    Args:
        value: what ``(await request.form()).get(name)`` returned.
    """
    return value if isinstance(value, str) else None
