"""Prometheus metrics for API and worker: the wire names, the helpers that feed them, ``/metrics``.

Every name here is a wire name (the house style: ``overseer_<noun>_<unit>``, ``_total`` counters,
``_seconds`` durations): add, never rename. ``docs/observability.md`` lists them with
their labels and which process exports them.

Where the numbers come from:

- **the event log** — :func:`observe_events` turns the events that ``append_events``
  newly inserted into counters (routing decisions, approvals, SLA breaches, review
  suggestions, LLM calls from the ``llm.called`` ledger). Only new events count, so an
  activity retried after a crash never counts twice.
- **the worker's interceptors** (``observability.interceptors``) — runs started and
  finished (counted inside the workflow through Temporal's replay-safe metric meter),
  node durations and activity failures.
- **the API** — HTTP requests by route and status (:class:`HTTPMetricsMiddleware`), and
  at scrape time the approval queue read from Postgres (:func:`refresh_queue_gauges`).
- **the Temporal SDK** — :class:`TemporalMetricsCollector` drains Temporal's
  ``MetricBuffer`` into the same registry, so each process is one scrape target.

Exemplars carry the trace id of the span that was current when a sample was recorded
(node durations, HTTP durations, LLM tokens), in the OpenMetrics exposition.
"""

from __future__ import annotations

import hmac
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

log = logging.getLogger("overseer.metrics")

#: Buckets for steps that take milliseconds to minutes (OCR, LLM calls, HTTP).
DURATION_BUCKETS_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                            60.0, 120.0, 300.0, 900.0)
#: Buckets for things that include a human: a run end to end, an approval's wait.
WAIT_BUCKETS_SECONDS = (0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0,
                        12 * 3600.0, 24 * 3600.0, 72 * 3600.0, 7 * 24 * 3600.0)

# --- the wire names ----------------------------------------------------------------------------
# Counted inside workflows (observability.interceptors) through Temporal's metric meter; the
# collector below exposes them under these names. Listed here so docs and tests see one table.
RUNS_STARTED = "overseer_runs_started_total"
RUNS_COMPLETED = "overseer_runs_completed_total"
RUN_DURATION = "overseer_run_duration_seconds"
WORKFLOW_NODE_DURATION = "overseer_workflow_node_duration_seconds"
"""Workflow-placed graph nodes (cheap, pure steps): workflow time, recorded replay-safe."""

BUILD_INFO = Info("overseer_build", "Overseer version and the process that exports these metrics")

