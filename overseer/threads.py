"""Agent Server threads and runs over Overseer runs (issue 12; the routes: ``routes/langgraph_api.py``).

A *thread*'s graph state, its checkpoints (one per superstep) and its history are
LangGraph's own, in ``AsyncPostgresSaver``'s tables, written by the run's segments
(:mod:`activities.segments`). Its row in ``agent_threads`` holds its metadata, its status
and a copy of its latest checkpoint (``values``, ``state``, ``checkpoint``) for thread
search and ``GET /threads/{id}``. A *run* is a row in ``agent_runs`` that reads one
stretch of a ``SegmentRunWorkflow``'s durable stream:

- a run with input (or ``command.goto``/``update``) starts a new ``SegmentRunWorkflow``
  (an Overseer run: ``run.submitted``, the event log, approvals) on the thread's
  checkpoints; its stretch starts at offset 0;
- a run with ``command.resume`` is a decision on the interrupt the thread's workflow waits
  on (the shared gate's ``decide`` update with ``raw_resume``, so ``interrupt()`` gets the
  value unchanged and a decision from the admin API and one from here cannot both win);
  its stretch starts where the workflow's stream stood when the decision was accepted.

A run with input waits in ``agent_runs`` as ``pending`` until the thread is free
(:func:`advance_queue`): the durable queue behind ``multitask_strategy="enqueue"``. The
run before it starts it: its workflow hands the thread on with its ending
(:func:`hand_off`); the API only recovers queued runs nobody started (:func:`sweep_queues`).

A run's stretch ends at the first ``interrupt`` (run ``interrupted``), ``end``
(``success``) or ``error`` (``error``) item. While a workflow is attached to a thread
(``agent_threads.last_run_id``), the thread's row is brought up to date from it (the
``get_thread_state`` query, :func:`sync_thread`); the workflow also writes it itself when
it pauses on an interrupt and when it ends (:func:`hand_off`, which ``runs.wait`` waits
on), and once it has ended it is detached.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from overseer import access
from overseer.errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidRequestError,
    NotAwaitingApprovalError,
    NotFoundError,
    OverseerError,
)
from overseer.graph_codec import encode, to_jsonable
from overseer.pipelines import Pipeline, get_registry
from overseer.settings import Settings
from overseer.store.events import RUN_SUBMITTED, NewEvent, append_events
from overseer.token_stream import STATE_CHANNEL

SEGMENT_STREAM_MODES = ("tasks", "checkpoints", "debug", "tools", "events")
"""LangGraph's own chunks the segment writes live when the run asks for them
(:mod:`overseer.token_stream`); ``tools`` is LangGraph's tool-call lifecycle
(``tool-started``, ``tool-finished``, ``tool-error``); ``events`` LangChain's callback
events (``astream_events(version="v2")``), as the Agent Server streams them."""
STREAM_MODES = ("values", "updates", "custom", "messages", "messages-tuple",
                *SEGMENT_STREAM_MODES)
"""Stream modes Overseer serves (:func:`overseer.thread_streams.run_events`): every chunk
comes live from LangGraph's own loop in the segment (:mod:`overseer.token_stream`)."""
UNSERVED_STREAM_MODES = {
    "lifecycle": "the installed LangGraph has no lifecycle stream mode",
}
"""Modes a client may name that Overseer refuses (422 ``stream_mode_unsupported``), and why."""
MULTITASK_STRATEGIES = ("enqueue", "reject", "interrupt", "rollback")
"""``multitask_strategy`` values; the first is the default, as on LangGraph's Agent Server."""
RUN_ENDINGS = {"interrupt": "interrupted", "end": "success", "error": "error"}
ACTIVE_RUN_STATUSES = ("pending", "running")
MESSAGE_TYPES = frozenset({
    "human", "ai", "system", "tool", "function", "chat", "AIMessageChunk", "HumanMessageChunk",
    "SystemMessageChunk", "ToolMessageChunk", "FunctionMessageChunk", "ChatMessageChunk"})
"""``type`` of a LangChain message's JSON form (``model_dump``); ``remove`` is not a message."""

logger = logging.getLogger(__name__)


class ThreadBusyError(ConflictError):
    """The thread has a run in progress and ``multitask_strategy`` is ``reject`` (409)."""

    code = "thread_busy"


class StreamModeUnsupportedError(InvalidRequestError):
    """A ``stream_mode`` Overseer cannot honour faithfully (422); ``details.unsupported`` names it."""

    code = "stream_mode_unsupported"


def stream_modes(value: Any) -> list[str]:
    """The ``stream_mode`` of a request (a name or a list; default ``["values"]``), validated.

    Raises:
        StreamModeUnsupportedError: a mode in :data:`UNSERVED_STREAM_MODES` or an unknown one (422).
    """
    modes = [value] if isinstance(value, str) else [str(m) for m in (value or [])]
    modes = modes or ["values"]
    refused = [m for m in modes if m not in STREAM_MODES]
    if refused:
        raise StreamModeUnsupportedError(
            f"stream mode {', '.join(map(repr, refused))} is not served by Overseer",
            details={"unsupported": refused, "supported": list(STREAM_MODES),
                     "reasons": {m: UNSERVED_STREAM_MODES.get(m, "unknown stream mode")
                                 for m in refused}})
    return modes


# --- assistants --------------------------------------------------------------------------------


def graph_pipelines() -> list[Pipeline]:
    """Every registered graph an Agent Server client may run (all but those that take an upload)."""
    return [p for p in get_registry() if not p.takes_upload]


async def segments_app(pipeline: str, settings: Settings | None = None) -> Any:
    """The graph compiled with LangGraph's Postgres checkpointer, in this process.

    The API's view of a thread that runs as segments: its state, history and updates are
    LangGraph's own.
    """
    from activities.segments import compiled
    from overseer.settings import get_settings

    return await compiled(pipeline, database_url=str((settings or get_settings()).database_url))


def assistant_id_of(name: str) -> str:
    """The stable assistant id of graph ``name`` (uuid5, as the Agent Server derives it)."""
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"overseer-assistant:{name}"))


def resolve_assistant(assistant_id: str) -> Pipeline:
    """The pipeline an ``assistant_id`` (or graph name) names.

    Raises:
        NotFoundError: no such assistant (404).
    """
    for pipeline in graph_pipelines():
        if assistant_id in (pipeline.name, assistant_id_of(pipeline.name)):
            return pipeline
    raise NotFoundError(f"unknown assistant {assistant_id!r}",
                        details={"known": [p.name for p in graph_pipelines()]})


def assistant_view(pipeline: Pipeline) -> dict[str, Any]:
    """An ``Assistant`` as the SDK reads it."""
    epoch = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    return {"assistant_id": assistant_id_of(pipeline.name), "graph_id": pipeline.name,
            "config": {}, "context": {}, "created_at": epoch, "updated_at": epoch,
            "metadata": {"created_by": "system", "seed": pipeline.seed},
            "version": 1, "name": pipeline.name, "description": pipeline.description or None}


# --- threads ---------------------------------------------------------------------------------


def _uuid(value: str, what: str = "thread") -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFoundError(f"unknown {what} {value}") from None


def _json(value: Any) -> Any:
    if value is None:
        return None
    return json.loads(value) if isinstance(value, str) else value


def thread_view(row: asyncpg.Record) -> dict[str, Any]:
    """A ``Thread`` as the SDK reads it."""
    return {"thread_id": str(row["thread_id"]), "created_at": row["created_at"].isoformat(),
            "updated_at": row["updated_at"].isoformat(), "metadata": _json(row["metadata"]) or {},
            "status": row["status"], "values": _json(row["values"]),
            "interrupts": _json(row["interrupts"]) or {}}


async def create_thread(pool: asyncpg.Pool, *, thread_id: str | None, metadata: dict[str, Any],
                        if_exists: str | None, subject: str,
                        scope: access.Scope) -> asyncpg.Record:
    """Create a thread owned by ``subject``.

    Args:
        pool: the database.
        thread_id: the id to give it (a new uuid4 when None).
        metadata: its metadata.
        if_exists: ``raise`` (default) or ``do_nothing`` when the id is taken.
        subject: its owner.
        scope: what the caller may read (:mod:`overseer.access`): ``do_nothing`` answers
            with an existing thread only inside it.

    Raises:
        ConflictError: the id is taken and ``if_exists`` is not ``do_nothing``, or it is
            taken by a thread outside ``scope`` (409; never its content).
    """
    tid = _uuid(thread_id) if thread_id else uuid.uuid4()
    row = await pool.fetchrow(
        """INSERT INTO agent_threads (thread_id, metadata, created_by) VALUES ($1, $2::jsonb, $3)
           ON CONFLICT (thread_id) DO NOTHING RETURNING *""", tid, json.dumps(metadata), subject)
    if row is not None:
        return row
    if if_exists == "do_nothing":
        args: list[Any] = [tid]
        where = scope.sql(args, owner_column="created_by", metadata_column="metadata")
        existing = await pool.fetchrow(
            f"SELECT * FROM agent_threads WHERE thread_id = $1 AND {where}", *args)
        if existing is not None:
            return existing
    raise ConflictError(f"thread {tid} already exists", details={"thread_id": str(tid)})


