"""The pricing pipeline's chat routes (seed 003).

``/api/v1/chat`` with SSE streaming, approvals, health, tools, models.

* ``POST /api/v1/chat`` — simple asks run the single agent in this process (no workflow);
  composite asks (or ``plan=true``) start a pricing run (``SegmentRunWorkflow``) and stream its events.
* ``GET /api/v1/chat/threads/{thread_id}/stream`` — (re)attach to a run's stream; with
  ``Last-Event-ID`` it resumes after that event, without duplicates.
* ``POST /api/v1/chat/approve`` / ``/cancel`` — resume or stop a paused plan by thread id.

Delivery: an orchestrated stream is read from the workflow's durable ``WorkflowStream``
(long-poll Updates; queries once the run has closed). Each event's ``seq`` (and SSE ``id``)
is its offset in that log plus one, the same on every connection, so a client that
reconnects with ``Last-Event-ID: n`` receives exactly the events after ``n``. Keepalive
comments (``: keepalive``) are sent only after ``interval`` seconds without an event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse, StreamingResponse
from temporalio.client import WorkflowFailureError

from activities.pricing import stream as events
from activities.pricing.agent import single_agent
from activities.pricing.catalog import Catalog, current_catalog
from activities.pricing.options import pricing_options
from activities.pricing.pipeline import PIPELINE as PRICING
from activities.pricing.router import RouteDecision, classify_with_llm, decide_route, resolve_scope
from activities.pricing.run import initial_state
from activities.pricing.schemas import (
    ChatHealth,
    ChatRequest,
    ChatStreamEvent,
    ModelsView,
    ThreadRequest,
    ToolView,
)
from activities.pricing.settings import get_pricing_settings
from activities.pricing.tools import TOOLS
from overseer.plugin import (
    LLM_CALLED,
    RUN_COMPLETED,
    RUN_SUBMITTED,
    ConflictError,
    DependencyUnavailableError,
    GraphRunInput,
    InvalidRequestError,
    NewEvent,
    NotFoundError,
    PoolDep,
    Principal,
    PrincipalDep,
    ReviewerDep,
    Settings,
    SettingsDep,
    SubmitterDep,
    TemporalDep,
    append_events,
    cancel_run_workflow,
    count_own,
    decide,
    durable_items,
    encode,
    merge_live,
    run_options,
    start_or_record,
    store_artifact,
    visible_run,
)

log = logging.getLogger("overseer.api.chat")
router = APIRouter(prefix="/api/v1/chat", tags=["chat"])

PIPELINE = "pricing"
CHAT_NAMESPACE = uuid.UUID("5f0c1d8e-2b7a-4c39-9e61-7a3d2f4b8c10")
KEEPALIVE = ": keepalive\n\n"
SELECTION_ORDER = ["admin_override", "request_hint (allowlisted)", "task_default",
                   "global_default"]
_LEAD_KEYS = ("token", "tool_call", "message", "tools_used", "error", "code", "retryable", "node")
_TAIL_KEYS = ("done", "model", "thread_id", "strategy", "outcome", "seq")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


# --- health, tools, models ---------------------------------------------------------------------


@router.get("/health", response_model=ChatHealth)
async def chat_health(settings: SettingsDep) -> ChatHealth:
    """Seed 003 AC6: ``{status, model, tools_count, time}`` (model: the effective default)."""
    return ChatHealth(status="ok", model=effective_model(settings, None)[0],
                      tools_count=len(TOOLS), time=datetime.now(UTC).isoformat())


@router.get("/tools", response_model=list[ToolView])
async def chat_tools(_: PrincipalDep) -> list[ToolView]:
    """Seed 003 AC6: the tools the chat's agent and workers call."""
    return [ToolView(**t) for t in TOOLS]


@router.get("/models", response_model=ModelsView)
async def chat_models(_: PrincipalDep, settings: SettingsDep) -> ModelsView:
    """Models ``?model=`` may ask for; the server decides (seed 003 AC5)."""
    from activities.llm import allowed_models, llm_enabled

    return ModelsView(default=effective_model(settings, None)[0],
                      allowlist=allowed_models(settings), llm_enabled=llm_enabled(settings),
                      selection_order=SELECTION_ORDER)


