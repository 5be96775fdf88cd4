"""Agent Server threads: their rows, their state and their history (the routes: ``routes/agent_threads.py``).

A *thread*'s graph state, its checkpoints (one per superstep) and its history are
LangGraph's own, in ``AsyncPostgresSaver``'s tables, written by the run's segments
(:mod:`overseer.runtime.segments`, read through :mod:`overseer.checkpoints`). Its row in
``agent_threads`` holds its owner, its metadata, its status and a copy of its latest
checkpoint (``values``, ``state``, ``checkpoint``) for thread search and ``GET
/threads/{id}``; ``last_run_id`` names the workflow attached to it while a run holds it.
A *run* is a row in ``agent_runs`` that reads one stretch of a ``SegmentRunWorkflow``'s
durable stream.

The jobs around a thread, one module each:

- this module: the rows (create, read, search, copy, prune, delete) and the states read
  from its checkpoints;
- :mod:`overseer.run_body`: a run's request body, checked and turned into graph input;
- :mod:`overseer.thread_sync`: the row follows the workflow attached to it, and a cancel
  detaches it;
- :mod:`overseer.thread_queue`: runs queued on a thread start in turn, handed on by the
  run before (``multitask_strategy="enqueue"``);
- :mod:`overseer.thread_runs`: what a client does to a thread's runs (create, resume,
  cancel, update the state);
- :mod:`overseer.thread_streams`: a run's stretch of the stream, as the SDK reads it.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, cast

import asyncpg
from temporalio.client import Client

from overseer import access, thread_ttl
from overseer.checkpoints import checkpoint_view, copy_checkpoints, segments_app
from overseer.cron_schedules import drop_schedules
from overseer.errors import ConflictError, InvalidRequestError, NotFoundError
from overseer.registry import get_registry
from overseer.runs import cancel_run_workflow
from overseer.settings import Settings, get_settings
from overseer.token_stream import DELETE_THREAD_TOKENS

RUN_ENDINGS = {"interrupt": "interrupted", "end": "success", "error": "error"}


ACTIVE_RUN_STATUSES = ("pending", "running")


def parse_uuid(value: str, what: str = "thread") -> uuid.UUID:
    """A thread's (or ``what``'s) id as a uuid.

    Raises:
        NotFoundError: not a uuid, so no such thread (404).
    """
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFoundError(f"unknown {what} {value}") from None


def parse_json(value: Any) -> Any:
    """A JSON column's value: asyncpg gives ``jsonb`` as text; None stays None."""
    if value is None:
        return None
    return json.loads(value) if isinstance(value, str) else value


def thread_view(row: asyncpg.Record) -> dict[str, Any]:
    """A ``Thread`` as the SDK reads it."""
    return {"thread_id": str(row["thread_id"]), "created_at": row["created_at"].isoformat(),
            "updated_at": row["updated_at"].isoformat(), "metadata": parse_json(row["metadata"]) or {},
            "status": row["status"], "values": parse_json(row["values"]),
            "interrupts": parse_json(row["interrupts"]) or {}}


def run_view(row: asyncpg.Record) -> dict[str, Any]:
    """A ``Run`` as the SDK reads it."""
    return {"run_id": str(row["run_id"]), "thread_id": str(row["thread_id"]),
            "assistant_id": row["assistant_id"], "created_at": row["created_at"].isoformat(),
            "updated_at": row["updated_at"].isoformat(), "status": row["status"],
            "metadata": parse_json(row["metadata"]) or {}, "kwargs": parse_json(row["kwargs"]) or {},
            "multitask_strategy": row["multitask_strategy"]}


def workflow_id(graph_id: str, run_id: str) -> str:
    """``<graph>-<run_id>``: the workflow behind an Overseer run."""
    return get_registry().get(graph_id).workflow_id(run_id)


def run_holds(row: asyncpg.Record) -> bool:
    """True while a run holds the thread's state: in progress, or paused on an interrupt.

    A thread ``interrupted`` at a breakpoint (its run ended) is held by nobody.
    """
    return row["status"] == "busy" or (row["status"] == "interrupted"
                                       and row["last_run_id"] is not None)


