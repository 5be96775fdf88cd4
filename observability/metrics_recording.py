"""The helpers that record node, activity, LLM and event-log metrics into :mod:`observability.metrics`.

- :func:`observe_events` turns events that ``append_events`` newly inserted into the business
  counters (routing decisions, approvals and their wait, SLA breaches, review suggestions,
  LLM calls from the ``llm.called`` ledger). Only new events count, so an activity retried
  after a crash never counts twice; a failure here is logged, never raised into the write.
- :func:`observe_node` and :func:`observe_activity_failure` are called by the worker's
  interceptors (``observability.interceptors``); :func:`observe_llm_call` by a model call that
  writes no ``llm.called`` event.
- :func:`trace_exemplar` is the trace id a sample carries (also used by the API's HTTP metrics).
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from observability.metrics import (
    ACTIVITY_FAILURES,
    APPROVAL_DECISIONS,
    APPROVAL_SLA_BREACHES,
    APPROVAL_WAIT,
    APPROVALS_REQUESTED,
    EVENTS_APPENDED,
    LLM_CALLS,
    LLM_COST,
    LLM_DURATION,
    LLM_TOKENS,
    NODE_DURATION,
    REVIEW_SUGGESTIONS,
    ROUTING_DECISIONS,
    bounded_label,
    pipeline_of,
)

log = logging.getLogger("overseer.metrics")


def observe_llm_call(model: str, input_tokens: int, output_tokens: int,
                     cost_usd: float | None = None, *, duration_seconds: float | None = None,
                     outcome: str = "ok", trace_id: str | None = None) -> None:
    """Record one LLM call attempt in ``overseer_llm_*``.

    Calls made through ``overseer.runtime.llm.call_json`` need no call here: they append an
    ``llm.called`` ledger event and :func:`observe_events` derives these metrics from the
    newly inserted events (so a retried activity never counts the same attempt twice).
    Call this only for a model call that writes no ``llm.called`` event.

    Args:
        model: the model name (label ``model``), e.g. ``gpt-4o-mini``.
        input_tokens: prompt tokens (>= 0).
        output_tokens: completion tokens (>= 0).
        cost_usd: price-table cost in USD; None when the price is unknown (nothing added).
        duration_seconds: latency of the attempt, when known.
        outcome: ``ok`` or a stable error code (``llm_rate_limited``, …).
        trace_id: 32-hex trace id for the exemplar (default: the current span's).
    """
    model = bounded_label(model or "unknown")
    exemplar = trace_exemplar(trace_id)
    LLM_CALLS.labels(model, bounded_label(outcome)).inc(exemplar=exemplar)
    if input_tokens > 0:
        LLM_TOKENS.labels(model, "input").inc(input_tokens, exemplar=exemplar)
    if output_tokens > 0:
        LLM_TOKENS.labels(model, "output").inc(output_tokens, exemplar=exemplar)
    if cost_usd is not None and cost_usd > 0 and math.isfinite(cost_usd):
        LLM_COST.labels(model).inc(cost_usd)
    if duration_seconds is not None and duration_seconds >= 0:
        LLM_DURATION.labels(model).observe(duration_seconds, exemplar=exemplar)


def observe_node(pipeline: str, node: str, duration_seconds: float, *, outcome: str,
                 trace_id: str | None = None) -> None:
    """Record one graph-node (or other activity) attempt's duration.

    Args:
        pipeline: the registry name of the run's graph.
        node: node or activity name, e.g. ``run_pipeline``.
        duration_seconds: wall-clock seconds of the attempt.
        outcome: ``ok`` or ``error``.
        trace_id: exemplar trace id (default: the current span's).
    """
    NODE_DURATION.labels(bounded_label(pipeline), bounded_label(node), outcome).observe(
        duration_seconds, exemplar=trace_exemplar(trace_id))


def observe_activity_failure(pipeline: str, activity: str, error_type: str, *,
                             retryable: bool) -> None:
    """Count one failed activity attempt (``error_type``: ApplicationError type or class name)."""
    ACTIVITY_FAILURES.labels(bounded_label(pipeline), bounded_label(activity), bounded_label(error_type),
                             "true" if retryable else "false").inc()


async def observe_events(conn: Any, events: Sequence[Any], *, workflow_id: str | None = None) -> None:
    """Derive business metrics from events that were *newly* appended (never raises).

    Args:
        conn: the asyncpg connection that appended them, or the pool once they are
            committed (used to read an approval's request time for
            ``overseer_approval_wait_seconds``).
        events: :class:`overseer.store.events.NewEvent` objects as returned by
            ``append_events`` (only the new ones).
        workflow_id: the recording workflow's id, to name the pipeline when an event's
            data does not (default: the current activity's workflow).
    """
    try:
        await _observe_events(conn, events, workflow_id)
    except Exception:  # metrics must never fail the event log write that already committed
        log.warning("could not derive metrics from events", exc_info=True)


async def _observe_events(conn: Any, events: Sequence[Any], workflow_id: str | None) -> None:
    if workflow_id is None:
        workflow_id = _current_workflow_id()
    default_pipeline = pipeline_of(workflow_id)
    for event in events:
        data: Mapping[str, Any] = event.data or {}
        pipeline = bounded_label(str(data.get("pipeline") or default_pipeline))
        kind = event.type
        EVENTS_APPENDED.labels(pipeline, bounded_label(kind)).inc()
        if kind == "route.decided":
            ROUTING_DECISIONS.labels(pipeline, bounded_label(str(data.get("after", "unknown"))),
                                     bounded_label(str(data.get("route", "unknown"))),
                                     bounded_label(str(data.get("reason", "unknown")))).inc()
        elif kind == "approval.requested":
            APPROVALS_REQUESTED.labels(pipeline).inc()
        elif kind == "approval.sla_breached":
            APPROVAL_SLA_BREACHES.labels(pipeline).inc()
        elif kind == "approval.decided":
            decision = bounded_label(str(data.get("decision", "unknown")))
            APPROVAL_DECISIONS.labels(pipeline, decision).inc()
            wait = await _approval_wait_seconds(conn, event)
            if wait is not None:
                APPROVAL_WAIT.labels(pipeline, decision).observe(wait)
        elif kind == "review.suggested":
            REVIEW_SUGGESTIONS.labels(pipeline, "true" if data.get("auto_applied") else "false").inc()
        elif kind == "llm.called":
            latency_ms = data.get("latency_ms")
            observe_llm_call(
                str(data.get("model") or "unknown"),
                int(data.get("input_tokens") or 0),
                int(data.get("output_tokens") or 0),
                float(data["cost_usd"]) if data.get("cost_usd") is not None else None,
                duration_seconds=float(latency_ms) / 1000 if latency_ms is not None else None,
                outcome="ok" if data.get("outcome", "ok") == "ok" else str(data.get("error_code")
                                                                           or "error"),
                trace_id=getattr(event, "trace_id", None),
            )


async def _approval_wait_seconds(conn: Any, event: Any) -> float | None:
    if conn is None:
        return None
    requested = await conn.fetchval("SELECT requested_at FROM approvals WHERE run_id = $1",
                                    uuid.UUID(event.run_id))
    decided_raw = (event.data or {}).get("decided_at") or event.occurred_at
    if requested is None or not decided_raw:
        return None
    decided = datetime.fromisoformat(str(decided_raw))
    if decided.tzinfo is None:
        decided = decided.replace(tzinfo=requested.tzinfo)
    return max(0.0, float((decided - requested).total_seconds()))


def _current_workflow_id() -> str | None:
    from temporalio import activity

    return activity.info().workflow_id if activity.in_activity() else None


def trace_exemplar(trace_id: str | None) -> dict[str, str] | None:
    """The exemplar a sample carries: its trace id.

    Args:
        trace_id: a 32-hex trace id; None takes the current span's.

    Returns:
        ``{"trace_id": ...}``, or None when there is no trace (no current span).
    """
    if trace_id is None:
        from observability.tracing import current_trace_id

        trace_id = current_trace_id()
    return {"trace_id": trace_id} if trace_id else None