async def get_thread(pool: asyncpg.Pool | asyncpg.Connection, thread_id: str) -> asyncpg.Record:
    """The thread row.

    Raises:
        NotFoundError: unknown thread (404).
    """
    row = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1", _uuid(thread_id))
    if row is None:
        raise NotFoundError(f"unknown thread {thread_id}")
    return row


async def search_threads(pool: asyncpg.Pool, *, metadata: dict[str, Any] | None,
                         status: str | None, ids: list[str] | None, limit: int,
                         offset: int, scope: access.Scope) -> list[asyncpg.Record]:
    """Threads newest first, filtered by metadata containment, status and ids.

    Only threads in ``scope`` (the caller's, :mod:`overseer.access`) are searched: the
    condition is part of the query, so ``limit`` and ``offset`` count visible threads.
    """
    clauses: list[str] = ["metadata @> $1::jsonb"]
    args: list[Any] = [json.dumps(metadata or {})]
    clauses.append(scope.sql(args, owner_column="created_by", metadata_column="metadata"))
    if status:
        args.append(status)
        clauses.append(f"status = ${len(args)}")
    if ids:
        args.append([_uuid(i) for i in ids])
        clauses.append(f"thread_id = ANY(${len(args)})")
    args += [limit, offset]
    return list(await pool.fetch(
        f"SELECT * FROM agent_threads WHERE {' AND '.join(clauses)} ORDER BY updated_at DESC "
        f"LIMIT ${len(args) - 1} OFFSET ${len(args)}", *args))


async def delete_thread(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                        subject: str) -> None:
    """Delete a thread, its runs and its crons; a workflow still attached to it is cancelled first.

    It also loses its LangGraph checkpoints, blobs and writes, and the tokens its runs
    streamed.
    """
    row = await get_thread(pool, thread_id)
    if row["last_run_id"] is not None and row["status"] in ("busy", "interrupted"):
        await _cancel_workflow(pool, temporal, row["graph_id"], str(row["last_run_id"]), subject)
    segments = row["graph_id"] is not None
    if segments:
        await segments_app(row["graph_id"])  # LangGraph's tables exist
    async with pool.acquire() as conn, conn.transaction():
        from overseer.token_stream import delete_tokens

        await delete_tokens(conn, [r["workflow_run_id"] for r in await conn.fetch(
            "SELECT DISTINCT workflow_run_id FROM agent_runs WHERE thread_id = $1",
            row["thread_id"])])  # the tokens its runs streamed (overseer.token_stream)
        await conn.execute("DELETE FROM agent_threads WHERE thread_id = $1", row["thread_id"])
        crons = [r["cron_id"] for r in await conn.fetch(
            "DELETE FROM agent_crons WHERE thread_id = $1 RETURNING cron_id", row["thread_id"])]
        if segments:  # a thread that never ran has no checkpoints
            for table in ("checkpoint_writes", "checkpoint_blobs", "checkpoints"):
                await conn.execute(f"DELETE FROM {table} WHERE thread_id = $1",  # noqa: S608
                                   str(row["thread_id"]))
    if crons:  # the thread's crons go with it, their schedules too
        from overseer.crons import drop_schedules

        await drop_schedules(temporal, crons)


PRUNE_STRATEGIES = ("delete", "keep_latest")
"""``POST /threads/prune`` strategies, as on the Agent Server."""


async def prune_thread(pool: asyncpg.Pool, temporal: Client, thread_id: str, strategy: str,
                       subject: str) -> bool:
    """One thread of ``POST /threads/prune``; whether it was pruned.

    ``delete`` deletes it (:func:`delete_thread`). ``keep_latest`` keeps the thread and its
    latest state and drops its older checkpoints (LangGraph's ``aprune``). A busy thread is
    not pruned with ``keep_latest`` (its run is writing checkpoints).
    """
    if strategy == "delete":
        await delete_thread(pool, temporal, thread_id, subject)
        return True
    row = await get_thread(pool, thread_id)
    if row["status"] == "busy":
        return False
    if row["graph_id"] is not None:
        app = await segments_app(row["graph_id"])
        await app.checkpointer.aprune([str(row["thread_id"])], strategy="keep_latest")
    return True


async def copy_thread(pool: asyncpg.Pool, thread_id: str) -> asyncpg.Record:
    """``POST /threads/{id}/copy``: a new idle thread with the metadata, state and checkpoints.

    The copy keeps the thread's owner (``created_by`` and the metadata an ``Auth`` handler
    put there), whoever asked for it.

    Raises:
        ConflictError: the thread is busy or paused (its state lives in a workflow then).
    """
    row = await get_thread(pool, thread_id)
    if _run_holds(row):
        raise ConflictError(f"thread {thread_id} is {row['status']}; copy it when idle")
    segments = row["graph_id"] is not None
    if segments:
        await segments_app(row["graph_id"])  # LangGraph's tables exist
    new_id = uuid.uuid4()
    async with pool.acquire() as conn, conn.transaction():
        if segments:
            await copy_checkpoints(conn, str(row["thread_id"]), str(new_id))
        await conn.execute(
            """INSERT INTO agent_threads (thread_id, metadata, status, graph_id, "values", state,
                                          checkpoint, created_by)
               SELECT $2, metadata, status, graph_id, "values", state, checkpoint, created_by
               FROM agent_threads WHERE thread_id = $1""", row["thread_id"], new_id)
    return await get_thread(pool, str(new_id))


async def copy_checkpoints(conn: Any, source: str, target: str) -> None:
    """Copy a thread's LangGraph checkpoints, channel blobs and pending writes to ``target``.

    What ``BaseCheckpointSaver.acopy_thread`` promises (the whole parent chain), which
    ``AsyncPostgresSaver`` does not implement: rows are copied in SQL with the thread id
    (and a ``thread_id`` in a checkpoint's metadata) changed, in the caller's transaction.

    Args:
        conn: an asyncpg connection on Overseer's Postgres (LangGraph's tables live there).
        source: the thread copied.
        target: the new thread's id (no rows yet).
    """
    await conn.execute(
        """INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id,
                                    type, checkpoint, metadata)
           SELECT $2, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint,
                  CASE WHEN metadata ? 'thread_id'
                       THEN jsonb_set(metadata, '{thread_id}', to_jsonb($2::text))
                       ELSE metadata END
           FROM checkpoints WHERE thread_id = $1""", source, target)
    await conn.execute(
        """INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
           SELECT $2, checkpoint_ns, channel, version, type, blob
           FROM checkpoint_blobs WHERE thread_id = $1""", source, target)
    await conn.execute(
        """INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id,
                                          task_path, idx, channel, type, blob)
           SELECT $2, checkpoint_ns, checkpoint_id, task_id, task_path, idx, channel, type, blob
           FROM checkpoint_writes WHERE thread_id = $1""", source, target)


async def drop_run_checkpoints(conn: Any, thread_id: str, run_id: str) -> int:
    """Rewind a thread to before a run: delete the checkpoints the run wrote, and their writes.

    LangGraph marks each checkpoint with the run that wrote it (metadata
    :data:`activities.segments.RUN_ID_KEY`), so what is left is the thread as the run found
    it. The run's channel blobs stay (unreferenced: LangGraph's versions never repeat).

    Returns:
        How many checkpoints were deleted.
    """
    from activities.segments import RUN_ID_KEY

    ids = [r["checkpoint_id"] for r in await conn.fetch(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND metadata->>$2 = $3",
        thread_id, RUN_ID_KEY, run_id)]
    if ids:
        await conn.execute("DELETE FROM checkpoint_writes WHERE thread_id = $1 "
                           "AND checkpoint_id = ANY($2::text[])", thread_id, ids)
        await conn.execute("DELETE FROM checkpoints WHERE thread_id = $1 "
                           "AND checkpoint_id = ANY($2::text[])", thread_id, ids)
    return len(ids)


