"""Grafana dashboards as code (``grafana-foundation-sdk``), written to ``observability/grafana/dashboards/``.

Regenerate after editing with::

    .venv/bin/python -m observability.dashboards

``tests/unit/test_metrics_dashboards.py`` fails when the committed JSON differs from what
this module generates, and ``tests/e2e/test_observability_prometheus.py`` runs every
panel's expression against a real Prometheus scraping a real run (each must return at
least one series). The dashboards:

- ``overseer-overview`` — runs in and out, failure ratio, approvals waiting, API traffic,
  LLM spend;
- ``overseer-pipeline`` — one pipeline (``$pipeline``): outcomes, routing decisions,
  node latency with trace exemplars, activity failures by error type;
- ``overseer-review`` — the human review queue: pending, overdue, oldest age, decisions,
  decision wait, SLA breaches, review-agent proposals;
- ``overseer-llm`` — LLM calls, tokens, cost by model, cost per run, latency, errors;
- ``overseer-worker`` — worker health from the Temporal SDK: schedule-to-start
  latencies, task slots, pollers, sticky cache, request rates, completions.

``grafana-foundation-sdk`` is a test/dev dependency only (Apache-2.0): the runtime never
imports this module.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    VariableOption,
    VariableRefresh,
)

DASHBOARD_DIR = Path(__file__).resolve().parent / "grafana" / "dashboards"
PROMETHEUS_UID = "prometheus"
DATASOURCE = DataSourceRef(type_val="prometheus", uid=PROMETHEUS_UID)
RATE = "$__rate_interval"
RANGE = "$__range"
PIPE = 'pipeline=~"$pipeline"'


def _query(expr: str, legend: str = "", *, exemplar: bool = False, instant: bool = False,
           ref: str = "A") -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).ref_id(ref).datasource(DATASOURCE)
    if legend:
        q = q.legend_format(legend)
    if exemplar:
        q = q.exemplar(True)
    return q.instant() if instant else q.range()


def _ts(title: str, queries: Iterable[prometheus.Dataquery], *, unit: str = "short",
        description: str = "", width: int = 12, height: int = 8) -> timeseries.Panel:
    panel = (timeseries.Panel().title(title).unit(unit).span(width).height(height)
             .datasource(DATASOURCE))
    if description:
        panel = panel.description(description)
    for i, q in enumerate(queries):
        panel = panel.with_target(q.ref_id(chr(ord("A") + i)))
    return panel


def _stat(title: str, expr: str, *, unit: str = "short", description: str = "",
          width: int = 6) -> stat.Panel:
    panel = (stat.Panel().title(title).unit(unit).span(width).height(4).datasource(DATASOURCE)
             .with_target(_query(expr, instant=True)))
    return panel.description(description) if description else panel


def _quantile(q: float, metric: str, by: str, selector: str = "") -> str:
    sel = f"{{{selector}}}" if selector else ""
    return f"histogram_quantile({q}, sum by (le, {by}) (rate({metric}_bucket{sel}[{RATE}])))"


def _dashboard(uid: str, title: str, description: str, tags: list[str]) -> dashboard.Dashboard:
    return (dashboard.Dashboard(title).uid(uid).description(description)
            .tags(["overseer", *tags]).refresh("30s").time("now-6h", "now")
            .timezone("browser").tooltip(DashboardCursorSync.CROSSHAIR).editable())


def _pipeline_variable() -> dashboard.QueryVariable:
    return (dashboard.QueryVariable("pipeline").label("Pipeline").datasource(DATASOURCE)
            .query({"query": "label_values(overseer_runs_started_total, pipeline)",
                    "refId": "PrometheusVariableQueryEditor-VariableQuery"})
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True).multi(True)
            .all_value(".*").current(VariableOption(selected=True, text="All", value="$__all")))


def overview() -> dashboard.Dashboard:
    """Runs, outcomes, failure ratio, approvals waiting, API traffic and LLM spend."""
    failed = ('(sum(rate(overseer_runs_completed_total{status="failed"}[' + RATE + '])) or vector(0))'
              ' / clamp_min(sum(rate(overseer_runs_completed_total[' + RATE + '])), 1e-9)')
    return (
        _dashboard("overseer-overview", "Overseer / Overview",
                   "Runs in and out of every pipeline, the review queue, API and LLM at a glance.",
                   ["overview"])
        .with_row(dashboard.Row("Now"))
        .with_panel(_stat("Runs started (range)",
                          f"sum(increase(overseer_runs_started_total[{RANGE}]))"))
        .with_panel(_stat("Runs finished (range)",
                          f"sum(increase(overseer_runs_completed_total[{RANGE}]))"))
        .with_panel(_stat("Failure ratio", failed, unit="percentunit",
                          description="Failed runs / finished runs over the rate interval."))
        .with_panel(_stat("Approvals waiting",
                          "sum(max by (pipeline) (overseer_approvals_pending))",
                          description="Pending approval requests (from the approvals read model)."))
        .with_row(dashboard.Row("Runs"))
        .with_panel(_ts("Runs started by pipeline", [
            _query(f"sum by (pipeline) (rate(overseer_runs_started_total[{RATE}]))",
                   "{{pipeline}}")], unit="reqps"))
        .with_panel(_ts("Runs finished by status and outcome", [
            _query(f"sum by (pipeline, status, outcome) "
                   f"(rate(overseer_runs_completed_total[{RATE}]))",
                   "{{pipeline}} {{status}}/{{outcome}}")], unit="reqps"))
        .with_panel(_ts("Run duration (submission to end, human waits included)", [
            _query(_quantile(0.5, "overseer_run_duration_seconds", "pipeline"), "p50 {{pipeline}}"),
            _query(_quantile(0.95, "overseer_run_duration_seconds", "pipeline"),
                   "p95 {{pipeline}}")], unit="s"))
        .with_panel(_ts("Runs in flight", [
            _query("sum by (pipeline, status) (max by (pipeline, status) (overseer_runs_active))",
                   "{{pipeline}} {{status}}")]))
        .with_row(dashboard.Row("API and LLM"))
        .with_panel(_ts("API requests by status", [
            _query(f"sum by (status) (rate(overseer_http_requests_total[{RATE}]))",
                   "{{status}}")], unit="reqps"))
        .with_panel(_ts("API latency p95 by route", [
            _query(_quantile(0.95, "overseer_http_request_duration_seconds", "method, route"),
                   "{{method}} {{route}}", exemplar=True)], unit="s"))
        .with_panel(_ts("LLM spend (USD per hour)", [
            _query(f"sum by (model) (rate(overseer_llm_cost_usd_total[{RATE}])) * 3600",
                   "{{model}}")], unit="currencyUSD"))
        .with_panel(_ts("Activity failures by error type", [
            _query(f"sum by (error_type) (rate(overseer_activity_failures_total[{RATE}]))",
                   "{{error_type}}")], unit="reqps"))
    )


def pipeline_detail() -> dashboard.Dashboard:
    """One pipeline: outcomes, routing, node latency (with trace exemplars), failures."""
    return (
        _dashboard("overseer-pipeline", "Overseer / Pipeline detail",
                   "One pipeline's runs, routing decisions, node latencies and failures.",
                   ["pipeline"])
        .with_variable(_pipeline_variable())
        .with_row(dashboard.Row("Runs"))
        .with_panel(_ts("Runs started and finished", [
            _query(f"sum by (pipeline) (rate(overseer_runs_started_total{{{PIPE}}}[{RATE}]))",
                   "started {{pipeline}}"),
            _query(f"sum by (pipeline) (rate(overseer_runs_completed_total{{{PIPE}}}[{RATE}]))",
                   "finished {{pipeline}}")], unit="reqps"))
        .with_panel(_ts("Outcomes", [
            _query(f"sum by (status, outcome) (increase(overseer_runs_completed_total{{{PIPE}}}"
                   f"[{RATE}]))", "{{status}}/{{outcome}}")]))
        .with_row(dashboard.Row("Routing"))
        .with_panel(_ts("Routing decisions by route", [
            _query(f"sum by (route) (rate(overseer_routing_decisions_total{{{PIPE}}}[{RATE}]))",
                   "{{route}}")], unit="reqps"))
        .with_panel(_ts("Routing reasons (range)", [
            _query(f"sum by (after, route, reason) "
                   f"(increase(overseer_routing_decisions_total{{{PIPE}}}[{RANGE}]))",
                   "{{after}} → {{route}} ({{reason}})", instant=True)]))
        .with_row(dashboard.Row("Nodes"))
        .with_panel(_ts("Node latency p50 / p95 (exemplars link to traces)", [
            _query(_quantile(0.5, "overseer_node_duration_seconds", "node", PIPE), "p50 {{node}}",
                   exemplar=True),
            _query(_quantile(0.95, "overseer_node_duration_seconds", "node", PIPE),
                   "p95 {{node}}", exemplar=True)], unit="s", width=24))
        .with_panel(_ts("Node attempts by outcome", [
            _query(f"sum by (node, outcome) "
                   f"(rate(overseer_node_duration_seconds_count{{{PIPE}}}[{RATE}]))",
                   "{{node}} {{outcome}}")], unit="reqps"))
        .with_panel(_ts("Activity failures by error type", [
            _query(f"sum by (activity, error_type, retryable) "
                   f"(rate(overseer_activity_failures_total{{{PIPE}}}[{RATE}]))",
                   "{{activity}}: {{error_type}} (retryable={{retryable}})")], unit="reqps"))
        .with_panel(_ts("Events appended by type", [
            _query(f"sum by (type) (rate(overseer_events_appended_total{{{PIPE}}}[{RATE}]))",
                   "{{type}}")], unit="reqps", width=24))
    )


def review_queue() -> dashboard.Dashboard:
    """The human review queue: backlog, age, decisions, wait, SLA breaches, proposals."""
    return (
        _dashboard("overseer-review", "Overseer / Human review queue",
                   "Approval requests waiting for people, how long they wait and SLA breaches.",
                   ["review"])
        .with_panel(_stat("Pending", "sum(max by (pipeline) (overseer_approvals_pending))"))
        .with_panel(_stat("Past SLA", "sum(max by (pipeline) (overseer_approvals_overdue))",
                          description="Pending requests whose SLA deadline has passed."))
        .with_panel(_stat("Oldest pending", "max(overseer_approval_oldest_pending_age_seconds)",
                          unit="s"))
        .with_panel(_stat("SLA breaches (range)",
                          f"sum(increase(overseer_approval_sla_breaches_total[{RANGE}]))"))
        .with_panel(_ts("Pending by pipeline", [
            _query("max by (pipeline) (overseer_approvals_pending)", "pending {{pipeline}}"),
            _query("max by (pipeline) (overseer_approvals_overdue)", "past SLA {{pipeline}}")]))
        .with_panel(_ts("Oldest pending request age", [
            _query("max by (pipeline) (overseer_approval_oldest_pending_age_seconds)",
                   "{{pipeline}}")], unit="s"))
        .with_panel(_ts("Requests opened and decided", [
            _query(f"sum by (pipeline) (rate(overseer_approvals_requested_total[{RATE}]))",
                   "opened {{pipeline}}"),
            _query(f"sum by (pipeline, decision) (rate(overseer_approval_decisions_total[{RATE}]))",
                   "{{decision}} {{pipeline}}")], unit="reqps"))
        .with_panel(_ts("Time to decision p50 / p95", [
            _query(_quantile(0.5, "overseer_approval_wait_seconds", "pipeline"), "p50 {{pipeline}}"),
            _query(_quantile(0.95, "overseer_approval_wait_seconds", "pipeline"),
                   "p95 {{pipeline}}")], unit="s"))
        .with_panel(_ts("SLA breaches", [
            _query(f"sum by (pipeline) (increase(overseer_approval_sla_breaches_total[{RATE}]))",
                   "{{pipeline}}")]))
        .with_panel(_ts("Review-agent proposals (auto-applied or sent to a person)", [
            _query(f"sum by (pipeline, auto_applied) "
                   f"(rate(overseer_review_suggestions_total[{RATE}]))",
                   "{{pipeline}} auto_applied={{auto_applied}}")], unit="reqps"))
    )


def llm_usage() -> dashboard.Dashboard:
    """LLM calls, tokens and cost by model; cost per run; latency and errors."""
    per_run = (f"sum(increase(overseer_llm_cost_usd_total[{RANGE}])) / "
               f"clamp_min(sum(increase(overseer_runs_completed_total[{RANGE}])), 1)")
    errors = (f'(sum by (model) (rate(overseer_llm_calls_total{{outcome!="ok"}}[{RATE}])) '
              f'or sum by (model) (rate(overseer_llm_calls_total[{RATE}])) * 0) / '
              f"clamp_min(sum by (model) (rate(overseer_llm_calls_total[{RATE}])), 1e-9)")
    return (
        _dashboard("overseer-llm", "Overseer / LLM usage and cost",
                   "Tokens and cost by model from the llm.called ledger; latency and errors.",
                   ["llm"])
        .with_panel(_stat("Spend (range)", f"sum(increase(overseer_llm_cost_usd_total[{RANGE}]))",
                          unit="currencyUSD"))
        .with_panel(_stat("Tokens (range)", f"sum(increase(overseer_llm_tokens_total[{RANGE}]))"))
        .with_panel(_stat("Spend per finished run (range)", per_run, unit="currencyUSD"))
        .with_panel(_stat("Calls (range)", f"sum(increase(overseer_llm_calls_total[{RANGE}]))"))
        .with_panel(_ts("Tokens per second by model and direction", [
            _query(f"sum by (model, direction) (rate(overseer_llm_tokens_total[{RATE}]))",
                   "{{model}} {{direction}}", exemplar=True)]))
        .with_panel(_ts("Spend by model (USD per hour)", [
            _query(f"sum by (model) (rate(overseer_llm_cost_usd_total[{RATE}])) * 3600",
                   "{{model}}")], unit="currencyUSD"))
        .with_panel(_ts("Calls by outcome", [
            _query(f"sum by (model, outcome) (rate(overseer_llm_calls_total[{RATE}]))",
                   "{{model}} {{outcome}}")], unit="reqps"))
        .with_panel(_ts("Error ratio by model", [_query(errors, "{{model}}")],
                        unit="percentunit"))
        .with_panel(_ts("Call latency p50 / p95", [
            _query(_quantile(0.5, "overseer_llm_call_duration_seconds", "model"), "p50 {{model}}",
                   exemplar=True),
            _query(_quantile(0.95, "overseer_llm_call_duration_seconds", "model"),
                   "p95 {{model}}", exemplar=True)], unit="s", width=24))
    )


def worker_health() -> dashboard.Dashboard:
    """Worker health from the Temporal SDK metrics each worker exports on its ``/metrics``."""
    return (
        _dashboard("overseer-worker", "Overseer / Worker health",
                   "Temporal SDK metrics from every worker: latency to start work, capacity, "
                   "pollers, cache, requests.", ["worker", "temporal"])
        .with_panel(_stat("Workers", 'count(overseer_build_info{service="overseer-worker"})'))
        # activity slots are sized by resource use by default: no fixed count is free, so
        # the panel shows what is held (a fixed-count worker's free slots are in "Task slots")
        .with_panel(_stat("Activity slots used", "sum(temporal_worker_task_slots_used"
                                                 '{worker_type="ActivityWorker"})'))
        .with_panel(_stat("Workflow slots free", "sum(temporal_worker_task_slots_available"
                                                 '{worker_type="WorkflowWorker"})'))
        .with_panel(_stat("Sticky cache size", "sum(temporal_sticky_cache_size)"))
        .with_panel(_ts("Workflow task schedule-to-start p95", [
            _query(_quantile(0.95, "temporal_workflow_task_schedule_to_start_latency_seconds",
                             "task_queue"), "{{task_queue}}")], unit="s",
            description="Time a workflow task waits for a worker: grows when workers are short."))
        .with_panel(_ts("Activity schedule-to-start p95", [
            _query(_quantile(0.95, "temporal_activity_schedule_to_start_latency_seconds",
                             "task_queue"), "{{task_queue}}")], unit="s"))
        .with_panel(_ts("Task slots used", [
            _query("sum by (worker_type) (temporal_worker_task_slots_used)", "{{worker_type}}")]))
        .with_panel(_ts("Pollers", [
            _query("sum by (poller_type) (temporal_num_pollers)", "{{poller_type}}")]))
        .with_panel(_ts("Workflow task execution p95", [
            _query(_quantile(0.95, "temporal_workflow_task_execution_latency_seconds",
                             "workflow_type"), "{{workflow_type}}")], unit="s"))
        .with_panel(_ts("Activity execution p95", [
            _query(_quantile(0.95, "temporal_activity_execution_latency_seconds", "activity_type"),
                   "{{activity_type}}")], unit="s"))
        .with_panel(_ts("Temporal requests by operation", [
            _query(f"sum by (operation) (rate(temporal_request_total[{RATE}]))", "{{operation}}")],
            unit="reqps"))
        .with_panel(_ts("Workflows completed by type", [
            _query(f"sum by (workflow_type) (rate(temporal_workflow_completed_total[{RATE}]))",
                   "{{workflow_type}}")], unit="reqps"))
    )


DASHBOARDS = {
    "overview": overview,
    "pipeline": pipeline_detail,
    "review-queue": review_queue,
    "llm-usage": llm_usage,
    "worker-health": worker_health,
}


def render_all() -> dict[str, str]:
    """``{file name: JSON text}`` for every dashboard, as committed."""
    out: dict[str, str] = {}
    for name, build in DASHBOARDS.items():
        model = build().build()
        for number, panel in enumerate(model.panels or [], start=1):
            panel.id_val = number  # Grafana wants unique panel ids (links, "view panel")
        out[f"{name}.json"] = json.dumps(model, cls=JSONEncoder, indent=2, sort_keys=True) + "\n"
    return out


def expressions(dashboard_json: dict[str, Any]) -> list[tuple[str, str]]:
    """``[(panel title, PromQL expr)]`` of every target of every panel (rows included)."""
    found: list[tuple[str, str]] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets") or []:
                if target.get("expr"):
                    found.append((panel.get("title", ""), target["expr"]))
            walk(panel.get("panels") or [])

    walk(dashboard_json.get("panels") or [])
    return found


def write(directory: Path = DASHBOARD_DIR) -> list[Path]:
    """Write every dashboard's JSON into ``directory``; returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in render_all().items():
        path = directory / name
        path.write_text(text)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for written in write(Path(sys.argv[1]) if len(sys.argv) > 1 else DASHBOARD_DIR):
        print(written)  # noqa: T201
