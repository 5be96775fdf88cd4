"""Threads (``client.threads.*``): create, search, read, change, delete, copy, prune; state, history.

The work is in :mod:`overseer.threads` and its sibling ``thread_*`` modules (a thread's
row is brought up to date with its runs by :func:`overseer.thread_queue.sync_thread`).
Every route on one thread passes the thread gate (:mod:`services.api.routes.agent_deps`).
A thread's runs: :mod:`services.api.routes.agent_runs`; its streams:
:mod:`services.api.routes.agent_run_streams`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from overseer import thread_queue, thread_runs, thread_ttl, threads, ttl_options
from overseer.errors import InvalidRequestError, NotFoundError, PermissionDeniedError
from overseer.http_routes import PoolDep, SettingsDep, TemporalDep
from services.api import agent_auth
from services.api.routes.agent_deps import (
    AgentPrincipal,
    JsonBody,
    ThreadDeleter,
    ThreadReader,
    ThreadUpdater,
    check_select,
    object_field,
    pick,
)

router = APIRouter(tags=["agent-server"])


@router.post("/threads")
async def create_thread(principal: AgentPrincipal, pool: PoolDep, temporal: TemporalDep,
                        settings: SettingsDep, body: JsonBody = None) -> dict[str, Any]:
    """Create a thread (``thread_id``, ``metadata``, ``if_exists``: ``raise`` | ``do_nothing``).

    ``supersteps`` (with ``metadata.graph_id``) start it from that state, written by
    LangGraph's ``abulk_update_state`` (:func:`overseer.threads.parse_supersteps`); ``ttl``
    sweeps it when unused that long (:mod:`overseer.thread_ttl`).
    """
    body = body or {}
    ttl = ttl_options.parse_ttl(body["ttl"]) if body.get("ttl") is not None else None
    value = {"thread_id": body.get("thread_id"), "metadata": dict(body.get("metadata") or {}),
             "if_exists": body.get("if_exists")}
    scope = await agent_auth.authorize(principal, "threads", "create", value)
    row = await threads.create_thread(pool, thread_id=body.get("thread_id"),
                                      metadata=dict(value.get("metadata") or {}),
                                      if_exists=body.get("if_exists"), subject=principal.subject,
                                      scope=scope, supersteps=body.get("supersteps"), ttl=ttl,
                                      temporal=temporal, settings=settings)
    return threads.thread_view(row)


THREAD_FIELDS = frozenset({"thread_id", "created_at", "updated_at", "metadata", "config",
                           "context", "status", "values", "interrupts"})
"""What ``threads.search``'s ``select`` may name (the SDK's ``ThreadSelectField``); a thread
here has no ``config`` or ``context`` of its own, so selecting them gives nothing."""


@router.post("/threads/search")
async def search_threads(principal: AgentPrincipal, pool: PoolDep,
                         body: JsonBody = None) -> list[dict[str, Any]]:
    """The caller's threads, newest first.

    ``metadata`` and ``values`` (containment), ``status``, ``ids``, ``sort_by`` /
    ``sort_order`` (:data:`overseer.threads.THREAD_SORT_COLUMNS`), ``select``
    (:data:`THREAD_FIELDS`), ``limit``, ``offset``; ``extract`` (``{alias: path}``, e.g.
    ``"values.messages[-1].content"``) adds ``extracted: {alias: value}`` to each thread
    (:func:`overseer.threads.parse_extract`).
    """
    body = body or {}
    limit, offset = int(body.get("limit") or 10), int(body.get("offset") or 0)
    select = check_select(body.get("select"), THREAD_FIELDS)
    paths = threads.parse_extract(body["extract"], THREAD_FIELDS) if body.get("extract") else {}
    value: dict[str, Any] = {k: body.get(k) for k in ("metadata", "values", "status", "ids")}
    value |= {"limit": limit, "offset": offset}
    scope = await agent_auth.authorize(principal, "threads", "search", value)
    rows = await threads.search_threads(
        pool, metadata=value["metadata"], status=value["status"], ids=value["ids"],
        limit=limit, offset=offset, scope=scope, values=value["values"],
        sort_by=body.get("sort_by"), sort_order=body.get("sort_order"))
    views = [threads.thread_view(r) for r in rows]
    chosen = pick(views, select)
    if paths:
        for view, full in zip(chosen, views, strict=True):
            view["extracted"] = threads.extracted(full, paths)
    return chosen



@router.post("/threads/count")
async def count_threads(principal: AgentPrincipal, pool: PoolDep, body: JsonBody = None) -> int:
    """How many threads match."""
    return len(await search_threads(principal, pool, {**(body or {}), "limit": 100_000}))


@router.get("/threads/{thread_id}")
async def read_thread(thread_id: str, _: ThreadReader, pool: PoolDep, temporal: TemporalDep,
                      settings: SettingsDep, include: str | None = None) -> dict[str, Any]:
    """One thread, its status and values brought up to date.

    ``include=ttl`` adds its ``ttl`` (``{strategy, ttl_minutes, expires_at}``) when it has one.
    """
    row = await thread_queue.sync_thread(pool, temporal, thread_id, settings)
    view = threads.thread_view(row)
    if "ttl" in (include or "").split(",") and (ttl := thread_ttl.ttl_view(row)) is not None:
        view["ttl"] = ttl
    return view


@router.patch("/threads/{thread_id}")
async def patch_thread(thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                       temporal: TemporalDep, settings: SettingsDep,
                       body: JsonBody = None) -> dict[str, Any]:
    """Merge ``metadata`` into the thread's; a ``ttl`` replaces its ttl, counted from now."""
    body = body or {}
    ttl = ttl_options.parse_ttl(body["ttl"]) if body.get("ttl") is not None else None
    value = {"metadata": dict(body.get("metadata") or {})}
    await agent_auth.gate_thread(pool, principal, thread_id, "update", value)
    row = await threads.get_thread(pool, thread_id)
    if ttl is not None:
        await thread_ttl.set_ttl(pool, temporal, settings, row["thread_id"], ttl)
    updated = await pool.fetchrow(
        "UPDATE agent_threads SET metadata = metadata || $2::jsonb, updated_at = now() "
        "WHERE thread_id = $1 RETURNING *", row["thread_id"],
        json.dumps(value.get("metadata") or {}))
    assert updated is not None  # read by its key just above
    return threads.thread_view(updated)


