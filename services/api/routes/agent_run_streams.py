"""A run followed as it goes: streamed (SSE), waited for, joined; and a thread's stream of all its runs.

``runs/stream`` and ``runs/wait`` (on a thread, or stateless) make the run with
:func:`overseer.run_service.start_run`, then answer with its events as SSE, or
with 200 at once and its values once it ends or pauses. A run's ``join`` and ``stream``
(re)join it; ``/threads/{thread_id}/stream`` follows every run of the thread. The events
are read by :mod:`overseer.thread_streams`. ``on_disconnect="cancel"`` (or a join's
``cancel_on_disconnect``) cancels the run if its client leaves before its end.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from overseer import run_body, run_service, thread_runs, thread_streams, threads
from overseer.access import Principal
from overseer.errors import InvalidRequestError
from overseer.graph_codec import to_jsonable
from overseer.http_routes import PoolDep, SettingsDep, TemporalDep, sse_frame
from services.api import agent_auth
from services.api.routes.agent_deps import AgentPrincipal, JsonBody, ThreadReader
from services.api.routes.agent_runs import body_stream_modes, run_locations

WAIT_KEEPALIVE_SECONDS = 5.0
"""While ``runs/wait`` blocks, a newline every this many seconds keeps proxies and load
balancers from closing the idle connection (JSON ignores the leading whitespace)."""

DISCONNECT_POLL_SECONDS = 0.5
"""How often a stream or wait whose run is cancelled when its client leaves
(``on_disconnect="cancel"``) checks that the client is still there."""

logger = logging.getLogger(__name__)
_leaving: set[asyncio.Task[None]] = set()
"""Cancellations of runs whose client left, running after their request ended."""

router = APIRouter(tags=["agent-server"])


def _frame(event_id: str | None, name: str, data: Any) -> bytes:
    """One SSE frame: ``event``, ``id`` when there is one, ``data`` as JSON."""
    return sse_frame(json.dumps(data, default=str), event=name, event_id=event_id).encode()


def _sse(run: Any, events: AsyncIterator[tuple[str | None, str, Any]],
         after_delete: Any = None, leave: _Leave | None = None) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        finished = False
        watch = leave.watch() if leave is not None else None
        try:
            async for event in events:
                yield _frame(*event)
            finished = True
        finally:
            if leave is not None:
                leave.stop(watch, finished)
            if after_delete is not None:
                await after_delete()

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={**run_locations(run), "Cache-Control": "no-store"})


def disconnect_mode(body: dict[str, Any]) -> bool:
    """Whether a run request's ``on_disconnect`` asks to cancel the run when its client leaves.

    ``"continue"`` (the default, as on the Agent Server) or ``"cancel"``.

    Raises:
        InvalidRequestError: any other value (422, ``details.field="on_disconnect"``).
    """
    mode = body.get("on_disconnect") or "continue"
    if mode not in ("continue", "cancel"):
        raise InvalidRequestError('on_disconnect must be "continue" or "cancel"',
                                  details={"field": "on_disconnect"})
    return mode == "cancel"


class _Leave:
    """Cancel a run if its client leaves before the run's answer or end was sent.

    ``on_disconnect="cancel"`` (or a join's ``cancel_on_disconnect``), as the Agent Server
    does it: the run is cancelled as ``POST .../cancel`` with ``action=interrupt`` would,
    once, in the background, and only while it is still pending or running (a run paused
    on an interrupt keeps its interrupt). The client is noticed gone within
    :data:`DISCONNECT_POLL_SECONDS` while the response waits, or at the next write.
    """

    def __init__(self, request: Request, pool: Any, temporal: Any, run: Any,
                 subject: str) -> None:
        self.request, self.pool, self.temporal = request, pool, temporal
        self.thread_id, self.run_id = str(run["thread_id"]), str(run["run_id"])
        self.subject = subject
        self.fired = False

    def watch(self) -> asyncio.Task[None]:
        """Start watching for the client to leave (until :meth:`stop`)."""
        async def poll() -> None:
            # Starlette offers no event for a client that left: is_disconnected() polls
            while not await self.request.is_disconnected():  # noqa: ASYNC110
                await asyncio.sleep(DISCONNECT_POLL_SECONDS)
            self.fire()
        return asyncio.create_task(poll())

    def stop(self, watch: asyncio.Task[None] | None, finished: bool) -> None:
        """The response ended: cancel the run unless its answer or end was sent."""
        if watch is not None:
            watch.cancel()
        if not finished:
            self.fire()

    def fire(self) -> None:
        if self.fired:
            return
        self.fired = True
        task = asyncio.create_task(self._cancel())
        _leaving.add(task)
        task.add_done_callback(_leaving.discard)

    async def _cancel(self) -> None:
        try:
            run = await thread_runs.get_run(self.pool, self.temporal, self.thread_id, self.run_id)
            if run["status"] not in threads.ACTIVE_RUN_STATUSES:
                return
            await thread_runs.cancel_run(self.pool, self.temporal, self.thread_id, self.run_id,
                                     self.subject, "interrupt")
            logger.info("run cancelled: its client left", extra={
                "run_id": self.run_id, "thread_id": self.thread_id})
        except Exception:  # noqa: BLE001 - nobody is waiting for this answer: log it
            logger.warning("cancelling a run whose client left failed", exc_info=True,
                           extra={"run_id": self.run_id})


def _leave(request: Request, pool: Any, temporal: Any, run: Any, principal: Principal,
           cancel: bool) -> _Leave | None:
    return _Leave(request, pool, temporal, run, principal.subject) if cancel else None


@router.post("/threads/{thread_id}/runs/wait")
async def wait_run(request: Request, thread_id: str, principal: AgentPrincipal, pool: PoolDep,
                   temporal: TemporalDep, settings: SettingsDep,
                   body: JsonBody = None) -> StreamingResponse:
    """Run and block until the run ends or pauses: the thread's values (``__interrupt__``, ``__error__``)."""
    body = body or {}
    cancel = disconnect_mode(body)
    run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                      thread_id, body)
    return _waiting(thread_streams.wait_values(pool, temporal, run), run,
                    leave=_leave(request, pool, temporal, run, principal, cancel))


