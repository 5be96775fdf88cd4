"""The LangGraph Agent Server API as ``langgraph-sdk`` sends it (issue 12): assistants, threads, runs.

Mounted at the API root next to ``/v1`` so an existing LangGraph client only changes its
URL and key. Every registered graph is an assistant (its id, or its graph name); threads
and runs live in :mod:`overseer.threads` and its sibling ``thread_*`` modules; each run is
an Overseer run (a ``SegmentRunWorkflow``), each interrupt an Overseer approval. Auth: the
SDK's ``x-api-key`` header (or ``Authorization: Bearer``) carries the same tokens and
roles as ``/v1``.
What differs from LangGraph's server, endpoint by endpoint: ``docs/langgraph-api.md``.

Who may see what (issue 29): every thread and its runs belong to the principal that
created them. Every ``/threads/{thread_id}/…`` route depends on :func:`thread_gate` (or, for
run creation, calls :func:`services.api.agent_auth.gate_thread` itself), and search and
count filter in SQL, by the one rule of :mod:`overseer.access` — or by a deployment's
LangGraph ``Auth`` handlers (:mod:`services.api.agent_auth`).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, FastAPI, Header, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.background import BackgroundTask

from overseer import assistants, run_body, thread_queue, thread_runs, thread_streams, threads
from overseer.access import Principal
from overseer.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
)
from overseer.graph_codec import to_jsonable
from overseer.pipelines import get_registry
from overseer.web import PoolDep, SettingsDep, TemporalDep
from services.api import agent_auth

WAIT_KEEPALIVE_SECONDS = 5.0
"""While ``runs/wait`` blocks, a newline every this many seconds keeps proxies and load
balancers from closing the idle connection (JSON ignores the leading whitespace)."""

DISCONNECT_POLL_SECONDS = 0.5
"""How often a stream or wait whose run is cancelled when its client leaves
(``on_disconnect="cancel"``) checks that the client is still there."""

logger = logging.getLogger(__name__)
_leaving: set[asyncio.Task[None]] = set()
"""Cancellations of runs whose client left, running after their request ended."""


@asynccontextmanager
async def queue_recovery(app: FastAPI) -> AsyncIterator[None]:
    """Start queued runs that nobody started: at start-up, then every ``queue_recovery_seconds``.

    A queued run starts when the run before it ends: that run's workflow hands the thread
    on (:func:`overseer.thread_queue.hand_off`). What this pass (:func:`overseer.thread_queue.sweep_queues`)
    recovers is a run accepted by an API process that died before starting it, or one
    whose start Temporal did not answer. Queued runs live in Postgres, so any API process
    recovers them.
    """

    async def sweep() -> None:
        delay = 0.0  # the first pass as soon as the app has its pool and client
        while True:
            await asyncio.sleep(delay)
            state = app.state
            if not hasattr(state, "pool") or not hasattr(state, "temporal"):
                delay = 0.5
                continue
            delay = state.settings.queue_recovery_seconds
            try:
                await thread_queue.sweep_queues(state.pool, state.temporal, state.settings)
            except Exception:  # noqa: BLE001 - a failed pass is retried on the next tick
                logger.warning("queue recovery failed", exc_info=True)

    task = asyncio.create_task(sweep(), name="agent-server-queue-recovery")
    try:
        yield
    finally:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise


router = APIRouter(tags=["agent-server"], lifespan=queue_recovery)

JsonBody = Annotated[dict[str, Any] | None, Body()]


@router.get("/info")
async def info() -> dict[str, Any]:
    """``GET /info``, as the Agent Server answers it (no key needed): versions and feature flags.

    Returns:
        ``{"version", "langgraph_py_version", "flags": {"assistants", "crons", "langsmith"},
        "host": {"kind"}}``; crons are on (each a Temporal Schedule), LangSmith off (traces
        go to OpenTelemetry).
    """
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"version": installed("overseer"), "langgraph_py_version": installed("langgraph"),
            "flags": {"assistants": True, "crons": True, "langsmith": False},
            "host": {"kind": "self-hosted", "server": "overseer"}}


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


# --- assistants --------------------------------------------------------------------------------


@router.post("/assistants/search")
async def search_assistants(principal: AgentPrincipal, pool: PoolDep,
                            body: JsonBody = None) -> list[dict[str, Any]]:
    """Every registered graph as an assistant, then those made through the API.

    Filters: ``graph_id``, ``name``, ``metadata``; ``limit`` (default 10), ``offset``.
    """
    body = body or {}
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
    offset, limit = int(body.get("offset") or 0), int(body.get("limit") or 10)
    return found[offset:offset + limit]


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
    graph = get_registry().builder(pipeline.name).compile().get_graph(xray=xray)
    view: dict[str, Any] = to_jsonable(graph.to_json())
    return view


@router.get("/assistants/{assistant_id}/schemas")
async def read_assistant_schemas(assistant_id: str, _: AgentPrincipal,
                                 pool: PoolDep) -> dict[str, Any]:
    """Input, output, state, config and context JSON schemas."""
    pipeline = (await assistants.resolve(pool, assistant_id)).pipeline
    return _schemas(pipeline.name, get_registry().builder(pipeline.name).compile())


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
            "state_schema": schema(lambda: app.builder.state_schema and
                                   app.get_output_jsonschema()),
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
    app = get_registry().builder(pipeline.name).compile()
    return {ns: _schemas(pipeline.name, sub)
            for ns, sub in app.get_subgraphs(namespace=namespace, recurse=recurse)}


# --- threads -------------------------------------------------------------------------------------


@router.post("/threads")
async def create_thread(principal: AgentPrincipal, pool: PoolDep,
                        body: JsonBody = None) -> dict[str, Any]:
    """Create a thread (``thread_id``, ``metadata``, ``if_exists``: ``raise`` | ``do_nothing``)."""
    body = body or {}
    value = {"thread_id": body.get("thread_id"), "metadata": dict(body.get("metadata") or {}),
             "if_exists": body.get("if_exists")}
    scope = await agent_auth.authorize(principal, "threads", "create", value)
    row = await threads.create_thread(pool, thread_id=body.get("thread_id"),
                                      metadata=dict(value.get("metadata") or {}),
                                      if_exists=body.get("if_exists"), subject=principal.subject,
                                      scope=scope)
    return threads.thread_view(row)


@router.post("/threads/search")
async def search_threads(principal: AgentPrincipal, pool: PoolDep,
                         body: JsonBody = None) -> list[dict[str, Any]]:
    """The caller's threads, newest first (``metadata``, ``status``, ``ids``, ``limit``, ``offset``)."""
    body = body or {}
    limit, offset = int(body.get("limit") or 10), int(body.get("offset") or 0)
    value: dict[str, Any] = {k: body.get(k) for k in ("metadata", "values", "status", "ids")}
    value |= {"limit": limit, "offset": offset}
    scope = await agent_auth.authorize(principal, "threads", "search", value)
    rows = await threads.search_threads(
        pool, metadata=value["metadata"], status=value["status"], ids=value["ids"],
        limit=limit, offset=offset, scope=scope)
    return [threads.thread_view(r) for r in rows]


