"""The shared ``record_events`` activity: workflows append to the event log through it."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.runtime import get_runtime
from observability.metrics import observe_events
from observability.tracing import current_trace_id
from overseer.store.events import NewEvent, append_events


@activity.defn(name="record_events")
async def record_events(events: list[dict[str, Any]]) -> int:
    """Append events (dicts in :class:`NewEvent` shape) and project them, idempotently.

    Safe to retry: ids are deterministic, so a retried call appends nothing twice.

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
