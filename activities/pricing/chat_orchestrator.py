"""The pricing chat's orchestrated runs: start one from an ask, and read its event stream.

A composite ask (or ``plan=true``) snapshots the catalog, records ``run.submitted`` and
starts the pricing run (``SegmentRunWorkflow``); its stream merges the workflow's durable
``WorkflowStream`` with the rows its segments write, each event with a dense ``seq``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from activities.pricing import stream as events
from activities.pricing.catalog import Catalog
from activities.pricing.chat_runs import json_column
from activities.pricing.options import pricing_options
from activities.pricing.router import RouteDecision
from activities.pricing.run import initial_state
from activities.pricing.schemas import ChatRequest
from activities.pricing.settings import get_pricing_settings
from overseer.plugin import (
    RUN_SUBMITTED,
    ConflictError,
    NewEvent,
    Pipeline,
    Principal,
    RunRequest,
    Settings,
    append_events,
    durable_items,
    merge_live,
    start_or_record,
    store_artifact,
)


async def start_orchestrator(pipeline: Pipeline, pool: Any, temporal: Any, settings: Settings,
                             body: ChatRequest, principal: Principal, catalog: Catalog,
                             scope: dict[str, Any], route: RouteDecision, run_id: str,
                             history: list[dict[str, str]], model: str, reason: str,
                             hint: str | None, idempotency_key: str | None) -> str:
    """Snapshot the catalog, record ``run.submitted`` and start the workflow (idempotent by key).

    ``pipeline`` is the pricing pipeline as declared (``activities.pricing.pipeline``).
    Returns the run's workflow id.
    """
    workflow_id = pipeline.workflow_id(run_id)
    data = catalog.to_csv()
    async with pool.acquire() as conn, conn.transaction():
        existing = await conn.fetchrow("SELECT input FROM runs WHERE run_id = $1",
                                       uuid.UUID(run_id))
        if existing is not None and (json_column(existing["input"]) or {}).get("message") != body.message:
            raise ConflictError("Idempotency-Key was already used for a different message",
                                details={"thread_id": run_id})
        await store_artifact(conn, data, kind="pricing_catalog", page_count=0,
                             filename="catalog.csv", content_type="text/csv")
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor=f"api:{principal.subject}",
            data={"pipeline": pipeline.name, "workflow_id": workflow_id,
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
    await start_or_record(pool, temporal, settings, RunRequest(
        pipeline=pipeline, run_id=run_id, input=state, submitted_by=principal.subject,
        snapshot=options, summary=f"pricing: {body.message[:80]}"))
    return workflow_id


async def orchestrator_events(pool: Any, temporal: Any, run_id: str, workflow_id: str, *,
                              from_offset: int = 0,
                              poll_cooldown: timedelta = timedelta(milliseconds=50),
                              max_errors: int = 5) -> AsyncIterator[dict[str, Any]]:
    """The run's stream events after the first ``from_offset``, each with its dense ``seq`` (1, 2 …).

    ``workflow_id`` is the run's workflow (what :func:`start_orchestrator` returns, and the
    run's ``workflow_id`` as stored).

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
        pool, _durable_events(temporal, run_id, workflow_id, poll_cooldown, max_errors), run_id,
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


async def _durable_events(temporal: Any, run_id: str, workflow_id: str, poll_cooldown: timedelta,
                          max_errors: int) -> AsyncIterator[tuple[Any, ...]]:
    """The workflow's stream from offset 0: ``("item", offset, event)``, or a last error event."""
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