@router.delete("/threads/{thread_id}", status_code=204)
async def delete_thread(thread_id: str, principal: ThreadDeleter, pool: PoolDep,
                        temporal: TemporalDep) -> Response:
    """Delete a thread and its runs (a run in progress is cancelled)."""
    await threads.delete_thread(pool, temporal, thread_id, principal.subject)
    return Response(status_code=204)


SelectQuery = Annotated[list[str] | None, Query()]
"""``?select=values.messages&select=next``: the fields of a state to answer with."""


@router.get("/threads/{thread_id}/state")
async def read_state(thread_id: str, _: ThreadReader, pool: PoolDep, temporal: TemporalDep,
                     subgraphs: bool = False, select: SelectQuery = None) -> dict[str, Any]:
    """The thread's state: ``values``, ``next``, ``tasks`` with interrupts, ``interrupts``, checkpoint.

    While a run is in progress, its latest checkpoint (:func:`overseer.thread_runs.current_state`);
    ``subgraphs=true`` adds each task's subgraph state; ``select`` keeps only the fields it
    names (:func:`overseer.threads.select_state`).
    """
    fields = threads.check_state_select(select)
    return threads.select_state(
        await thread_runs.current_state(pool, temporal, thread_id, subgraphs=subgraphs), fields)


@router.post("/threads/{thread_id}/state")
async def write_state(thread_id: str, principal: ThreadUpdater, pool: PoolDep,
                      temporal: TemporalDep, body: JsonBody = None) -> dict[str, Any]:
    """Update an idle or paused thread's values as ``as_node`` (the graph's reducers apply).

    ``checkpoint`` (or ``checkpoint_id``): from that past checkpoint (a fork), or in that
    subgraph (``checkpoint_ns``).

    Raises:
        InvalidRequestError: ``checkpoint`` is not an object (422).
    """
    body = body or {}
    checkpoint = object_field(body, "checkpoint")
    if body.get("checkpoint_id") and not checkpoint.get("checkpoint_id"):
        checkpoint = {**checkpoint, "checkpoint_id": body["checkpoint_id"]}
    await thread_queue.sync_thread(pool, temporal, thread_id)
    return await thread_runs.update_state(pool, temporal, thread_id, body.get("values"),
                                          body.get("as_node"), principal.subject,
                                          checkpoint or None)


@router.get("/threads/{thread_id}/state/{checkpoint_id}")
async def read_state_at(thread_id: str, checkpoint_id: str, _: ThreadReader, pool: PoolDep,
                        subgraphs: bool = False, select: SelectQuery = None) -> dict[str, Any]:
    """The thread's state at a saved checkpoint (``subgraphs``, ``select`` as for the current one)."""
    fields = threads.check_state_select(select)
    return threads.select_state(
        await threads.state_at(pool, thread_id, checkpoint_id, subgraphs=subgraphs), fields)


