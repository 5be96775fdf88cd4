"""The console's stats page: ``GET /console/stats``, the orchestrator dashboard (``overseer.stats``).

The figures of ``GET /v1/admin/stats`` as tables, for one pipeline or all and a time window.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from overseer.registry import get_registry
from overseer.stats import compute_stats, window_start
from services.api.console import session as sessions
from services.api.routes.console.login import SESSION_DEP
from services.api.routes.console.render import render

STATS_WINDOWS = [("", "all time"), ("24", "last 24 h"), ("168", "last 7 days"),
                 ("720", "last 30 days")]

router = APIRouter(prefix="/console", include_in_schema=False)


@router.get("/stats", response_class=HTMLResponse)
async def stats_page(request: Request, session: sessions.ConsoleSession = SESSION_DEP,
                     pipeline: str | None = None, hours: str | None = None) -> Response:
    """The orchestrator dashboard: the figures of ``GET /v1/admin/stats`` as tables."""
    window = float(hours) if hours and hours.replace(".", "", 1).isdigit() else None
    stats = await compute_stats(request.app.state.pool, pipeline=pipeline or None,
                                since=window_start(window))
    return render(request, session, "stats.html",
                  {"stats": stats, "pipelines": get_registry().names(), "windows": STATS_WINDOWS,
                   "filters": {"pipeline": pipeline or "", "hours": hours or ""}})