NODE_DURATION = Histogram(
    "overseer_node_duration_seconds",
    "Wall-clock time of one graph-node activity attempt",
    ["pipeline", "node", "outcome"],
    buckets=DURATION_BUCKETS_SECONDS,
)
ACTIVITY_FAILURES = Counter(
    "overseer_activity_failures_total",
    "Failed activity attempts, by activity and error type (retried ones included)",
    ["pipeline", "activity", "error_type", "retryable"],
)
ROUTING_DECISIONS = Counter(
    "overseer_routing_decisions_total",
    "Routing decisions recorded as route.decided events",
    ["pipeline", "after", "route", "reason"],
)
EVENTS_APPENDED = Counter(
    "overseer_events_appended_total",
    "Events newly appended to the event log by activities",
    ["pipeline", "type"],
)
APPROVALS_REQUESTED = Counter(
    "overseer_approvals_requested_total",
    "Approval requests opened (approval.requested)",
    ["pipeline"],
)
APPROVAL_DECISIONS = Counter(
    "overseer_approval_decisions_total",
    "Human decisions applied to approval requests (approval.decided)",
    ["pipeline", "decision"],
)
APPROVAL_WAIT = Histogram(
    "overseer_approval_wait_seconds",
    "Time from an approval request to its decision",
    ["pipeline", "decision"],
    buckets=WAIT_BUCKETS_SECONDS,
)
APPROVAL_SLA_BREACHES = Counter(
    "overseer_approval_sla_breaches_total",
    "Approval requests still undecided when their SLA timer fired (approval.sla_breached)",
    ["pipeline"],
)
REVIEW_SUGGESTIONS = Counter(
    "overseer_review_suggestions_total",
    "Review-agent proposals, by whether they were applied without a human",
    ["pipeline", "auto_applied"],
)
APPROVALS_PENDING = Gauge(
    "overseer_approvals_pending",
    "Approval requests waiting for a human now (from the approvals read model)",
    ["pipeline"],
)
APPROVALS_OVERDUE = Gauge(
    "overseer_approvals_overdue",
    "Pending approval requests past their SLA deadline now",
    ["pipeline"],
)
APPROVAL_OLDEST_AGE = Gauge(
    "overseer_approval_oldest_pending_age_seconds",
    "Age of the oldest pending approval request (0 when none)",
    ["pipeline"],
)
RUNS_ACTIVE = Gauge(
    "overseer_runs_active",
    "Runs not yet finished, by status (from the runs read model)",
    ["pipeline", "status"],
)
LLM_CALLS = Counter(
    "overseer_llm_calls_total",
    "LLM call attempts, by model and outcome (ok or the error code)",
    ["model", "outcome"],
)
LLM_TOKENS = Counter(
    "overseer_llm_tokens_total",
    "LLM tokens, by model and direction (input or output)",
    ["model", "direction"],
)
LLM_COST = Counter(
    "overseer_llm_cost_usd_total",
    "LLM spend in US dollars from the price table, by model",
    ["model"],
)
LLM_DURATION = Histogram(
    "overseer_llm_call_duration_seconds",
    "Latency of one LLM call attempt",
    ["model"],
    buckets=DURATION_BUCKETS_SECONDS,
)
HTTP_REQUESTS = Counter(
    "overseer_http_requests_total",
    "HTTP requests answered by the API, by route template and status code",
    ["method", "route", "status"],
)
HTTP_DURATION = Histogram(
    "overseer_http_request_duration_seconds",
    "Time to answer an HTTP request, by route template",
    ["method", "route"],
    buckets=DURATION_BUCKETS_SECONDS,
)
QUEUE_GAUGE_ERRORS = Counter(
    "overseer_metrics_refresh_errors_total",
    "Scrapes whose read-model gauges could not be refreshed from Postgres",
)

# Label values outside these sets are folded into "other", so a bug or a hostile value can
# never blow up the number of series.
_MAX_LABEL_CHARS = 64


def set_build_info(service: str, version: str = "0.1.0") -> None:
    """Record ``overseer_build_info{service, version}`` once per process."""
    BUILD_INFO.info({"service": service, "version": version})


def pipeline_of(workflow_id: str | None, default: str = "unknown") -> str:
    """The pipeline of a workflow id ``<pipeline>-<run_id UUID>`` (``default`` when it has none)."""
    if not workflow_id or len(workflow_id) < 38 or workflow_id[-37] != "-":
        return default
    try:
        uuid.UUID(workflow_id[-36:])
    except ValueError:
        return default
    return workflow_id[:-37]


def run_id_of(workflow_id: str | None) -> str | None:
    """The run id (UUID string) at the end of a workflow id, or None."""
    if pipeline_of(workflow_id, default="") == "":
        return None
    assert workflow_id is not None
    return workflow_id[-36:]


def observe_llm_call(model: str, input_tokens: int, output_tokens: int,
                     cost_usd: float | None = None, *, duration_seconds: float | None = None,
                     outcome: str = "ok", trace_id: str | None = None) -> None:
    """Record one LLM call attempt in ``overseer_llm_*``.

    Calls made through ``activities.llm.call_json`` need no call here: they append an
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
    model = _label(model or "unknown")
    exemplar = _exemplar(trace_id)
    LLM_CALLS.labels(model, _label(outcome)).inc(exemplar=exemplar)
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
    NODE_DURATION.labels(_label(pipeline), _label(node), outcome).observe(
        duration_seconds, exemplar=_exemplar(trace_id))


def observe_activity_failure(pipeline: str, activity: str, error_type: str, *,
                             retryable: bool) -> None:
    """Count one failed activity attempt (``error_type``: ApplicationError type or class name)."""
    ACTIVITY_FAILURES.labels(_label(pipeline), _label(activity), _label(error_type),
                             "true" if retryable else "false").inc()


async def observe_events(conn: Any, events: Sequence[Any], *, workflow_id: str | None = None) -> None:
    """Derive business metrics from events that were *newly* appended (never raises).

    Args:
        conn: the asyncpg connection that appended them (used to read an approval's
            request time for ``overseer_approval_wait_seconds``).
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
        pipeline = _label(str(data.get("pipeline") or default_pipeline))
        kind = event.type
        EVENTS_APPENDED.labels(pipeline, _label(kind)).inc()
        if kind == "route.decided":
            ROUTING_DECISIONS.labels(pipeline, _label(str(data.get("after", "unknown"))),
                                     _label(str(data.get("route", "unknown"))),
                                     _label(str(data.get("reason", "unknown")))).inc()
        elif kind == "approval.requested":
            APPROVALS_REQUESTED.labels(pipeline).inc()
        elif kind == "approval.sla_breached":
            APPROVAL_SLA_BREACHES.labels(pipeline).inc()
        elif kind == "approval.decided":
            decision = _label(str(data.get("decision", "unknown")))
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


