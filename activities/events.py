"""The shared ``record_events`` activity: workflows append to the event log through it."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.runtime import get_runtime
from observability.metrics import observe_events
from observability.tracing import current_trace_id
from overseer.store.events import NewEvent, append_events


@activity.defn(name="record_events")
async def record_events(events: list[dict[str, Any]],
                        hand_off: dict[str, Any] | None = None) -> int:
    """Append events (dicts in :class:`NewEvent` shape) and project them, idempotently.

    Safe to retry: ids are deterministic, so a retried call appends nothing twice.

    ``hand_off`` (``{thread_id, run_id, snapshot}``), sent with the ending of an Agent Server
    run, then hands the run's thread on (:func:`overseer.threads.hand_off`): its final state
    to the thread, and the next queued run started, after the ending is in the log.

    Returns:
        How many events were new.

    Raises:
        asyncpg.PostgresError, OSError: database unavailable (transient, retried).
    """
    trace_id = current_trace_id()
    batch = [NewEvent(**e) for e in events]
    for event in batch:
        event.trace_id = event.trace_id or trace_id
    async with get_runtime().pool.acquire() as conn:
        inserted = await append_events(conn, batch)
        await observe_events(conn, inserted)  # metrics from new events only (never raises)
    if hand_off is not None:
        from overseer import threads  # the Agent Server's thread model, only for its runs

        runtime = get_runtime()
        await threads.hand_off(runtime.pool, activity.client(), runtime.settings, **hand_off)
    return len(inserted)


async def append_from_activity(events: list[NewEvent]) -> int:
    """Append events from inside any activity (node activities record their own steps)."""
    trace_id = current_trace_id()
    for event in events:
        event.trace_id = event.trace_id or trace_id
    async with get_runtime().pool.acquire() as conn:
        inserted = await append_events(conn, events)
        await observe_events(conn, inserted)  # metrics from new events only (never raises)
    return len(inserted)
