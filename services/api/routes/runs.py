"""Runs: list, read, events, the pipeline's report and quotes, retry from the failed node."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

from fastapi import APIRouter, Query, status
from fastapi.responses import PlainTextResponse

from overseer import access
from overseer.errors import NotFoundError, PermissionDeniedError
from overseer.http_routes import (
    PoolDep,
    PrincipalDep,
    ReviewerDep,
    RunAccepted,
    SettingsDep,
    SubmitterDep,
    TemporalDep,
)
from overseer.registry import get_registry
from overseer.runs import retry_run
from overseer.store.events import fetch_events
from services.api.readmodels import get_run, list_runs
from services.api.schemas import EventList, EventView, RunList, RunView

router = APIRouter(prefix="/v1/runs", tags=["runs"])


@router.get("", response_model=RunList)
async def list_all(
    principal: PrincipalDep,
    pool: PoolDep,
    pipeline: str | None = None,
    status: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> RunList:
    """List runs, newest first, filtered by pipeline and status."""
    return RunList(items=await list_runs(pool, principal, pipeline=pipeline, status=status,
                                         limit=limit))


@router.get("/{run_id}", response_model=RunView)
async def read(run_id: str, principal: PrincipalDep, pool: PoolDep) -> RunView:
    """One run: status, result, pending approval, children, trace id."""
    return await get_run(pool, run_id, principal)


@router.get("/{run_id}/events", response_model=EventList)
async def events(run_id: str, principal: PrincipalDep, pool: PoolDep) -> EventList:
    """The run's audit events in append order."""
    view = await get_run(pool, run_id, principal)
    rows = await fetch_events(pool, view.run_id)
    return EventList(run_id=view.run_id, items=[EventView(**r) for r in rows])


@router.get("/{run_id}/report.md", response_class=PlainTextResponse,
            responses={200: {"content": {"text/markdown": {}}}})
async def report(run_id: str, principal: PrincipalDep, pool: PoolDep) -> PlainTextResponse:
    """The pipeline's Markdown report of the run (partial while it runs, final when done)."""
    view = await get_run(pool, run_id, principal)
    pipeline = get_registry().get(view.pipeline)
    if pipeline.api.report is None:
        raise NotFoundError(f"pipeline {pipeline.name} has no report")
    rendered = pipeline.api.report(_state_of(view))
    text = await rendered if inspect.isawaitable(rendered) else rendered
    return PlainTextResponse(str(text), media_type="text/markdown; charset=utf-8")


@router.get("/{run_id}/quotes")
async def quotes(run_id: str, principal: ReviewerDep, pool: PoolDep,
                 ids: Annotated[str, Query(max_length=20_000,
                                           description="comma-separated quote ids")]
                 ) -> dict[str, Any]:
    """Reviewers only: the source text of quote ids the run's result holds (unknown ids left out)."""
    view = await get_run(pool, run_id, principal)
    pipeline = get_registry().get(view.pipeline)
    if pipeline.api.quotes is None:
        raise NotFoundError(f"pipeline {pipeline.name} keeps no quote ids")
    wanted = [i.strip() for i in ids.split(",") if i.strip()][:500]
    return {"run_id": view.run_id, "quotes": await pipeline.api.quotes(_state_of(view), wanted)}


@router.post("/{run_id}/retry", status_code=status.HTTP_202_ACCEPTED, response_model=RunAccepted)
async def retry(run_id: str, principal: SubmitterDep, pool: PoolDep, temporal: TemporalDep,
                settings: SettingsDep) -> RunAccepted:
    """Start a new run that resumes a failed run at its failed node (earlier nodes are not re-run)."""
    view = await get_run(pool, run_id, principal)
    if not access.can(principal, "write", view.submitted_by):
        raise PermissionDeniedError("only the submitter or an admin may retry a run")
    submitted = await retry_run(pool, temporal, settings, run_id=view.run_id,
                                subject=principal.subject)
    return RunAccepted(run_id=submitted.run_id, pipeline=submitted.pipeline,
                       status=submitted.status, links=submitted.links)


def _state_of(view: RunView) -> dict[str, Any]:
    """The run's state as far as it got: the final output, else the partial results so far."""
    result = dict(view.result or {})
    output = result.get("output")
    return dict(output) if isinstance(output, dict) else result
