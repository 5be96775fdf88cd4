"""The API's observability: ``/metrics``, HTTP metrics, FastAPI/asyncpg spans, decision span links.

:func:`install_api_observability` is the one call ``services/api/main.py`` makes:

- FastAPI server spans (``opentelemetry-instrumentation-fastapi``; ``/metrics``,
  ``/healthz`` and ``/readyz`` excluded) and asyncpg client spans
  (``opentelemetry-instrumentation-asyncpg``; SQL text only, never parameters);
- :class:`HTTPMetricsMiddleware`: ``overseer_http_requests_total{method, route, status}``
  and ``overseer_http_request_duration_seconds`` by route *template* (unmatched paths
  count as ``unmatched``), with the request's trace id as exemplar;
- :class:`DecisionLinkMiddleware`: a decision posted days after submission runs in its
  own trace, so its ``approval decision`` span carries a **span link** to the run's trace
  (to the run's ``StartWorkflow`` span, read from the workflow's start header), and
  ``overseer.run_trace_id`` as an attribute;
- ``GET /metrics``: this process's registry (OpenMetrics with exemplars when the scraper
  asks for it), after refreshing the approval-queue gauges from Postgres.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, TraceFlags

from observability import metrics, metrics_exposition, metrics_queue, metrics_recording

log = logging.getLogger("overseer.api.observability")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

EXCLUDED_URLS = "/metrics,/healthz,/readyz"
# The admin API's decision and the review console's form post (services/api/routes/console/decisions.py).
_DECISION_PATH = re.compile(
    r"^/(?:v1/admin/approvals|console/items)/(?P<run_id>[^/]+)/decision/?$")


def install_api_observability(app: FastAPI, *, pipelines: tuple[str, ...] = (),
                              metrics_token: str | None = None) -> None:
    """Instrument ``app`` and add ``GET /metrics`` (call once, before the app starts).

    Args:
        app: the FastAPI app; its lifespan must set ``app.state.pool`` (asyncpg) and
            ``app.state.temporal`` (a Temporal client) for the queue gauges and span links.
        pipelines: pipeline names that always get a queue-gauge series (0 when empty).
        metrics_token: bearer token ``/metrics`` requires (None or empty: none); the API
            passes ``OVERSEER_METRICS_TOKEN`` from its settings.
    """
    token = metrics_token or None
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    from observability.tracing import instrument_asyncpg

    metrics.set_build_info("overseer-api")
    instrument_asyncpg()
    app.add_middleware(DecisionLinkMiddleware)
    app.add_middleware(HTTPMetricsMiddleware)
    FastAPIInstrumentor.instrument_app(app, excluded_urls=EXCLUDED_URLS,
                                       exclude_spans=["receive", "send"])

    @app.get("/metrics", include_in_schema=False)
    async def prometheus_metrics(request: Request) -> Response:
        """Prometheus scrape endpoint (``Authorization: Bearer`` when OVERSEER_METRICS_TOKEN is set)."""
        if not metrics_exposition.metrics_authorized(request.headers.get("authorization"), token):
            return Response("metrics need Authorization: Bearer <OVERSEER_METRICS_TOKEN>\n",
                            status_code=401, media_type="text/plain",
                            headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
        pool = getattr(request.app.state, "pool", None)
        if pool is not None:
            await metrics_queue.refresh_queue_gauges(pool, known_pipelines=pipelines)
        body, content_type = metrics_exposition.render(request.headers.get("accept"))
        return Response(body, media_type=content_type)


class HTTPMetricsMiddleware:
    """Pure ASGI middleware counting requests and their durations by route template."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Time the request; label it by the matched route's path template."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            if template != "/metrics":
                method = str(scope.get("method", "GET"))
                metrics.HTTP_REQUESTS.labels(method, template, str(status)).inc()
                metrics.HTTP_DURATION.labels(method, template).observe(
                    time.perf_counter() - started, exemplar=metrics_recording.trace_exemplar(None))


class DecisionLinkMiddleware:
    """Wraps a decision POST (admin API or review console) in a span linked to the run's trace."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Open the linked ``approval decision`` span around the decision request."""
        match = _DECISION_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if match is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        run_id = match["run_id"]
        app_state = getattr(scope.get("app"), "state", None)
        link, run_trace_id = await run_trace_link(app_state, run_id)
        attrs = {"overseer.run_id": run_id}
        if run_trace_id:
            attrs["overseer.run_trace_id"] = run_trace_id
        tracer = trace.get_tracer("overseer.api")
        with tracer.start_as_current_span("approval decision", links=[link] if link else None,
                                          attributes=attrs):
            await self.app(scope, receive, send)


async def run_trace_link(app_state: Any, run_id: str) -> tuple[Link | None, str | None]:
    """A span link to run ``run_id``'s trace, and that trace's id (None, None when unknown).

    The link points at the run's ``StartWorkflow`` span, whose context the Temporal
    ``OpenTelemetryPlugin`` wrote into the workflow's start header; when that cannot be
    read, at no span (the trace id is still returned for the attribute). Never raises.
    """
    pool = getattr(app_state, "pool", None)
    temporal = getattr(app_state, "temporal", None)
    if pool is None:
        return None, None
    try:
        row = await pool.fetchrow("SELECT workflow_id, trace_id FROM runs WHERE run_id = $1",
                                  uuid.UUID(run_id))
    except Exception:  # a malformed id or a database hiccup: the route answers for itself
        return None, None
    if row is None:
        return None, None
    trace_id = row["trace_id"]
    context = None
    if temporal is not None:
        try:
            context = await start_span_context(temporal, row["workflow_id"])
        except Exception:
            log.debug("could not read the run's start header", exc_info=True)
    if context is None or (trace_id and format(context.trace_id, "032x") != trace_id):
        return None, trace_id
    return Link(context, {"overseer.link": "run_trace", "overseer.run_id": run_id}), trace_id


async def start_span_context(temporal: Any, workflow_id: str) -> SpanContext | None:
    """The span context propagated in the ``WorkflowExecutionStarted`` header of ``workflow_id``."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    from temporalio.converter import PayloadConverter

    handle = temporal.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events(page_size=1):
        header = event.workflow_execution_started_event_attributes.header
        payload = header.fields.get("_tracer-data")
        if payload is None:
            return None
        carrier = PayloadConverter.default.from_payloads([payload])[0]
        ctx = TraceContextTextMapPropagator().extract(carrier)
        span_context = trace.get_current_span(ctx).get_span_context()
        if not span_context.is_valid:
            return None
        return SpanContext(span_context.trace_id, span_context.span_id, is_remote=True,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return None
