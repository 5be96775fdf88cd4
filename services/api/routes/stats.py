"""Orchestrator statistics: ``GET /v1/admin/stats`` (seed 000 §3.5), computed from the event log."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from overseer.errors import InvalidRequestError
from overseer.http_routes import PoolDep, ReviewerDep
from overseer.stats import Stats, compute_stats

router = APIRouter(prefix="/v1/admin/stats", tags=["stats"])


@router.get("", response_model=Stats)
async def read_stats(
    _: ReviewerDep,
    pool: PoolDep,
    pipeline: str | None = None,
    since: Annotated[datetime | None, Query(description="runs submitted at or after (ISO-8601)")] = None,
    until: Annotated[datetime | None, Query(description="runs submitted before (ISO-8601)")] = None,
    top: Annotated[int, Query(ge=1, le=100)] = 10,
) -> Stats:
    """Outcomes per pipeline, tools per submission, escalation reasons, approval ages, SLA, reviewers.

    The figures cover the runs submitted in ``[since, until)`` of ``pipeline`` (all
    optional) and every event of those runs.
    """
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise InvalidRequestError(f"{name} needs a time zone (e.g. 2030-01-01T00:00:00Z)",
                                      details={"field": name})
    return await compute_stats(pool, pipeline=pipeline, since=since, until=until, top=top)
