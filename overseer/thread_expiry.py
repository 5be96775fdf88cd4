"""What a thread's ttl timer does when it fires: sweep the thread if it is due, else wait.

The timer itself (``ThreadTtlWorkflow``, started and woken by :mod:`overseer.thread_ttl`)
calls :func:`expire` through the ``expire_thread`` activity.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from temporalio.client import Client

from overseer import threads
from overseer.errors import NotFoundError
from overseer.thread_ttl import MIN_WAIT_SECONDS, TTL_SUBJECT


async def expire(pool: asyncpg.Pool, temporal: Client, thread_id: str) -> dict[str, Any]:
    """What a thread's timer does now: sweep the thread if it is due, else say how long to wait.

    Returns:
        ``{"wait": seconds}`` (at least :data:`MIN_WAIT_SECONDS`) while the thread has a
        ttl, or ``{"ended": why}``: ``"gone"`` (no such thread), ``"no_ttl"``, ``"deleted"``.
        After ``keep_latest`` the answer is a wait (``{"wait", "pruned": True}``).
    """
    row = await pool.fetchrow(
        """SELECT status, ttl_minutes, ttl_strategy,
                  extract(epoch FROM greatest(updated_at, coalesce(ttl_from, updated_at))
                          + ttl_minutes * interval '1 minute' - now()) AS left_seconds
           FROM agent_threads WHERE thread_id = $1""", threads.parse_uuid(thread_id))
    if row is None:
        return {"ended": "gone"}
    if row["ttl_minutes"] is None:
        return {"ended": "no_ttl"}
    full = row["ttl_minutes"] * 60.0
    if row["left_seconds"] > 0:
        return {"wait": max(float(row["left_seconds"]), MIN_WAIT_SECONDS)}
    if row["status"] == "busy":
        return {"wait": max(full, MIN_WAIT_SECONDS)}
    try:
        if row["ttl_strategy"] == "delete":
            await threads.delete_thread(pool, temporal, thread_id, TTL_SUBJECT)
            return {"ended": "deleted"}
        await threads.prune_thread(pool, temporal, thread_id, "keep_latest", TTL_SUBJECT)
    except NotFoundError:  # deleted by someone else meanwhile
        return {"ended": "gone"}
    await pool.execute("UPDATE agent_threads SET ttl_from = now() WHERE thread_id = $1",
                       threads.parse_uuid(thread_id))
    return {"wait": max(full, MIN_WAIT_SECONDS), "pruned": True}