def parse_supersteps(supersteps: Any, metadata: dict[str, Any]) -> tuple[str, list[list[Any]]]:
    """``threads.create``'s ``supersteps`` as LangGraph's ``abulk_update_state`` takes them.

    Each superstep is ``{"updates": [{"values", "command"?, "as_node"}, …]}``: an update's
    ``command`` (``{update, goto, resume}``) is applied instead of its ``values`` when given,
    as on the Agent Server. The graph is the thread's ``metadata.graph_id`` (the SDK's
    ``graph_id=``).

    Returns:
        ``(graph id, [[StateUpdate, …], …])``.

    Raises:
        InvalidRequestError: not a list of such supersteps, or no registered
            ``metadata.graph_id`` (422, ``details.field``).
    """
    from langgraph.types import Command, StateUpdate

    graph_id = metadata.get("graph_id")
    if not isinstance(graph_id, str) or graph_id not in get_registry().names():
        raise InvalidRequestError("supersteps need metadata.graph_id, a graph of this server "
                                  "(the SDK's graph_id=)", details={"field": "metadata.graph_id"})
    steps: list[list[Any]] = []
    for step in supersteps if isinstance(supersteps, list) else [None]:
        updates = step.get("updates") if isinstance(step, dict) else None
        if not isinstance(updates, list) or not all(isinstance(u, dict) for u in updates):
            raise InvalidRequestError('each superstep must be {"updates": [{"values", '
                                      '"as_node"}, …]}', details={"field": "supersteps"})
        steps.append([StateUpdate(  # LangGraph applies a Command too (types say dict only)
            cast(Any, Command(update=u["command"].get("update"), resume=u["command"].get("resume"),
                              goto=u["command"].get("goto") or ()))
            if isinstance(u.get("command"), dict) else u.get("values"),
            u.get("as_node")) for u in updates])
    return graph_id, steps


async def _apply_supersteps(pool: asyncpg.Pool, row: asyncpg.Record, graph_id: str,
                            steps: list[list[Any]]) -> asyncpg.Record:
    """Write a new thread's ``supersteps`` as LangGraph checkpoints and mirror them in its row.

    The thread becomes ``interrupted`` when its state has next tasks (as after a breakpoint:
    a run with no input goes on from there), else ``idle``. If LangGraph refuses an update,
    the thread is deleted again, so a refused create leaves nothing behind.

    Raises:
        InvalidRequestError: LangGraph refused an update (an unknown ``as_node``, a value its
            state cannot take …) (422, ``details.field="supersteps"``).
    """
    from langgraph.errors import InvalidUpdateError

    tid = str(row["thread_id"])
    app = await segments_app(graph_id)
    try:
        await app.abulk_update_state({"configurable": {"thread_id": tid}}, steps)
    except (InvalidUpdateError, ValueError, TypeError, KeyError) as err:
        await pool.execute(_DELETE_THREAD, row["thread_id"], tid)
        raise InvalidRequestError(f"LangGraph refused the supersteps: {err}",
                                  details={"field": "supersteps"}) from err
    await mirror_checkpointed(pool, row["thread_id"], graph_id, status_from_next=True)
    updated = await pool.fetchrow("UPDATE agent_threads SET graph_id = $2 WHERE thread_id = $1 "
                                  "RETURNING *", row["thread_id"], graph_id)
    assert updated is not None  # created just before
    return updated


