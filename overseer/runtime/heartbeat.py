"""Run blocking work off the event loop while heartbeating, so a dead worker is noticed in seconds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")


async def with_heartbeats(work: Awaitable[T], *, every_seconds: float = 2.0, detail: str = "") -> T:
    """Await ``work`` while sending an activity heartbeat every ``every_seconds``.

    Outside an activity (tests, plain LangGraph baselines) it just awaits ``work``.
    Cancellation of the activity cancels ``work``.
    """
    if not activity.in_activity():
        return await work
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every_seconds)
            if done:
                return task.result()
            activity.heartbeat(detail)
    finally:
        if not task.done():
            task.cancel()
