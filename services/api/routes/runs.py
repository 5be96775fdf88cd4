"""Reading runs: ``GET /v1/runs``, ``GET /v1/runs/{run_id}``, ``GET /v1/runs/{run_id}/events``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from overseer.store.events import fetch_events
from services.api.deps import PoolDep, PrincipalDep
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
