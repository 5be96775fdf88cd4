"""The worker's observability interceptor: run and node metrics, node span attributes, stage logs.

- **Workflows** (inside the sandbox, replay-safe), runs only (not a cron's tick or a
  thread's clean-up or ttl timer, :data:`HOUSEKEEPING_WORKFLOWS`):
  ``overseer_runs_started_total`` when a run starts, ``overseer_runs_completed_total{status, outcome}`` and
  ``overseer_run_duration_seconds`` when it ends, through ``workflow.metric_meter()`` —
  Temporal drops metrics and ``workflow.logger`` records while replaying, so a run
  counts once however often a worker replays it. Logs ``run started`` / ``run completed``
  / ``run failed`` (seed 002 R10.1, R10.3, R10.4).
- **Activities** (a run's ``run_segment`` activities, whose nodes the segment itself
  measures, plus ``record_events``, splits and a pipeline's own activities):
  ``overseer_node_duration_seconds``,
  ``overseer_activity_failures_total{error_type}``, attributes on the ``RunActivity`` span
  made by ``OpenTelemetryPlugin`` (``overseer.run_id``, ``overseer.pipeline``,
  ``langgraph.graph``, ``langgraph.node``, attempt), the log context (run id, pipeline,
  stage) and a ``stage completed`` record with ``duration_ms`` (seed 002 R10.2).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

from opentelemetry import trace
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError, is_cancelled_exception
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from observability import metrics, metrics_recording
from observability.logging import log_context

log = logging.getLogger("overseer.worker.stages")

# Workflow-side metric names as given to Temporal's meter; the MetricBuffer collector adds
# ``_total`` to counters, giving the wire names in observability.metrics.
_RUNS_STARTED = metrics.RUNS_STARTED.removesuffix("_total")
_RUNS_COMPLETED = metrics.RUNS_COMPLETED.removesuffix("_total")


class ObservabilityInterceptor(Interceptor):
    """Worker interceptor adding metrics, span attributes and stage logs (see module docstring)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Wrap every activity."""
        return _ActivityInbound(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        """Wrap every workflow run."""
        return _WorkflowInbound


class _ActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        pipeline = metrics.pipeline_of(info.workflow_id, default=info.workflow_type or "unknown")
        graph, _, node = info.activity_type.rpartition(".")
        run_id = metrics.run_id_of(info.workflow_id)
        span = trace.get_current_span()
        if span.is_recording():
            attrs: dict[str, Any] = {"overseer.pipeline": pipeline, "overseer.node": node,
                                     "temporal.activity.attempt": info.attempt}
            if run_id:
                attrs["overseer.run_id"] = run_id
            if graph:
                attrs["langgraph.graph"] = graph
                attrs["langgraph.node"] = node
            span.set_attributes(attrs)
        started = time.perf_counter()
        with log_context(run_id=run_id, pipeline=pipeline, stage=node):
            try:
                result = await super().execute_activity(input)
            except BaseException as err:
                elapsed = time.perf_counter() - started
                error_type, retryable = _error_type(err)
                metrics_recording.observe_node(pipeline, node, elapsed, outcome="error")
                metrics_recording.observe_activity_failure(pipeline, node, error_type, retryable=retryable)
                log.warning("stage failed", extra={
                    "duration_ms": round(elapsed * 1000), "error_code": error_type,
                    "retryable": retryable, "attempt": info.attempt})
                raise
            elapsed = time.perf_counter() - started
            metrics_recording.observe_node(pipeline, node, elapsed, outcome="ok")
            log.info("stage completed", extra={"duration_ms": round(elapsed * 1000),
                                               "attempt": info.attempt})
            return result


HOUSEKEEPING_WORKFLOWS = frozenset({"CronTickWorkflow", "ThreadCleanupWorkflow",
                                    "ThreadTtlWorkflow"})
"""Workflow types that are not runs (a cron's tick, a thread's clean-up or ttl timer): they
count in no run metric and log no ``run started`` (a thread's ttl timer would otherwise be a
"pipeline" of the dashboards, ``thread-ttl``, with one run per thread)."""


def counts_as_run(workflow_type: str) -> bool:
    """Whether a workflow of this type is a run, for the run metrics and logs."""
    return workflow_type not in HOUSEKEEPING_WORKFLOWS


class _WorkflowInbound(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = workflow.info()
        if not counts_as_run(info.workflow_type):
            return await super().execute_workflow(input)
        pipeline = metrics.pipeline_of(info.workflow_id, default=info.workflow_type)
        run_id = metrics.run_id_of(info.workflow_id)
        meter = workflow.metric_meter()
        labels = {"pipeline": pipeline}
        meter.create_counter(_RUNS_STARTED, "Runs started, by pipeline").add(1, labels)
        workflow.logger.info("run started", extra={"run_id": run_id, "pipeline": pipeline,
                                                   "stage": "started"})
        try:
            result = await super().execute_workflow(input)
        except (Exception, asyncio.CancelledError) as err:
            # GeneratorExit (an evicted workflow's coroutine being closed, outside the workflow
            # loop) is not caught at all; continue-as-new and workflow-task failures (which
            # Temporal retries) are not finishes.
            if isinstance(err, workflow.ContinueAsNewError) or not _is_finish(err):
                raise
            status = "cancelled" if is_cancelled_exception(err) else "failed"
            code, _ = _error_type(err)
            _record_finish(meter, pipeline, status, code, info.start_time)
            workflow.logger.warning("run failed", extra={
                "run_id": run_id, "pipeline": pipeline, "status": status, "error_code": code,
                "error_message": str(err)[:200],
                "total_duration_ms": _elapsed_ms(info.start_time)})
            raise
        status, outcome = _status_of(result)
        _record_finish(meter, pipeline, status, outcome, info.start_time)
        workflow.logger.info("run completed", extra={
            "run_id": run_id, "pipeline": pipeline, "status": status, "outcome": outcome,
            "total_duration_ms": _elapsed_ms(info.start_time)})
        return result


def _is_finish(err: BaseException) -> bool:
    try:
        return bool(workflow.is_failure_exception(err) or is_cancelled_exception(err))
    except Exception:  # not inside the workflow's event loop: nothing to record
        return False


def _record_finish(meter: Any, pipeline: str, status: str, outcome: str, start_time: Any) -> None:
    meter.create_counter(_RUNS_COMPLETED, "Runs finished, by pipeline, status and outcome").add(
        1, {"pipeline": pipeline, "status": status, "outcome": outcome})
    elapsed = workflow.now() - start_time if start_time else timedelta(0)
    meter.create_histogram_float(metrics.RUN_DURATION, "Run duration, submission to end",
                                 "s").record(max(0.0, elapsed.total_seconds()),
                                             {"pipeline": pipeline, "status": status})


def _elapsed_ms(start_time: Any) -> int:
    if not start_time:
        return 0
    return round(float((workflow.now() - start_time).total_seconds()) * 1000)


def _status_of(result: Any) -> tuple[str, str]:
    """``(status, outcome)`` of a workflow result: a dataclass/dict with those keys, or completed."""
    if isinstance(result, dict):
        status, outcome = result.get("status"), result.get("outcome")
    else:
        status, outcome = getattr(result, "status", None), getattr(result, "outcome", None)
    status = str(status) if status else "completed"
    return status, str(outcome) if outcome else status


def _error_type(err: BaseException) -> tuple[str, bool]:
    """``(error_type, retryable)``: an ApplicationError's type, else the exception's class name."""
    if isinstance(err, asyncio.CancelledError) or is_cancelled_exception(err):
        return "cancelled", False
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ApplicationError):
            return cause.type or "ApplicationError", not cause.non_retryable
        cause = getattr(cause, "cause", None)
    return type(err).__name__, True