async def create_thread(pool: asyncpg.Pool, *, thread_id: str | None, metadata: dict[str, Any],
                        if_exists: str | None, subject: str, scope: access.Scope,
                        supersteps: Any = None, ttl: tuple[float, str] | None = None,
                        temporal: Client | None = None,
                        settings: Settings | None = None) -> asyncpg.Record:
    """Create a thread owned by ``subject``.

    Args:
        pool: the database.
        thread_id: the id to give it (a new uuid4 when None).
        metadata: its metadata.
        if_exists: ``raise`` (default) or ``do_nothing`` when the id is taken.
        subject: its owner.
        scope: what the caller may read (:mod:`overseer.access`): ``do_nothing`` answers
            with an existing thread only inside it.
        supersteps: state to start from (:func:`parse_supersteps`), written into a new
            thread only (an existing one that ``do_nothing`` answers with is left as it is).
        ttl: ``(minutes, strategy)`` (:func:`overseer.ttl_options.parse_ttl`) for a new thread,
            counted from now; without one, the deployment's default
            (:attr:`overseer.registry.Registry.thread_ttl`), if any.
        temporal: starts a new thread's ttl timer (:func:`overseer.thread_ttl.watch`);
            ``None`` only where no thread with a ttl can be made (tests).
        settings: the task queue for that timer (the process's settings when None).

    Raises:
        ConflictError: the id is taken and ``if_exists`` is not ``do_nothing``, or it is
            taken by a thread outside ``scope`` (409; never its content).
        InvalidRequestError: ``supersteps`` refused (:func:`parse_supersteps`,
            :func:`_apply_supersteps`; 422).
    """
    steps = parse_supersteps(supersteps, metadata) if supersteps else None
    tid = parse_uuid(thread_id) if thread_id else uuid.uuid4()
    minutes, strategy = thread_ttl.new_thread_ttl(ttl)
    row = await pool.fetchrow(
        """INSERT INTO agent_threads (thread_id, metadata, created_by, ttl_minutes, ttl_strategy,
                                      ttl_from)
           VALUES ($1, $2::jsonb, $3, $4, $5, CASE WHEN $4::float8 IS NULL THEN NULL ELSE now() END)
           ON CONFLICT (thread_id) DO NOTHING RETURNING *""",
        tid, json.dumps(metadata), subject, minutes, strategy)
    if row is not None:
        if steps is not None:  # a refusal deletes the thread again: no timer for it yet
            row = await _apply_supersteps(pool, row, *steps)
        if minutes is not None and temporal is not None:
            await thread_ttl.watch(temporal, settings or get_settings(), row["thread_id"])
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
    row = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1", parse_uuid(thread_id))
    if row is None:
        raise NotFoundError(f"unknown thread {thread_id}")
    return row


THREAD_SORT_COLUMNS = {"thread_id": "thread_id", "status": "status",
                       "created_at": "created_at", "updated_at": "updated_at",
                       "state_updated_at": "updated_at"}
"""``threads.search``'s ``sort_by`` values (the SDK's ``ThreadSortBy``) and the column each
orders by: a thread's row changes whenever its state does, so ``state_updated_at`` is
``updated_at``."""


EXTRACT_ROOTS = frozenset({"values", "metadata", "config", "interrupts"})
"""What a ``threads.search`` ``extract`` path may start with (the thread's JSON fields)."""
MAX_EXTRACT_PATHS = 10
"""How many paths one ``extract`` may name, as on the Agent Server."""
_EXTRACT_STEP = re.compile(r"\.([^.\[\]]+)|\[(-?\d+)\]")


def parse_extract(extract: Any, reserved: frozenset[str]) -> dict[str, list[str | int]]:
    """``threads.search``'s ``extract`` (``{alias: "values.messages[-1].content"}``) parsed.

    A path is a root (:data:`EXTRACT_ROOTS`) followed by ``.key`` and ``[index]`` steps
    (a negative index counts from the end).

    Returns:
        ``{alias: [root, step, …]}``, each step a key (str) or an index (int).

    Raises:
        InvalidRequestError: not an object; more than :data:`MAX_EXTRACT_PATHS` paths; an
            alias that is not an identifier or names a thread field (``reserved``); a path
            that is empty, starts elsewhere, or has a step that is neither (422).
    """
    if not isinstance(extract, dict):
        raise InvalidRequestError("extract must be an object of alias: path",
                                  details={"field": "extract"})
    if len(extract) > MAX_EXTRACT_PATHS:
        raise InvalidRequestError(f"extract may name at most {MAX_EXTRACT_PATHS} paths",
                                  details={"field": "extract"})
    parsed: dict[str, list[str | int]] = {}
    for alias, path in extract.items():
        if not alias.isidentifier() or alias in reserved:
            raise InvalidRequestError(
                f"extract alias {alias!r} must be an identifier and not a thread field "
                f"({sorted(reserved)})", details={"field": "extract"})
        root = path.split(".")[0].split("[")[0] if isinstance(path, str) else None
        if root not in EXTRACT_ROOTS:
            raise InvalidRequestError(
                f"extract path {path!r} must start with one of {sorted(EXTRACT_ROOTS)}",
                details={"field": "extract"})
        rest, steps = path[len(root):], cast(list[str | int], [root])
        pos = 0
        while pos < len(rest):
            step = _EXTRACT_STEP.match(rest, pos)
            if step is None:
                raise InvalidRequestError(f"extract path {path!r}: cannot read {rest[pos:]!r}",
                                          details={"field": "extract"})
            steps.append(step[1] if step[1] is not None else int(step[2]))
            pos = step.end()
        parsed[alias] = steps
    return parsed