async def mirror_checkpointed(pool: asyncpg.Pool, thread_id: Any, graph_id: str) -> None:
    """Write the thread's latest LangGraph checkpoint into its ``agent_threads`` row.

    The row's ``values``/``state``/``checkpoint`` are what thread search and ``GET
    /threads/{id}`` show; they follow the checkpointer.
    """
    from activities.segments import snapshot_of

    app = await segments_app(graph_id)
    snap = snapshot_of(await app.aget_state({"configurable": {"thread_id": str(thread_id)}}))
    empty = snap["checkpoint_id"] is None
    await pool.execute(
        """UPDATE agent_threads SET "values" = $2::jsonb, state = $3::jsonb,
               checkpoint = $4::jsonb, updated_at = now() WHERE thread_id = $1""",
        thread_id, None if empty else json.dumps(snap["values"]),
        None if empty else json.dumps(snap["encoded"]),
        None if empty else json.dumps({k: snap.get(k) for k in (
            "next", "tasks", "interrupts", "checkpoint_id", "parent_checkpoint_id", "metadata",
            "created_at")}, default=str))


def state_view(row: asyncpg.Record) -> dict[str, Any]:
    """The thread's current ``ThreadState``."""
    cp = _json(row["checkpoint"]) or {}
    tid = str(row["thread_id"])
    return {"values": _json(row["values"]) or {}, "next": cp.get("next", []),
            "tasks": cp.get("tasks", []), "interrupts": cp.get("interrupts", []),
            "metadata": cp.get("metadata", {}), "created_at": cp.get("created_at"),
            "checkpoint": {"thread_id": tid, "checkpoint_ns": "",
                           "checkpoint_id": cp.get("checkpoint_id"), "checkpoint_map": None},
            "parent_checkpoint": ({"thread_id": tid, "checkpoint_ns": "",
                                   "checkpoint_id": cp["parent_checkpoint_id"],
                                   "checkpoint_map": None}
                                  if cp.get("parent_checkpoint_id") else None)}


async def current_state(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                        settings: Settings | None = None) -> dict[str, Any]:
    """The thread's ``ThreadState`` now; during a segments run, its latest checkpoint.

    As the Agent Server reads it: the checkpoint LangGraph wrote last (``next`` names the
    nodes running), so a UI that reloads mid-run sees the run going on; before the run's
    first checkpoint, the state before it with ``next: ["__start__"]`` (LangGraph's first
    checkpoint of a run names the same). Otherwise (idle, paused on an interrupt) the
    thread's own state (:func:`state_view`).
    """
    row = await sync_thread(pool, temporal, thread_id, settings)
    if row["status"] == "busy" and row["graph_id"] is not None:
        app = await segments_app(row["graph_id"])
        state = await app.aget_state({"configurable": {"thread_id": str(row["thread_id"])}})
        if state.config and state.next:
            return checkpoint_view(str(row["thread_id"]), state)
        return {**state_view(row), "next": ["__start__"]}
    return state_view(row)


def checkpoint_view(thread_id: str, state: Any) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the SDK reads a ``ThreadState``."""
    from activities.segments import snapshot_of

    snap = snapshot_of(state)
    created = snap["created_at"]
    return {"values": snap["values"], "next": snap["next"], "tasks": snap["tasks"],
            "interrupts": snap["interrupts"], "metadata": snap["metadata"],
            "created_at": created.isoformat() if hasattr(created, "isoformat") else created,
            "checkpoint": {"thread_id": thread_id, "checkpoint_ns": "",
                           "checkpoint_id": snap["checkpoint_id"], "checkpoint_map": None},
            "parent_checkpoint": ({"thread_id": thread_id, "checkpoint_ns": "",
                                   "checkpoint_id": snap["parent_checkpoint_id"],
                                   "checkpoint_map": None}
                                  if snap["parent_checkpoint_id"] else None)}


async def state_at(pool: asyncpg.Pool, thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    """The thread's state at a saved checkpoint.

    Raises:
        NotFoundError: no such checkpoint on the thread (404).
    """
    row = await get_thread(pool, thread_id)
    if row["graph_id"] is None:
        raise NotFoundError(f"unknown checkpoint {checkpoint_id}")
    app = await segments_app(row["graph_id"])
    state = await app.aget_state({"configurable": {"thread_id": str(row["thread_id"]),
                                                   "checkpoint_id": checkpoint_id}})
    if not state.config or not state.values and not state.next:
        raise NotFoundError(f"unknown checkpoint {checkpoint_id}")
    return checkpoint_view(str(row["thread_id"]), state)


async def history(pool: asyncpg.Pool, thread_id: str, limit: int,
                  before: str | None = None) -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first.

    LangGraph's own: one per superstep (and per state update).
    """
    row = await get_thread(pool, thread_id)
    if row["graph_id"] is None:
        return []
    app = await segments_app(row["graph_id"])
    tid = str(row["thread_id"])
    before_config = {"configurable": {"thread_id": tid, "checkpoint_id": before}} \
        if before else None
    return [checkpoint_view(tid, s) async for s in app.aget_state_history(
        {"configurable": {"thread_id": tid}}, limit=limit, before=before_config)]


# --- syncing a thread from its workflow -------------------------------------------------------


def workflow_id(graph_id: str, run_id: str) -> str:
    """``<graph>-<run_id>``: the workflow behind an Overseer run."""
    return get_registry().get(graph_id).workflow_id(run_id)


QUERY_TRIES = 5
"""A query that times out or finds Temporal unavailable is asked again this many times in all
(backoff 0.2 s doubling): with a hundred runs in flight on one worker a query can wait past
its deadline for the run's workflow task, which is no reason to fail a ``runs.wait``."""
TRANSIENT_RPC = frozenset({RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE,
                           RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.CANCELLED})


async def query_state(temporal: Client, graph_id: str, run_id: str) -> dict[str, Any] | None:
    """The workflow's ``get_thread_state`` answer, or None when it is gone or cannot answer.

    Raises:
        DependencyUnavailableError: Temporal failed the query :data:`QUERY_TRIES` times, or
            with an error that is not transient (503).
    """
    handle = temporal.get_workflow_handle(workflow_id(graph_id, run_id))
    for attempt in range(1, QUERY_TRIES + 1):
        try:
            snap: dict[str, Any] = await handle.query("get_thread_state")
            break
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            if err.status not in TRANSIENT_RPC or attempt == QUERY_TRIES:
                raise DependencyUnavailableError("Temporal did not answer") from err
            await asyncio.sleep(0.2 * 2 ** (attempt - 1))
        except Exception:  # noqa: BLE001 - e.g. a workflow recorded before the query existed
            return None
    try:
        desc = await handle.describe()
        snap["closed"] = desc.status is not None and desc.status.name != "RUNNING"
        snap["cancelled"] = desc.status is not None and desc.status.name in (
            "CANCELED", "TERMINATED")
    except RPCError:
        snap["closed"], snap["cancelled"] = False, False
    return snap


async def workflow_closed(temporal: Client, graph_id: str, run_id: str) -> bool:
    """True when the run's workflow has closed or is gone; Temporal's server answers alone.

    A transient failure (deadline, unavailable) answers False: the caller asks again later.

    Raises:
        DependencyUnavailableError: Temporal refused the describe otherwise (503).
    """
    try:
        desc = await temporal.get_workflow_handle(workflow_id(graph_id, run_id)).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return True
        if err.status in TRANSIENT_RPC:
            return False
        raise DependencyUnavailableError("Temporal did not answer") from err
    return desc.status is not None and desc.status.name != "RUNNING"


def thread_status(snap: dict[str, Any]) -> str:
    """``idle`` | ``busy`` | ``interrupted`` | ``error`` from a workflow's state.

    A run that ended with nodes still to run (stopped at one of its own breakpoints,
    ``interrupt_before`` / ``interrupt_after``) leaves its thread ``interrupted``, as on the
    Agent Server, with no run attached: the next run goes on from there.
    """
    if snap.get("cancelled"):
        return "idle"
    marks, published = snap.get("marks") or [], int(snap.get("published") or 0)
    last = marks[-1] if marks else None
    if last and last["event"] == "error":
        return "error"
    if last and last["event"] == "end":
        return "interrupted" if snap.get("next") else "idle"
    if last and last["event"] == "interrupt" and last["offset"] == published - 1 and \
            not snap.get("decided"):
        return "interrupted"
    return "busy"


def _run_holds(row: asyncpg.Record) -> bool:
    """True while a run holds the thread's state: in progress, or paused on an interrupt.

    A thread ``interrupted`` at a breakpoint (its run ended) is held by nobody.
    """
    return row["status"] == "busy" or (row["status"] == "interrupted"
                                       and row["last_run_id"] is not None)


def segment_status(snap: dict[str, Any] | None, from_offset: int) -> str:
    """A run's status: the first ``interrupt``/``end``/``error`` at or after its first offset.

    A run whose workflow was cancelled (its ``end`` mark says so) is ``interrupted``, as the
    Agent Server calls a cancelled run.
    """
    if snap is None:
        return "error"
    for mark in snap.get("marks") or []:
        if mark["offset"] >= from_offset:
            return "interrupted" if mark.get("cancelled") else RUN_ENDINGS[mark["event"]]
    return "interrupted" if snap.get("closed") else "running"