# --- read-model gauges (API, at scrape time) ---------------------------------------------------

_QUEUE_SQL = """
SELECT pipeline,
       count(*) AS pending,
       count(*) FILTER (WHERE sla_deadline IS NOT NULL AND sla_deadline < now()) AS overdue,
       coalesce(extract(epoch FROM now() - min(requested_at)), 0) AS oldest_age_seconds
FROM approvals WHERE status = 'pending' GROUP BY pipeline
"""
_ACTIVE_SQL = """
SELECT pipeline, status, count(*) AS runs FROM runs
WHERE status IN ('running', 'awaiting_approval') GROUP BY pipeline, status
"""
_refresh_lock = threading.Lock()
_refreshed_at = 0.0


async def refresh_queue_gauges(pool: Any, *, known_pipelines: Iterable[str] = (),
                               min_interval_seconds: float = 2.0) -> None:
    """Set the approval-queue and active-run gauges from Postgres (at most every few seconds).

    Pipelines in ``known_pipelines`` always get a series (0 when nothing waits), so a
    dashboard shows an empty queue as 0 rather than as "no data".

    Never raises: a failed refresh counts ``overseer_metrics_refresh_errors_total`` and
    leaves the previous values.
    """
    global _refreshed_at
    now = time.monotonic()
    if now - _refreshed_at < min_interval_seconds:
        return
    try:
        queue = await pool.fetch(_QUEUE_SQL)
        active = await pool.fetch(_ACTIVE_SQL)
    except Exception:
        QUEUE_GAUGE_ERRORS.inc()
        log.warning("could not read the approval queue for metrics", exc_info=True)
        return
    with _refresh_lock:
        _refreshed_at = now
        for gauge in (APPROVALS_PENDING, APPROVALS_OVERDUE, APPROVAL_OLDEST_AGE, RUNS_ACTIVE):
            gauge.clear()
        for name in known_pipelines:
            for gauge in (APPROVALS_PENDING, APPROVALS_OVERDUE, APPROVAL_OLDEST_AGE):
                gauge.labels(_label(name)).set(0)
            for status in ("running", "awaiting_approval"):
                RUNS_ACTIVE.labels(_label(name), status).set(0)
        for row in queue:
            p = _label(row["pipeline"])
            APPROVALS_PENDING.labels(p).set(row["pending"])
            APPROVALS_OVERDUE.labels(p).set(row["overdue"])
            APPROVAL_OLDEST_AGE.labels(p).set(float(row["oldest_age_seconds"]))
        for row in active:
            RUNS_ACTIVE.labels(_label(row["pipeline"]), row["status"]).set(row["runs"])


# --- exposition --------------------------------------------------------------------------------


def render(accept_header: str | None, registry: CollectorRegistry = REGISTRY) -> tuple[bytes, str]:
    """The registry in the format the scraper asked for (OpenMetrics carries exemplars).

    Returns:
        ``(body, content_type)``.
    """
    encoder, content_type = choose_encoder(accept_header or "")
    return encoder(registry), content_type or CONTENT_TYPE_LATEST