def extracted(thread: dict[str, Any], paths: dict[str, list[str | int]]) -> dict[str, Any]:
    """Each alias's value in a thread view (:func:`thread_view`), ``None`` where a path ends.

    Args:
        thread: a thread as the SDK reads it.
        paths: :func:`parse_extract`'s answer.
    """
    out: dict[str, Any] = {}
    for alias, (root, *steps) in paths.items():
        value: Any = thread.get(str(root))
        for step in steps:
            if isinstance(step, int) and isinstance(value, list) and -len(value) <= step < len(value):
                value = value[step]
            elif isinstance(step, str) and isinstance(value, dict):
                value = value.get(step)
            else:
                value = None
            if value is None:
                break
        out[alias] = value
    return out


async def search_threads(pool: asyncpg.Pool, *, metadata: dict[str, Any] | None,
                         status: str | None, ids: list[str] | None, limit: int,
                         offset: int, scope: access.Scope, values: Any = None,
                         sort_by: str | None = None,
                         sort_order: str | None = None) -> list[asyncpg.Record]:
    """Threads filtered by metadata and values containment, status and ids; newest first.

    Only threads in ``scope`` (the caller's, :mod:`overseer.access`) are searched: the
    condition is part of the query, so ``limit`` and ``offset`` count visible threads.
    ``sort_by`` (:data:`THREAD_SORT_COLUMNS`, default ``updated_at``) and ``sort_order``
    (``asc`` | ``desc``, default ``desc``) order them, ties by ``thread_id``.

    Raises:
        InvalidRequestError: an unknown ``sort_by`` or ``sort_order`` (422).
    """
    sort_by, sort_order = sort_by or "updated_at", sort_order or "desc"
    if not isinstance(sort_by, str) or sort_by not in THREAD_SORT_COLUMNS:
        raise InvalidRequestError(f"sort_by must be one of {sorted(THREAD_SORT_COLUMNS)}",
                                  details={"field": "sort_by"})
    if sort_order not in ("asc", "desc"):
        raise InvalidRequestError('sort_order must be "asc" or "desc"',
                                  details={"field": "sort_order"})
    clauses: list[str] = ["metadata @> $1::jsonb"]
    args: list[Any] = [json.dumps(metadata or {})]
    clauses.append(scope.sql(args, owner_column="created_by", metadata_column="metadata"))
    if values:
        args.append(json.dumps(values))
        clauses.append(f'"values" @> ${len(args)}::jsonb')
    if status:
        args.append(status)
        clauses.append(f"status = ${len(args)}")
    if ids:
        args.append([parse_uuid(i) for i in ids])
        clauses.append(f"thread_id = ANY(${len(args)})")
    args += [limit, offset]
    order = f"{THREAD_SORT_COLUMNS[sort_by]} {sort_order.upper()}"
    return list(await pool.fetch(
        f"SELECT * FROM agent_threads WHERE {' AND '.join(clauses)} ORDER BY {order}, thread_id "
        f"LIMIT ${len(args) - 1} OFFSET ${len(args)}", *args))