async def sync_thread(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                      settings: Settings | None = None) -> asyncpg.Record:
    """Bring the thread's row up to date with its attached workflow (see the module docstring).

    Observing a thread also starts its next queued run when its turn has come
    (:func:`advance_queue`).
    """
    row = await _sync(pool, temporal, thread_id)
    if await pool.fetchval("SELECT EXISTS (SELECT 1 FROM agent_runs WHERE thread_id = $1 "
                           "AND status = 'pending')", row["thread_id"]):
        await advance_queue(pool, temporal, thread_id, settings)
        row = await get_thread(pool, thread_id)
    return row


async def _sync(pool: asyncpg.Pool, temporal: Client, thread_id: str) -> asyncpg.Record:
    row = await get_thread(pool, thread_id)
    if row["last_run_id"] is None or row["graph_id"] is None:
        return row
    snap = await query_state(temporal, row["graph_id"], str(row["last_run_id"]))
    if snap is None:
        return row
    await save_snapshot(pool, row, snap)
    return await get_thread(pool, thread_id)


async def save_snapshot(pool: asyncpg.Pool, row: asyncpg.Record, snap: dict[str, Any], *,
                        shown: bool = True) -> None:
    """Write a workflow's state into the thread and its runs' statuses.

    ``shown=False`` (a pause handed over by the workflow, not yet shown to any client)
    leaves the thread's ``checkpoint`` — the state a resume without an interrupt id answers
    (:func:`resume_target`) — as it was, so a resume never lands on an interrupt no client
    has read; :func:`overseer.thread_streams.wait_values` and every read of the thread show it.
    """
    status = thread_status(snap)
    wrid = row["last_run_id"]
    async with pool.acquire() as conn, conn.transaction():
        # the thread's row first: a resume's run row is in, or the thread detached, not both
        if await conn.fetchval("SELECT last_run_id FROM agent_threads WHERE thread_id = $1 "
                               "FOR UPDATE", row["thread_id"]) != wrid:
            return  # already detached (this run's ending, a cancel) or given to another run
        for run in await conn.fetch(
                "SELECT run_id, from_offset FROM agent_runs WHERE workflow_run_id = $1 "
                "AND status = ANY($2)", wrid, list(ACTIVE_RUN_STATUSES)):
            await conn.execute("UPDATE agent_runs SET status = $2, updated_at = now() "
                               "WHERE run_id = $1", run["run_id"],
                               segment_status(snap, run["from_offset"]))
        ended = status in ("idle", "error") or snap.get("closed")
        if "values" not in snap:  # e.g. failed before its first state: an ended run detaches
            await conn.execute(
                """UPDATE agent_threads SET status = $2, updated_at = now(),
                       last_run_id = CASE WHEN $4 THEN NULL ELSE last_run_id END,
                       cancelling = CASE WHEN $4 THEN NULL ELSE cancelling END
                   WHERE thread_id = $1 AND last_run_id = $3""",
                row["thread_id"], status, wrid, bool(ended))
            return
        cp = {k: snap.get(k) for k in ("next", "tasks", "interrupts", "checkpoint_id",
                                        "parent_checkpoint_id", "metadata", "created_at")}
        interrupts = {t["id"]: t["interrupts"] for t in snap.get("tasks") or [] if t["interrupts"]}
        if status != "interrupted":
            cp["interrupts"], interrupts = [], {}
            cp["tasks"] = [t for t in cp.get("tasks") or [] if not t.get("interrupts")]
        await conn.execute(
            """UPDATE agent_threads SET status = $2, "values" = $3::jsonb, state = $4::jsonb,
                   checkpoint = CASE WHEN $9 THEN $5::jsonb ELSE checkpoint END,
                   interrupts = $6::jsonb, updated_at = now(),
                   last_run_id = CASE WHEN $7 THEN NULL ELSE last_run_id END,
                   cancelling = CASE WHEN $7 THEN NULL ELSE cancelling END
               WHERE thread_id = $1 AND last_run_id = $8""",
            row["thread_id"], status, json.dumps(snap["values"]), json.dumps(snap["encoded"]),
            json.dumps(cp), json.dumps(interrupts), bool(ended), wrid, shown)


# --- runs ------------------------------------------------------------------------------------


def run_view(row: asyncpg.Record) -> dict[str, Any]:
    """A ``Run`` as the SDK reads it."""
    return {"run_id": str(row["run_id"]), "thread_id": str(row["thread_id"]),
            "assistant_id": row["assistant_id"], "created_at": row["created_at"].isoformat(),
            "updated_at": row["updated_at"].isoformat(), "status": row["status"],
            "metadata": _json(row["metadata"]) or {}, "kwargs": _json(row["kwargs"]) or {},
            "multitask_strategy": row["multitask_strategy"]}


async def get_run(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                  run_id: str) -> asyncpg.Record:
    """The run, its status refreshed from its workflow while it is active.

    Raises:
        NotFoundError: unknown run on this thread (404).
    """
    row = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1 AND thread_id = $2",
                              _uuid(run_id, "run"), _uuid(thread_id))
    if row is None:
        raise NotFoundError(f"unknown run {run_id} on thread {thread_id}")
    if row["status"] == "pending":  # queued: its turn may have come
        await advance_queue(pool, temporal, thread_id)
        row = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1", row["run_id"])
        if row is None:
            raise NotFoundError(f"unknown run {run_id} on thread {thread_id}")
    if row["status"] in ACTIVE_RUN_STATUSES and row["status"] != "pending":
        snap = await query_state(temporal, row["graph_id"], str(row["workflow_run_id"]))
        status = segment_status(snap, row["from_offset"])
        if status != row["status"]:  # unless a cancel or hand-off wrote it meanwhile
            updated = await pool.fetchrow(
                "UPDATE agent_runs SET status = $2, updated_at = now() "
                "WHERE run_id = $1 AND status = $3 RETURNING *", row["run_id"], status,
                row["status"])
            row = updated or await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1",
                                                 row["run_id"])
            assert row is not None  # read by its key just above
    return row


async def list_runs(pool: asyncpg.Pool, thread_id: str, limit: int, offset: int,
                    status: str | None) -> list[asyncpg.Record]:
    """The thread's runs, newest first."""
    await get_thread(pool, thread_id)
    return list(await pool.fetch(
        """SELECT * FROM agent_runs WHERE thread_id = $1 AND ($4::text IS NULL OR status = $4)
           ORDER BY created_at DESC LIMIT $2 OFFSET $3""",
        _uuid(thread_id), limit, offset, status))


