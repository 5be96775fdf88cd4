"""The pricing chat's ask: ``POST /api/v1/chat`` and ``GET /api/v1/chat/threads/{thread_id}/stream``.

An ask is routed to the single agent (the fast path) or to an orchestrated run, and answered
as Server-Sent Events or as one JSON event; a thread's stream can be (re)attached to, resuming
after ``Last-Event-ID``. :func:`build_router` builds the routes for the Pipeline that
``activities.pricing.pipeline`` passes in (the asks start its runs).
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse, StreamingResponse

from activities.pricing.catalog import current_catalog
from activities.pricing.chat_fast_path import fast_path
from activities.pricing.chat_orchestrator import orchestrator_events, start_orchestrator
from activities.pricing.chat_routing import (
    classifier_events,
    effective_model,
    route_message,
    session_history,
)
from activities.pricing.chat_runs import is_orchestrated
from activities.pricing.chat_sse import (
    first_stop,
    frames,
    last_event,
    parse_last_event_id,
    skip_seen,
    sse_response,
)
from activities.pricing.router import resolve_scope
from activities.pricing.schemas import ChatRequest, ChatStreamEvent
from overseer.plugin import (
    NotFoundError,
    Pipeline,
    PoolDep,
    PrincipalDep,
    SettingsDep,
    SubmitterDep,
    TemporalDep,
    append_events,
    visible_run,
)

log = logging.getLogger("overseer.api.chat")

CHAT_NAMESPACE = uuid.UUID("5f0c1d8e-2b7a-4c39-9e61-7a3d2f4b8c10")


def build_router(pipeline: Pipeline) -> APIRouter:
    """The ask and a thread's stream; an ask answers or starts a run of ``pipeline``.

    Args:
        pipeline: the pricing pipeline as declared (``activities.pricing.pipeline``).
    """
    router = APIRouter(prefix="/api/v1/chat", tags=["chat"])

    @router.post("", response_model=ChatStreamEvent,
                 responses={200: {"content": {"text/event-stream": {}}},
                            202: {"description": "the plan paused for sign-off (non-streaming)"}})
    async def chat(
        body: ChatRequest,
        principal: SubmitterDep,
        settings: SettingsDep,
        pool: PoolDep,
        temporal: TemporalDep,
        stream: bool = False,
        plan: bool = False,
        model: Annotated[str | None, Query(max_length=100)] = None,
        keepalive: bool = False,
        interval: Annotated[float, Query(ge=0.05, le=300)] = 15.0,
        idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", max_length=200)] = None,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=40)] = None,
    ) -> Any:
        """Ask a pricing question; ``stream=true`` answers with Server-Sent Events.

        Simple asks stay on the single agent (no workflow); composite asks or ``plan=true`` start
        a durable orchestrator run (``thread_id`` = run id) and stream its events. Non-streaming
        calls answer the final event's JSON, or — when the plan paused for sign-off — ``202``
        with the pending-approval event.
        """
        started = time.monotonic()
        history, previous_scope = await session_history(pool, principal, body.session_id)
        chosen, reason = effective_model(settings, model)
        log.info("chat model decision", extra={"hint": model, "chosen": chosen, "reason": reason})
        classified: list[dict[str, Any]] = []
        route = await route_message(body.message, plan=plan, settings=settings, calls=classified)
        catalog = await current_catalog(pool)
        scope = resolve_scope(body.message, catalog, previous=previous_scope)
        run_id = (str(uuid.uuid5(CHAT_NAMESPACE, f"{principal.subject}:{idempotency_key}"))
                  if idempotency_key else str(uuid.uuid4()))
        after = parse_last_event_id(last_event_id)
        asked = classifier_events(run_id, classified, principal.subject)
        if route.path == "single_agent":
            source = fast_path(pipeline, pool, settings, body, principal, catalog, scope, route,
                               run_id, chosen, reason, started, prior=asked)
            if not stream:
                return JSONResponse(await last_event(source))
            return sse_response(frames(skip_seen(source, after)), keepalive, interval)
        workflow_id = await start_orchestrator(
            pipeline, pool, temporal, settings, body, principal, catalog, scope, route, run_id,
            history, chosen, reason, model, idempotency_key)
        if asked:  # the run is submitted: the classifier's call joins its ledger
            async with pool.acquire() as conn:
                await append_events(conn, asked)
        source = orchestrator_events(pool, temporal, run_id, workflow_id, from_offset=after)
        if not stream:
            event = await first_stop(source)
            return JSONResponse(event, status_code=200 if event.get("done") else 202)
        return sse_response(frames(source), keepalive, interval)

    @router.get("/threads/{thread_id}/stream", responses={200: {"content": {"text/event-stream": {}}}})
    async def thread_stream(
        thread_id: str,
        principal: PrincipalDep,
        pool: PoolDep,
        temporal: TemporalDep,
        keepalive: bool = False,
        interval: Annotated[float, Query(ge=0.05, le=300)] = 15.0,
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=40)] = None,
        last_event_id_param: Annotated[str | None, Query(alias="last_event_id", max_length=40)] = None,
    ) -> StreamingResponse:
        """(Re)attach to an orchestrated run's stream; resumes after ``Last-Event-ID`` without duplicates."""
        view = await visible_run(pool, thread_id, principal)
        if not is_orchestrated(view) or view.workflow_id is None:
            raise NotFoundError(f"no orchestrated pricing thread {thread_id}")
        after = parse_last_event_id(last_event_id or last_event_id_param)
        return sse_response(frames(orchestrator_events(pool, temporal, view.run_id, view.workflow_id,
                                                       from_offset=after)),
                            keepalive, interval)

    return router
