"""A thread's time-to-live (``threads.create`` / ``threads.update`` ``ttl``), kept by a Temporal timer.

The Agent Server sweeps expired threads on an interval; here each thread with a ``ttl``
has its own ``ThreadTtlWorkflow`` (:mod:`workflows.thread_ttl`, id ``thread-ttl-<thread
id>``) that sleeps on a durable timer until the thread is due and then asks
:func:`expire` what to do. No process polls, and a timer survives restarts of every
process, as the run workflows' do.

A thread is due ``ttl_minutes`` after the later of its last change (``updated_at``: a run,
a state update, new metadata) and the time its ttl was set (``ttl_from``), so a thread in
use is never swept and a ttl given to an old thread counts from then. At that time:

- ``strategy="delete"`` deletes it as ``DELETE /threads/{id}`` does (its runs, checkpoints,
  crons; a run paused on an interrupt is cancelled);
- ``strategy="keep_latest"`` keeps the thread and its latest state and drops its older
  checkpoints (as ``threads.prune``), then counts the ttl again from then.

A thread with a run in progress is not swept: it is looked at again ``ttl_minutes`` later.
The columns live in ``agent_threads`` (``ttl_minutes``, ``ttl_strategy``, ``ttl_from``).
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client

from overseer.errors import InvalidRequestError, NotFoundError
from overseer.settings import Settings

TTL_STRATEGIES = ("delete", "keep_latest")
"""What happens to a thread when its ttl is up, as on the Agent Server."""
TTL_SUBJECT = "overseer:ttl"
"""Who a ttl's deletion is recorded as (a cancelled run's ``run.cancelled`` names it)."""
MAX_TTL_MINUTES = 100 * 366 * 24 * 60
"""A century: a longer ttl would overflow a timer's duration (and Postgres' intervals)."""
MIN_WAIT_SECONDS = 1.0
"""The shortest timer the workflow sets, so a clock skew never makes it spin."""


def workflow_id(thread_id: str) -> str:
    """``thread-ttl-<thread id>``: the one timer workflow of a thread."""
    return f"thread-ttl-{thread_id}"


def parse_ttl(ttl: Any) -> tuple[float, str]:
    """A request's ``ttl``: minutes, or ``{"ttl": minutes, "strategy"?}`` (the SDK sends the latter).

    Returns:
        ``(minutes, strategy)``; the strategy defaults to ``delete``.

    Raises:
        InvalidRequestError: not a positive number of minutes up to :data:`MAX_TTL_MINUTES`,
            or an unknown ``strategy`` (422, ``details.field="ttl"``).
    """
    minutes, strategy = (ttl.get("ttl"), ttl.get("strategy") or "delete") \
        if isinstance(ttl, dict) else (ttl, "delete")
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) \
            or not math.isfinite(minutes) or not 0 < minutes <= MAX_TTL_MINUTES:
        raise InvalidRequestError(f"ttl must be a positive number of minutes (at most "
                                  f"{MAX_TTL_MINUTES}), or "
                                  '{"ttl": minutes, "strategy": "delete" | "keep_latest"}',
                                  details={"field": "ttl"})
    if strategy not in TTL_STRATEGIES:
        raise InvalidRequestError(f"ttl strategy must be one of {TTL_STRATEGIES}",
                                  details={"field": "ttl"})
    return float(minutes), str(strategy)


def new_thread_ttl(own: tuple[float, str] | None) -> tuple[float | None, str | None]:
    """The ``(minutes, strategy)`` a new thread starts with; ``(None, None)`` for no ttl.

    ``own`` (the ``ttl`` asked for, or the one of the thread it copies), else the
    deployment's default (:attr:`overseer.registry.Registry.thread_ttl`).
    """
    from overseer.registry import get_registry

    return own or get_registry().thread_ttl or (None, None)


async def set_ttl(pool: asyncpg.Pool, temporal: Client, settings: Settings, thread_id: Any,
                  ttl: tuple[float, str]) -> None:
    """Give a thread a new ttl (``threads.update``), counted from now, and :func:`watch` it.

    Args:
        pool: the database.
        temporal: the Temporal client (the timer workflow is started with it).
        settings: the task queue the worker polls.
        thread_id: the thread (it exists).
        ttl: :func:`parse_ttl`'s answer.
    """
    minutes, strategy = ttl
    await pool.execute("UPDATE agent_threads SET ttl_minutes = $2, ttl_strategy = $3, "
                       "ttl_from = now() WHERE thread_id = $1", thread_id, minutes, strategy)
    await watch(temporal, settings, thread_id)


async def watch(temporal: Client, settings: Settings, thread_id: Any) -> None:
    """Make sure the thread's timer workflow runs and has read its ttl as it is now.

    Signal-with-start of ``reset``: a running timer wakes and reads the ttl again (so a
    shorter one takes effect at once); otherwise one starts. Harmless for a thread without
    a ttl (the timer ends at once), so a retried request may call it again.
    """
    await temporal.start_workflow(
        "ThreadTtlWorkflow", args=[str(thread_id)], id=workflow_id(str(thread_id)),
        task_queue=settings.task_queue, start_signal="reset",
        static_summary=f"sweep thread {thread_id} when its ttl is up")


async def wake(temporal: Client, thread_id: Any) -> None:
    """Wake the thread's timer to read its row again (a deleted thread's timer then ends).

    Nothing happens when no timer runs (it ended, or never started).
    """
    from temporalio.service import RPCError, RPCStatusCode

    try:
        await temporal.get_workflow_handle(workflow_id(str(thread_id))).signal("reset")
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise


def ttl_view(row: asyncpg.Record) -> dict[str, Any] | None:
    """A thread's ``ttl`` as ``threads.get(include=["ttl"])`` reads it, or ``None`` without one.

    Returns:
        ``{"strategy", "ttl_minutes", "expires_at"}`` (ISO 8601), as the Agent Server's
        ``ThreadTTLInfo``.
    """
    if row["ttl_minutes"] is None:
        return None
    since = max(row["updated_at"], row["ttl_from"] or row["updated_at"])
    return {"strategy": row["ttl_strategy"], "ttl_minutes": row["ttl_minutes"],
            "expires_at": (since + timedelta(minutes=row["ttl_minutes"])).isoformat()}


async def expire(pool: asyncpg.Pool, temporal: Client, thread_id: str) -> dict[str, Any]:
    """What a thread's timer does now: sweep the thread if it is due, else say how long to wait.

    Returns:
        ``{"wait": seconds}`` (at least :data:`MIN_WAIT_SECONDS`) while the thread has a
        ttl, or ``{"ended": why}``: ``"gone"`` (no such thread), ``"no_ttl"``, ``"deleted"``.
        After ``keep_latest`` the answer is a wait (``{"wait", "pruned": True}``).
    """
    from overseer import threads

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