async def create_run(pool: asyncpg.Pool, temporal: Client, settings: Settings, *,
                     thread_id: str, body: dict[str, Any], subject: str, role: str,
                     is_admin: bool, check_role: bool = True,
                     run_id: str | None = None,
                     assistant_id: str | None = None) -> asyncpg.Record:
    """Start or queue a run on a thread, or resume its interrupt (see the module docstring).

    A run with input (or ``command.goto``/``update``) is first written to ``agent_runs`` as
    ``pending``, then started by :func:`advance_queue` when the thread is free: at once on an
    idle thread, or, with ``multitask_strategy="enqueue"`` (the default, as on LangGraph's
    Agent Server), when the run before it ends: that run's workflow starts it
    (:func:`hand_off`). The queue lives in Postgres, so a queued run outlives the API
    process that accepted it; one nobody started is started by whichever process next
    observes the thread, or by an API's recovery pass (:func:`sweep_queues`).

    Args:
        pool: the database pool.
        temporal: the Temporal client.
        settings: the process settings.
        thread_id: the thread.
        subject: the caller.
        is_admin: the caller is an admin.
        body: the SDK's run body (``assistant_id``, ``input``, ``command``, ``metadata``,
            ``multitask_strategy``, ``if_not_exists`` …).
        role: the caller's role: ``submitter`` may start runs, ``reviewer`` may resume.
        check_role: False when a deployment's LangGraph ``Auth`` handlers already decided
            who may start and resume runs (its users have no Overseer role).
        run_id: the new run's id (a cron's tick gives one derived from the tick, so a
            retried tick finds its run instead of starting a second); a uuid4 when None.
            A run with this id already on the thread is returned as it is.
        assistant_id: the run's assistant when it is one made through the API
            (:func:`overseer.assistants.run_body` has already applied its config and
            context, and ``body["assistant_id"]`` names its graph); else the graph's own.

    Returns:
        The run row: ``running`` once started, ``pending`` while queued.

    Raises:
        NotFoundError: unknown assistant or thread (the route creates a missing thread for
            ``if_not_exists="create"`` and checks the caller may run on it: issue 29).
        ThreadBusyError: a run is in progress or queued and the strategy is ``reject`` (409).
        NotAwaitingApprovalError: a resume on a thread that waits for nothing (409).
        PermissionDeniedError: the role may not do this (403).
        InvalidRequestError: malformed input or strategy (422).
    """
    from overseer.errors import PermissionDeniedError

    pipeline = resolve_assistant(str(body.get("assistant_id") or ""))
    command = body.get("command") or {}
    resuming = "resume" in command
    if check_role and not is_admin and role != ("reviewer" if resuming else "submitter"):
        raise PermissionDeniedError(
            f"role {role!r} may not {'resume' if resuming else 'start'} runs",
            details={"needs": ["reviewer" if resuming else "submitter"]})
    check_webhook(body.get("webhook"))
    if resuming:
        seen = await get_thread(pool, thread_id)
        if seen["last_run_id"] is not None or not state_view(seen)["next"]:
            return await _resume(pool, temporal, seen, pipeline, body, subject, is_admin)
        # no run waits (its state was updated while paused): as LangGraph, the resume goes
        # to the thread's next tasks, in a new run that starts from its checkpoint
    strategy = body.get("multitask_strategy") or MULTITASK_STRATEGIES[0]
    if strategy not in MULTITASK_STRATEGIES:
        raise InvalidRequestError(f"multitask_strategy must be one of {MULTITASK_STRATEGIES}",
                                  details={"field": "multitask_strategy"})
    given = body.get("checkpoint")
    checkpoint: dict[str, Any] = given if isinstance(given, dict) else {}
    if body.get("checkpoint_id") is None and checkpoint.get("checkpoint_id"):
        body = {**body, "checkpoint_id": checkpoint["checkpoint_id"]}
    if body.get("durability") is not None and body["durability"] not in ("sync", "async", "exit"):
        raise InvalidRequestError("durability must be sync, async or exit",
                                  details={"field": "durability"})
    check_run_options(pipeline, body)
    if run_id is not None:
        known = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1",
                                    uuid.UUID(run_id))
        if known is not None:
            return known
    row = await sync_thread(pool, temporal, thread_id, settings)
    run_id = run_id or str(uuid.uuid4())
    graph_input(pipeline, body, run_id, has_state=row["state"] is not None)  # 422 before queueing
    queued = await pool.fetchval("SELECT count(*) FROM agent_runs WHERE thread_id = $1 "
                                 "AND status = 'pending'", row["thread_id"])
    if row["status"] == "busy" or queued:
        if strategy == "reject":
            raise ThreadBusyError(f"thread {thread_id} has a run in progress",
                                  details={"multitask_strategy": strategy, "queued": queued})
        if strategy in ("interrupt", "rollback"):  # stop the run in progress and the queue
            await pool.execute("UPDATE agent_runs SET status = 'interrupted', updated_at = now() "
                               "WHERE thread_id = $1 AND status = 'pending'", row["thread_id"])
            row = await get_thread(pool, thread_id)
            await cancel_thread_run(pool, temporal, row, subject,
                                    rollback=strategy == "rollback")
    await pool.execute(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   from_offset, kind, status, metadata, kwargs,
                                   multitask_strategy, created_by)
           VALUES ($1, $2, $3, $4, $1, 0, 'start', 'pending', $5::jsonb, $6::jsonb, $7, $8)
           ON CONFLICT (run_id) DO NOTHING""",
        uuid.UUID(run_id), row["thread_id"], assistant_id or assistant_id_of(pipeline.name),
        pipeline.name,
        json.dumps(dict(body.get("metadata") or {})), json.dumps(_kwargs(body)), strategy,
        subject)
    await advance_queue(pool, temporal, thread_id, settings)
    run = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1", uuid.UUID(run_id))
    assert run is not None  # inserted just above
    return run


async def advance_queue(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                        settings: Settings | None = None) -> None:
    """Start the thread's oldest ``pending`` run if the thread is free (idempotent, race-safe).

    The thread row is locked while a run is claimed (``last_run_id`` set to it, status
    ``busy``); the workflow is then started under the run's own id, so two processes
    claiming or starting the same run start one workflow. A claimed run whose workflow
    never started (the process died in between) is started by the next caller. A thread
    paused on an interrupt with runs queued behind it drops the interrupt first, as new
    input on a paused thread does.
    """
    from overseer.settings import get_settings

    settings = settings or get_settings()
    for _ in range(3):
        row = await _sync(pool, temporal, thread_id)
        if row["last_run_id"] is not None:
            claimed = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1 "
                                          "AND status = 'pending'", row["last_run_id"])
            if claimed is not None:
                await _launch(pool, temporal, settings, claimed)
                return
            nxt = await pool.fetchrow("SELECT created_by FROM agent_runs WHERE thread_id = $1 "
                                      "AND status = 'pending' ORDER BY created_at LIMIT 1",
                                      row["thread_id"])
            if row["status"] != "interrupted" or nxt is None:
                return
            await cancel_thread_run(pool, temporal, row, nxt["created_by"] or "queue",
                                    rollback=False)
            continue
        async with pool.acquire() as conn, conn.transaction():
            locked = await conn.fetchrow("SELECT last_run_id FROM agent_threads "
                                         "WHERE thread_id = $1 FOR UPDATE", row["thread_id"])
            if locked is None or locked["last_run_id"] is not None:
                continue
            claimed = await conn.fetchrow(
                "SELECT * FROM agent_runs WHERE thread_id = $1 AND status = 'pending' "
                "ORDER BY created_at, run_id LIMIT 1", row["thread_id"])
            if claimed is None:
                return
            await conn.execute(
                """UPDATE agent_threads SET status = 'busy', last_run_id = $2, graph_id = $3,
                       interrupts = '{}'::jsonb, updated_at = now() WHERE thread_id = $1""",
                row["thread_id"], claimed["run_id"], claimed["graph_id"])
        await _launch(pool, temporal, settings, claimed)
        return


async def sweep_queues(pool: asyncpg.Pool, temporal: Client,
                       settings: Settings | None = None) -> int:
    """One pass over every thread with a queued run (:func:`advance_queue`); how many there were.

    Each API process runs it at start-up and every ``queue_recovery_seconds``: it starts
    queued runs no run handed the thread to (accepted by an API process that died before
    starting them, or whose start Temporal did not answer).
    """
    rows = await pool.fetch("SELECT DISTINCT thread_id FROM agent_runs WHERE status = 'pending'")
    for r in rows:
        try:
            await advance_queue(pool, temporal, str(r["thread_id"]), settings)
        except (OverseerError, RPCError, asyncpg.PostgresError, OSError) as err:
            logger.warning("queued run not started yet", extra={
                "thread_id": str(r["thread_id"]), "error": type(err).__name__})
    return len(rows)


def check_webhook(url: Any) -> None:
    """A run's ``webhook``: None, or an absolute ``http``/``https`` URL with a host.

    Raises:
        InvalidRequestError: anything else (422, ``details.field`` ``webhook``).
    """
    from urllib.parse import urlsplit

    if url is None:
        return
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidRequestError("webhook must be an absolute http or https URL",
                                  details={"field": "webhook"})


async def claim_webhooks(pool: asyncpg.Pool, workflow_run_id: str,
                         claim: str) -> list[dict[str, Any]]:
    """The webhooks due for the workflow's runs that have ended, each claimed once.

    A run (a start or a resume) with a ``webhook`` whose status is final is claimed with
    ``claim`` (the hand-off's own key: the same on a retried hand-off, so a retry gets the
    same list back and no other hand-off gets it at all).

    Returns:
        ``[{"url", "payload", "delivery"}]``: the payload is the run as the SDK reads it plus
        ``values`` (the thread's), ``run_started_at``, ``run_ended_at`` and, for a failed
        run, ``error`` ``{error, message}`` — the Agent Server's webhook body; ``delivery``
        is the run id (one delivery per run).
    """
    rows = await pool.fetch(
        """UPDATE agent_runs SET kwargs = kwargs || jsonb_build_object('webhook_claim', $2::text)
           WHERE workflow_run_id = $1 AND status <> ALL($3) AND kwargs ? 'webhook'
             AND (NOT kwargs ? 'webhook_claim' OR kwargs->>'webhook_claim' = $2)
           RETURNING *""", uuid.UUID(workflow_run_id), claim, list(ACTIVE_RUN_STATUSES))
    due: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: r["created_at"]):
        view = run_view(row)
        view["kwargs"].pop("webhook_claim", None)
        values = _json(await pool.fetchval('SELECT "values" FROM agent_threads '
                                           "WHERE thread_id = $1", row["thread_id"]))
        payload = {**view, "run_started_at": view["created_at"],
                   "run_ended_at": view["updated_at"], "values": values}
        if row["status"] == "error":
            payload["error"] = await _run_error(pool, workflow_run_id)
        due.append({"url": view["kwargs"]["webhook"], "payload": payload,
                    "delivery": view["run_id"]})
    return due


async def hand_off(pool: asyncpg.Pool, temporal: Client, settings: Settings, *,
                   thread_id: str, run_id: str, snapshot: dict[str, Any],
                   pause: bool = False) -> str | None:
    """A thread's run has ended: write its final state to the thread, start the next queued run.

    With ``pause`` the run has stopped at an interrupt instead (its approval is being
    opened): its state and statuses are written (thread ``interrupted``, the runs that
    ended there ``interrupted``) and nothing more. Either way a ``NOTIFY`` on
    :data:`overseer.token_stream.STATE_CHANNEL` wakes the API's ``runs.wait`` callers
    (:func:`overseer.thread_streams.wait_values`), which wait on Postgres, not on the workflow's stream.

    Called by the run's own workflow with its ending (``record_events``' ``hand_off``), so the
    thread's queue moves when Temporal ends a run and not when someone next looks: the
    per-thread ordering the Agent Server's multitask strategies promise, driven by the run
    workflows (issue 25). Idempotent, so a retried call writes nothing twice and starts no
    run twice: the thread is detached only while the ending run is still attached, and
    :func:`advance_queue` claims under the thread's row lock. Does nothing while the API
    is cancelling the run (``agent_threads.cancelling``): :func:`cancel_thread_run` then
    sets the thread's state (a rollback's is the state before the run) and its caller
    starts the next run.

    Args:
        pool: the database pool.
        temporal: the Temporal client (the worker's) that starts the next run.
        settings: the process settings.
        thread_id: the thread (uuid text).
        run_id: the ending run's workflow run id (``agent_threads.last_run_id`` while it ran).
        snapshot: what :meth:`SegmentRunWorkflow.get_thread_state` will answer once the
            ending is published (its last mark ``end`` or ``error``), with ``closed`` set;
            with ``pause``, what it answers at the interrupt.
        pause: the run paused on an interrupt (see above).

    Returns:
        The status the thread was left in, or None when the thread no longer exists.

    Raises:
        asyncpg.PostgresError, OSError: the database is unavailable (the activity retries).
    """
    row = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1",
                              _uuid(thread_id))
    if row is None:
        return None
    if row["cancelling"] is not None and str(row["cancelling"]) == run_id:
        return str(row["status"])  # the API is cancelling this run: it hands the thread on
    if row["last_run_id"] is not None and str(row["last_run_id"]) == run_id:
        await save_snapshot(pool, row, snapshot, shown=not pause)
    await pool.execute("SELECT pg_notify($1, $2)", STATE_CHANNEL, run_id)
    if pause:
        return str(await pool.fetchval("SELECT status FROM agent_threads WHERE thread_id = $1",
                                       row["thread_id"]))
    if await pool.fetchval("SELECT EXISTS (SELECT 1 FROM agent_runs WHERE thread_id = $1 "
                           "AND status = 'pending')", row["thread_id"]):
        try:
            await advance_queue(pool, temporal, thread_id, settings)
        except (OverseerError, RPCError) as err:  # the API's recovery pass starts it later
            logger.warning("queued run not started at hand-off", extra={
                "thread_id": thread_id, "error": type(err).__name__})
    status: str | None = await pool.fetchval(
        "SELECT status FROM agent_threads WHERE thread_id = $1", row["thread_id"])
    return status


def graph_input(pipeline: Pipeline, body: dict[str, Any], run_id: str, *,
                has_state: bool) -> tuple[Any, Any]:
    """``(graph input, its JSON record)`` of a run body: input, or ``Command(goto, update)``.

    No input on a thread with state is ``None``: as on LangGraph, the run goes on from the
    thread's checkpoint (past a breakpoint the run before stopped at); on a new thread no
    input is ``{}``.

    Raises:
        InvalidRequestError: input that is not a JSON object (422).
        pydantic.ValidationError: the pipeline's ``input_model`` refuses a thread's first input.
    """
    from langgraph.types import Command

    from overseer.runs import input_keys

    command = body.get("command") or {}
    if "resume" in command:  # a thread's next tasks, resumed (create_run: no run waits)
        return (Command(resume=command["resume"], goto=_goto(command.get("goto")),
                        update=command.get("update")), {"command": command})
    if command.get("goto") is not None or command.get("update") is not None:
        return (Command(goto=_goto(command.get("goto")), update=command.get("update")),
                {"command": command})
    value = body.get("input")
    if value is None and has_state:
        return None, None  # LangGraph goes on from the thread's checkpoint (a breakpoint's)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise InvalidRequestError("input must be a JSON object", details={"field": "input"})
    if pipeline.input_model is not None and not has_state:
        value = pipeline.input_model.model_validate(value).model_dump(mode="json")
    declared = input_keys(get_registry().builder(pipeline.name))
    extras = {"run_id": run_id, "options": pipeline.options(),
              "metadata": dict(body.get("metadata") or {})}
    value = {**value, **{k: v for k, v in extras.items() if k in declared and k not in value}}
    return value, value


async def _launch(pool: asyncpg.Pool, temporal: Client, settings: Settings,
                  run: asyncpg.Record) -> None:
    """Start the ``SegmentRunWorkflow`` of a claimed run on the thread's checkpoints (idempotent).

    A failure to reach Temporal leaves the run claimed and ``pending``: the next
    :func:`advance_queue` starts it.
    """
    from overseer.run_types import GraphRunInput
    from overseer.runs import run_options, start_run_workflow

    row = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1",
                              run["thread_id"])
    if row is None or row["last_run_id"] != run["run_id"]:
        return
    pipeline = get_registry().get(run["graph_id"])
    run_id, thread_id = str(run["run_id"]), str(run["thread_id"])
    kwargs, metadata = _json(run["kwargs"]) or {}, _json(run["metadata"]) or {}
    body = {**kwargs, "metadata": metadata}
    try:
        value, recorded = graph_input(pipeline, body, run_id, has_state=row["state"] is not None)
    except Exception as err:  # noqa: BLE001 - the input no longer fits the thread: the run fails
        await _fail_unstarted(pool, run, f"{type(err).__name__}: {err}"[:500])
        return
    wid = pipeline.workflow_id(run_id)
    async with pool.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED,
            actor=f"api:{run['created_by']}",
            data={"pipeline": pipeline.name, "workflow_id": wid,
                  "submitted_by": run["created_by"], "idempotency_key": None,
                  "input": {"input": to_jsonable(recorded), "metadata": metadata,
                            "thread_id": thread_id, "agent_server": True}})])
    options = run_options(settings, pipeline.options(), metadata)
    asked = kwargs.get("stream_mode")
    asked = [asked] if isinstance(asked, str) else list(asked or [])
    collected = [m for m in asked if m in SEGMENT_STREAM_MODES]
    if asks_for_messages(asked):
        collected.append("messages")  # tokens as the model makes them (overseer.token_stream)
    if collected:
        options["stream_modes"] = collected  # LangGraph's chunks the segments collect for it
    for key in ("durability", "checkpoint_id"):  # the run's own (validated in create_run)
        if kwargs.get(key):
            options[key] = kwargs[key]
    options.update(segment_options(kwargs))
    own = options.setdefault("graph_config", {})  # who the run is for, as the Agent Server says
    own["configurable"] = {**(own.get("configurable") or {}),
                           "langgraph_auth_user_id": run["created_by"] or ""}
    argument = GraphRunInput(
        run_id=run_id, pipeline=pipeline.name, input=encode(value), options=options,
        metadata=metadata, submitted_by=run["created_by"] or "unknown",
        search_attributes=settings.search_attributes_enabled, thread_id=thread_id)
    delay = float(kwargs.get("after_seconds") or 0)  # Temporal holds the first task until then
    try:
        await start_run_workflow(temporal, settings, argument, workflow_id=wid,
                                 summary=f"{pipeline.name}: thread {thread_id}",
                                 start_delay=timedelta(seconds=delay) if delay else None)
    except RPCError as err:
        logger.warning("queued run not started: Temporal did not answer",
                       extra={"run_id": run_id, "error": err.message})
        return
    await pool.execute("UPDATE agent_runs SET status = 'running', updated_at = now() "
                       "WHERE run_id = $1 AND status = 'pending'", run["run_id"])
    still = await pool.fetchval("SELECT last_run_id FROM agent_threads WHERE thread_id = $1",
                                run["thread_id"])
    if still != run["run_id"]:  # cancelled or deleted while it was being started
        await _cancel_workflow(pool, temporal, pipeline.name, run_id, run["created_by"] or "queue")


async def _fail_unstarted(pool: asyncpg.Pool, run: asyncpg.Record, message: str) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE agent_runs SET status = 'error', updated_at = now(), "
                           "kwargs = kwargs || $2::jsonb WHERE run_id = $1", run["run_id"],
                           json.dumps({"error": {"error": "invalid_request",
                                                 "message": message}}))
        await conn.execute("UPDATE agent_threads SET status = 'idle', last_run_id = NULL, "
                           "updated_at = now() WHERE thread_id = $1 AND last_run_id = $2",
                           run["thread_id"], run["run_id"])


def _goto(goto: Any) -> Any:
    from langgraph.types import Send

    if isinstance(goto, dict) and "node" in goto:
        return Send(goto["node"], goto.get("input"))
    if isinstance(goto, list):
        return [_goto(g) for g in goto]
    return goto if goto is not None else ()


def segment_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A run's own LangGraph options for its segments (``GraphRunInput.options``).

    ``config`` (``configurable``, ``tags``, ``metadata``, ``recursion_limit``), ``context``,
    ``interrupt_before`` / ``interrupt_after`` and ``stream_subgraphs``, as the Agent
    Server passes them to LangGraph (checked by :func:`check_run_options`).
    """
    out: dict[str, Any] = {}
    config = kwargs.get("config") or {}
    own = {k: config[k] for k in ("configurable", "tags", "metadata") if config.get(k)}
    if own:
        out["graph_config"] = own
    if config.get("recursion_limit"):
        out["recursion_limit"] = int(config["recursion_limit"])
    if kwargs.get("context") is not None:
        out["context"] = kwargs["context"]
    for key in ("interrupt_before", "interrupt_after"):
        if kwargs.get(key):
            out[key] = kwargs[key]
    if kwargs.get("stream_subgraphs"):
        out["stream_subgraphs"] = True
    return out


MAX_AFTER_SECONDS = 366 * 24 * 3600
"""The longest a run may wait before it starts (``after_seconds``): a year."""


def check_run_options(pipeline: Pipeline, body: dict[str, Any]) -> None:
    """Refuse run options the graph cannot honour, before the run is queued.

    Raises:
        InvalidRequestError: ``config`` that is not an object or with a ``recursion_limit``
            that is not a positive integer; ``after_seconds`` that is not 0 to
            :data:`MAX_AFTER_SECONDS`; ``interrupt_before`` / ``interrupt_after`` that
            is not ``"*"`` or a list of the graph's nodes (422, ``details.field`` names it).
    """
    config = body.get("config")
    if config is not None and not isinstance(config, dict):
        raise InvalidRequestError("config must be an object", details={"field": "config"})
    delay = body.get("after_seconds")
    if delay is not None and (isinstance(delay, bool) or not isinstance(delay, int | float)
                              or not 0 <= delay <= MAX_AFTER_SECONDS):
        raise InvalidRequestError(f"after_seconds must be a number of seconds from 0 to "
                                  f"{MAX_AFTER_SECONDS}", details={"field": "after_seconds"})
    limit = (config or {}).get("recursion_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise InvalidRequestError("config.recursion_limit must be a positive integer",
                                  details={"field": "config"})
    for key in ("interrupt_before", "interrupt_after"):
        value = body.get(key)
        if not value:
            continue
        nodes = set(get_registry().builder(pipeline.name).nodes)
        if value != "*" and (not isinstance(value, list) or not set(map(str, value)) <= nodes):
            raise InvalidRequestError(
                f'{key} must be "*" or a list of the graph\'s nodes {sorted(nodes)}',
                details={"field": key})


def _kwargs(body: dict[str, Any]) -> dict[str, Any]:
    keep = ("input", "command", "config", "context", "stream_mode", "stream_resumable",
            "stream_subgraphs", "interrupt_before", "interrupt_after", "on_completion",
            "if_not_exists", "checkpoint_id", "durability", "webhook", "after_seconds")
    kwargs: dict[str, Any] = to_jsonable({k: body[k] for k in keep if k in body})
    return kwargs


async def _resume(pool: asyncpg.Pool, temporal: Client, row: asyncpg.Record, pipeline: Pipeline,
                  body: dict[str, Any], subject: str, is_admin: bool) -> asyncpg.Record:
    from overseer.run_types import DecisionInput

    if row["last_run_id"] is None or row["graph_id"] is None:
        raise NotAwaitingApprovalError(f"thread {row['thread_id']} has no pending interrupt",
                                       details={"status": row["status"]})
    graph = get_registry().get(row["graph_id"])
    kind = "approve" if "approve" in graph.decisions else graph.decisions[0]
    interrupt_id, value, more = resume_target(body["command"]["resume"], (
        _json(row["checkpoint"]) or {}).get("interrupts") or [])
    run_id = uuid.uuid4()
    note = f"resumed through the Agent Server API (run {run_id})"
    decision = DecisionInput(decision=kind, resume=value, raw_resume=True, decided_by=subject,
                             is_admin=is_admin, note=note, interrupt_id=interrupt_id,
                             more_resumes=more or None)
    handle = temporal.get_workflow_handle(graph.workflow_id(str(row["last_run_id"])))
    deadline = asyncio.get_running_loop().time() + 10.0
    seen: int | None = None
    recorded = False
    try:
        while True:
            snap = await query_state(temporal, row["graph_id"], str(row["last_run_id"]))
            offset = int((snap or {}).get("published") or 0)
            if seen is not None and offset != seen:  # the run moved on: someone else decided
                raise NotAwaitingApprovalError("the interrupt was already answered",
                                               details={"status": "running"})
            seen = offset
            if not recorded:  # in before the decision, so the run's hand-offs see it
                await pool.execute(
                    """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id,
                                               workflow_run_id, from_offset, kind, status,
                                               metadata, kwargs, multitask_strategy, created_by)
                       VALUES ($1, $2, $3, $4, $5, $6, 'resume', 'running', $7::jsonb,
                               $8::jsonb, $9, $10)""",
                    run_id, row["thread_id"], assistant_id_of(pipeline.name), row["graph_id"],
                    row["last_run_id"], offset, json.dumps(body.get("metadata") or {}),
                    json.dumps(_kwargs(body)), body.get("multitask_strategy") or "reject",
                    subject)
                recorded = True
            try:
                update = await handle.start_update("decide", decision,
                                                   wait_for_stage=WorkflowUpdateStage.ACCEPTED)
                await _applied(temporal, row, update, note)
                break
            except WorkflowUpdateFailedError as err:
                cause = err.cause
                code = cause.type if isinstance(cause, ApplicationError) else None
                # the interrupt is on the stream a moment before its approval opens: wait
                if code == "not_awaiting_approval" and snap and thread_status(snap) != "idle" \
                        and (snap.get("marks") or [{}])[-1].get("event") == "interrupt" and \
                        not snap.get("decided") and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.1)
                    continue
                from overseer.runs import refusal  # the one mapping, as /v1 decides

                raise refusal(cause, row["status"]) from err
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    raise NotAwaitingApprovalError("the thread's run is gone") from err
                raise DependencyUnavailableError("Temporal did not answer") from err
    except BaseException:
        if recorded:  # refused: the run never was
            await pool.execute("DELETE FROM agent_runs WHERE run_id = $1", run_id)
        raise
    async with pool.acquire() as conn, conn.transaction():
        # locked, so the run's ending (hand_off) either saw this run or has not run yet
        attached = await conn.fetchval("SELECT last_run_id FROM agent_threads "
                                       "WHERE thread_id = $1 FOR UPDATE", row["thread_id"])
        run = await conn.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1", run_id)
        # busy, unless a hand-off already ended the run or paused it at its next interrupt
        if attached == row["last_run_id"] and run is not None and run["status"] == "running":
            await conn.execute("UPDATE agent_threads SET status = 'busy', "
                               "interrupts = '{}'::jsonb, updated_at = now() "
                               "WHERE thread_id = $1", row["thread_id"])
    assert run is not None  # inserted above; only a refusal deletes it
    return run