@router.post("/threads/count")
async def count_threads(principal: AgentPrincipal, pool: PoolDep, body: JsonBody = None) -> int:
    """How many threads match."""
    return len(await search_threads(principal, pool, {**(body or {}), "limit": 100_000}))


@router.get("/threads/{thread_id}")
async def read_thread(thread_id: str, _: ThreadReader, pool: PoolDep,
                      temporal: TemporalDep, settings: SettingsDep) -> dict[str, Any]:
    """One thread, its status and values brought up to date."""
    return threads.thread_view(await thread_queue.sync_thread(pool, temporal, thread_id, settings))


@router.patch("/threads/{thread_id}")
async def patch_thread(thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                       body: JsonBody = None) -> dict[str, Any]:
    """Merge ``metadata`` into the thread's."""
    value = {"metadata": dict((body or {}).get("metadata") or {})}
    await agent_auth.gate_thread(pool, principal, thread_id, "update", value)
    row = await threads.get_thread(pool, thread_id)
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


@router.get("/threads/{thread_id}/state")
async def read_state(thread_id: str, _: ThreadReader, pool: PoolDep,
                     temporal: TemporalDep) -> dict[str, Any]:
    """The thread's state: ``values``, ``next``, ``tasks`` with interrupts, ``interrupts``, checkpoint.

    While a run is in progress, its latest checkpoint (:func:`overseer.thread_runs.current_state`).
    """
    return await thread_runs.current_state(pool, temporal, thread_id)


