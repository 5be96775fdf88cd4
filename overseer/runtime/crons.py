"""The activities of a cron tick, a stateless run's clean-up and a thread's ttl.

Their workflows: :mod:`workflows.cron_tick`, :mod:`workflows.thread_ttl`. They call
:mod:`overseer.crons` and :mod:`overseer.thread_expiry` with the worker's pool, settings and
Temporal client.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from overseer import crons, thread_expiry
from overseer.errors import OverseerError
from overseer.resources import get_runtime
from overseer.runtime.errors import as_application_error


@activity.defn(name="fire_cron")
async def fire_cron(cron_id: str, tick: str) -> dict[str, Any]:
    """Make the run of one tick (:func:`overseer.crons.fire`; idempotent per ``tick``).

    Raises:
        ApplicationError: a refusal of the run (its error code; not retried when permanent,
            e.g. a payload the graph no longer accepts).
    """
    runtime = get_runtime()
    try:
        return await crons.fire(runtime.pool, activity.client(), runtime.settings, cron_id, tick)
    except OverseerError as err:
        raise as_application_error(err) from err


@activity.defn(name="delete_thread_after_run")
async def delete_thread_after_run(run_id: str, thread_id: str) -> str:
    """Wait for a stateless run (a cron's, or ``on_completion="delete"``) to end, then delete its thread.

    :func:`overseer.crons.finish`: a run paused on an interrupt keeps its thread.
    """
    runtime = get_runtime()
    return await crons.finish(runtime.pool, activity.client(), run_id, thread_id,
                              beat=activity.heartbeat)


@activity.defn(name="expire_thread")
async def expire_thread(thread_id: str) -> dict[str, Any]:
    """Sweep a thread whose ttl is up, or say how long to wait (:func:`overseer.thread_expiry.expire`)."""
    runtime = get_runtime()
    return await thread_expiry.expire(runtime.pool, activity.client(), thread_id)
