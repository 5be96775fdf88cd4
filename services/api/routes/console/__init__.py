"""The review console: server-rendered pages under ``/console`` for reviewers and admins.

- ``GET/POST /console/login``, ``POST /console/logout``: exchange an API token for a signed,
  HttpOnly, SameSite=Strict session cookie (see ``services/api/console/session.py``);
  ``login.py``.
- ``GET /console/queue``: the approval queue, oldest first, filtered by status, pipeline,
  age, SLA state and assignee (htmx swaps the table as filters change); ``queue.py``.
- ``GET /console/items/{run_id}``: the document page(s) next to current and proposed field
  values with evidence, Approve / Reject / Edit, Claim / Release / Reassign, the run's
  event timeline (polled while the run is live), a Temporal Web UI link, the trace id and
  the pipeline's own section (``Pipeline.api.console_view``); ``items.py``, its forms in
  ``decisions.py``.
- ``GET /console/items/{run_id}/pages/{n}.png``: a page of the run's document as PNG.
- ``GET /console/stats``: the orchestrator dashboard (``overseer.stats``); ``stats.py``.

Every POST checks the session's CSRF token. Decisions, claims and reassignments go through
the same functions as the JSON admin API (``services.api.routes.approvals``), so the workflow
validates them and refusals (409, 422) are shown on the page. Templates autoescape every value
(``render.py``). This module puts the pages together: one :data:`router`, and
:func:`install_console` adds it to the app with the static files and the error pages.
"""

from __future__ import annotations

import inspect
import json
from urllib.parse import urlencode

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from overseer.errors import OverseerError
from services.api.console import session as sessions
from services.api.errors import SECURITY_CODES, record_security_event
from services.api.routes.console import decisions, items, login, queue, stats
from services.api.routes.console.render import CONSOLE_DIR, render

router = APIRouter()
"""Every console page (all under ``/console``, none in the OpenAPI schema), in the order they match."""
router.include_router(login.router)
router.include_router(queue.router)
router.include_router(items.router)
router.include_router(decisions.router)
router.include_router(stats.router)


def install_console(app: FastAPI) -> None:
    """Add the console's routes, its static files and its login redirect to ``app``."""
    app.include_router(router)
    app.mount("/console/static", StaticFiles(directory=CONSOLE_DIR / "static"), name="console-static")

    async def _login_redirect(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, sessions.LoginRequired)
        if request.headers.get("hx-request"):
            return Response(status_code=401, headers={"HX-Redirect": "/console/login"})
        return RedirectResponse(f"/console/login?{urlencode({'next': exc.next_path})}", 303)

    app.add_exception_handler(sessions.LoginRequired, _login_redirect)
    json_handler = app.exception_handlers.get(OverseerError)

    async def _console_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, OverseerError)
        path = request.url.path
        if not path.startswith("/console/") or path.endswith(".png") or json_handler is None:
            if json_handler is None:
                return Response(json.dumps({"code": exc.code, "message": exc.message,
                                            "details": exc.details}),
                                status_code=exc.http_status, media_type="application/json")
            answer = json_handler(request, exc)
            return await answer if inspect.isawaitable(answer) else answer
        if exc.code in SECURITY_CODES:
            await record_security_event(request, exc.code, exc.http_status)
        return render(request, sessions.read_session(request), "error.html",
                      {"status": exc.http_status, "code": exc.code, "message": exc.message},
                      status=exc.http_status)

    app.add_exception_handler(OverseerError, _console_error)