# --- chat -----------------------------------------------------------------------------------------


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
        source = fast_path(pool, settings, body, principal, catalog, scope, route, run_id,
                           chosen, reason, started, prior=asked)
        if not stream:
            return JSONResponse(await last_event(source))
        return sse_response(frames(skip_seen(source, after)), keepalive, interval)
    await start_orchestrator(pool, temporal, settings, body, principal, catalog, scope, route,
                             run_id, history, chosen, reason, model, idempotency_key)
    if asked:  # the run is submitted: the classifier's call joins its ledger
        async with pool.acquire() as conn:
            await append_events(conn, asked)
    source = orchestrator_events(pool, temporal, run_id, from_offset=after)
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
    if not is_orchestrated(view):
        raise NotFoundError(f"no orchestrated pricing thread {thread_id}")
    after = parse_last_event_id(last_event_id or last_event_id_param)
    return sse_response(frames(orchestrator_events(pool, temporal, view.run_id,
                                                   from_offset=after)),
                        keepalive, interval)


@router.post("/approve", response_model=ChatStreamEvent)
async def approve(body: ThreadRequest, principal: ReviewerDep, pool: PoolDep,
                  temporal: TemporalDep) -> JSONResponse:
    """Sign off a paused plan (reviewers); answers the run's final event once it has finished.

    The same decision path as ``/v1/admin/approvals`` (claims fence other reviewers with 409
    ``claimed_by_other``, admins may override, the same refusal codes).
    """
    handle = await thread_handle(pool, temporal, body.thread_id, principal)
    await decide(pool, temporal, body.thread_id, principal, "approve", updates=body.updates,
                 note=body.note)
    return JSONResponse(await final_event(pool, handle, body.thread_id))


@router.post("/cancel", response_model=ChatStreamEvent)
async def cancel(body: ThreadRequest, principal: PrincipalDep, pool: PoolDep,
                 temporal: TemporalDep) -> JSONResponse:
    """Cancel a running or paused plan (its owner, reviewers, admins); answers the final event."""
    view = await visible_run(pool, body.thread_id, principal)
    handle = await thread_handle(pool, temporal, body.thread_id, principal)
    if view.status in ("completed", "rejected", "failed", "cancelled"):
        raise ConflictError(f"thread {body.thread_id} has already ended ({view.status})",
                            details={"status": view.status})
    if not await cancel_run_workflow(pool, temporal, handle.id, view.run_id, principal.subject):
        raise ConflictError(f"thread {body.thread_id} has already ended")
    return JSONResponse(await final_event(pool, handle, body.thread_id))


# --- routing, catalog, sessions -------------------------------------------------------------------


def effective_model(settings: Settings, hint: str | None) -> tuple[str, str]:
    """``(model, reason)``: the LLM layer's choice for reporting, or ``rules`` offline."""
    from activities.llm import allowed_models, llm_enabled, select_model

    if not llm_enabled(settings):
        refused = ";hint_not_allowlisted" if hint and hint not in allowed_models(settings) else ""
        return events.RULES, "no_llm_endpoint" + refused
    choice = select_model("reporting", settings, hint=hint)
    return choice.model, choice.reason


CLASSIFIER_NODE = "intent_classifier"
"""The ledger's name for the API's intent classifier call (``llm.called`` ``node``)."""


