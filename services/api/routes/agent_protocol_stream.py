"""The thread protocol's event stream: ``POST /threads/{thread_id}/stream/events`` ("Protocol v2").

SSE that stays open across runs, for ``@langchain/react`` 1.x ``useStream`` (its commands:
:mod:`services.api.routes.agent_protocol_commands`). A new connection replays the thread
from its current run (the oldest one queued or running, else the latest), then each run
as it comes, as the protocol's events (:mod:`services.api.routes.agent_protocol_events`),
each connection keeping those its selector asks for.

Runs are read with :func:`overseer.thread_streams.run_events` (the run's durable stream
and its live token rows), so every connection derives the same events in the same order.
What differs from LangGraph's own servers: ``docs/langgraph-api.md``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any

import asyncpg
from fastapi import APIRouter, Body, Request
from fastapi.responses import StreamingResponse
from temporalio.client import Client

from overseer import thread_streams, threads
from overseer.errors import InvalidRequestError
from overseer.http_routes import PoolDep, TemporalDep
from services.api.routes.agent_deps import ThreadReader, thread_uuid
from services.api.routes.agent_protocol_events import RUN_STREAM_MODES, RunTranslator
from services.api.routes.agent_run_streams import with_keepalives

router = APIRouter(tags=["agent-server"])


CHANNELS = frozenset({"values", "updates", "checkpoints", "messages", "tools", "custom",
                      "lifecycle", "input", "tasks"})
"""Channel names a stream may ask for (and ``custom:<name>``)."""


@dataclass
class Selector:
    """What one SSE connection asked for: ``channels``, ``namespaces`` prefixes, ``depth``, ``since``."""

    channels: frozenset[str]
    namespaces: list[list[str]] | None = None
    depth: int | None = None
    since: int | None = None

    @classmethod
    def parse(cls, body: Any) -> Selector:
        """The request body as a selector.

        Raises:
            InvalidRequestError: ``channels`` missing, empty or naming an unknown channel;
                ``namespaces`` not a list of string lists; ``depth`` or ``since`` not a
                non-negative integer (422).
        """
        body = body if isinstance(body, dict) else {}
        channels = body.get("channels")
        if not isinstance(channels, list) or not channels or not all(
                isinstance(c, str) and (c in CHANNELS or c.startswith("custom:"))
                for c in channels):
            raise InvalidRequestError(f"channels must be a non-empty list of {sorted(CHANNELS)} "
                                      "or custom:<name>", details={"field": "channels"})
        namespaces = body.get("namespaces")
        if namespaces is not None and (not isinstance(namespaces, list) or not all(
                isinstance(n, list) and all(isinstance(s, str) for s in n) for n in namespaces)):
            raise InvalidRequestError("namespaces must be a list of string lists",
                                      details={"field": "namespaces"})
        for key in ("depth", "since"):
            value = body.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise InvalidRequestError(f"{key} must be a non-negative integer",
                                          details={"field": key})
        return cls(frozenset(channels), namespaces or None, body.get("depth"), body.get("since"))

    def admits(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` goes out on this connection (the client's own matching rule)."""
        if self.since is not None and event["seq"] <= self.since:
            return False
        method, params = event["method"], event["params"]
        if method == "input.requested":
            wanted = "input" in self.channels
        elif method == "custom":
            name = params["data"].get("name") if isinstance(params["data"], dict) else None
            wanted = "custom" in self.channels or f"custom:{name}" in self.channels
        else:
            wanted = method in self.channels
        if not wanted or self.namespaces is None:
            return wanted
        namespace = params["namespace"]
        return any(_prefix(namespace, p) and (self.depth is None
                                              or len(namespace) - len(p) <= self.depth)
                   for p in self.namespaces)


def _prefix(namespace: list[str], prefix: list[str]) -> bool:
    """``prefix`` segment by segment; ``"fetcher"`` also matches ``"fetcher:abc"``."""
    return len(prefix) <= len(namespace) and all(
        seg == want or (":" not in want and seg.split(":", 1)[0] == want)
        for seg, want in zip(namespace, prefix, strict=False))


