"""How the console's pages are rendered: the Jinja environment, its filters and globals, the headers.

The templates (``services/api/console/templates``, package data of ``services.api.console``)
autoescape every value. :func:`render` fills one with the session's user and CSRF token and
answers it with the security headers every console page carries (a strict CSP, no framing, no
caching). The template filters (``duration``, ``short_time``, ``urlquote``) and globals
(``sla_state``, ``item_href``) are registered here.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape

from services.api.console import session as sessions
from services.api.schemas import ApprovalView

CONSOLE_DIR = Path(__file__).resolve().parents[2] / "console"
HTMX_VERSION = "2.0.11"
"""Version of the vendored ``static/htmx.min.js`` (npm ``htmx.org``, 0BSD)."""
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

templates = Environment(loader=FileSystemLoader(CONSOLE_DIR / "templates"),
                        autoescape=select_autoescape(default=True, default_for_string=True),
                        trim_blocks=True, lstrip_blocks=True)


def render(request: Request, session: sessions.ConsoleSession | None, name: str,
           context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """A console page: template ``name`` rendered with ``context`` and the security headers.

    Args:
        request: the request answered (its path marks the current page in the navigation).
        session: the reviewer's session (its user and CSRF token go to every template), or
            None on the login and error pages of a visitor not logged in.
        name: a template under ``services/api/console/templates``, e.g. ``queue.html``.
        context: the template's own values (autoescaped).
        status: the HTTP status of the answer.

    Returns:
        The HTML response.
    """
    html = templates.get_template(name).render(
        request=request, session=session, csrf_token=session.csrf_token if session else "",
        user=session.principal if session else None, htmx_version=HTMX_VERSION,
        path=request.url.path, **context)
    return HTMLResponse(html, status_code=status, headers=_security_headers())


def _security_headers() -> dict[str, str]:
    return {"Content-Security-Policy": CSP, "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store"}


def item_href(run_id: str, interrupt_id: str | None = None, item_query: str = "") -> str:
    """The console page of one approval: its run, its interrupt when it has one, the filters."""
    query = item_query
    if interrupt_id:
        query = f"{query}&" if query else "?"
        query += urlencode({"interrupt": interrupt_id})
    return f"/console/items/{quote(str(run_id))}{query}"


def duration(seconds: Any) -> str:
    """``93784`` → ``1 d 2 h``; ``75`` → ``1 min 15 s``.

    Args:
        seconds: a number of seconds (anything ``float()`` takes); negative counts as 0.

    Returns:
        The duration for people, or ``?`` when ``seconds`` is not a number.
    """
    try:
        s = float(seconds)
    except (TypeError, ValueError):
        return "?"
    if math.isnan(s):
        return "?"
    s = max(0, int(s))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s" if minutes < 10 else f"{minutes} min"
    return f"{secs} s"


def _sla_state(approval: ApprovalView) -> str:
    """``breached`` (recorded), ``overdue`` (past the deadline, not yet recorded) or ``ok``."""
    if approval.sla_breached:
        return "breached"
    if approval.status == "pending" and approval.sla_deadline and \
            datetime.fromisoformat(approval.sla_deadline) < datetime.now(UTC):
        return "overdue"
    return "ok"


def _short_time(value: str | None) -> str:
    if not value:
        return ""
    return datetime.fromisoformat(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


templates.filters.update(duration=duration, short_time=_short_time, urlquote=lambda v: quote(str(v)))
templates.globals.update(sla_state=_sla_state, item_href=item_href)