def start_metrics_server(host: str, port: int, registry: CollectorRegistry = REGISTRY, *,
                         token: str | None = None) -> int | None:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread (the worker's scrape target).

    Args:
        host: bind address (``OVERSEER_METRICS_HOST_WORKER``; ``127.0.0.1`` by default).
        port: port; 0 picks a free one.
        registry: what to expose.
        token: when set (``OVERSEER_METRICS_TOKEN``), every request must carry
            ``Authorization: Bearer <token>``; others get 401 and no metrics.

    Returns:
        The bound port, or None when the port was taken (logged; the process keeps running,
        e.g. a second worker started on the same machine).
    """
    from wsgiref.simple_server import make_server

    from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler, make_wsgi_app

    class _Server(ThreadingWSGIServer):
        address_family = _address_family(host)

    app = _bearer_protected(make_wsgi_app(registry), token)
    try:
        server = make_server(host, port, app, _Server, handler_class=_SilentHandler)
    except OSError as err:
        log.warning("metrics endpoint not started", extra={"host": host, "port": port,
                                                            "error": str(err)})
        return None
    threading.Thread(target=server.serve_forever, name="overseer-metrics", daemon=True).start()
    return int(server.server_port)


def metrics_authorized(authorization: str | None, token: str | None) -> bool:
    """Whether a scrape may read ``/metrics``.

    Args:
        authorization: the request's ``Authorization`` header value (None when absent).
        token: the configured ``OVERSEER_METRICS_TOKEN``; None or empty = no authentication
            (the default: the endpoint is then protected only by where it listens).

    Returns:
        True when no token is configured, or the header is ``Bearer <token>`` (scheme
        case-insensitive, compared in constant time); False otherwise.
    """
    if not token:
        return True
    if not authorization:
        return False
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode(), token.encode())


def _bearer_protected(app: Any, token: str | None) -> Any:
    """Wrap the WSGI ``app`` so that only requests passing :func:`metrics_authorized` reach it."""
    if not token:
        return app

    def protected(environ: dict[str, Any], start_response: Any) -> Any:
        if metrics_authorized(environ.get("HTTP_AUTHORIZATION"), token):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                            ("WWW-Authenticate", 'Bearer realm="metrics"')])
        return [b"metrics need Authorization: Bearer <OVERSEER_METRICS_TOKEN>\n"]

    return protected


def _address_family(host: str) -> int:
    import socket

    return socket.AF_INET6 if ":" in host else socket.AF_INET


# --- Temporal SDK metrics: one scrape target per process -----------------------------------------


_temporal_runtime: Any = None


def temporal_runtime(registry: CollectorRegistry = REGISTRY, *, buffer_size: int = 100_000) -> Any:
    """A Temporal ``Runtime`` whose SDK metrics are served by this process's ``/metrics`` (idempotent).

    Chosen over ``PrometheusConfig(bind_address=...)`` so each process is one scrape target:
    the SDK writes into a ``MetricBuffer`` and :class:`TemporalMetricsCollector` exposes it
    from the same registry as Overseer's own metrics. Pass the runtime to
    ``Client.connect(runtime=...)``; workers made from that client report through it.
    """
    global _temporal_runtime
    if _temporal_runtime is not None:
        return _temporal_runtime
    from temporalio.runtime import MetricBuffer, MetricBufferDurationFormat, Runtime, TelemetryConfig

    buffer = MetricBuffer(buffer_size, MetricBufferDurationFormat.SECONDS)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    collector = TemporalMetricsCollector(buffer).start()
    registry.register(collector)
    _temporal_runtime = runtime
    return runtime


class TemporalMetricsCollector(Collector):
    """Exposes the Temporal SDK's metrics (and workflow-side ``overseer_*`` ones) from a MetricBuffer.

    Temporal's Rust core writes metric updates into a :class:`temporalio.runtime.MetricBuffer`;
    this collector drains it (on every scrape and from a background thread, so the buffer
    never fills) and keeps cumulative values: counters as ``<name>_total``, histograms of
    durations as ``<name>_seconds`` with :data:`DURATION_BUCKETS_SECONDS`, gauges as they
    are. Names that already follow Overseer's convention (``overseer_*``) pass unchanged.

    Args:
        buffer: the buffer given to ``TelemetryConfig(metrics=...)`` (durations in seconds).
        drain_interval_seconds: how often the background thread drains.
    """

    def __init__(self, buffer: Any, *, drain_interval_seconds: float = 1.0) -> None:
        self._buffer = buffer
        self._lock = threading.Lock()
        # name -> (kind, description, {labels_tuple: value | _Hist})
        self._series: dict[str, tuple[int, str, dict[tuple[tuple[str, str], ...], Any]]] = {}
        self._interval = drain_interval_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> TemporalMetricsCollector:
        """Start the background drain thread (daemon); returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="temporal-metrics-drain",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the drain thread."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.drain()

    def drain(self) -> None:
        """Fold all buffered updates into the cumulative series."""
        with self._lock:
            try:
                updates = self._buffer.retrieve_updates()
            except RuntimeError:  # the runtime is not created yet
                return
            for update in updates:
                metric = update.metric
                kind = int(metric.kind)
                name = _temporal_name(metric.name, kind, metric.unit)
                entry = self._series.get(name)
                if entry is None:
                    entry = (kind, metric.description or metric.name, {})
                    self._series[name] = entry
                labels = tuple(sorted((str(k), _label_value(v))
                                      for k, v in dict(update.attributes).items()
                                      if k != "service_name"))
                values = entry[2]
                if kind == 0:  # counter: deltas
                    values[labels] = values.get(labels, 0) + update.value
                elif kind == 1:  # gauge: last value
                    values[labels] = update.value
                else:
                    hist = values.get(labels)
                    if hist is None:
                        hist = values[labels] = _Hist()
                    hist.observe(float(update.value))

    def collect(self) -> Iterator[Metric]:
        """Prometheus collection: drain, then yield one family per metric name."""
        self.drain()
        with self._lock:
            for name, (kind, description, values) in sorted(self._series.items()):
                if kind == 0:
                    family = Metric(name[: -len("_total")], description, "counter")
                    for labels, value in values.items():
                        family.add_sample(name, dict(labels), float(value))
                elif kind == 1:
                    family = Metric(name, description, "gauge")
                    for labels, value in values.items():
                        family.add_sample(name, dict(labels), float(value))
                else:
                    family = Metric(name, description, "histogram")
                    for labels, hist in values.items():
                        hist.samples_into(family, name, dict(labels))
                yield family


class _Hist:
    __slots__ = ("counts", "sum", "count")

    def __init__(self) -> None:
        self.counts = [0] * len(DURATION_BUCKETS_SECONDS)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.sum += value
        self.count += 1
        for i, bound in enumerate(DURATION_BUCKETS_SECONDS):
            if value <= bound:
                self.counts[i] += 1
                break

    def samples_into(self, family: Metric, name: str, labels: dict[str, str]) -> None:
        running = 0
        for bound, n in zip(DURATION_BUCKETS_SECONDS, self.counts, strict=True):
            running += n
            family.add_sample(f"{name}_bucket", {**labels, "le": _float_str(bound)}, running)
        family.add_sample(f"{name}_bucket", {**labels, "le": "+Inf"}, self.count)
        family.add_sample(f"{name}_count", labels, self.count)
        family.add_sample(f"{name}_sum", labels, self.sum)


def _temporal_name(name: str, kind: int, unit: str | None) -> str:
    if kind == 0:
        return name if name.endswith("_total") else f"{name}_total"
    if kind == 2 and unit in ("s", "ms", "duration") and not name.endswith("_seconds"):
        return f"{name}_seconds"
    return name


def _float_str(value: float) -> str:
    return repr(float(value))


def _label_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return _label(str(value))


def _label(value: str) -> str:
    return value if len(value) <= _MAX_LABEL_CHARS else value[:_MAX_LABEL_CHARS]


def _exemplar(trace_id: str | None) -> dict[str, str] | None:
    if trace_id is None:
        from observability.tracing import current_trace_id

        trace_id = current_trace_id()
    return {"trace_id": trace_id} if trace_id else None


def metric_names() -> list[str]:
    """Every ``overseer_*`` sample family this version exports (for docs and tests)."""
    names = {RUNS_STARTED, RUNS_COMPLETED, RUN_DURATION, WORKFLOW_NODE_DURATION}
    for collector in (BUILD_INFO, NODE_DURATION, ACTIVITY_FAILURES, ROUTING_DECISIONS,
                      EVENTS_APPENDED, APPROVALS_REQUESTED, APPROVAL_DECISIONS, APPROVAL_WAIT,
                      APPROVAL_SLA_BREACHES, REVIEW_SUGGESTIONS, APPROVALS_PENDING,
                      APPROVALS_OVERDUE, APPROVAL_OLDEST_AGE, RUNS_ACTIVE, LLM_CALLS, LLM_TOKENS,
                      LLM_COST, LLM_DURATION, HTTP_REQUESTS, HTTP_DURATION, QUEUE_GAUGE_ERRORS):
        for family in collector.describe():
            suffix = {"counter": "_total", "info": "_info"}.get(family.type, "")
            names.add(family.name + suffix)
    return sorted(names)
