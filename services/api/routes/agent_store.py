"""The Agent Server's store API (``client.store.*``) on LangGraph's Postgres store.

``PUT/GET/DELETE /store/items``, ``POST /store/items/search``, ``POST /store/namespaces``,
as ``langgraph-sdk`` sends them and the Agent Server answers them, on the same
``AsyncPostgresStore`` the graphs get (:mod:`overseer.graph_store`): an item a graph put is
read here and the other way round.

Who may touch what (with no ``@auth.on.store`` handler in the deployment's ``Auth``, which
otherwise decides, as on the Agent Server): admins everything, reviewers read everything;
a submitter's items live under its own namespace, whose first label is its identity
(``[<subject>, ...]``, the convention of LangGraph's own store-auth examples). A
submitter's put or delete elsewhere is 403; a get elsewhere answers ``null`` (as a missing
item does), a search or namespace listing elsewhere is empty, and one with no prefix is
confined to its own namespace.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from overseer import access
from overseer.access import Principal
from overseer.errors import InvalidRequestError, PermissionDeniedError
from overseer.graph_store import SemanticSearchUnavailableError, graph_store, searchable
from services.api import agent_auth
from services.api.routes.agent_deps import AgentPrincipal, JsonBody

router = APIRouter(tags=["agent-server"])

READ_ACTIONS = ("get", "search", "list_namespaces")
MAX_SEARCH_LIMIT = 1000
"""At most this many items (or namespaces) per page."""

_sweeping: set[int] = set()


async def _store() -> Any:
    """The process's store, its expired-item sweeper started once."""
    store = await graph_store()
    if id(store) not in _sweeping:
        _sweeping.add(id(store))
        await store.start_ttl_sweeper()
    return store


def namespace_of(value: Any, field: str, *, empty: bool = False) -> tuple[str, ...]:
    """A namespace from a request: a list of non-empty labels without ``.``.

    Raises:
        InvalidRequestError: anything else (422, ``details.field``).
    """
    if value is None and empty:
        return ()
    if not isinstance(value, list | tuple) or not all(
            isinstance(label, str) and label and "." not in label for label in value) or \
            (not value and not empty):
        raise InvalidRequestError(
            f"{field} must be a list of non-empty labels without '.'", details={"field": field})
    return tuple(value)


def _page(body: dict[str, Any], default: int) -> tuple[int, int]:
    limit, offset = body.get("limit", default), body.get("offset", 0)
    for name, number, low in (("limit", limit, 1), ("offset", offset, 0)):
        if isinstance(number, bool) or not isinstance(number, int) or number < low or \
                (name == "limit" and number > MAX_SEARCH_LIMIT):
            raise InvalidRequestError(f"{name} must be an integer from {low}"
                                      + (f" to {MAX_SEARCH_LIMIT}" if name == "limit" else ""),
                                      details={"field": name})
    return int(limit), int(offset)


async def admit(principal: Principal, action: str, value: dict[str, Any]) -> bool:
    """Whether the caller may ``action`` ``value["namespace"]`` (see the module docstring).

    A deployment's ``@auth.on.store`` handler decides when there is one (and may change
    ``value``). Otherwise the owner rule: a search or listing with no prefix is confined
    to the submitter's own namespace (``value`` changed).

    Returns:
        False for a read outside the caller's own namespace (the route answers as for
        nothing found).

    Raises:
        PermissionDeniedError: a put or delete outside the caller's own namespace (403).
    """
    if await agent_auth.authorize_store(principal, action, value):
        return True
    scope = access.scope(principal, "read" if action in READ_ACTIONS else "write")
    if scope == access.ANY:
        return True
    namespace, own = tuple(value.get("namespace") or ()), principal.subject
    if action in ("search", "list_namespaces") and not namespace:
        value["namespace"] = (own,)
        return True
    if namespace[:1] == (own,):
        return True
    if action in READ_ACTIONS:
        return False
    raise PermissionDeniedError(
        f"a submitter's store items live under its own namespace, [{own!r}, ...]",
        details={"namespace": list(namespace)})


@router.put("/store/items", status_code=204)
async def put_item(principal: AgentPrincipal, body: JsonBody = None) -> Response:
    """``store.put_item``: store or replace an item (204).

    Body: ``namespace`` (labels), ``key``, ``value`` (an object), ``index`` (``false`` or
    the fields to embed; default: every text field when semantic search is on), ``ttl``
    (minutes; None = kept).

    Raises:
        InvalidRequestError: a malformed field (422, ``details.field``).
        PermissionDeniedError: outside the caller's own namespace (403).
    """
    body = body or {}
    value: dict[str, Any] = {
        "namespace": namespace_of(body.get("namespace"), "namespace"),
        "key": body.get("key"), "value": body.get("value"),
        "index": body.get("index"), "ttl": body.get("ttl")}
    if not isinstance(value["key"], str) or not value["key"]:
        raise InvalidRequestError("key must be a non-empty string", details={"field": "key"})
    if not isinstance(value["value"], dict):
        raise InvalidRequestError("value must be a JSON object", details={"field": "value"})
    index = value["index"]
    if index is not None and index is not False and not (
            isinstance(index, list) and all(isinstance(f, str) for f in index)):
        raise InvalidRequestError("index must be false or a list of field paths",
                                  details={"field": "index"})
    ttl = value["ttl"]
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)
                            or ttl <= 0):
        raise InvalidRequestError("ttl must be a positive number of minutes",
                                  details={"field": "ttl"})
    await admit(principal, "put", value)
    await (await _store()).aput(value["namespace"], value["key"], value["value"],
                                index=value["index"], ttl=value["ttl"])
    return Response(status_code=204)


