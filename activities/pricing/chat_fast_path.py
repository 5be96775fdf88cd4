"""The pricing chat's fast path: a simple ask answered by the single agent in the API process.

No workflow runs; the answer is recorded as a run (``run.submitted``, every model attempt,
``run.completed``) in one transaction before its final event is sent.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from activities.pricing.agent import single_agent
from activities.pricing.catalog import Catalog
from activities.pricing.options import pricing_options
from activities.pricing.router import RouteDecision
from activities.pricing.schemas import ChatRequest
from overseer.plugin import (
    RUN_COMPLETED,
    RUN_SUBMITTED,
    NewEvent,
    Pipeline,
    Principal,
    Settings,
    append_events,
)


async def fast_path(pipeline: Pipeline, pool: Any, settings: Settings, body: ChatRequest,
                    principal: Principal, catalog: Catalog, scope: dict[str, Any],
                    route: RouteDecision, run_id: str, model: str, reason: str, started: float,
                    prior: list[NewEvent] | None = None) -> AsyncIterator[dict[str, Any]]:
    """The single agent's events with ``seq``; the answer is recorded as a run before ``done``.

    ``pipeline``: the pricing pipeline as declared (``activities.pricing.pipeline``), whose
    run the answer is recorded as. ``prior``: ``llm.called`` events of calls made for this
    run before it (the API's intent classifier), written with its own.
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
            await record_fast_answer(pipeline, pool, body, principal, catalog, scope, route,
                                     run_id, model, reason, event, started, ledger)
        yield {**event, "seq": seq}


async def record_fast_answer(pipeline: Pipeline, pool: Any, body: ChatRequest,
                             principal: Principal, catalog: Catalog, scope: dict[str, Any],
                             route: RouteDecision, run_id: str, model: str, reason: str,
                             event: dict[str, Any], started: float,
                             ledger: list[NewEvent] | None = None) -> None:
    """Record a fast-path answer as a run of ``pipeline``, in one transaction (audit trail, session memory).

    ``run.submitted``, every model attempt (``llm.called``), ``run.completed``; a model
    failure that fell back to the rules answer is in the snapshot's ``fallback``.
    """
    async with pool.acquire() as conn:
        await append_events(conn, [
            NewEvent(run_id=run_id, key="run.submitted", type=RUN_SUBMITTED,
                     actor=f"api:{principal.subject}",
                     # The id its workflow would have: none exists, so Temporal answers
                     # NOT_FOUND to anything sent there (the admin API's 409), never a 5xx.
                     data={"pipeline": pipeline.name, "workflow_id": pipeline.workflow_id(run_id),
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