def resume_target(resume: Any,
                  shown: list[dict[str, Any]]) -> tuple[str | None, Any, dict[str, Any]]:
    """``(interrupt id, value, other answers)`` a ``command.resume`` gives, as LangGraph reads it.

    A non-empty dict whose keys are all interrupt ids (32 hex digits, LangGraph's
    ``is_xxh3_128_hexdigest``) names its interrupts: ``{id: value}`` answers ``id``'s approval
    with ``value`` (the gate refuses an id whose approval is not waiting: 409
    ``not_awaiting_approval``). It may name several, in any order, as LangGraph allows: the
    first id is the decision's, the others come back as ``{id: value}`` and are answered
    with it (each must be waiting too). Any other value answers the interrupt the server
    last showed for the thread (the oldest id), so a resume never lands on an interrupt its
    client has not seen.
    """
    if isinstance(resume, dict) and resume and \
            all(isinstance(k, str) and re.fullmatch(r"[0-9a-f]{32}", k) for k in resume):
        first, *others = sorted(resume)
        return first, resume[first], {k: resume[k] for k in others}
    ids = sorted(str(i["id"]) for i in shown if i.get("id"))
    return (ids[0] if ids else None), resume, {}


async def _applied(temporal: Client, row: asyncpg.Record, update: Any, note: str) -> None:
    """Return once the accepted decision is the one the gate took; raise its refusal otherwise.

    Two decisions accepted in the same workflow task both pass the validator; the handler
    then refuses the later one. The update's result comes only once the run has moved on,
    so the gate's current decision (its ``note``) says sooner which one won.

    Raises:
        WorkflowUpdateFailedError: the handler refused the decision.
    """
    result = asyncio.ensure_future(update.result())
    try:
        while True:
            done, _ = await asyncio.wait({result}, timeout=0.05)
            if done:
                result.result()
                return
            snap = await query_state(temporal, row["graph_id"], str(row["last_run_id"]))
            if snap and snap.get("decision_note") == note:
                return
    finally:
        result.add_done_callback(lambda t: t.cancelled() or t.exception())
        if not result.done():
            result.cancel()


