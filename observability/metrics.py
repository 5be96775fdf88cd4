"""Prometheus metrics for API and worker: the wire names and the series they are recorded in.

Every name here is a wire name (the house style: ``overseer_<noun>_<unit>``, ``_total`` counters,
``_seconds`` durations): add, never rename. ``docs/observability.md`` lists them with
their labels and which process exports them.

Where the numbers come from:

- **the event log** — :func:`observability.metrics_recording.observe_events` turns the events
  that ``append_events`` newly inserted into counters (routing decisions, approvals, SLA
  breaches, review suggestions, LLM calls from the ``llm.called`` ledger). Only new events
  count, so an activity retried after a crash never counts twice.
- **the worker's interceptors** (``observability.interceptors``) — runs started and
  finished (counted inside the workflow through Temporal's replay-safe metric meter),
  node durations and activity failures.
- **the API** — HTTP requests by route and status (:class:`observability.http.HTTPMetricsMiddleware`),
  and at scrape time the approval queue read from Postgres
  (:func:`observability.metrics_queue.refresh_queue_gauges`).
- **the Temporal SDK** — :class:`observability.metrics_temporal.TemporalMetricsCollector` drains
  Temporal's ``MetricBuffer`` into the same registry, so each process is one scrape target.

Exemplars carry the trace id of the span that was current when a sample was recorded
(node durations, HTTP durations, LLM tokens), in the OpenMetrics exposition
(``observability.metrics_exposition`` serves ``/metrics``).
"""

from __future__ import annotations

import uuid

from prometheus_client import Counter, Gauge, Histogram, Info

#: Buckets for steps that take milliseconds to minutes (OCR, LLM calls, HTTP).
DURATION_BUCKETS_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                            60.0, 120.0, 300.0, 900.0)
#: Buckets for things that include a human: a run end to end, an approval's wait.
WAIT_BUCKETS_SECONDS = (0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0,
                        12 * 3600.0, 24 * 3600.0, 72 * 3600.0, 7 * 24 * 3600.0)

# --- the wire names ----------------------------------------------------------------------------
# Counted inside workflows (observability.interceptors) through Temporal's metric meter; the
# collector in observability.metrics_temporal exposes them under these names. Listed here so
# docs and tests see one table.
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


def bounded_label(value: str) -> str:
    """A label value cut to at most 64 characters, so no value can make its series unbounded.

    Args:
        value: the label value as recorded (a pipeline, node, model, error code, …).

    Returns:
        ``value``, or its first 64 characters.
    """
    return value if len(value) <= _MAX_LABEL_CHARS else value[:_MAX_LABEL_CHARS]


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