@router.post("/runs/wait")
async def wait_stateless_run(request: Request, principal: AgentPrincipal, pool: PoolDep,
                             temporal: TemporalDep, settings: SettingsDep,
                             body: JsonBody = None) -> StreamingResponse:
    """A stateless run, blocking; the thread is deleted afterwards unless ``on_completion="keep"``."""
    body = body or {}
    cancel = disconnect_mode(body)
    run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                      None, body)
    answered: dict[str, Any] = {}

    async def values() -> Any:
        answered["values"] = await thread_streams.wait_values(pool, temporal, run)
        return answered["values"]

    async def clean_up() -> None:  # once the answer is sent, as the Agent Server's worker does
        if body.get("on_completion", "delete") == "delete":
            await drop_stateless_thread(pool, temporal, run, answered.get("values"),
                                        principal.subject)

    return _waiting(values(), run, after=clean_up,
                    leave=_leave(request, pool, temporal, run, principal, cancel))


async def drop_stateless_thread(pool: Any, temporal: Any, run: Any, values: Any,
                                subject: str) -> None:
    """Delete a waited-for stateless run's thread, given the values it answered with.

    Kept when the run paused on an interrupt (``__interrupt__``: a person answers it on that
    thread) or no answer came (``values`` None); deleted when it ended or failed
    (``__error__``). ``POST /runs/wait`` and ``/mcp``'s ``tools/call`` share it.
    """
    if isinstance(values, dict) and "__interrupt__" not in values:
        await threads.delete_thread(pool, temporal, str(run["thread_id"]), subject)


def _waiting(values: Any, run: Any, after: Callable[[], Awaitable[None]] | None = None,
             leave: _Leave | None = None) -> StreamingResponse:
    """``runs/wait``'s answer: 200 at once, then the JSON values; ``after`` once it is sent.

    A newline goes out every :data:`WAIT_KEEPALIVE_SECONDS` while the run goes on. A
    failure after the answer has started is reported in the body as
    ``{"__error__": {"error", "message"}}`` (the status is sent).
    """

    async def body() -> AsyncIterator[bytes]:
        task = asyncio.ensure_future(values)
        watch = leave.watch() if leave is not None else None
        answered = False
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=WAIT_KEEPALIVE_SECONDS)
                if done:
                    break
                yield b"\n"
            try:
                result = task.result()
            except Exception as err:  # noqa: BLE001 - the status is already sent: say it in the body
                logger.warning("runs/wait failed after the answer started", exc_info=err)
                result = {"__error__": {"error": getattr(err, "code", type(err).__name__),
                                        "message": str(getattr(err, "message", err))[:500]}}
            answered = True
            yield json.dumps(to_jsonable(result), separators=(",", ":")).encode()
        finally:
            if leave is not None:
                leave.stop(watch, answered)
            if not task.done():
                task.cancel()

    return StreamingResponse(body(), media_type="application/json",
                             headers={"Content-Location": run_locations(run)["Content-Location"]},
                             background=BackgroundTask(after) if after is not None else None)


@router.post("/threads/{thread_id}/runs/stream")
async def stream_run(request: Request, thread_id: str, principal: AgentPrincipal,
                     pool: PoolDep, temporal: TemporalDep, settings: SettingsDep,
                     body: JsonBody = None) -> StreamingResponse:
    """Run and stream it as SSE: ``metadata``, then ``values``/``updates``/``custom``, ``end``.

    ``on_disconnect="cancel"`` cancels the run if the client leaves before its end.
    """
    body = body or {}
    modes, cancel = body_stream_modes(body), disconnect_mode(body)
    run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                      thread_id, body)
    return _sse(run, thread_streams.run_events(pool, temporal, run, modes),
                leave=_leave(request, pool, temporal, run, principal, cancel))