@router.post("/threads/{thread_id}/state/checkpoint")
async def read_state_at_checkpoint(thread_id: str, _: ThreadReader, pool: PoolDep,
                                   temporal: TemporalDep, settings: SettingsDep,
                                   body: JsonBody = None) -> dict[str, Any]:
    """The thread's state at ``checkpoint`` (the current state without one).

    ``checkpoint`` is ``{checkpoint_id?, checkpoint_ns?}``: a task's ``checkpoint`` (a
    subgraph's namespace, no id) reads that subgraph's latest state. ``subgraphs`` and
    ``select``: as for ``GET .../state``.

    Raises:
        InvalidRequestError: ``checkpoint`` is not an object, ``subgraphs`` not a boolean, or
            a bad ``select`` (422).
    """
    body = body or {}
    checkpoint, subgraphs = object_field(body, "checkpoint"), body.get("subgraphs", False)
    if not isinstance(subgraphs, bool):
        raise InvalidRequestError("subgraphs must be a boolean", details={"field": "subgraphs"})
    fields = threads.check_state_select(body.get("select"))
    checkpoint_id, checkpoint_ns = checkpoint.get("checkpoint_id"), checkpoint.get("checkpoint_ns")
    if not checkpoint_id and not checkpoint_ns:
        return threads.select_state(await thread_runs.current_state(
            pool, temporal, thread_id, settings, subgraphs=subgraphs), fields)
    return threads.select_state(await threads.state_at(
        pool, thread_id, str(checkpoint_id) if checkpoint_id else None,
        checkpoint_ns=str(checkpoint_ns or ""), subgraphs=subgraphs), fields)


@router.post("/threads/{thread_id}/copy")
async def copy_thread(thread_id: str, _: ThreadReader, pool: PoolDep,
                      temporal: TemporalDep, settings: SettingsDep) -> dict[str, Any]:
    """A new thread with this one's metadata, state, history and owner (not its runs)."""
    await thread_queue.sync_thread(pool, temporal, thread_id, settings)
    return threads.thread_view(await threads.copy_thread(pool, thread_id, temporal=temporal,
                                                         settings=settings))


@router.get("/threads/{thread_id}/history")
async def read_history(thread_id: str, _: ThreadReader, pool: PoolDep, temporal: TemporalDep,
                       limit: int = 10, before: str | None = None) -> list[dict[str, Any]]:
    """Saved states, newest first."""
    await thread_queue.sync_thread(pool, temporal, thread_id)
    return await threads.history(pool, thread_id, limit, before)


@router.post("/threads/{thread_id}/history")
async def search_history(thread_id: str, _: ThreadReader, pool: PoolDep, temporal: TemporalDep,
                         body: JsonBody = None) -> list[dict[str, Any]]:
    """Saved states, newest first.

    ``limit``, ``before`` (a ``checkpoint_id`` or a checkpoint), ``metadata`` (only states
    whose metadata contains it), ``checkpoint`` (its ``checkpoint_ns``: a subgraph's
    history), ``select`` (as for ``GET .../state``).

    Raises:
        InvalidRequestError: ``metadata`` or ``checkpoint`` not an object, a bad ``select`` (422).
    """
    body = body or {}
    before = body.get("before")
    if isinstance(before, dict):
        before = before.get("checkpoint_id")
    metadata, checkpoint = object_field(body, "metadata"), object_field(body, "checkpoint")
    fields = threads.check_state_select(body.get("select"))
    await thread_queue.sync_thread(pool, temporal, thread_id)
    states = await threads.history(pool, thread_id, int(body.get("limit") or 10), before,
                                   metadata=metadata,
                                   checkpoint_ns=str(checkpoint.get("checkpoint_ns") or ""))
    return [threads.select_state(s, fields) for s in states]


MAX_PRUNE_THREADS = 1000
"""Threads one ``POST /threads/prune`` may name."""


@router.post("/threads/prune")
async def prune_threads(principal: AgentPrincipal, pool: PoolDep, temporal: TemporalDep,
                        body: JsonBody = None) -> dict[str, int]:
    """``threads.prune``: delete threads, or keep only their latest state (``keep_latest``).

    A thread the caller may not delete (``delete``) or change (``keep_latest``), or does not
    see, is left alone and not counted, as a missing one is; so is a busy thread under
    ``keep_latest``.

    Returns:
        ``{"pruned_count": n}``.

    Raises:
        InvalidRequestError: no ``thread_ids`` list (1 to :data:`MAX_PRUNE_THREADS`) or an
            unknown ``strategy`` (422).
    """
    body = body or {}
    ids, strategy = body.get("thread_ids"), body.get("strategy") or "delete"
    if not isinstance(ids, list) or not ids or len(ids) > MAX_PRUNE_THREADS:
        raise InvalidRequestError(f"thread_ids must be a list of 1 to {MAX_PRUNE_THREADS} ids",
                                  details={"field": "thread_ids"})
    if strategy not in threads.PRUNE_STRATEGIES:
        raise InvalidRequestError(f"strategy must be one of {threads.PRUNE_STRATEGIES}",
                                  details={"field": "strategy"})
    pruned = 0
    for thread_id in dict.fromkeys(str(i) for i in ids):
        try:
            await agent_auth.gate_thread(pool, principal, thread_id,
                                         "delete" if strategy == "delete" else "update")
            pruned += await threads.prune_thread(pool, temporal, thread_id, strategy,
                                                 principal.subject)
        except (NotFoundError, PermissionDeniedError):
            continue
    return {"pruned_count": pruned}
