"""The shared ``record_events`` activity: workflows append to the event log through it."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from observability.metrics_recording import observe_events
from observability.tracing import current_trace_id
from overseer.resources import get_runtime
from overseer.store.events import NewEvent, append_events


@activity.defn(name="record_events")
async def record_events(events: list[dict[str, Any]],
                        hand_off: dict[str, Any] | None = None) -> int | dict[str, Any]:
    """Append events (dicts in :class:`NewEvent` shape) and project them, idempotently.

    Safe to retry: ids are deterministic, so a retried call appends nothing twice.

    ``hand_off`` (``{thread_id, run_id, snapshot, key, pause?}``), sent with the ending of an
    Agent Server run or its pause on an interrupt, also hands the run's thread on
    (:func:`overseer.thread_queue.hand_off`, which appends the events in its transaction)
    and claims the webhooks of the runs that ended
    (:func:`overseer.thread_queue.claim_webhooks`, ``key`` the claim): the log, the
    thread's state and the claims commit together; at the end the next queued run is
    started after the commit.

    Returns:
        How many events were new; with ``hand_off``, ``{"inserted": n, "webhooks": [...]}``
        (the workflow POSTs each webhook with its own retried activity).

    Raises:
        asyncpg.PostgresError, OSError: database unavailable (transient, retried).
    """
    trace_id = current_trace_id()
    batch = [NewEvent(**e) for e in events]
    for event in batch:
        event.trace_id = event.trace_id or trace_id
    runtime = get_runtime()
    if hand_off is None:
        async with runtime.pool.acquire() as conn:
            inserted = await append_events(conn, batch)
            await observe_events(conn, inserted)  # metrics from new events only (never raises)
        return len(inserted)
    from overseer import thread_queue  # the Agent Server's thread queue, only for its runs

    given = dict(hand_off)
    claim = str(given.pop("key", "end"))
    handed = await thread_queue.hand_off(runtime.pool, activity.client(), runtime.settings,
                                         events=batch, claim=claim, **given)
    await observe_events(runtime.pool, handed.inserted)
    return {"inserted": len(handed.inserted), "webhooks": handed.webhooks}


async def append_from_activity(events: list[NewEvent]) -> int:
    """Append events from inside any activity (node activities record their own steps)."""
    trace_id = current_trace_id()
    for event in events:
        event.trace_id = event.trace_id or trace_id
    async with get_runtime().pool.acquire() as conn:
        inserted = await append_events(conn, events)
        await observe_events(conn, inserted)  # metrics from new events only (never raises)
    return len(inserted)