@router.post("/threads/{thread_id}/stream/events")
async def thread_event_stream(request: Request, thread_id: str, _: ThreadReader, pool: PoolDep,
                              temporal: TemporalDep,
                              body: Annotated[Any, Body()] = None) -> StreamingResponse:
    """The thread's protocol events as SSE, open across runs (see the module docstring).

    Body: ``{"channels": [...], "namespaces"?: [[...]], "depth"?: int, "since"?: int}``.
    Each frame is ``event: <method>``, ``id: <seq>``, ``data: <event JSON>``; a comment
    ``: open`` first and a keep-alive comment every 15 s of silence.

    Raises:
        InvalidRequestError: a body that is not a selector (422).
        NotFoundError: no such thread, or someone else's (404).
    """
    selector = Selector.parse(body)

    async def admitted() -> AsyncIterator[tuple[str | None, str, Any]]:
        async for event in thread_protocol_events(pool, temporal, thread_id):
            if selector.admits(event):
                yield str(event["seq"]), event["method"], event

    async def frames() -> AsyncIterator[bytes]:
        yield b": open\n\n"
        async for frame in with_keepalives(request, admitted()):
            yield frame

    return StreamingResponse(frames(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


async def thread_protocol_events(pool: asyncpg.Pool, temporal: Client,
                                 thread_id: str) -> AsyncIterator[dict[str, Any]]:
    """Every protocol event of the thread from its current run on, then of each new run.

    The current run is the oldest one queued or running, else the latest (a paused run's
    ``input.requested`` is replayed). Runs are read one after the other in the order they
    were made (:func:`overseer.thread_streams.thread_runs`, each by
    :func:`overseer.thread_streams.run_events`). Ends when the thread is deleted.

    Yields:
        ``{"type": "event", "event_id", "seq", "method", "params": {"namespace",
        "timestamp", "node"?, "data"}}``.
    """
    tid = thread_uuid(thread_id)
    start = await pool.fetchrow(
        "SELECT created_at, run_id FROM agent_runs WHERE thread_id = $1 AND status = ANY($2) "
        "ORDER BY created_at, run_id LIMIT 1", tid, list(threads.ACTIVE_RUN_STATUSES)) or \
        await pool.fetchrow("SELECT created_at, run_id FROM agent_runs WHERE thread_id = $1 "
                            "ORDER BY created_at DESC, run_id DESC LIMIT 1", tid)
    async for run in thread_streams.thread_runs(pool, tid, start):
        place = 1 + int(await pool.fetchval(
            "SELECT count(*) FROM agent_runs WHERE thread_id = $1 AND (created_at, run_id) < "
            "($2::timestamptz, $3::uuid)", tid, run["created_at"], run["run_id"]))
        async for event in run_protocol_events(pool, temporal, run, place):
            yield event


async def run_protocol_events(pool: asyncpg.Pool, temporal: Client, run: asyncpg.Record,
                              place: int) -> AsyncIterator[dict[str, Any]]:
    """One run's protocol events (see :class:`RunTranslator`), ``place`` its rank on the thread."""
    translator = RunTranslator(run, place)
    async for source, name, data in thread_streams.run_events(pool, temporal, run, RUN_STREAM_MODES):
        out = translator.feed(source, name, data)
        ended = name in ("end", "error")
        if ended:  # a run cancelled through the API is interrupted, not failed
            paused = name == "end" and bool(translator.interrupts)
            status = None if paused else await _settled_status(pool, run["run_id"])
            failure = data if name == "error" and isinstance(data, dict) else {}
            error = str(failure.get("message") or failure.get("error") or "the run failed") \
                if name == "error" else None
            out += translator.ended(source, cancelled=status == "interrupted", error=error)
        for event in out:
            yield event
        if ended:
            return


CANCEL_SETTLE_SECONDS = 2.0
"""A run's status is final when its workflow publishes its ending, except for a run the API is
cancelling (the API marks it ``interrupted`` right after asking Temporal to cancel it): a
status still active is looked at again for this long before the run counts as ended normally."""


async def _settled_status(pool: asyncpg.Pool, run_id: uuid.UUID) -> str | None:
    deadline = time.monotonic() + CANCEL_SETTLE_SECONDS
    while True:
        status: str | None = await pool.fetchval(
            "SELECT status FROM agent_runs WHERE run_id = $1", run_id)
        if status not in threads.ACTIVE_RUN_STATUSES or time.monotonic() > deadline:
            return status
        await asyncio.sleep(0.2)