@router.post("/threads/{thread_id}/state")
async def write_state(thread_id: str, principal: ThreadUpdater, pool: PoolDep,
                      temporal: TemporalDep, body: JsonBody = None) -> dict[str, Any]:
    """Update an idle or paused thread's values as ``as_node`` (the graph's reducers apply)."""
    body = body or {}
    await thread_queue.sync_thread(pool, temporal, thread_id)
    return await thread_runs.update_state(pool, temporal, thread_id, body.get("values"),
                                      body.get("as_node"), principal.subject)


@router.get("/threads/{thread_id}/state/{checkpoint_id}")
async def read_state_at(thread_id: str, checkpoint_id: str, _: ThreadReader,
                        pool: PoolDep) -> dict[str, Any]:
    """The thread's state at a saved checkpoint."""
    return await threads.state_at(pool, thread_id, checkpoint_id)


@router.post("/threads/{thread_id}/state/checkpoint")
async def read_state_at_checkpoint(thread_id: str, principal: ThreadReader, pool: PoolDep,
                                   temporal: TemporalDep, settings: SettingsDep,
                                   body: JsonBody = None) -> dict[str, Any]:
    """The thread's state at ``checkpoint.checkpoint_id`` (the current state without one)."""
    checkpoint = (body or {}).get("checkpoint") or {}
    checkpoint_id = checkpoint.get("checkpoint_id") if isinstance(checkpoint, dict) else None
    if not checkpoint_id:
        return await thread_runs.current_state(pool, temporal, thread_id, settings)
    return await read_state_at(thread_id, str(checkpoint_id), principal, pool)


@router.post("/threads/{thread_id}/copy")
async def copy_thread(thread_id: str, _: ThreadReader, pool: PoolDep,
                      temporal: TemporalDep, settings: SettingsDep) -> dict[str, Any]:
    """A new thread with this one's metadata, state, history and owner (not its runs)."""
    await thread_queue.sync_thread(pool, temporal, thread_id, settings)
    return threads.thread_view(await threads.copy_thread(pool, thread_id))


@router.get("/threads/{thread_id}/history")
async def read_history(thread_id: str, _: ThreadReader, pool: PoolDep, temporal: TemporalDep,
                       limit: int = 10, before: str | None = None) -> list[dict[str, Any]]:
    """Saved states, newest first."""
    await thread_queue.sync_thread(pool, temporal, thread_id)
    return await threads.history(pool, thread_id, limit, before)


@router.post("/threads/{thread_id}/history")
async def search_history(thread_id: str, _: ThreadReader, pool: PoolDep, temporal: TemporalDep,
                         body: JsonBody = None) -> list[dict[str, Any]]:
    """Saved states, newest first (``limit``, ``before``)."""
    body = body or {}
    before = body.get("before")
    if isinstance(before, dict):
        before = before.get("checkpoint_id")
    await thread_queue.sync_thread(pool, temporal, thread_id)
    return await threads.history(pool, thread_id, int(body.get("limit") or 10), before)


# --- runs ------------------------------------------------------------------------------------------


def _modes(body: dict[str, Any]) -> list[str]:
    return run_body.stream_modes(body.get("stream_mode"))


def _locations(run: Any) -> dict[str, str]:
    base = f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return {"Content-Location": base, "Location": f"{base}/stream"}


async def _create(pool: Any, temporal: Any, settings: Any, principal: Principal,
                  thread_id: str | None, body: dict[str, Any], *,
                  run_id: str | None = None) -> Any:
    """Create (or queue) a run as ``POST /threads/{id}/runs`` does, or resume with ``command.resume``.

    ``run_id``: the new run's id (see :func:`overseer.thread_runs.create_run`; a run with this
    id already on the thread is returned as it is); a uuid4 when None. Not used by a resume.
    """
    body, assistant = await assistants.run_body(pool, body)  # its config and context applied
    if "stream_mode" in body:
        run_body.stream_modes(body["stream_mode"])  # 422 first
    if thread_id is None or body.get("if_not_exists") == "create":
        # stateless: a thread of its own; if_not_exists="create": a missing thread is made
        value: dict[str, Any] = {"thread_id": thread_id,
                                 "metadata": {"stateless": True} if thread_id is None else {},
                                 "if_exists": "do_nothing"}
        scope = await agent_auth.authorize(principal, "threads", "create", value)
        try:
            row = await threads.create_thread(pool, thread_id=thread_id,
                                              metadata=dict(value.get("metadata") or {}),
                                              if_exists="do_nothing", subject=principal.subject,
                                              scope=scope)
            thread_id = str(row["thread_id"])
        except ConflictError:  # someone else's thread: the gate below answers 404, not 409
            if thread_id is None:
                raise
    resuming = "resume" in (body.get("command") or {})
    run_value: dict[str, Any] = {k: body.get(k) for k in (
        "assistant_id", "multitask_strategy", "if_not_exists", "after_seconds")}
    run_value |= {"metadata": dict(body.get("metadata") or {}),
                  "kwargs": {k: body.get(k) for k in ("input", "command", "config", "context",
                                                      "stream_mode")}}
    await agent_auth.gate_thread(pool, principal, thread_id, "create_run", run_value,
                                 owner_action="read" if resuming else None)
    body = {**body, "metadata": run_value.get("metadata") or {}}  # as the handler left it
    return await thread_runs.create_run(pool, temporal, settings, thread_id=thread_id,
                                        body=body, principal=principal,
                                        check_role=principal.user is None,
                                        assistant_id=assistant, run_id=run_id)


