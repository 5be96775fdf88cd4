"""The Agent Server's assistants (``client.assistants.*``): registered graphs and those made here.

Every registered graph is an assistant (its id, or its graph name); ``assistants.create``
makes one of a graph with its own ``config``/``context``, with versions. Searching and
reading cover both; the work is in :mod:`overseer.assistants`. Creating one takes a
submitter's or an admin's key (a reviewer's is 403); changing or deleting one, its
creator's or an admin's.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, Response

from overseer import access, assistants, threads
from overseer.errors import InvalidRequestError, NotFoundError, PermissionDeniedError
from overseer.graph_codec import to_jsonable
from overseer.http_routes import PoolDep, TemporalDep
from overseer.registry import get_registry
from services.api import agent_auth
from services.api.routes.agent_deps import AgentPrincipal, JsonBody, check_select, pick

router = APIRouter(tags=["agent-server"])


# --- reading: registered graphs and assistants made through the API -------------------------------


ASSISTANT_FIELDS = frozenset({"assistant_id", "graph_id", "name", "description", "config",
                              "context", "created_at", "updated_at", "metadata", "version"})
"""What ``assistants.search``'s ``select`` may name (the SDK's ``AssistantSelectField``)."""
ASSISTANT_SORT_FIELDS = frozenset({"assistant_id", "graph_id", "name", "created_at",
                                   "updated_at"})
"""``assistants.search``'s ``sort_by`` values (the SDK's ``AssistantSortBy``); without one,
the registered graphs come first, then the assistants made through the API."""


@router.post("/assistants/search")
async def search_assistants(principal: AgentPrincipal, pool: PoolDep,
                            body: JsonBody = None) -> list[dict[str, Any]]:
    """Every registered graph as an assistant, then those made through the API.

    Filters: ``graph_id``, ``name``, ``metadata``; ``limit`` (default 10), ``offset``;
    ``sort_by`` (:data:`ASSISTANT_SORT_FIELDS`) and ``sort_order`` (``asc`` | ``desc``,
    default ``desc``), ties by ``assistant_id``; ``select`` (:data:`ASSISTANT_FIELDS`).

    Raises:
        InvalidRequestError: an unknown ``sort_by``, ``sort_order`` or ``select`` field (422).
    """
    body = body or {}
    fields = check_select(body.get("select"), ASSISTANT_FIELDS)
    sort_by, sort_order = body.get("sort_by"), body.get("sort_order") or "desc"
    if sort_by is not None and sort_by not in ASSISTANT_SORT_FIELDS:
        raise InvalidRequestError(f"sort_by must be one of {sorted(ASSISTANT_SORT_FIELDS)}",
                                  details={"field": "sort_by"})
    if sort_order not in ("asc", "desc"):
        raise InvalidRequestError('sort_order must be "asc" or "desc"',
                                  details={"field": "sort_order"})
    scope = await agent_auth.authorize(principal, "assistants", "search", {
        "graph_id": body.get("graph_id"), "metadata": body.get("metadata"),
        "limit": body.get("limit"), "offset": body.get("offset")})
    made = await assistants.search(pool, body)
    found = [a for a in [*(assistants.assistant_view(p) for p in assistants.graph_pipelines()), *made]
             if scope.admits(None, a["metadata"])]
    if body.get("graph_id"):
        found = [a for a in found if a["graph_id"] == body["graph_id"]]
    if body.get("name"):
        found = [a for a in found if str(body["name"]).lower() in a["name"].lower()]
    for key, value in (body.get("metadata") or {}).items():
        found = [a for a in found if a["metadata"].get(key) == value]
    if sort_by is not None:
        found.sort(key=lambda a: str(a["assistant_id"]))
        found.sort(key=lambda a: str(a[sort_by] or ""), reverse=sort_order == "desc")
    offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
    return pick(found[offset:offset + limit], fields)


@router.post("/assistants/count")
async def count_assistants(principal: AgentPrincipal, pool: PoolDep,
                           body: JsonBody = None) -> int:
    """How many assistants match."""
    return len(await search_assistants(principal, pool, {**(body or {}), "limit": 10_000}))


@router.get("/assistants/{assistant_id}")
async def read_assistant(assistant_id: str, principal: AgentPrincipal,
                         pool: PoolDep) -> dict[str, Any]:
    """One assistant, by id or graph name (its latest version)."""
    view = assistants.view(await assistants.resolve(pool, assistant_id))
    scope = await agent_auth.authorize(principal, "assistants", "read",
                                       {"assistant_id": view["assistant_id"]})
    if scope.metadata is not None and not scope.admits(None, view["metadata"]):
        raise NotFoundError(f"unknown assistant {assistant_id!r}")
    return view


@router.get("/assistants/{assistant_id}/graph")
async def read_assistant_graph(assistant_id: str, _: AgentPrincipal, pool: PoolDep,
                               xray: bool | int = False) -> dict[str, Any]:
    """The graph's nodes and edges (LangGraph's ``get_graph().to_json()``)."""
    pipeline = (await assistants.resolve(pool, assistant_id)).pipeline
    graph = get_registry().app(pipeline.name).get_graph(xray=xray)
    view: dict[str, Any] = to_jsonable(graph.to_json())
    return view


@router.get("/assistants/{assistant_id}/schemas")
async def read_assistant_schemas(assistant_id: str, _: AgentPrincipal,
                                 pool: PoolDep) -> dict[str, Any]:
    """Input, output, state, config and context JSON schemas."""
    pipeline = (await assistants.resolve(pool, assistant_id)).pipeline
    return _graph_schemas(get_registry(), pipeline.name)


@functools.lru_cache(maxsize=256)
def _graph_schemas(registry: Any, graph_id: str) -> dict[str, Any]:
    """:func:`_schemas` of a registered graph, made once per process and registry.

    LangGraph renders them afresh on every call (~30 ms for a graph with a message list,
    plus compiling the graph), and a graph does not change while the process runs; UIs
    and ``/mcp``'s ``tools/list`` read them often. Callers must not change the answer.
    """
    return _schemas(graph_id, registry.app(graph_id))


def _schemas(graph_id: str, app: Any) -> dict[str, Any]:
    """A compiled graph's ``GraphSchema`` (LangGraph's JSON schemas; one it cannot render is None)."""

    def schema(fn: Any) -> Any:
        try:
            return fn()
        except Exception:  # noqa: BLE001 - a schema LangGraph cannot render is left out
            return None

    return {"graph_id": graph_id,
            "input_schema": schema(lambda: app.get_input_jsonschema()),
            "output_schema": schema(lambda: app.get_output_jsonschema()),
            "state_schema": schema(lambda: app.get_output_jsonschema()
                                   if getattr(app, "builder", None) is not None
                                   and app.builder.state_schema else None),
            "config_schema": schema(lambda: app.get_config_jsonschema()),
            "context_schema": schema(lambda: app.get_context_jsonschema())}


@router.get("/assistants/{assistant_id}/subgraphs")
@router.get("/assistants/{assistant_id}/subgraphs/{namespace}")
async def read_assistant_subgraphs(assistant_id: str, _: AgentPrincipal, pool: PoolDep,
                                   namespace: str | None = None,
                                   recurse: bool = False) -> dict[str, Any]:
    """The graph's compiled subgraphs by namespace, each with its schemas.

    LangGraph's ``get_subgraphs``: ``recurse`` walks into subgraphs of subgraphs,
    ``namespace`` picks one.
    """
    pipeline = (await assistants.resolve(pool, assistant_id)).pipeline
    app = get_registry().app(pipeline.name)
    return {ns: _schemas(pipeline.name, sub)
            for ns, sub in app.get_subgraphs(namespace=namespace, recurse=recurse)}


# --- made through the API: create, update, delete, versions ---------------------------------------


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
