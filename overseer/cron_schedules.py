"""The Temporal Schedule behind each cron: its id, and dropping it with its cron or thread."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode


def schedule_id(cron_id: Any) -> str:
    """The Temporal Schedule id of a cron."""
    return f"cron-{cron_id}"


async def drop_schedules(temporal: Client, cron_ids: list[Any]) -> None:
    """Delete the Temporal Schedules of these crons (one already gone is fine)."""
    for cron_id in cron_ids:
        try:
            await temporal.get_schedule_handle(schedule_id(cron_id)).delete()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
