"""The approval-queue and active-run gauges, refreshed from Postgres when the API is scraped.

:func:`refresh_queue_gauges` reads the read models (``approvals``, ``runs``) at most every few
seconds and sets ``overseer_approvals_pending``, ``overseer_approvals_overdue``,
``overseer_approval_oldest_pending_age_seconds`` and ``overseer_runs_active``
(:mod:`observability.metrics`); ``observability.http`` calls it from ``GET /metrics``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from observability.metrics import (
    APPROVAL_OLDEST_AGE,
    APPROVALS_OVERDUE,
    APPROVALS_PENDING,
    QUEUE_GAUGE_ERRORS,
    RUNS_ACTIVE,
    bounded_label,
)

log = logging.getLogger("overseer.metrics")


# --- read-model gauges (API, at scrape time) ---------------------------------------------------

_QUEUE_SQL = """
SELECT pipeline,
       count(*) AS pending,
       count(*) FILTER (WHERE sla_deadline IS NOT NULL AND sla_deadline < now()) AS overdue,
       coalesce(extract(epoch FROM now() - min(requested_at)), 0) AS oldest_age_seconds
FROM approvals WHERE status = 'pending' GROUP BY pipeline
"""
_ACTIVE_SQL = """
SELECT pipeline, status, count(*) AS runs FROM runs
WHERE status IN ('running', 'awaiting_approval') GROUP BY pipeline, status
"""
_refresh_lock = threading.Lock()
_refreshed_at = 0.0


async def refresh_queue_gauges(pool: Any, *, known_pipelines: Iterable[str] = (),
                               min_interval_seconds: float = 2.0) -> None:
    """Set the approval-queue and active-run gauges from Postgres (at most every few seconds).

    Pipelines in ``known_pipelines`` always get a series (0 when nothing waits), so a
    dashboard shows an empty queue as 0 rather than as "no data".

    Never raises: a failed refresh counts ``overseer_metrics_refresh_errors_total`` and
    leaves the previous values.
    """
    global _refreshed_at
    now = time.monotonic()
    if now - _refreshed_at < min_interval_seconds:
        return
    try:
        queue = await pool.fetch(_QUEUE_SQL)
        active = await pool.fetch(_ACTIVE_SQL)
    except Exception:
        QUEUE_GAUGE_ERRORS.inc()
        log.warning("could not read the approval queue for metrics", exc_info=True)
        return
    with _refresh_lock:
        _refreshed_at = now
        for gauge in (APPROVALS_PENDING, APPROVALS_OVERDUE, APPROVAL_OLDEST_AGE, RUNS_ACTIVE):
            gauge.clear()
        for name in known_pipelines:
            for gauge in (APPROVALS_PENDING, APPROVALS_OVERDUE, APPROVAL_OLDEST_AGE):
                gauge.labels(bounded_label(name)).set(0)
            for status in ("running", "awaiting_approval"):
                RUNS_ACTIVE.labels(bounded_label(name), status).set(0)
        for row in queue:
            p = bounded_label(row["pipeline"])
            APPROVALS_PENDING.labels(p).set(row["pending"])
            APPROVALS_OVERDUE.labels(p).set(row["overdue"])
            APPROVAL_OLDEST_AGE.labels(p).set(float(row["oldest_age_seconds"]))
        for row in active:
            RUNS_ACTIVE.labels(bounded_label(row["pipeline"]), row["status"]).set(row["runs"])