@router.post("/runs/stream")
async def stream_stateless_run(request: Request, principal: AgentPrincipal, pool: PoolDep,
                               temporal: TemporalDep, settings: SettingsDep,
                               body: JsonBody = None) -> StreamingResponse:
    """A stateless run, streamed (its thread is kept: a stream client may rejoin it)."""
    body = body or {}
    modes, cancel = body_stream_modes(body), disconnect_mode(body)
    run = await run_service.start_run(pool, temporal, settings, agent_auth.run_caller(principal),
                                      None, body)
    return _sse(run, thread_streams.run_events(pool, temporal, run, modes),
                leave=_leave(request, pool, temporal, run, principal, cancel))


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join_run(thread_id: str, run_id: str, _: ThreadReader, pool: PoolDep,
                   temporal: TemporalDep) -> Any:
    """Block until the run ends or pauses; the thread's values, as ``runs/wait`` answers."""
    run = await thread_runs.get_run(pool, temporal, thread_id, run_id)
    return await thread_streams.wait_values(pool, temporal, run)


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_stream(request: Request, thread_id: str, run_id: str, principal: ThreadReader,
                      pool: PoolDep, temporal: TemporalDep,
                      stream_mode: Annotated[list[str] | None, Query()] = None,
                      cancel_on_disconnect: bool = False,
                      last_event_id: Annotated[str | None, Header()] = None) -> StreamingResponse:
    """(Re)join a run's stream; with ``Last-Event-ID`` it resumes after that event, no duplicates.

    ``cancel_on_disconnect`` cancels the run if this client leaves before its end (the
    caller must be allowed to change the thread).
    """
    run = await thread_runs.get_run(pool, temporal, thread_id, run_id)
    kwargs = json.loads(run["kwargs"]) if isinstance(run["kwargs"], str) else run["kwargs"]
    named = [m for m in stream_mode or [] if m]  # the SDK sends stream_mode="" for none
    modes = run_body.stream_modes(named) if named else body_stream_modes(kwargs or {})
    after = thread_streams.parse_last_event_id(last_event_id)
    if cancel_on_disconnect:  # cancelling changes the thread: a reader may not
        await agent_auth.gate_thread(pool, principal, thread_id, "update")
    return _sse(run, thread_streams.run_events(pool, temporal, run, modes, after=after),
                leave=_leave(request, pool, temporal, run, principal, cancel_on_disconnect))


@router.get("/threads/{thread_id}/stream")
async def join_thread_stream(request: Request, thread_id: str, _: ThreadReader,
                             pool: PoolDep, temporal: TemporalDep,
                             stream_modes: str | None = None,
                             stream_mode: Annotated[list[str] | None, Query()] = None,
                             last_event_id: Annotated[str | None, Header()] = None,
                             ) -> StreamingResponse:
    """``threads.join_stream``: every run of the thread as it happens.

    Read by :func:`overseer.thread_streams.thread_events`. Modes as ``stream_modes``
    (comma-separated, as the Agent Server reads it) or ``stream_mode`` (as the SDKs send
    it): ``run_modes`` (default), ``lifecycle``, ``state_update``. A keep-alive comment
    every :data:`KEEPALIVE_SECONDS` while nothing happens.

    Raises:
        InvalidRequestError: an unknown mode (422).
    """
    modes = [m.strip() for m in (stream_modes or "").split(",") if m.strip()] + \
        [m for m in stream_mode or [] if m]
    modes = modes or ["run_modes"]
    thread_streams.check_thread_stream_modes(modes)
    events = thread_streams.thread_events(pool, temporal, thread_id, modes, after=last_event_id)
    return StreamingResponse(with_keepalives(request, events), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store"})


KEEPALIVE_SECONDS = 15.0
"""A thread stream sends an SSE comment after this long without an event."""


async def with_keepalives(request: Request, events: AsyncIterator[tuple[str | None, str, Any]],
                          ) -> AsyncIterator[bytes]:
    """``events`` as SSE frames, with a keep-alive comment in every silence.

    Stops within a second of the client leaving (a thread stream has no end of its own).
    """
    queue: asyncio.Queue[tuple[str | None, str, Any] | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        except Exception:  # noqa: BLE001 - the stream ends; the client rejoins with its last id
            logger.warning("thread stream ended on an error", exc_info=True)
        finally:
            await queue.put(None)

    task = asyncio.create_task(pump())
    quiet = 0.0
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), 1.0)
            except TimeoutError:
                if await request.is_disconnected():
                    return
                quiet += 1.0
                if quiet >= KEEPALIVE_SECONDS:
                    quiet = 0.0
                    yield b": keep-alive\n\n"
                continue
            quiet = 0.0
            if item is None:
                return
            yield _frame(*item)
    finally:
        task.cancel()