async def route_message(message: str, *, plan: bool, settings: Settings,
                        calls: list[dict[str, Any]] | None = None) -> RouteDecision:
    """Rules, plus the LLM intent classifier when a model is configured (never removes intents).

    Args:
        message: the analyst's ask.
        plan: the caller asked for the orchestrator.
        settings: LLM settings.
        calls: when given, the classifier's call is appended as an ``llm.called`` event's
            data (model, tokens, cost, latency, outcome): the run it belongs to does not
            exist yet, so the caller records it (:func:`classifier_events`).
    """
    from activities.llm import (
        chat_model,
        classify_error,
        llm_enabled,
        price_usd,
        reply_usage,
        select_model,
    )

    if plan or not llm_enabled(settings):
        return decide_route(message, plan=plan)
    choice = select_model("routing", settings)
    model = chat_model(settings, choice.model)
    replies: list[Any] = []
    started = time.monotonic()
    entry: dict[str, Any] = {"task": "routing", "model": choice.model,
                             "choice_reason": choice.reason, "node": CLASSIFIER_NODE,
                             "step": 0, "attempt": 1, "dry_run": settings.dry_run,
                             "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    try:
        extra = await asyncio.wait_for(classify_with_llm(model, message, replies),
                                       timeout=settings.llm_timeout_seconds)
    except Exception as err:  # noqa: BLE001 — the classifier is optional: rules still route
        log.warning("intent classifier failed; rules only", extra={"error": type(err).__name__})
        code = "llm_timeout" if isinstance(err, TimeoutError) else classify_error(err).code
        entry.update(outcome="error", error_code=code)
        return decide_route(message)
    finally:
        entry["latency_ms"] = int((time.monotonic() - started) * 1000)
        if replies:
            entry["input_tokens"], entry["output_tokens"] = reply_usage(replies[0])
            cost = price_usd(choice.model, entry["input_tokens"], entry["output_tokens"],
                             settings)
            entry.update(cost_usd=cost or 0.0, price_known=cost is not None)
        entry.setdefault("outcome", "ok")
        if calls is not None:
            calls.append(entry)
    return decide_route(message, extra_intents=extra, strategy=f"llm:{choice.model}")


def classifier_events(run_id: str, calls: list[dict[str, Any]], subject: str) -> list[NewEvent]:
    """The API's intent-classifier calls as the run's ``llm.called`` events (the one ledger).

    Written with the run's own events, after its ``run.submitted`` (the fast path's one
    transaction; after the orchestrator's start). Keyed by the run, so a retried request
    with the same ``Idempotency-Key`` (the same run) records its first classification only.
    """
    return [NewEvent(run_id=run_id, key=f"llm.called:{CLASSIFIER_NODE}:0:{i + 1}:1",
                     type=LLM_CALLED, actor=f"api:{subject}", data={**entry, "call": i + 1})
            for i, entry in enumerate(calls)]


async def session_history(pool: Any, principal: Principal, session_id: str | None
                          ) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
    """Earlier turns of the caller's session, oldest first, and the last turn's scope."""
    if not session_id:
        return [], None
    rows = await pool.fetch(
        """SELECT input, result FROM runs WHERE pipeline = $1 AND submitted_by = $2
             AND input->>'session_id' = $3 ORDER BY created_at DESC LIMIT 6""",
        PIPELINE, principal.subject, session_id)
    messages: list[dict[str, str]] = []
    scope = None
    for row in reversed(rows):
        inp = _json(row["input"]) or {}
        res = _json(row["result"]) or {}
        messages.append({"role": "user", "content": inp.get("message", "")})
        if res.get("report") or res.get("message"):
            messages.append({"role": "assistant", "content": res.get("report") or res["message"]})
        if inp.get("scope", {}).get("item_ids"):
            scope = inp["scope"]
    return messages, scope


# --- the fast path ---------------------------------------------------------------------------------


async def fast_path(pool: Any, settings: Settings, body: ChatRequest, principal: Principal,
                    catalog: Catalog, scope: dict[str, Any], route: RouteDecision, run_id: str,
                    model: str, reason: str, started: float,
                    prior: list[NewEvent] | None = None) -> AsyncIterator[dict[str, Any]]:
    """The single agent's events with ``seq``; the answer is recorded as a run before ``done``.

    ``prior``: ``llm.called`` events of calls made for this run before it (the API's intent
    classifier), written with its own.
    """
    seq = 0
    ledger: list[NewEvent] = list(prior or [])

    async def record(events: list[NewEvent]) -> None:
        ledger.extend(events)  # every model attempt; written with the run, in one transaction

    async for event in single_agent(body.message, catalog, pricing_options(settings), scope=scope,
                                    model_name=model, settings=settings, run_id=run_id,
                                    record=record, model_reason=reason):
        seq += 1
        if event.get("done"):
            await record_fast_answer(pool, body, principal, catalog, scope, route, run_id,
                                     model, reason, event, started, ledger)
        yield {**event, "seq": seq}


async def record_fast_answer(pool: Any, body: ChatRequest, principal: Principal, catalog: Catalog,
                             scope: dict[str, Any], route: RouteDecision, run_id: str, model: str,
                             reason: str, event: dict[str, Any], started: float,
                             ledger: list[NewEvent] | None = None) -> None:
    """Record a fast-path answer as a run, in one transaction (audit trail, session memory).

    ``run.submitted``, every model attempt (``llm.called``), ``run.completed``; a model
    failure that fell back to the rules answer is in the snapshot's ``fallback``.
    """
    async with pool.acquire() as conn:
        await append_events(conn, [
            NewEvent(run_id=run_id, key="run.submitted", type=RUN_SUBMITTED,
                     actor=f"api:{principal.subject}",
                     # The id its workflow would have: none exists, so Temporal answers
                     # NOT_FOUND to anything sent there (the admin API's 409), never a 5xx.
                     data={"pipeline": PRICING.name, "workflow_id": PRICING.workflow_id(run_id),
                           "submitted_by": principal.subject,
                           "input": {"message": body.message, "session_id": body.session_id,
                                     "path": "single_agent", "route": route.to_dict(),
                                     "scope": scope, "catalog_sha256": catalog.sha256,
                                     "model": model, "model_reason": reason}}),
            *(ledger or []),
            NewEvent(run_id=run_id, key="run.finished", type=RUN_COMPLETED, actor="api",
                     data={"status": "completed", "outcome": "answered",
                           "snapshot": {"message": event["message"], "path": "single_agent",
                                        "tools_used": event["tools_used"],
                                        "strategy": event["strategy"], "model": model,
                                        "fallback": event.get("fallback"),
                                        "latency_ms": int((time.monotonic() - started) * 1000)}}),
        ])


# --- the orchestrator ------------------------------------------------------------------------------


async def start_orchestrator(pool: Any, temporal: Any, settings: Settings, body: ChatRequest,
                             principal: Principal, catalog: Catalog, scope: dict[str, Any],
                             route: RouteDecision, run_id: str, history: list[dict[str, str]],
                             model: str, reason: str, hint: str | None,
                             idempotency_key: str | None) -> None:
    """Snapshot the catalog, record ``run.submitted`` and start the workflow (idempotent by key)."""
    workflow_id = PRICING.workflow_id(run_id)
    data = catalog.to_csv()
    async with pool.acquire() as conn, conn.transaction():
        existing = await conn.fetchrow("SELECT input FROM runs WHERE run_id = $1",
                                       uuid.UUID(run_id))
        if existing is not None and (_json(existing["input"]) or {}).get("message") != body.message:
            raise ConflictError("Idempotency-Key was already used for a different message",
                                details={"thread_id": run_id})
        await store_artifact(conn, data, kind="pricing_catalog", page_count=0,
                             filename="catalog.csv", content_type="text/csv")
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor=f"api:{principal.subject}",
            data={"pipeline": PRICING.name, "workflow_id": workflow_id,
                  "submitted_by": principal.subject, "idempotency_key": idempotency_key,
                  "input": {"message": body.message, "session_id": body.session_id,
                            "path": "orchestrator", "route": route.to_dict(), "scope": scope,
                            "catalog_sha256": catalog.sha256, "model": model,
                            "model_reason": reason}},
        )])
    options = pricing_options(settings)
    own = get_pricing_settings()
    state = initial_state(
        run_id=run_id, message=body.message, plan=route.plan, scope=scope,
        catalog={"sha256": catalog.sha256, "items": len(catalog),
                 "source": own.catalog_table or str(own.catalog_path or "sample")},
        options=options, messages=[*history, {"role": "user", "content": body.message}],
        route=route.to_dict(), session_id=body.session_id, model=model, model_reason=reason,
        model_hint=hint)
    inp = GraphRunInput(run_id=run_id, pipeline=PIPELINE, input=encode(state),
                        options=run_options(settings, options),
                        submitted_by=principal.subject,
                        search_attributes=settings.search_attributes_enabled)
    await start_or_record(pool, temporal, settings, inp, workflow_id=workflow_id,
                          summary=f"pricing: {body.message[:80]}")


