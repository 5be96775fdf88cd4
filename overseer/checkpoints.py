"""A thread's LangGraph checkpoints as the API reads and copies them (``AsyncPostgresSaver``'s tables).

The segments (:mod:`overseer.runtime.segments`) write a thread's state, one checkpoint per
superstep, with LangGraph's own Postgres checkpointer on Overseer's database. The API reads
them through the same compiled graph (:func:`segments_app`), copies a thread's rows for
``threads.copy`` and a retried run (:func:`copy_checkpoints`), and rewinds a thread to
before a run for a ``rollback`` (:func:`drop_run_checkpoints`).
"""

from __future__ import annotations

from typing import Any

from overseer.settings import Settings, get_settings


async def segments_app(pipeline: str, settings: Settings | None = None) -> Any:
    """The graph compiled with LangGraph's Postgres checkpointer, in this process.

    The API's view of a thread that runs as segments: its state, history and updates are
    LangGraph's own.
    """
    from overseer.compiled_graphs import compiled

    return await compiled(pipeline, database_url=str((settings or get_settings()).database_url))


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
    :data:`overseer.compiled_graphs.RUN_ID_KEY`), so what is left is the thread as the run
    found it. The run's channel blobs stay (unreferenced: LangGraph's versions never repeat).

    Returns:
        How many checkpoints were deleted.
    """
    from overseer.run_types import RUN_ID_KEY

    ids = [r["checkpoint_id"] for r in await conn.fetch(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = $1 AND metadata->>$2 = $3",
        thread_id, RUN_ID_KEY, run_id)]
    if ids:
        await conn.execute("DELETE FROM checkpoint_writes WHERE thread_id = $1 "
                           "AND checkpoint_id = ANY($2::text[])", thread_id, ids)
        await conn.execute("DELETE FROM checkpoints WHERE thread_id = $1 "
                           "AND checkpoint_id = ANY($2::text[])", thread_id, ids)
    return len(ids)


def checkpoint_view(thread_id: str, state: Any) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the SDK reads a ``ThreadState``.

    A snapshot read with ``subgraphs=True`` carries, on each task that runs a subgraph, that
    subgraph's own snapshot: it becomes the task's ``state``, shaped the same way
    (recursively), as the Agent Server gives it. A subgraph's checkpoint names its
    ``checkpoint_ns`` (``"<node>:<task id>"``) and LangGraph's ``checkpoint_map``; the root's
    are ``""`` and ``None``.
    """
    from langgraph.types import StateSnapshot

    from overseer.graph_state import snapshot_of

    snap = snapshot_of(state)
    conf = (state.config or {}).get("configurable") or {}
    ns, checkpoint_map = conf.get("checkpoint_ns") or "", conf.get("checkpoint_map") or None
    tasks = [{**view, "state": checkpoint_view(thread_id, task.state)}
             if isinstance(task.state, StateSnapshot) else view
             for view, task in zip(snap["tasks"], state.tasks, strict=True)]
    created = snap["created_at"]
    return {"values": snap["values"], "next": snap["next"], "tasks": tasks,
            "interrupts": snap["interrupts"], "metadata": snap["metadata"],
            "created_at": created.isoformat() if hasattr(created, "isoformat") else created,
            "checkpoint": {"thread_id": thread_id, "checkpoint_ns": ns,
                           "checkpoint_id": snap["checkpoint_id"],
                           "checkpoint_map": checkpoint_map},
            "parent_checkpoint": ({"thread_id": thread_id, "checkpoint_ns": ns,
                                   "checkpoint_id": snap["parent_checkpoint_id"],
                                   "checkpoint_map": None}
                                  if snap["parent_checkpoint_id"] else None)}
