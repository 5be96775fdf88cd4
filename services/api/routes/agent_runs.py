"""Runs (``client.runs.*``): create (on a thread, stateless, in a batch), list, read, cancel, delete.

Each run is an Overseer run (a ``SegmentRunWorkflow``), each interrupt an Overseer
approval; the work is in :mod:`overseer.thread_runs` and :mod:`overseer.thread_queue`.
Every run starts through the run service (:func:`overseer.run_service.start_run`), here, in
:mod:`services.api.routes.agent_run_streams`, for the thread protocol's ``run.start`` and
the MCP tool call.
The router's lifespan starts queued runs that nobody started (:func:`queue_recovery`).
Streaming, waiting for and joining a run: :mod:`services.api.routes.agent_run_streams`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, FastAPI, Query, Response
from fastapi.responses import JSONResponse

from overseer import run_body, run_service, thread_queue, thread_runs, threads
from overseer.errors import (
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
)
from overseer.http_routes import PoolDep, SettingsDep, TemporalDep
from services.api import agent_auth
from services.api.routes.agent_deps import (
    AgentPrincipal,
    JsonBody,
    ThreadDeleter,
    ThreadReader,
    ThreadUpdater,
    check_select,
    pick,
)

logger = logging.getLogger(__name__)


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


def body_stream_modes(body: dict[str, Any]) -> list[str]:
    """The stream modes a run body asks for (``stream_mode``; see :func:`overseer.run_body.stream_modes`)."""
    return run_body.stream_modes(body.get("stream_mode"))


def run_locations(run: Any) -> dict[str, str]:
    """A run's ``Content-Location`` (the run) and ``Location`` (its stream) headers."""
    base = f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return {"Content-Location": base, "Location": f"{base}/stream"}


@router.post("/threads/{thread_id}/runs")
async def create_run(thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                     temporal: TemporalDep, settings: SettingsDep,
                     body: JsonBody = None) -> JSONResponse:
    """Start a background run (or resume the thread's interrupt with ``command.resume``)."""
    run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                      thread_id, body or {})
    return JSONResponse(threads.run_view(run), headers={"Content-Location": run_locations(run)[
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
    run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                      None, body)
    await _clean_up_after(temporal, settings, run, body)
    return JSONResponse(threads.run_view(run), headers={"Content-Location": run_locations(run)[
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
    asks = []
    for index, given in enumerate(body):  # every payload checked before any run starts
        try:
            asks.append(await run_service.resolve_request(pool, given))
            _on_completion(given)
        except InvalidRequestError as err:  # its own code, with the payload it refused
            err.details = {**(err.details or {}), "index": index}
            raise
    caller = agent_auth.run_caller(principal)
    runs = [await run_service.start_run(pool, temporal, settings, caller, None, ask.body, ask=ask)
            for ask in asks]
    for run, payload in zip(runs, body, strict=True):
        await _clean_up_after(temporal, settings, run, payload)
    return [threads.run_view(run) for run in runs]


RUN_FIELDS = frozenset({"run_id", "thread_id", "assistant_id", "created_at", "updated_at",
                        "status", "metadata", "kwargs", "multitask_strategy"})
"""What ``runs.list``'s ``select`` may name (the SDK's ``RunSelectField``)."""


@router.get("/threads/{thread_id}/runs")
async def list_runs(thread_id: str, _: ThreadReader, pool: PoolDep, limit: int = 10,
                    offset: int = 0, status: str | None = None,
                    select: Annotated[list[str] | None, Query()] = None) -> list[dict[str, Any]]:
    """The thread's runs, newest first; ``select`` keeps only the fields it names."""
    fields = check_select(select, RUN_FIELDS)
    return pick([threads.run_view(r) for r in await thread_runs.list_runs(
        pool, thread_id, limit, offset, status)], fields)


@router.get("/threads/{thread_id}/runs/{run_id}")
async def read_run(thread_id: str, run_id: str, _: ThreadReader, pool: PoolDep,
                   temporal: TemporalDep) -> dict[str, Any]:
    """One run (``running``, ``interrupted``, ``success``, ``error``)."""
    return threads.run_view(await thread_runs.get_run(pool, temporal, thread_id, run_id))


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