def _frame(event_id: str | None, name: str, data: Any) -> bytes:
    """One SSE frame: ``event``, ``id`` when there is one, ``data`` as JSON."""
    head = f"event: {name}\n" + (f"id: {event_id}\n" if event_id else "")
    return (head + f"data: {json.dumps(data, default=str)}\n\n").encode()


def _sse(run: Any, events: AsyncIterator[tuple[str | None, str, Any]],
         after_delete: Any = None, leave: _Leave | None = None) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        finished = False
        watch = leave.watch() if leave is not None else None
        try:
            async for event in events:
                yield _frame(*event)
            finished = True
        finally:
            if leave is not None:
                leave.stop(watch, finished)
            if after_delete is not None:
                await after_delete()

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={**_locations(run), "Cache-Control": "no-store"})


def disconnect_mode(body: dict[str, Any]) -> bool:
    """Whether a run request's ``on_disconnect`` asks to cancel the run when its client leaves.

    ``"continue"`` (the default, as on the Agent Server) or ``"cancel"``.

    Raises:
        InvalidRequestError: any other value (422, ``details.field="on_disconnect"``).
    """
    mode = body.get("on_disconnect") or "continue"
    if mode not in ("continue", "cancel"):
        raise InvalidRequestError('on_disconnect must be "continue" or "cancel"',
                                  details={"field": "on_disconnect"})
    return mode == "cancel"


class _Leave:
    """Cancel a run if its client leaves before the run's answer or end was sent.

    ``on_disconnect="cancel"`` (or a join's ``cancel_on_disconnect``), as the Agent Server
    does it: the run is cancelled as ``POST .../cancel`` with ``action=interrupt`` would,
    once, in the background, and only while it is still pending or running (a run paused
    on an interrupt keeps its interrupt). The client is noticed gone within
    :data:`DISCONNECT_POLL_SECONDS` while the response waits, or at the next write.
    """

    def __init__(self, request: Request, pool: Any, temporal: Any, run: Any,
                 subject: str) -> None:
        self.request, self.pool, self.temporal = request, pool, temporal
        self.thread_id, self.run_id = str(run["thread_id"]), str(run["run_id"])
        self.subject = subject
        self.fired = False

    def watch(self) -> asyncio.Task[None]:
        """Start watching for the client to leave (until :meth:`stop`)."""
        async def poll() -> None:
            # Starlette offers no event for a client that left: is_disconnected() polls
            while not await self.request.is_disconnected():  # noqa: ASYNC110
                await asyncio.sleep(DISCONNECT_POLL_SECONDS)
            self.fire()
        return asyncio.create_task(poll())

    def stop(self, watch: asyncio.Task[None] | None, finished: bool) -> None:
        """The response ended: cancel the run unless its answer or end was sent."""
        if watch is not None:
            watch.cancel()
        if not finished:
            self.fire()

    def fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        task = asyncio.create_task(self._cancel())
        _leaving.add(task)
        task.add_done_callback(_leaving.discard)

    async def _cancel(self) -> None:
        try:
            run = await thread_runs.get_run(self.pool, self.temporal, self.thread_id, self.run_id)
            if run["status"] not in threads.ACTIVE_RUN_STATUSES:
                return
            await thread_runs.cancel_run(self.pool, self.temporal, self.thread_id, self.run_id,
                                     self.subject, "interrupt")
            logger.info("run cancelled: its client left", extra={
                "run_id": self.run_id, "thread_id": self.thread_id})
        except Exception:  # noqa: BLE001 - nobody is waiting for this answer: log it
            logger.warning("cancelling a run whose client left failed", exc_info=True,
                           extra={"run_id": self.run_id})


