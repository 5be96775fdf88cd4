"""The console's approval queue: ``GET /console/queue`` and the queue filters the item pages keep.

The queue lists approval requests oldest first, filtered by status, pipeline, age, SLA state
and assignee (htmx swaps the table as filters change). An item page carries the filters on
(:func:`item_query`), so its previous/next links and the item shown after a decision follow
the same queue (:func:`list_queue`).
"""

from __future__ import annotations

import math
from typing import Any
from urllib.parse import urlencode

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from overseer.access import Principal
from overseer.registry import get_registry
from services.api.console import session as sessions
from services.api.operations import list_approval_views
from services.api.routes.console.login import SESSION_DEP
from services.api.routes.console.render import render
from services.api.schemas import ApprovalView

AGE_CHOICES = [("", "any age"), ("3600", "older than 1 h"), ("14400", "older than 4 h"),
               ("86400", "older than 1 day"), ("259200", "older than 3 days")]
QUEUE_FILTERS = ("status", "pipeline", "sla_state", "assignee", "min_age_seconds")

router = APIRouter(prefix="/console", include_in_schema=False)


# --- queue ------------------------------------------------------------------------------------


@router.get("/queue", response_class=HTMLResponse)
async def queue(request: Request, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """The approval queue with filters; an htmx request gets only the table."""
    filters = _queue_filters(request, session.principal)
    pool = request.app.state.pool
    items = await list_queue(pool, filters, session.principal)
    pipelines = sorted(set(get_registry().names()) | {a.pipeline for a in items})
    context = {"items": items, "filters": filters, "pipelines": pipelines,
               "age_choices": AGE_CHOICES, "item_query": item_query(filters)}
    if request.headers.get("hx-request") and request.headers.get("hx-target") == "queue-table":
        return render(request, session, "_queue_table.html", context)
    return render(request, session, "queue.html", context)


# --- listing and filters ------------------------------------------------------------------------


async def list_queue(pool: asyncpg.Pool, filters: dict[str, Any], principal: Principal,
                     limit: int = 500) -> list[ApprovalView]:
    """The admin API's queue listing; ``me`` is the caller, ``unassigned`` the unclaimed ones.

    Args:
        pool: the Postgres pool.
        filters: the queue filters (keys of :data:`QUEUE_FILTERS`; empty values filter nothing).
        principal: the reviewer asking (``assignee=me`` means them).
        limit: at most this many approvals.

    Returns:
        The approvals, oldest request first.
    """
    assignee = filters.get("assignee") or None
    if assignee == "me":
        assignee = principal.subject
    elif assignee in ("unassigned", "none"):
        assignee = "none"
    return await list_approval_views(
        pool, status=filters.get("status") or None, pipeline=filters.get("pipeline") or None,
        assignee=assignee, sla_state=filters.get("sla_state") or None,
        min_age_seconds=_float(filters.get("min_age_seconds")), limit=limit)


def _queue_filters(request: Request, principal: Principal) -> dict[str, str]:
    q = request.query_params
    status = q.get("status", "pending")
    return {
        "status": status if status in ("pending", "decided", "cancelled", "") else "pending",
        "pipeline": q.get("pipeline", ""),
        "sla_state": q.get("sla_state", "") if q.get("sla_state") in ("ok", "breached") else "",
        "assignee": q.get("assignee", "").strip()[:200],
        "min_age_seconds": q.get("min_age_seconds", "") if _float(q.get("min_age_seconds")) else "",
    }


def item_query(filters: dict[str, Any]) -> str:
    """The query string that carries the queue filters to an item page.

    Args:
        filters: the queue filters; empty ones and the default ``status=pending`` are left out.

    Returns:
        ``?key=value&…``, or ``""`` when no filter is set.
    """
    kept = {k: v for k, v in filters.items() if v and not (k == "status" and v == "pending")}
    return f"?{urlencode(kept)}" if kept else ""


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None