@router.get("/store/items")
async def get_item(principal: AgentPrincipal, key: str = "", namespace: str = "",
                   refresh_ttl: Annotated[bool | None, Query()] = None) -> Any:
    """``store.get_item``: the item, or ``null`` when there is none (as the Agent Server answers).

    ``namespace`` is the labels joined by ``.``.

    Raises:
        InvalidRequestError: no key, or a malformed namespace (422).
    """
    if not key:
        raise InvalidRequestError("key is required", details={"field": "key"})
    value: dict[str, Any] = {"namespace": namespace_of(namespace.split("."), "namespace"),
                             "key": key, "refresh_ttl": refresh_ttl}
    if not await admit(principal, "get", value):
        return None
    item = await (await _store()).aget(value["namespace"], value["key"],
                                       refresh_ttl=value["refresh_ttl"])
    return item.dict() if item is not None else None


@router.delete("/store/items", status_code=204)
async def delete_item(principal: AgentPrincipal, body: JsonBody = None) -> Response:
    """``store.delete_item`` (204, also when there was no such item).

    Raises:
        InvalidRequestError: a malformed namespace or key (422).
        PermissionDeniedError: outside the caller's own namespace (403).
    """
    body = body or {}
    value: dict[str, Any] = {"namespace": namespace_of(body.get("namespace"), "namespace"),
                             "key": body.get("key")}
    if not isinstance(value["key"], str) or not value["key"]:
        raise InvalidRequestError("key must be a non-empty string", details={"field": "key"})
    await admit(principal, "delete", value)
    await (await _store()).adelete(value["namespace"], value["key"])
    return Response(status_code=204)


@router.post("/store/items/search")
async def search_items(principal: AgentPrincipal, body: JsonBody = None) -> dict[str, Any]:
    """``store.search_items``: ``{"items": [...]}`` under a namespace prefix.

    Body: ``namespace_prefix``, ``filter`` (exact matches on value fields, or LangGraph's
    ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/``$lte``), ``limit`` (default 10),
    ``offset``, ``query`` (semantic search: items ranked by similarity, each with
    ``score``), ``refresh_ttl``.

    Raises:
        InvalidRequestError: a malformed field (422).
        SemanticSearchUnavailableError: ``query`` on a store without an embedding index
            (422 ``semantic_search_unavailable``; see :mod:`overseer.graph_store`).
    """
    body = body or {}
    value: dict[str, Any] = {
        "namespace": namespace_of(body.get("namespace_prefix") or [], "namespace_prefix",
                                  empty=True),
        "filter": body.get("filter"), "query": body.get("query"),
        "refresh_ttl": body.get("refresh_ttl")}
    value["limit"], value["offset"] = _page(body, 10)
    if value["filter"] is not None and not isinstance(value["filter"], dict):
        raise InvalidRequestError("filter must be an object", details={"field": "filter"})
    if value["query"] is not None and not isinstance(value["query"], str):
        raise InvalidRequestError("query must be a string", details={"field": "query"})
    store = await _store()
    if value["query"] and not searchable(store):
        raise SemanticSearchUnavailableError(
            "this store has no embedding index: semantic search needs pgvector in the "
            "Postgres and OVERSEER_STORE_EMBEDDINGS=wordllama", details={"field": "query"})
    if not await admit(principal, "search", value):
        return {"items": []}
    items = await store.asearch(value["namespace"], filter=value["filter"],
                                limit=value["limit"], offset=value["offset"],
                                query=value["query"] or None, refresh_ttl=value["refresh_ttl"])
    return {"items": [item.dict() for item in items]}


@router.post("/store/namespaces")
async def list_namespaces(principal: AgentPrincipal, body: JsonBody = None) -> dict[str, Any]:
    """``store.list_namespaces``: ``{"namespaces": [[label, ...], ...]}``.

    Body: ``prefix``, ``suffix``, ``max_depth`` (namespaces cut to that many labels),
    ``limit`` (default 100), ``offset``.

    Raises:
        InvalidRequestError: a malformed field (422).
    """
    body = body or {}
    depth = body.get("max_depth")
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 1):
        raise InvalidRequestError("max_depth must be a positive integer",
                                  details={"field": "max_depth"})
    value: dict[str, Any] = {
        "namespace": namespace_of(body.get("prefix"), "prefix", empty=True),
        "suffix": namespace_of(body.get("suffix"), "suffix", empty=True), "max_depth": depth}
    value["limit"], value["offset"] = _page(body, 100)
    if not await admit(principal, "list_namespaces", value):
        return {"namespaces": []}
    found = await (await _store()).alist_namespaces(
        prefix=value["namespace"] or None, suffix=value["suffix"] or None,
        max_depth=value["max_depth"], limit=value["limit"], offset=value["offset"])
    return {"namespaces": [list(ns) for ns in found]}