def _leave(request: Request, pool: Any, temporal: Any, run: Any, principal: Principal,
           cancel: bool) -> _Leave | None:
    return _Leave(request, pool, temporal, run, principal.subject) if cancel else None


@router.post("/threads/{thread_id}/runs")
async def create_run(thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                     temporal: TemporalDep, settings: SettingsDep,
                     body: JsonBody = None) -> JSONResponse:
    """Start a background run (or resume the thread's interrupt with ``command.resume``)."""
    run = await _create(pool, temporal, settings, principal, thread_id, body or {})
    return JSONResponse(threads.run_view(run), headers={"Content-Location": _locations(run)[
        "Content-Location"]})


@router.post("/runs")
async def create_stateless_run(principal: AgentPrincipal, pool: PoolDep, temporal: TemporalDep,
                               settings: SettingsDep, body: JsonBody = None) -> JSONResponse:
    """A background run on a new thread of its own, deleted once the run ends.

    As on the Agent Server, ``on_completion`` is ``delete`` unless ``keep`` is asked
    (:func:`_clean_up_after`); a run paused on an interrupt keeps its thread.

    Raises:
        InvalidRequestError: ``on_completion`` other than ``delete`` / ``keep`` (422).
    """
    body = body or {}
    _on_completion(body)
    run = await _create(pool, temporal, settings, principal, None, body)
    await _clean_up_after(temporal, settings, run, body)
    return JSONResponse(threads.run_view(run), headers={"Content-Location": _locations(run)[
        "Content-Location"]})


def _on_completion(body: dict[str, Any]) -> str:
    """A stateless run's ``on_completion`` (default ``delete``).

    Raises:
        InvalidRequestError: anything but ``delete`` or ``keep`` (422).
    """
    value = body.get("on_completion") or "delete"
    if value not in ("delete", "keep"):
        raise InvalidRequestError("on_completion must be delete or keep",
                                  details={"field": "on_completion"})
    return str(value)


async def _clean_up_after(temporal: Any, settings: Any, run: Any, body: dict[str, Any]) -> None:
    """Have Temporal delete a background stateless run's thread once the run ends.

    A ``ThreadCleanupWorkflow`` (:mod:`workflows.cron_tick`) per run, started idempotently
    (a retried request starts none twice); nothing for ``on_completion="keep"``.
    """
    from temporalio.common import WorkflowIDConflictPolicy

    if _on_completion(body) != "delete":
        return
    await temporal.start_workflow(
        "ThreadCleanupWorkflow", args=[str(run["run_id"]), str(run["thread_id"])],
        id=f"thread-cleanup-{run['run_id']}", task_queue=settings.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary=f"delete thread {run['thread_id']} after its run")


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


MAX_BATCH_RUNS = 100
"""Runs one ``POST /runs/batch`` may create."""


@router.post("/runs/batch")
async def create_stateless_runs(principal: AgentPrincipal, pool: PoolDep, temporal: TemporalDep,
                                settings: SettingsDep,
                                body: Annotated[Any, Body()] = None) -> list[dict[str, Any]]:
    """``runs.create_batch``: background runs, each on a new thread of its own, in order.

    Every payload is checked before any run is created (its assistant exists, its input is
    an object, its config and breakpoints fit the graph, its stream modes are served, its
    webhook is an http URL), so a bad one
    refuses the whole batch and nothing is half-created.

    Raises:
        InvalidRequestError: not a list of 1 to :data:`MAX_BATCH_RUNS` objects, or a payload
            the run would refuse (422, ``details.index`` names it).
        NotFoundError: an unknown assistant (404).
    """
    if not isinstance(body, list) or not body or len(body) > MAX_BATCH_RUNS or \
            not all(isinstance(p, dict) for p in body):
        raise InvalidRequestError(f"the body must be a list of 1 to {MAX_BATCH_RUNS} run payloads")
    for index, given in enumerate(body):
        try:
            payload, _ = await assistants.run_body(pool, given)
            run_body.check_run_options(
                assistants.resolve_assistant(str(payload.get("assistant_id") or "")), payload)
            run_body.stream_modes(payload.get("stream_mode"))
            run_body.check_webhook(payload.get("webhook"))
            _on_completion(payload)
            if payload.get("input") is not None and not isinstance(payload["input"], dict):
                raise InvalidRequestError("input must be a JSON object",
                                          details={"field": "input"})
        except InvalidRequestError as err:  # its own code, with the payload it refused
            err.details = {**(err.details or {}), "index": index}
            raise
    runs = [await _create(pool, temporal, settings, principal, None, payload) for payload in body]
    for run, payload in zip(runs, body, strict=True):
        await _clean_up_after(temporal, settings, run, payload)
    return [threads.run_view(run) for run in runs]


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(request: Request, thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                   temporal: TemporalDep, settings: SettingsDep,
                   body: JsonBody = None) -> StreamingResponse:
    """Run and block until the run ends or pauses: the thread's values (``__interrupt__``, ``__error__``)."""
    body = body or {}
    cancel = disconnect_mode(body)
    run = await _create(pool, temporal, settings, principal, thread_id, body)
    return _waiting(thread_streams.wait_values(pool, temporal, run), run,
                    leave=_leave(request, pool, temporal, run, principal, cancel))