_THREAD_ROWS = f"""tokens AS ({DELETE_THREAD_TOKENS}),
     thread AS (DELETE FROM agent_threads WHERE thread_id = $1),
     crons AS (DELETE FROM agent_crons WHERE thread_id = $1 RETURNING cron_id)"""
_CHECKPOINT_ROWS = """writes AS (DELETE FROM checkpoint_writes WHERE thread_id = $2),
     blobs AS (DELETE FROM checkpoint_blobs WHERE thread_id = $2),
     checkpoints AS (DELETE FROM checkpoints WHERE thread_id = $2),"""
_CRON_IDS = "SELECT coalesce(array_agg(cron_id), '{}') FROM crons"
_DELETE_THREAD_NEVER_RAN = f"WITH {_THREAD_ROWS} {_CRON_IDS}"
""":func:`delete_thread`'s statement: the thread's tokens, its row (its runs go with it) and its
crons; it answers the crons' ids."""
_DELETE_THREAD = f"WITH {_CHECKPOINT_ROWS} {_THREAD_ROWS} {_CRON_IDS}"
"""The same for a thread that has run: LangGraph's checkpoints, blobs and writes go too
(``$2``: the thread's id as LangGraph's tables keep it, text)."""


async def delete_thread(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                        subject: str) -> None:
    """Delete a thread, its runs and its crons; a workflow still attached to it is cancelled first.

    It also loses its LangGraph checkpoints, blobs and writes, and the tokens its runs
    streamed; its ttl timer, if it has one, is woken to end.
    """
    row = await get_thread(pool, thread_id)
    if row["last_run_id"] is not None and row["status"] in ("busy", "interrupted"):
        run_id = str(row["last_run_id"])
        await cancel_run_workflow(pool, temporal, workflow_id(row["graph_id"], run_id), run_id,
                                  subject)
    # one statement each, so its parts commit together
    if row["graph_id"] is not None:
        await segments_app(row["graph_id"])  # LangGraph's tables exist
        crons = await pool.fetchval(_DELETE_THREAD, row["thread_id"], str(row["thread_id"]))
    else:  # a thread that never ran has no checkpoints
        crons = await pool.fetchval(_DELETE_THREAD_NEVER_RAN, row["thread_id"])
    if crons:  # the thread's crons go with it, their schedules too
        await drop_schedules(temporal, crons)
    if row["ttl_minutes"] is not None and subject != thread_ttl.TTL_SUBJECT:
        await thread_ttl.wake(temporal, row["thread_id"])  # its timer ends now, not when due


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


async def copy_thread(pool: asyncpg.Pool, thread_id: str, *, temporal: Client | None = None,
                      settings: Settings | None = None) -> asyncpg.Record:
    """``POST /threads/{id}/copy``: a new idle thread with the metadata, state and checkpoints.

    The copy keeps the thread's owner (``created_by`` and the metadata an ``Auth`` handler
    put there), whoever asked for it, and its ttl (strategy and minutes, counted from the
    copy's creation); a thread without one gives its copy the deployment's default
    (:attr:`overseer.registry.Registry.thread_ttl`), as every new thread gets. A copy with a
    ttl has its own timer (:func:`overseer.thread_ttl.watch`; ``temporal`` starts it,
    ``settings`` names its task queue: the process's when None).

    Raises:
        ConflictError: the thread is busy or paused (its state lives in a workflow then).
    """
    row = await get_thread(pool, thread_id)
    if run_holds(row):
        raise ConflictError(f"thread {thread_id} is {row['status']}; copy it when idle")
    segments = row["graph_id"] is not None
    if segments:
        await segments_app(row["graph_id"])  # LangGraph's tables exist
    new_id = uuid.uuid4()
    async with pool.acquire() as conn, conn.transaction():
        if segments:
            await copy_checkpoints(conn, str(row["thread_id"]), str(new_id))
        minutes, strategy = thread_ttl.new_thread_ttl(
            (row["ttl_minutes"], row["ttl_strategy"]) if row["ttl_minutes"] is not None else None)
        await conn.execute(
            """INSERT INTO agent_threads (thread_id, metadata, status, graph_id, "values", state,
                                          checkpoint, created_by, ttl_minutes, ttl_strategy,
                                          ttl_from)
               SELECT $2, metadata, status, graph_id, "values", state, checkpoint, created_by,
                      $3, $4, CASE WHEN $3::float8 IS NULL THEN NULL ELSE now() END
               FROM agent_threads WHERE thread_id = $1""",
            row["thread_id"], new_id, minutes, strategy)
    if minutes is not None and temporal is not None:
        await thread_ttl.watch(temporal, settings or get_settings(), new_id)
    return await get_thread(pool, str(new_id))


