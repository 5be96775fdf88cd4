"""``GET /healthz`` (process alive) and ``GET /readyz`` (Temporal and Postgres reachable)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from overseer.http_routes import PoolDep, TemporalDep
from services.api.schemas import Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """The process is up."""
    return Health(status="ok")


@router.get("/readyz", response_model=Health, responses={503: {"model": Health}})
async def readyz(pool: PoolDep, temporal: TemporalDep) -> Health | JSONResponse:
    """Ready when Postgres answers a query and Temporal answers a health check (2 s each)."""
    checks: dict[str, str] = {}
    try:
        await asyncio.wait_for(pool.fetchval("SELECT 1"), 2)
        checks["postgres"] = "ok"
    except Exception as err:  # noqa: BLE001 — any failure means not ready
        checks["postgres"] = f"unavailable: {type(err).__name__}"
    try:
        await asyncio.wait_for(temporal.service_client.check_health(), 2)
        checks["temporal"] = "ok"
    except Exception as err:  # noqa: BLE001
        checks["temporal"] = f"unavailable: {type(err).__name__}"
    if all(v == "ok" for v in checks.values()):
        return Health(status="ok", checks=checks)
    return JSONResponse(Health(status="unavailable", checks=checks).model_dump(), status_code=503)