async def orchestrator_events(pool: Any, temporal: Any, run_id: str, *, from_offset: int = 0,
                              poll_cooldown: timedelta = timedelta(milliseconds=50),
                              max_errors: int = 5) -> AsyncIterator[dict[str, Any]]:
    """The run's stream events after the first ``from_offset``, each with its dense ``seq`` (1, 2 …).

    Two sources merged in one order (:func:`overseer.token_stream.merge_live`): the events
    the run's workflow publishes on its durable stream (the plan, the sign-off, the
    decision, the final event) and the rows its segments write as the graph runs (each
    worker's ``tool_call`` and summary, the reporter's tokens) — a token never crosses
    Temporal. Read again, the same events come with the same ``seq``, so a client that
    rejoins with ``Last-Event-ID`` gets exactly the events after it.

    Ends after the final (``done``) event. Transient RPC failures resubscribe from the last
    durable offset delivered (nothing repeats); a run that closed without a final event, or
    an unknown thread, ends the stream with an error event.
    """
    seq = 0
    merged = merge_live(
        pool, _durable_events(temporal, run_id, poll_cooldown, max_errors), run_id,
        lambda entry: bool(entry[2].get("done")))
    async for entry in merged:
        if entry[0] == "token":
            data = entry[3]
            if not isinstance(data, dict) or not isinstance(data.get("own"), dict):
                continue  # not of this stream (an Agent Server run's token)
            event = data["own"]
        else:
            event = entry[2]
        seq += 1
        if seq > from_offset:
            yield {**event, "seq": seq}
        if event.get("done"):
            return