async def cancel_thread_run(pool: asyncpg.Pool, temporal: Client, row: asyncpg.Record,
                            subject: str, *, rollback: bool) -> None:
    """Cancel the workflow attached to a thread; its runs become ``interrupted``.

    With ``rollback`` the thread's state stays what it was before that workflow; otherwise
    it keeps the workflow's last saved state. The thread is marked ``cancelling`` first, so
    the workflow's own ending (:func:`hand_off`) leaves the thread to this function; a run
    that ended and handed the thread on before is left as it ended. A rollback waits (at
    most :data:`CLOSE_WAIT_SECONDS`) for the run's segment to stop, then deletes the
    checkpoints the run wrote (:func:`drop_run_checkpoints`); either way the thread's row
    then follows its latest checkpoint (:func:`mirror_checkpointed`).
    """
    if row["last_run_id"] is None or row["graph_id"] is None:
        return
    wrid = str(row["last_run_id"])
    if await pool.fetchval(  # the run's own ending no longer hands the thread on (hand_off)
            "UPDATE agent_threads SET cancelling = last_run_id WHERE thread_id = $1 "
            "AND last_run_id = $2 RETURNING thread_id", row["thread_id"], row["last_run_id"]
    ) is None:
        return  # the run ended and handed the thread on before the cancel: nothing to stop
    await _cancel_workflow(pool, temporal, row["graph_id"], wrid, subject)
    if rollback:  # once its segment has stopped writing, drop what it wrote
        await _closed(temporal, row["graph_id"], wrid)
        async with pool.acquire() as conn:
            await drop_run_checkpoints(conn, str(row["thread_id"]), wrid)
    await mirror_checkpointed(pool, row["thread_id"], row["graph_id"])
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE agent_runs SET status = 'interrupted', updated_at = now() "
                           "WHERE workflow_run_id = $1 AND status = ANY($2)",
                           row["last_run_id"], list(ACTIVE_RUN_STATUSES))
        await conn.execute(  # unless the run's own ending already handed the thread on
            """UPDATE agent_threads SET status = 'idle', last_run_id = NULL, cancelling = NULL,
                   interrupts = '{}'::jsonb, updated_at = now()
               WHERE thread_id = $1 AND (last_run_id = $2 OR last_run_id IS NULL)""",
            row["thread_id"], row["last_run_id"])