@router.post("/runs/wait")
async def wait_stateless_run(request: Request, principal: AgentPrincipal, pool: PoolDep,
                             temporal: TemporalDep, settings: SettingsDep,
                             body: JsonBody = None) -> StreamingResponse:
    """A stateless run, blocking; the thread is deleted afterwards unless ``on_completion="keep"``."""
    body = body or {}
    cancel = disconnect_mode(body)
    run = await _create(pool, temporal, settings, principal, None, body)
    answered: dict[str, Any] = {}

    async def values() -> Any:
        answered["values"] = await thread_streams.wait_values(pool, temporal, run)
        return answered["values"]

    async def clean_up() -> None:  # once the answer is sent, as the Agent Server's worker does
        got = answered.get("values")
        if body.get("on_completion", "delete") == "delete" and isinstance(got, dict) \
                and "__interrupt__" not in got:
            await threads.delete_thread(pool, temporal, str(run["thread_id"]), principal.subject)

    return _waiting(values(), run, after=clean_up,
                    leave=_leave(request, pool, temporal, run, principal, cancel))


def _waiting(values: Any, run: Any, after: Callable[[], Awaitable[None]] | None = None,
             leave: _Leave | None = None) -> StreamingResponse:
    """``runs/wait``'s answer: 200 at once, then the JSON values; ``after`` once it is sent.

    A newline goes out every :data:`WAIT_KEEPALIVE_SECONDS` while the run goes on. A
    failure after the answer has started is reported in the body as
    ``{"__error__": {"error", "message"}}`` (the status is sent).
    """

    async def body() -> AsyncIterator[bytes]:
        task = asyncio.ensure_future(values)
        watch = leave.watch() if leave is not None else None
        answered = False
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WAIT_KEEPALIVE_SECONDS)
                if done:
                    break
                yield b"\n"
            try:
                result = task.result()
            except Exception as err:  # noqa: BLE001 - the status is already sent: say it in the body
                logger.warning("runs/wait failed after the answer started", exc_info=err)
                result = {"__error__": {"error": getattr(err, "code", type(err).__name__),
                                        "message": str(getattr(err, "message", err))[:500]}}
            answered = True
            yield json.dumps(to_jsonable(result), separators=(",", ":")).encode()
        finally:
            if leave is not None:
                leave.stop(watch, answered)
            if not task.done():
                task.cancel()

    return StreamingResponse(body(), media_type="application/json",
                             headers={"Content-Location": _locations(run)["Content-Location"]},
                             background=BackgroundTask(after) if after is not None else None)


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(request: Request, thread_id: str, principal: AgentPrincipal,
                     pool: PoolDep, temporal: TemporalDep, settings: SettingsDep,
                     body: JsonBody = None) -> StreamingResponse:
    """Run and stream it as SSE: ``metadata``, then ``values``/``updates``/``custom``, ``end``.

    ``on_disconnect="cancel"`` cancels the run if the client leaves before its end.
    """
    body = body or {}
    modes, cancel = _modes(body), disconnect_mode(body)
    run = await _create(pool, temporal, settings, principal, thread_id, body)
    return _sse(run, thread_streams.run_events(pool, temporal, run, modes),
                leave=_leave(request, pool, temporal, run, principal, cancel))