async def mirror_checkpointed(pool: asyncpg.Pool, thread_id: Any, graph_id: str, *,
                              status_from_next: bool = False) -> None:
    """Write the thread's latest LangGraph checkpoint into its ``agent_threads`` row.

    The row's ``values``/``state``/``checkpoint`` are what thread search and ``GET
    /threads/{id}`` show; they follow the checkpointer (a pause held back for its first
    reader, ``paused_checkpoint``, is dropped: this checkpoint supersedes it).

    ``status_from_next`` (a state written with no run attached: an update, supersteps): the
    thread becomes ``interrupted`` when the checkpoint has next tasks (as after a
    breakpoint: a run with no input goes on from there), else ``idle``, as the Agent Server
    sets it after a state update; never while a run is attached (``last_run_id``).
    """
    from overseer.graph_state import snapshot_of

    app = await segments_app(graph_id)
    snap = snapshot_of(await app.aget_state({"configurable": {"thread_id": str(thread_id)}}))
    empty = snap["checkpoint_id"] is None
    status = ("interrupted" if snap["next"] else "idle") if status_from_next else None
    await pool.execute(
        """UPDATE agent_threads SET "values" = $2::jsonb, state = $3::jsonb,
               checkpoint = $4::jsonb, paused_checkpoint = NULL, updated_at = now(),
               status = CASE WHEN last_run_id IS NULL THEN coalesce($5, status) ELSE status END
           WHERE thread_id = $1""",
        thread_id, None if empty else json.dumps(snap["values"]),
        None if empty else json.dumps(snap["encoded"]),
        None if empty else json.dumps({k: snap.get(k) for k in (
            "next", "tasks", "interrupts", "checkpoint_id", "parent_checkpoint_id", "metadata",
            "created_at")}, default=str), status)


def state_view(row: asyncpg.Record) -> dict[str, Any]:
    """The thread's current ``ThreadState``."""
    cp = parse_json(row["checkpoint"]) or {}
    tid = str(row["thread_id"])
    return {"values": parse_json(row["values"]) or {}, "next": cp.get("next", []),
            # a task as the Agent Server lists it, also in a row mirrored before it had
            # every key (RemoteGraph reads "state" and "checkpoint" unconditionally)
            "tasks": [{"path": [], "checkpoint": None, "state": None, **t}
                      for t in cp.get("tasks", [])], "interrupts": cp.get("interrupts", []),
            "metadata": cp.get("metadata", {}), "created_at": cp.get("created_at"),
            "checkpoint": {"thread_id": tid, "checkpoint_ns": "",
                           "checkpoint_id": cp.get("checkpoint_id"), "checkpoint_map": None},
            "parent_checkpoint": ({"thread_id": tid, "checkpoint_ns": "",
                                   "checkpoint_id": cp["parent_checkpoint_id"],
                                   "checkpoint_map": None}
                                  if cp.get("parent_checkpoint_id") else None)}


