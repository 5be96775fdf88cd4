"""The Agent Server's cron API (``client.crons.*``), each cron a Temporal Schedule.

``POST /runs/crons`` (stateless: a new thread per run), ``POST /threads/{id}/runs/crons``
(every run on that thread), ``GET/PATCH/DELETE /runs/crons/{cron_id}``,
``POST /runs/crons/search`` and ``/count``, as ``langgraph-sdk`` sends them; the work is in
:mod:`overseer.crons`.

Who may do what: a cron belongs to the key that made it, as a thread does — another
submitter gets 404 for it and never sees it in a search; reviewers read every cron and
change none but their own (they may not create any: a cron starts runs, a submitter's
right); admins do everything. A deployment's LangGraph ``Auth`` handlers decide instead
when they cover ``crons`` (its filters apply to the cron's metadata, which a ``create``
handler may stamp).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from overseer import crons
from overseer.access import Principal
from overseer.errors import PermissionDeniedError
from overseer.http_routes import PoolDep, SettingsDep, TemporalDep
from services.api import agent_auth
from services.api.routes.agent_deps import AgentPrincipal, JsonBody

router = APIRouter(tags=["agent-server"])


async def _creating(principal: Principal, body: dict[str, Any],
                    thread_id: str | None) -> dict[str, Any]:
    """The create body as the ``crons.create`` handler left it (403 for a reviewer's key)."""
    if principal.user is None and not principal.is_admin and principal.role != "submitter":
        raise PermissionDeniedError(f"role {principal.role!r} may not create crons: a cron "
                                    "starts runs", details={"needs": ["submitter"]})
    value = {**body, "metadata": dict(body.get("metadata") or {}), "thread_id": thread_id}
    await agent_auth.authorize(principal, "crons", "create", value)
    return {k: v for k, v in value.items() if k != "thread_id"}


@router.post("/runs/crons")
async def create_cron(principal: AgentPrincipal, pool: PoolDep, temporal: TemporalDep,
                      settings: SettingsDep, body: JsonBody = None) -> dict[str, Any]:
    """``crons.create``: a stateless cron → the ``Cron``.

    Each run is on a new thread, deleted after it unless ``on_run_completed="keep"``.

    Raises:
        NotFoundError: unknown assistant (404).
        InvalidRequestError: a malformed field or a schedule Temporal refuses (422).
        PermissionDeniedError: a reviewer's key (403).
    """
    body = await _creating(principal, body or {}, None)
    return await crons.create_cron(pool, temporal, settings, body=body, thread_id=None,
                                   subject=principal.subject)


@router.post("/threads/{thread_id}/runs/crons")
async def create_thread_cron(thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                             temporal: TemporalDep, settings: SettingsDep,
                             body: JsonBody = None) -> dict[str, Any]:
    """``crons.create_for_thread``: every run of the cron on this thread → the ``Cron``.

    Raises:
        NotFoundError: unknown assistant, or a thread the caller does not reach (404).
        InvalidRequestError: a malformed field or a schedule Temporal refuses (422).
        PermissionDeniedError: a reviewer's key (403).
    """
    await agent_auth.gate_thread(pool, principal, thread_id, "create_run",
                                 {"assistant_id": (body or {}).get("assistant_id")})
    body = await _creating(principal, body or {}, thread_id)
    return await crons.create_cron(pool, temporal, settings, body=body, thread_id=thread_id,
                                   subject=principal.subject)


@router.get("/runs/crons/{cron_id}")
async def get_cron(cron_id: str, principal: AgentPrincipal, pool: PoolDep,
                   temporal: TemporalDep) -> dict[str, Any]:
    """The ``Cron`` with its next run date (404 for another's)."""
    scope = await agent_auth.authorize(principal, "crons", "read", {"cron_id": cron_id})
    row = await crons.get_cron(pool, cron_id, scope)
    return crons.cron_view(row, await crons.next_run_date(temporal, row["cron_id"]))


@router.patch("/runs/crons/{cron_id}")
async def update_cron(cron_id: str, principal: AgentPrincipal, pool: PoolDep,
                      temporal: TemporalDep, settings: SettingsDep,
                      body: JsonBody = None) -> dict[str, Any]:
    """``crons.update``: schedule, time zone, end time, enabled, run payload → the ``Cron``.

    Raises:
        NotFoundError: another's cron, or none (404).
        InvalidRequestError: an empty body, a malformed field, a refused schedule (422).
    """
    value = {**(body or {}), "cron_id": cron_id}
    scope = await agent_auth.authorize(principal, "crons", "update", value)
    return await crons.update_cron(pool, temporal, settings, cron_id, body or {}, scope)


@router.delete("/runs/crons/{cron_id}", status_code=204)
async def delete_cron(cron_id: str, principal: AgentPrincipal, pool: PoolDep,
                      temporal: TemporalDep) -> Response:
    """``crons.delete``: the cron and its schedule (204; 404 for another's)."""
    scope = await agent_auth.authorize(principal, "crons", "delete", {"cron_id": cron_id})
    await crons.delete_cron(pool, temporal, cron_id, scope)
    return Response(status_code=204)


@router.post("/runs/crons/search")
async def search_crons(principal: AgentPrincipal, pool: PoolDep, temporal: TemporalDep,
                       body: JsonBody = None) -> list[dict[str, Any]]:
    """``crons.search``: the crons the caller reaches, newest first by default."""
    value = dict(body or {})
    scope = await agent_auth.authorize(principal, "crons", "search", value)
    return await crons.search_crons(pool, temporal, value, scope)


@router.post("/runs/crons/count")
async def count_crons(principal: AgentPrincipal, pool: PoolDep,
                      body: JsonBody = None) -> int:
    """``crons.count``: how many crons the caller reaches match the filters."""
    value = dict(body or {})
    scope = await agent_auth.authorize(principal, "crons", "search", value)
    return await crons.count_crons(pool, value, scope)