CLOSE_WAIT_SECONDS = 30.0
"""How long a rollback waits for a cancelled run's workflow to close (its segment activity
is cancelled at its next heartbeat, a third of the heartbeat time-out at most)."""


async def _closed(temporal: Client, graph_id: str, run_id: str) -> None:
    """Wait until the run's workflow has closed (or :data:`CLOSE_WAIT_SECONDS` passed)."""
    handle = temporal.get_workflow_handle(workflow_id(graph_id, run_id))
    with contextlib.suppress(Exception):  # cancelled, failed, gone, or still closing: go on
        await asyncio.wait_for(handle.result(), CLOSE_WAIT_SECONDS)


async def _cancel_workflow(pool: asyncpg.Pool, temporal: Client, graph_id: str, run_id: str,
                           subject: str) -> None:
    from overseer.runs import cancel_run_workflow

    await cancel_run_workflow(pool, temporal, workflow_id(graph_id, run_id), run_id, subject)


async def cancel_run(pool: asyncpg.Pool, temporal: Client, thread_id: str, run_id: str,
                     subject: str, action: str) -> asyncpg.Record:
    """``POST .../cancel``: stop the run's workflow if the run is still active.

    With ``action="rollback"`` the thread is also put back as the run found it.
    """
    run = await get_run(pool, temporal, thread_id, run_id)
    row = await _sync(pool, temporal, thread_id)
    # a run paused on an interrupt still has its workflow waiting: cancelling drops the interrupt
    if row["status"] in ("busy", "interrupted") and row["last_run_id"] == run["workflow_run_id"]:
        await cancel_thread_run(pool, temporal, row, subject, rollback=action == "rollback")
    elif run["status"] == "pending":  # still queued: it never starts
        await pool.execute("UPDATE agent_runs SET status = 'interrupted', updated_at = now() "
                           "WHERE run_id = $1 AND status = 'pending'", run["run_id"])
    await advance_queue(pool, temporal, thread_id)  # the next queued run, if any
    return await get_run(pool, temporal, thread_id, run_id)


def asks_for_messages(modes: Any) -> bool:
    """Whether stream modes (a name or a list, as a run body has them) ask for messages."""
    asked = [modes] if isinstance(modes, str) else list(modes or [])
    return bool({"messages", "messages-tuple"} & set(asked))


async def _run_error(pool: asyncpg.Pool, workflow_run_id: str) -> dict[str, Any]:
    """``{error, message}`` of a failed run, from its ``run.failed`` event."""
    data = _json(await pool.fetchval(
        "SELECT data FROM events WHERE run_id = $1 AND type = 'run.failed' "
        "ORDER BY seq DESC LIMIT 1", uuid.UUID(workflow_run_id))) or {}
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return {"error": "error", "message": "the run failed"}
    return {"error": error.get("code", "error"), "message": error.get("message", "")}


async def _update_checkpointed(pool: asyncpg.Pool, row: asyncpg.Record, values: Any,
                               as_node: str | None) -> dict[str, Any]:
    """``update_state`` of a thread that runs as segments: LangGraph writes a new checkpoint."""
    from langgraph.errors import InvalidUpdateError

    app = await segments_app(row["graph_id"])
    config: dict[str, Any] = {"configurable": {"thread_id": str(row["thread_id"])}}
    try:
        written = await app.aupdate_state(config, values, as_node=as_node)
    except InvalidUpdateError as err:
        raise InvalidRequestError(f"LangGraph refused the update: {err}",
                                  details={"field": "as_node"}) from err
    await mirror_checkpointed(pool, row["thread_id"], row["graph_id"])
    return {"checkpoint": {**written.get("configurable", {}), "checkpoint_map": None}}


async def update_state(pool: asyncpg.Pool, temporal: Client, thread_id: str, values: Any,
                       as_node: str | None, subject: str) -> dict[str, Any]:
    """``POST /threads/{id}/state``: LangGraph's own ``aupdate_state`` (reducers apply).

    On an idle thread, or one paused on an interrupt, as LangGraph allows. A paused thread's
    run, which waits at the approval gate, is let go first (its approval cancelled,
    ``run.cancelled``, the thread keeping its state), as new input on a paused thread does:
    on LangGraph's servers that run has already ended. As in plain LangGraph, the thread
    then has its next tasks and no pending interrupt; a ``command.resume`` starts a run that
    runs them again, their ``interrupt()`` answered by the value (:func:`create_run`).

    Raises:
        ConflictError: the thread is busy (a run in progress), or has never run.
    """
    row = await get_thread(pool, thread_id)
    if row["status"] == "busy":
        raise ConflictError(f"thread {thread_id} is busy; update its state when idle or paused")
    if _run_holds(row):  # paused on an interrupt: let its run go, keep its state
        await cancel_thread_run(pool, temporal, row, subject, rollback=False)
        row = await get_thread(pool, thread_id)
        if _run_holds(row):  # it moved on meanwhile (someone decided)
            raise ConflictError(f"thread {thread_id} is {row['status']}; update its state "
                                "when idle or paused")
    if row["graph_id"] is None:
        raise ConflictError(f"thread {thread_id} has no graph yet; run it once first")
    return await _update_checkpointed(pool, row, values, as_node)