async def state_at(pool: asyncpg.Pool, thread_id: str, checkpoint_id: str | None, *,
                   checkpoint_ns: str = "", subgraphs: bool = False) -> dict[str, Any]:
    """The thread's state at a saved checkpoint, as LangGraph's ``aget_state`` reads it.

    Args:
        pool: the database.
        thread_id: the thread (its owner was checked by the caller).
        checkpoint_id: the checkpoint; ``None`` with a ``checkpoint_ns`` reads that
            namespace's latest (a task's ``checkpoint``, which names no id).
        checkpoint_ns: ``""`` for the graph itself, ``"<node>:<task id>"`` for a subgraph.
        subgraphs: also read the state of each task's subgraph (``tasks[i].state``).

    Raises:
        NotFoundError: no such checkpoint on the thread (404).
    """
    row = await get_thread(pool, thread_id)
    name = checkpoint_id or checkpoint_ns
    if row["graph_id"] is None:
        raise NotFoundError(f"unknown checkpoint {name}")
    app = await segments_app(row["graph_id"])
    configurable = {"thread_id": str(row["thread_id"]), "checkpoint_ns": checkpoint_ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    try:
        state = await app.aget_state({"configurable": configurable}, subgraphs=subgraphs)
    except ValueError as err:  # LangGraph: "Subgraph <name> not found"
        raise NotFoundError(f"unknown checkpoint {name}: {err}") from err
    if not state.config or not state.values and not state.next:
        raise NotFoundError(f"unknown checkpoint {name}")
    return checkpoint_view(str(row["thread_id"]), state)


async def history(pool: asyncpg.Pool, thread_id: str, limit: int,
                  before: str | None = None, *, metadata: dict[str, Any] | None = None,
                  checkpoint_ns: str = "") -> list[dict[str, Any]]:
    """The thread's checkpoints, newest first.

    LangGraph's own: one per superstep (and per state update).

    Args:
        pool: the database.
        thread_id: the thread (its owner was checked by the caller).
        limit: at most this many.
        before: only checkpoints older than this ``checkpoint_id``.
        metadata: only checkpoints whose metadata contains these pairs (LangGraph's
            ``filter``, e.g. ``{"source": "loop", "step": 1}``).
        checkpoint_ns: a subgraph's history (a task's ``checkpoint.checkpoint_ns``); the
            graph's own by default.
    """
    row = await get_thread(pool, thread_id)
    if row["graph_id"] is None:
        return []
    app = await segments_app(row["graph_id"])
    tid = str(row["thread_id"])
    before_config = {"configurable": {"thread_id": tid, "checkpoint_ns": checkpoint_ns,
                                      "checkpoint_id": before}} if before else None
    try:
        return [checkpoint_view(tid, s) async for s in app.aget_state_history(
            {"configurable": {"thread_id": tid, "checkpoint_ns": checkpoint_ns}},
            filter=metadata or None, limit=limit, before=before_config)]
    except ValueError as err:  # LangGraph: "Subgraph <name> not found"
        raise NotFoundError(f"unknown checkpoint namespace {checkpoint_ns}: {err}") from err


STATE_FIELDS = frozenset({"values", "next", "tasks", "checkpoint", "metadata", "created_at",
                          "parent_checkpoint", "interrupts"})
"""What a ``ThreadState``'s ``select`` may name (the SDK's ``ThreadStateSelectField``),
besides ``values.<key>``."""


def check_state_select(select: Any) -> list[str] | None:
    """A ``get_state`` / ``get_history`` ``select``, checked: ``None`` for every field.

    Raises:
        InvalidRequestError: not a list of :data:`STATE_FIELDS` and ``values.<key>`` (422).
    """
    if select is None or select == []:
        return None
    if not isinstance(select, list) or not all(
            isinstance(f, str) and (f in STATE_FIELDS or f.startswith("values.") and len(f) > 7)
            for f in select):
        raise InvalidRequestError(f"select must be a list of {sorted(STATE_FIELDS)} or "
                                  "values.<key>", details={"field": "select"})
    return list(select)


def select_state(state: dict[str, Any], select: list[str] | None) -> dict[str, Any]:
    """Only the fields ``select`` names (:func:`check_state_select`); all of them for None.

    ``values.<key>`` keeps that key of ``values`` (several may be named; ``values`` itself
    keeps them all); a key the state has not is left out.
    """
    if select is None:
        return state
    out = {f: state[f] for f in select if f in state}
    keys = [f[len("values."):] for f in select if f.startswith("values.")]
    if keys and "values" not in select:
        values = state.get("values")
        out["values"] = {k: values[k] for k in keys if k in values} \
            if isinstance(values, dict) else values
    return out

