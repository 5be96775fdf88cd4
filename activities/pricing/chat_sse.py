"""Server-Sent Events for the pricing chat: the envelope's key order, frames, keepalive, replay.

Each frame is ``id: <seq>`` and one ``data:`` line of compact JSON; keepalive comments
(``: keepalive``) come only after ``interval`` seconds without a frame. ``Last-Event-ID``
is read as the last ``seq`` the client has seen.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

from activities.pricing import stream as events
from overseer.plugin import InvalidRequestError
from overseer.plugin import sse_frame as web_sse_frame

log = logging.getLogger("overseer.api.chat")
KEEPALIVE = ": keepalive\n\n"
_LEAD_KEYS = ("token", "tool_call", "message", "tools_used", "error", "code", "retryable", "node")
_TAIL_KEYS = ("done", "model", "thread_id", "strategy", "outcome", "seq")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def canonical(event: dict[str, Any]) -> dict[str, Any]:
    """The envelope's key order: content first, then metadata, then ``done`` and its trailers.

    (Events come back from the workflow stream with sorted keys; golden samples compare text.)
    """
    out = {k: event[k] for k in _LEAD_KEYS if k in event}
    out.update({k: v for k, v in sorted(event.items()) if k not in _LEAD_KEYS + _TAIL_KEYS})
    out.update({k: event[k] for k in _TAIL_KEYS if k in event})
    return out


def sse_frame(event: dict[str, Any]) -> str:
    """One SSE message: ``id: <seq>`` and one ``data:`` line of compact JSON."""
    data = json.dumps(canonical(event), separators=(",", ":"), ensure_ascii=False)
    return web_sse_frame(data, event_id=str(event["seq"]) if event.get("seq") is not None else None)


async def frames(source: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    """SSE frames for ``source``; an unexpected failure becomes one terminal error event."""
    seq = 0
    try:
        async for event in source:
            seq = event.get("seq", seq)
            yield sse_frame(event)
    except asyncio.CancelledError:
        raise
    except Exception as err:  # noqa: BLE001 — the stream has started: report in-band, once
        log.exception("chat stream failed", exc_info=err)
        yield sse_frame({**events.error("the stream failed", "internal_error", retryable=True),
                         "seq": seq + 1})


async def with_keepalive(source: AsyncIterator[str], interval: float | None
                         ) -> AsyncIterator[str]:
    """Pass ``source`` through, adding ``: keepalive`` after each ``interval`` s without a frame."""
    if not interval:
        async for frame in source:
            yield frame
        return
    iterator = source.__aiter__()
    pending: asyncio.Future[str] = asyncio.ensure_future(iterator.__anext__())
    try:
        while True:
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield KEEPALIVE
                continue
            try:
                frame = pending.result()
            except StopAsyncIteration:
                return
            yield frame
            pending = asyncio.ensure_future(iterator.__anext__())
    finally:
        if not pending.done():
            pending.cancel()
            try:
                await pending
            except (asyncio.CancelledError, StopAsyncIteration):
                pass
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()


def sse_response(source: AsyncIterator[str], keepalive: bool, interval: float
                 ) -> StreamingResponse:
    """A ``text/event-stream`` response, with keepalive comments when asked for."""
    body = with_keepalive(source, interval if keepalive else None)
    return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)


async def last_event(source: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """Drain ``source``; its last event (the non-streaming answer)."""
    last: dict[str, Any] = {}
    async for event in source:
        last = event
    return canonical(last)


async def first_stop(source: AsyncIterator[dict[str, Any]]) -> dict[str, Any]:
    """The final event, or the pending-approval event if the plan pauses first."""
    async for event in source:
        if event.get("done") or event.get("awaiting_approval"):
            if hasattr(source, "aclose"):
                await source.aclose()
            return canonical(event)
    return canonical(events.error("the run ended without a final answer", "run_ended",
                                  retryable=False))


async def skip_seen(source: AsyncIterator[dict[str, Any]], after: int
                    ) -> AsyncIterator[dict[str, Any]]:
    """Events with ``seq`` greater than ``after`` (a fast-path replay after Last-Event-ID)."""
    async for event in source:
        if event.get("seq", 0) > after:
            yield event


def parse_last_event_id(raw: str | None) -> int:
    """``Last-Event-ID`` as the last seq seen (0 when absent).

    Raises:
        InvalidRequestError: not a non-negative integer.
    """
    if raw is None or raw == "":
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise InvalidRequestError("Last-Event-ID must be the seq of an event",
                                  details={"last_event_id": raw}) from None
    if value < 0:
        raise InvalidRequestError("Last-Event-ID must be ≥ 0", details={"last_event_id": raw})
    return value
