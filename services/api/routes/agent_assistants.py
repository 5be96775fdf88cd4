"""Assistants made through the Agent Server API (``assistants.create/update/delete``, versions).

The work is in :mod:`overseer.assistants`; reading and searching assistants (registered
graphs and these alike) is in :mod:`services.api.routes.langgraph_api`. Creating one takes
a submitter's or an admin's key (a reviewer's is 403); changing or deleting one, its
creator's or an admin's.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from overseer import access, assistants, threads
from overseer.errors import PermissionDeniedError
from overseer.web import PoolDep, TemporalDep
from services.api import agent_auth
from services.api.routes.langgraph_api import AgentPrincipal

router = APIRouter(tags=["agent-server"])

JsonBody = Annotated[dict[str, Any] | None, Body()]


@router.post("/assistants")
async def create_assistant(principal: AgentPrincipal, pool: PoolDep,
                           body: JsonBody = None) -> dict[str, Any]:
    """``assistants.create``: a graph with its own ``config``/``context`` → the ``Assistant`` (v1).

    Raises:
        NotFoundError: an unknown ``graph_id`` (404).
        ConflictError: the ``assistant_id`` is taken (409; ``if_exists="do_nothing"`` returns it).
        InvalidRequestError: a malformed field (422).
        PermissionDeniedError: a reviewer's key (403).
    """
    body = dict(body or {})
    if principal.user is None and not principal.is_admin and principal.role != "submitter":
        raise PermissionDeniedError(f"role {principal.role!r} may not create assistants",
                                    details={"needs": ["submitter"]})
    body["metadata"] = dict(body.get("metadata") or {})
    await agent_auth.authorize(principal, "assistants", "create", body)
    return await assistants.create(pool, body, principal.subject)


@router.patch("/assistants/{assistant_id}")
async def update_assistant(assistant_id: str, principal: AgentPrincipal, pool: PoolDep,
                           body: JsonBody = None) -> dict[str, Any]:
    """``assistants.update``: a new version that runs from now on → the ``Assistant``.

    Body: ``graph_id``, ``config``, ``context``, ``name``, ``description``; ``metadata``
    is merged into the assistant's.

    Raises:
        NotFoundError: no such assistant (404).
        PermissionDeniedError: a registered graph's assistant, or another's (403).
    """
    value = {**(body or {}), "assistant_id": assistant_id}
    scope = await agent_auth.authorize(principal, "assistants", "update", value)
    return await assistants.update(pool, assistant_id, body or {}, _writer(principal, scope))


@router.delete("/assistants/{assistant_id}", status_code=204)
async def delete_assistant(assistant_id: str, principal: AgentPrincipal, pool: PoolDep,
                           temporal: TemporalDep, delete_threads: bool = False) -> Response:
    """``assistants.delete`` (204); ``delete_threads=true`` also deletes the threads of its runs.

    Raises:
        NotFoundError: no such assistant (404).
        PermissionDeniedError: a registered graph's assistant, or another's (403).
    """
    scope = await agent_auth.authorize(principal, "assistants", "delete",
                                       {"assistant_id": assistant_id})
    row = await assistants.delete(pool, assistant_id, _writer(principal, scope))
    if delete_threads:
        for tid in await pool.fetch("SELECT DISTINCT thread_id FROM agent_runs "
                                    "WHERE assistant_id = $1", str(row["assistant_id"])):
            await threads.delete_thread(pool, temporal, str(tid["thread_id"]), principal.subject)
    return Response(status_code=204)


@router.post("/assistants/{assistant_id}/versions")
async def list_versions(assistant_id: str, principal: AgentPrincipal, pool: PoolDep,
                        body: JsonBody = None) -> list[dict[str, Any]]:
    """``assistants.get_versions``: newest first (``metadata``, ``limit``, ``offset``)."""
    await agent_auth.authorize(principal, "assistants", "read", {"assistant_id": assistant_id})
    return await assistants.versions(pool, assistant_id, body or {})


@router.post("/assistants/{assistant_id}/latest")
async def set_latest(assistant_id: str, principal: AgentPrincipal, pool: PoolDep,
                     body: JsonBody = None) -> dict[str, Any]:
    """``assistants.set_latest``: the version runs use from now on → the ``Assistant``."""
    value = {**(body or {}), "assistant_id": assistant_id}
    scope = await agent_auth.authorize(principal, "assistants", "update", value)
    return await assistants.set_latest(pool, assistant_id, (body or {}).get("version"),
                                       _writer(principal, scope))


def _writer(principal: Any, scope: access.Scope) -> access.Scope:
    """Who may change an assistant: an ``Auth`` handler's scope, else the owner rule's."""
    if scope.metadata is not None or principal.user is not None:
        return scope
    return access.scope(principal, "write")