async def _durable_events(temporal: Any, run_id: str, poll_cooldown: timedelta,
                          max_errors: int) -> AsyncIterator[tuple[Any, ...]]:
    """The workflow's stream from offset 0: ``("item", offset, event)``, or a last error event."""
    workflow_id = PRICING.workflow_id(run_id)
    async for entry in durable_items(
            temporal, workflow_id, events.STREAM_TOPIC,
            lambda _, data: isinstance(data, dict) and bool(data.get("done")),
            poll_cooldown=poll_cooldown, max_errors=max_errors):
        if entry[0] == "item":
            yield "item", entry[1], entry[2] if isinstance(entry[2], dict) else {"node": "unknown"}
            continue
        _, offset, code = entry
        yield "fail", offset, (
            events.error(f"unknown thread {run_id}", "not_found", retryable=False)
            if code == "not_found" else
            events.error("Temporal did not answer", code, retryable=True, thread_id=run_id)
            if code == "dependency_unavailable" else
            events.error("the run ended without a final answer", code, retryable=False,
                         thread_id=run_id))


# --- approve / cancel helpers ---------------------------------------------------------------------


async def thread_handle(pool: Any, temporal: Any, thread_id: str, principal: Principal) -> Any:
    """The workflow handle of an orchestrated thread the caller may see.

    Raises:
        NotFoundError: unknown thread, a fast-path answer, or someone else's thread.
    """
    view = await visible_run(pool, thread_id, principal)
    if not is_orchestrated(view):
        raise NotFoundError(f"no orchestrated pricing thread {thread_id}")
    return temporal.get_workflow_handle(view.workflow_id)


def is_orchestrated(view: Any) -> bool:
    """A pricing run with a workflow (fast-path answers are runs without one)."""
    return bool(view.pipeline == PIPELINE and view.workflow_id
                and (view.result or {}).get("path") != "single_agent")


async def final_event(pool: Any, handle: Any, run_id: str,
                      timeout_seconds: float = 60.0) -> dict[str, Any]:
    """The run's final stream event (with its ``seq``) once the workflow has closed.

    Its ``seq`` is the one :func:`orchestrator_events` gives it: every durable item and
    every live row of the run come before it.

    Raises:
        DependencyUnavailableError: the run has not finished within ``timeout_seconds``.
    """
    try:
        await asyncio.wait_for(handle.result(), timeout_seconds)
    except (WorkflowFailureError, TimeoutError):
        pass
    event = await handle.query("get_final_event")  # SegmentRunWorkflow's query
    if not event:
        raise DependencyUnavailableError("the run has not finished yet", details={"retry": True})
    items = await handle.query("__temporal_workflow_stream_offset", result_type=int)
    return canonical({**event, "seq": items + await count_own(pool, run_id)})


# --- SSE ----------------------------------------------------------------------------------------------


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
    head = f"id: {event['seq']}\n" if event.get("seq") is not None else ""
    return f"{head}data: {data}\n\n"


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


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
