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

from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client

from overseer.settings import Settings

TTL_SUBJECT = "overseer:ttl"
"""Who a ttl's deletion is recorded as (a cancelled run's ``run.cancelled`` names it)."""
MIN_WAIT_SECONDS = 1.0
"""The shortest timer the workflow sets, so a clock skew never makes it spin."""


def workflow_id(thread_id: str) -> str:
    """``thread-ttl-<thread id>``: the one timer workflow of a thread."""
    return f"thread-ttl-{thread_id}"



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
