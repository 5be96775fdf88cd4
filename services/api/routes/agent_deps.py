"""What the Agent Server routes share: the caller, the thread gate, a JSON body, a thread id.

The LangGraph Agent Server API as ``langgraph-sdk`` sends it is mounted at the
API root next to ``/v1`` so an existing LangGraph client only changes its URL and key; its
routes are the ``agent_*`` modules of :mod:`services.api.routes`. Auth: the SDK's
``x-api-key`` header (or ``Authorization: Bearer``) carries the same tokens and roles as
``/v1``. What differs from LangGraph's server, endpoint by endpoint: ``docs/langgraph-api.md``.

Who may see what: every thread and its runs belong to the principal that
created them. Every ``/threads/{thread_id}/…`` route depends on :func:`thread_gate` (or, for
run creation, calls :func:`services.api.agent_auth.gate_thread` itself), and search and
count filter in SQL, by the one rule of :mod:`overseer.access` — or by a deployment's
LangGraph ``Auth`` handlers (:mod:`services.api.agent_auth`).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Body, Depends, Request

from overseer.access import Principal
from overseer.errors import InvalidRequestError, NotFoundError
from overseer.http_routes import PoolDep
from services.api import agent_auth

JsonBody = Annotated[dict[str, Any] | None, Body()]


async def agent_principal(request: Request) -> Principal:
    """The caller: ``x-api-key`` (the SDK's header) or a bearer token, or the deployment's ``Auth``.

    Raises:
        AuthenticationError: no key, an unknown or expired one, or refused by the ``Auth``
            handler (401).
    """
    return await agent_auth.authenticate(request)


AgentPrincipal = Annotated[Principal, Depends(agent_principal)]


def thread_gate(action: str) -> Any:
    """A dependency: the caller may ``action`` the path's thread (:func:`agent_auth.gate_thread`: 404 if not).

    The ``Auth`` handler's value is LangGraph's: ``thread_id``, plus ``run_id`` on a run's
    routes; ``update`` routes that change metadata pass it themselves.
    """

    async def dependency(request: Request, thread_id: str, principal: AgentPrincipal,
                         pool: PoolDep) -> Principal:
        value: dict[str, Any] = {}
        if "run_id" in request.path_params:
            value["run_id"] = request.path_params["run_id"]
        if action == "update" and request.url.path.endswith("/cancel"):
            value["action"] = request.query_params.get("action", "interrupt")
        await agent_auth.gate_thread(pool, principal, thread_id, action, value)
        return principal

    dependency.__name__ = f"thread_gate_{action}"
    return dependency


ThreadReader = Annotated[Principal, Depends(thread_gate("read"))]
ThreadUpdater = Annotated[Principal, Depends(thread_gate("update"))]
ThreadDeleter = Annotated[Principal, Depends(thread_gate("delete"))]


def thread_uuid(thread_id: str) -> uuid.UUID:
    """A path's ``thread_id`` as a UUID.

    Raises:
        NotFoundError: not a UUID, so no thread's id (404).
    """
    try:
        return uuid.UUID(thread_id)
    except ValueError:
        raise NotFoundError(f"unknown thread {thread_id}") from None


def object_field(body: dict[str, Any], field: str) -> dict[str, Any]:
    """``body[field]``, which must be an object when given; ``{}`` when absent or null.

    Raises:
        InvalidRequestError: anything else (422, ``details.field``).
    """
    value = body.get(field) or {}
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{field} must be an object", details={"field": field})
    return value


def check_select(select: Any, allowed: frozenset[str]) -> list[str] | None:
    """A search's ``select`` (the SDK's ``*SelectField`` lists), checked; None for every field.

    Raises:
        InvalidRequestError: not a list of names in ``allowed`` (422, ``details.field``).
    """
    if select is None or select == []:
        return None
    if not isinstance(select, list) or not all(isinstance(f, str) and f in allowed
                                               for f in select):
        raise InvalidRequestError(f"select must be a list of {sorted(allowed)}",
                                  details={"field": "select"})
    return list(select)


def pick(items: list[dict[str, Any]], select: list[str] | None) -> list[dict[str, Any]]:
    """Each item with only the fields ``select`` names (all of them for None)."""
    return items if select is None else [{k: i[k] for k in select if k in i} for i in items]