@router.post("/runs/stream")
async def stream_stateless_run(request: Request, principal: AgentPrincipal, pool: PoolDep,
                               temporal: TemporalDep, settings: SettingsDep,
                               body: JsonBody = None) -> StreamingResponse:
    """A stateless run, streamed (its thread is kept: a stream client may rejoin it)."""
    body = body or {}
    modes, cancel = _modes(body), disconnect_mode(body)
    run = await _create(pool, temporal, settings, principal, None, body)
    return _sse(run, thread_streams.run_events(pool, temporal, run, modes),
                leave=_leave(request, pool, temporal, run, principal, cancel))


@router.get("/threads/{thread_id}/runs")
async def list_runs(thread_id: str, _: ThreadReader, pool: PoolDep, limit: int = 10,
                    offset: int = 0, status: str | None = None) -> list[dict[str, Any]]:
    """The thread's runs, newest first."""
    return [threads.run_view(r) for r in await thread_runs.list_runs(pool, thread_id, limit, offset,
                                                                  status)]


@router.get("/threads/{thread_id}/runs/{run_id}")
async def read_run(thread_id: str, run_id: str, _: ThreadReader, pool: PoolDep,
                   temporal: TemporalDep) -> dict[str, Any]:
    """One run (``running``, ``interrupted``, ``success``, ``error``)."""
    return threads.run_view(await thread_runs.get_run(pool, temporal, thread_id, run_id))


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, _: ThreadReader, pool: PoolDep,
                   temporal: TemporalDep) -> Any:
    """Block until the run ends or pauses; the thread's values, as ``runs/wait`` answers."""
    run = await thread_runs.get_run(pool, temporal, thread_id, run_id)
    return await thread_streams.wait_values(pool, temporal, run)


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_stream(request: Request, thread_id: str, run_id: str, principal: ThreadReader,
                      pool: PoolDep, temporal: TemporalDep,
                      stream_mode: Annotated[list[str] | None, Query()] = None,
                      cancel_on_disconnect: bool = False,
                      last_event_id: Annotated[str | None, Header()] = None) -> StreamingResponse:
    """(Re)join a run's stream; with ``Last-Event-ID`` it resumes after that event, no duplicates.

    ``cancel_on_disconnect`` cancels the run if this client leaves before its end (the
    caller must be allowed to change the thread).
    """
    run = await thread_runs.get_run(pool, temporal, thread_id, run_id)
    kwargs = json.loads(run["kwargs"]) if isinstance(run["kwargs"], str) else run["kwargs"]
    named = [m for m in stream_mode or [] if m]  # the SDK sends stream_mode="" for none
    modes = run_body.stream_modes(named) if named else _modes(kwargs or {})
    after = thread_streams.parse_last_event_id(last_event_id)
    if cancel_on_disconnect:  # cancelling changes the thread: a reader may not
        await agent_auth.gate_thread(pool, principal, thread_id, "update")
    return _sse(run, thread_streams.run_events(pool, temporal, run, modes, after=after),
                leave=_leave(request, pool, temporal, run, principal, cancel_on_disconnect))


@router.get("/threads/{thread_id}/stream")
async def join_thread_stream(request: Request, thread_id: str, _: ThreadReader,
                             pool: PoolDep, temporal: TemporalDep,
                             stream_modes: str | None = None,
                             stream_mode: Annotated[list[str] | None, Query()] = None,
                             last_event_id: Annotated[str | None, Header()] = None,
                             ) -> StreamingResponse:
    """``threads.join_stream``: every run of the thread as it happens.

    Read by :func:`overseer.thread_streams.thread_events`. Modes as ``stream_modes``
    (comma-separated, as the Agent Server reads it) or ``stream_mode`` (as the SDKs send
    it): ``run_modes`` (default), ``lifecycle``, ``state_update``. A keep-alive comment
    every :data:`KEEPALIVE_SECONDS` while nothing happens.

    Raises:
        InvalidRequestError: an unknown mode (422).
    """
    modes = [m.strip() for m in (stream_modes or "").split(",") if m.strip()] + \
        [m for m in stream_mode or [] if m]
    modes = modes or ["run_modes"]
    thread_streams.check_thread_stream_modes(modes)
    events = thread_streams.thread_events(pool, temporal, thread_id, modes, after=last_event_id)
    return StreamingResponse(_with_keepalives(request, events), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store"})


KEEPALIVE_SECONDS = 15.0
"""A thread stream sends an SSE comment after this long without an event."""


async def _with_keepalives(request: Request, events: AsyncIterator[tuple[str | None, str, Any]],
                           ) -> AsyncIterator[bytes]:
    """``events`` as SSE frames, with a keep-alive comment in every silence.

    Stops within a second of the client leaving (a thread stream has no end of its own).
    """
    queue: asyncio.Queue[tuple[str | None, str, Any] | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        except Exception:  # noqa: BLE001 - the stream ends; the client rejoins with its last id
            logger.warning("thread stream ended on an error", exc_info=True)
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump())
    quiet = 0.0
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), 1.0)
            except TimeoutError:
                if await request.is_disconnected():
                    return
                quiet += 1.0
                if quiet >= KEEPALIVE_SECONDS:
                    quiet = 0.0
                    yield b": keep-alive\n\n"
                continue
            quiet = 0.0
            if item is None:
                return
            yield _frame(*item)
    finally:
        task.cancel()


