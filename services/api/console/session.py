"""Console sessions: a signed, HttpOnly, SameSite=Strict cookie issued in exchange for an API token.

The cookie holds ``{sub, role, fp, csrf, exp}`` as base64url JSON plus an HMAC-SHA256 of it
under ``Settings.console_secret()``. It never holds the token itself: ``fp`` is an HMAC
fingerprint of the token, checked against the *current* grants on every request, so removing
a token from ``OVERSEER_API_TOKENS`` ends its console sessions at the next restart, and a role
change applies at once. ``csrf`` is a per-session random token that every POST form (and
every htmx request, as ``X-CSRF-Token``) must echo.

Before login there is no session, so the login form carries a double-submit token: a random
nonce in a short-lived cookie and its HMAC in the form.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastapi import Request

from overseer.access import Principal
from overseer.errors import PermissionDeniedError

COOKIE = "overseer_console"
LOGIN_COOKIE = "overseer_console_login"
COOKIE_PATH = "/console"
LOGIN_NONCE_SECONDS = 3600
CONSOLE_ROLES = ("reviewer", "admin")
"""Roles that may use the console (submitters may not)."""
_CONTEXT = b"overseer-console-session-v1."


class LoginRequired(Exception):  # noqa: N818 - a control-flow signal, not an error
    """No valid session: the handler redirects to the login page (``next`` = where to return)."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


@dataclass(frozen=True)
class ConsoleSession:
    """A verified console session.

    Attributes:
        principal: the reviewer or admin, as the current token grant says.
        csrf_token: the token POST forms must echo.
        expires_at: UNIX time the cookie stops being accepted.
    """

    principal: Principal
    csrf_token: str
    expires_at: float


def console_secret(request: Request) -> bytes | None:
    """The signing key (cached on the app), or None when the console login is disabled."""
    state = request.app.state
    if not hasattr(state, "console_secret"):
        state.console_secret = state.settings.console_secret()
    secret: bytes | None = state.console_secret
    return secret


def token_fingerprint(secret: bytes, token: str) -> str:
    """A keyed fingerprint of an API token (safe to put in a cookie)."""
    return hmac.new(secret, b"token:" + token.encode(), hashlib.sha256).hexdigest()[:32]


def grant_for_token(request: Request, token: str) -> dict[str, str] | None:
    """The grant ``{role, subject}`` of ``token``, compared in constant time; None if unknown."""
    grants: dict[str, dict[str, str]] = request.app.state.grants
    found = None
    for known, grant in grants.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = grant
    return found


def grant_expired(grant: dict[str, str]) -> bool:
    """Whether the grant's optional ``expires_at`` has passed."""
    expires = grant.get("expires_at")
    return expires is not None and datetime.fromisoformat(expires) <= datetime.now(UTC)


def issue_session(secret: bytes, token: str, grant: dict[str, str],
                  lifetime_seconds: float) -> tuple[str, ConsoleSession]:
    """A new session for ``token`` (whose ``grant`` was already checked).

    The session ends after ``lifetime_seconds`` or when the token expires, whichever is first.

    Returns:
        ``(cookie_value, session)``.
    """
    expires_at = time.time() + lifetime_seconds
    if grant.get("expires_at"):
        expires_at = min(expires_at, datetime.fromisoformat(grant["expires_at"]).timestamp())
    session = ConsoleSession(principal=Principal(subject=grant["subject"], role=grant["role"]),
                             csrf_token=secrets.token_urlsafe(32), expires_at=expires_at)
    payload = {"sub": grant["subject"], "role": grant["role"], "fp": token_fingerprint(secret, token),
               "csrf": session.csrf_token, "exp": int(session.expires_at)}
    return _sign(secret, payload), session


def read_session(request: Request) -> ConsoleSession | None:
    """The request's valid session, or None (no cookie, bad signature, expired, token revoked)."""
    secret = console_secret(request)
    raw = request.cookies.get(COOKIE)
    if secret is None or not raw:
        return None
    payload = _verify(secret, raw)
    if payload is None or float(payload.get("exp", 0)) < time.time():
        return None
    grant = _fingerprints(request, secret).get(str(payload.get("fp")))
    if grant is None or grant["role"] not in CONSOLE_ROLES or grant_expired(grant):
        return None
    return ConsoleSession(principal=Principal(subject=grant["subject"], role=grant["role"]),
                          csrf_token=str(payload["csrf"]), expires_at=float(payload["exp"]))


def require_session(request: Request) -> ConsoleSession:
    """Dependency: the session, or :class:`LoginRequired` (the handler redirects to login)."""
    session = read_session(request)
    if session is None:
        path = request.url.path if request.method == "GET" else "/console/queue"
        query = f"?{request.url.query}" if request.url.query and request.method == "GET" else ""
        raise LoginRequired(path + query)
    return session


def check_csrf(session: ConsoleSession, request: Request, form_token: str | None) -> None:
    """Refuse a state-changing request whose CSRF token (form field or header) is not the session's.

    Raises:
        PermissionDeniedError: missing or wrong token (403).
    """
    sent = form_token or request.headers.get("x-csrf-token") or ""
    if not hmac.compare_digest(sent.encode(), session.csrf_token.encode()):
        raise PermissionDeniedError("missing or invalid CSRF token")


def login_nonce() -> str:
    """A fresh nonce for the login form's double-submit cookie."""
    return secrets.token_urlsafe(24)


def login_form_token(secret: bytes, nonce: str) -> str:
    """The login form's CSRF token bound to the cookie's nonce."""
    return hmac.new(secret, b"login:" + nonce.encode(), hashlib.sha256).hexdigest()


def check_login_csrf(secret: bytes, request: Request, form_token: str | None) -> bool:
    """Whether the login form's token matches the nonce cookie."""
    nonce = request.cookies.get(LOGIN_COOKIE)
    if not nonce or not form_token:
        return False
    return hmac.compare_digest(login_form_token(secret, nonce).encode(), form_token.encode())


def safe_next(value: str | None) -> str:
    """A post-login redirect target: only console paths on this site (no open redirect)."""
    if (value and value.startswith("/console") and not value.startswith("//")
            and "\\" not in value and not value.startswith("/console/login")):
        return value
    return "/console/queue"


def _fingerprints(request: Request, secret: bytes) -> dict[str, dict[str, str]]:
    state = request.app.state
    grants: dict[str, dict[str, str]] = state.grants
    cached = getattr(state, "console_fingerprints", None)
    if cached is None or cached[0] is not grants:
        cached = (grants, {token_fingerprint(secret, t): g for t, g in grants.items()})
        state.console_fingerprints = cached
    fingerprints: dict[str, dict[str, str]] = cached[1]
    return fingerprints


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(secret: bytes, payload: dict[str, Any]) -> str:
    body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
    mac = hmac.new(secret, _CONTEXT + body.encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}"


def _verify(secret: bytes, value: str) -> dict[str, Any] | None:
    body, _, mac = value.partition(".")
    if not body or not mac:
        return None
    expected = hmac.new(secret, _CONTEXT + body.encode(), hashlib.sha256).digest()
    try:
        if not hmac.compare_digest(expected, _unb64(mac)):
            return None
        payload = json.loads(_unb64(body))
    except (ValueError, json.JSONDecodeError):
        return None
    return payload if isinstance(payload, dict) else None