@router.post("/threads/{thread_id}/runs/{run_id}/cancel")
async def cancel_run(thread_id: str, run_id: str, principal: ThreadUpdater, pool: PoolDep,
                     temporal: TemporalDep, wait: bool | int = False,
                     action: str = "interrupt") -> Any:
    """Cancel a run in progress (``action``: ``interrupt`` keeps its state, ``rollback`` drops it)."""
    run = await thread_runs.cancel_run(pool, temporal, thread_id, run_id, principal.subject, action)
    return threads.run_view(run) if wait else Response(status_code=202)


BULK_CANCEL_STATUSES = {"pending": ("pending",), "running": ("running",),
                        "all": ("pending", "running")}
"""``POST /runs/cancel`` ``status`` filters, as the SDK's ``cancel_many`` sends them."""


@router.post("/runs/cancel", status_code=204)
async def cancel_runs(principal: AgentPrincipal, pool: PoolDep, temporal: TemporalDep,
                      action: str = "interrupt", body: JsonBody = None) -> Response:
    """``runs.cancel_many``: cancel ``run_ids`` of ``thread_id``, or every run with ``status``.

    Each run is cancelled as ``POST /threads/{id}/runs/{run_id}/cancel`` cancels it (with
    ``action``). Runs on threads the caller may not change, or does not see, are left
    alone, as are runs that already ended.

    Raises:
        InvalidRequestError: neither ``thread_id`` with ``run_ids`` nor a ``status`` of
            ``pending``, ``running`` or ``all``; or an ``action`` other than ``interrupt``
            or ``rollback`` (422).
    """
    body = body or {}
    if action not in ("interrupt", "rollback"):
        raise InvalidRequestError("action must be interrupt or rollback",
                                  details={"field": "action"})
    status, thread_id, run_ids = body.get("status"), body.get("thread_id"), body.get("run_ids")
    if status is not None:
        if status not in BULK_CANCEL_STATUSES:
            raise InvalidRequestError(f"status must be one of {sorted(BULK_CANCEL_STATUSES)}",
                                      details={"field": "status"})
        rows = await pool.fetch("SELECT thread_id, run_id FROM agent_runs WHERE status = ANY($1)",
                                list(BULK_CANCEL_STATUSES[status]))
        targets = [(str(r["thread_id"]), str(r["run_id"])) for r in rows]
    elif thread_id and isinstance(run_ids, list) and run_ids:
        targets = [(str(thread_id), str(r)) for r in run_ids]
    else:
        raise InvalidRequestError("give thread_id with run_ids, or a status",
                                  details={"fields": ["thread_id", "run_ids", "status"]})
    allowed: dict[str, bool] = {}
    for tid, rid in targets:
        if tid not in allowed:
            try:
                await agent_auth.gate_thread(pool, principal, tid, "update",
                                             {"action": action})
                allowed[tid] = True
            except (NotFoundError, PermissionDeniedError):
                allowed[tid] = False
        if allowed[tid]:
            try:
                await thread_runs.cancel_run(pool, temporal, tid, rid, principal.subject, action)
            except NotFoundError:
                continue  # not a run of that thread
    return Response(status_code=204)


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete_run(thread_id: str, run_id: str, _: ThreadDeleter, pool: PoolDep,
                     temporal: TemporalDep) -> Response:
    """Forget a finished run."""
    run = await thread_runs.get_run(pool, temporal, thread_id, run_id)
    await pool.execute("DELETE FROM agent_runs WHERE run_id = $1", run["run_id"])
    return Response(status_code=204)
