"""Metric names, the Temporal MetricBuffer collector, event-derived metrics and the dashboards as code."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from observability import dashboards, metrics, metrics_exposition, metrics_recording, metrics_temporal
from observability.http import HTTPMetricsMiddleware
from overseer.store.events import NewEvent

WIRE_NAME = re.compile(r"^overseer_[a-z][a-z0-9_]*$")


def _value(name: str, labels: dict[str, str]) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_every_metric_name_follows_the_house_style():
    names = metrics.metric_names()
    assert len(names) >= 20
    for name in names:
        assert WIRE_NAME.match(name), name
        if "duration" in name or "age" in name or "wait" in name:
            assert name.endswith("_seconds"), name
    counters = [f.name for c in (metrics.ACTIVITY_FAILURES, metrics.LLM_TOKENS, metrics.LLM_COST,
                                 metrics.HTTP_REQUESTS, metrics.ROUTING_DECISIONS)
                for f in c.describe()]
    assert all(f"{n}_total" in names for n in counters)
    for name in ("overseer_runs_started_total", "overseer_runs_completed_total",
                 "overseer_llm_tokens_total", "overseer_llm_cost_usd_total",
                 "overseer_approval_sla_breaches_total", "overseer_node_duration_seconds",
                 "overseer_http_requests_total", "overseer_approvals_pending"):
        assert name in names


def test_pipeline_and_run_id_come_from_the_workflow_id():
    rid = "5b4fd5b8-53c5-4b55-9d59-52c2ba0c1e0d"
    assert metrics.pipeline_of(f"document_intake-{rid}") == "document_intake"
    assert metrics.run_id_of(f"document_intake-{rid}") == rid
    assert metrics.pipeline_of("something-else", default="x") == "x"
    assert metrics.run_id_of(None) is None


@dataclass
class _Metric:
    name: str
    kind: int
    unit: str | None = None
    description: str | None = None


@dataclass
class _Update:
    metric: _Metric
    value: float
    attributes: dict[str, Any] = field(default_factory=dict)


class _Buffer:
    def __init__(self) -> None:
        self.updates: list[_Update] = []

    def retrieve_updates(self) -> list[_Update]:
        out, self.updates = self.updates, []
        return out


def test_temporal_buffer_becomes_cumulative_prometheus_series():
    buffer = _Buffer()
    collector = metrics_temporal.TemporalMetricsCollector(buffer)
    registry = CollectorRegistry()
    registry.register(collector)
    request = _Metric("temporal_request", 0)
    latency = _Metric("temporal_workflow_task_schedule_to_start_latency", 2, "s")
    slots = _Metric("temporal_worker_task_slots_available", 1)
    started = _Metric("overseer_runs_started", 0, "1")
    attrs = {"namespace": "default", "task_queue": "q", "service_name": "temporal-core-sdk",
             "eager": True}
    buffer.updates += [_Update(request, 1, attrs), _Update(request, 2, attrs),
                       _Update(latency, 0.02, attrs), _Update(latency, 3.0, attrs),
                       _Update(slots, 5, attrs), _Update(slots, 7, attrs),
                       _Update(started, 1, {"pipeline": "document_intake"})]
    text = generate_latest(registry).decode()
    buffer.updates += [_Update(request, 4, attrs)]
    text = generate_latest(registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    total = [s for s in families["temporal_request"].samples if s.name == "temporal_request_total"]
    assert total[0].value == 7 and total[0].labels["eager"] == "true"
    assert "service_name" not in total[0].labels
    hist = families["temporal_workflow_task_schedule_to_start_latency_seconds"]
    count = [s for s in hist.samples if s.name.endswith("_count")][0]
    assert count.value == 2
    le_005 = [s for s in hist.samples if s.name.endswith("_bucket") and s.labels["le"] == "0.025"]
    assert le_005[0].value == 1
    assert [s.value for s in families["temporal_worker_task_slots_available"].samples] == [7]
    started_samples = families["overseer_runs_started"].samples
    assert started_samples[0].name == "overseer_runs_started_total"
    assert started_samples[0].labels == {"pipeline": "document_intake"}


async def test_events_become_business_metrics_once():
    rid = "6a0e7a1c-3f4e-4a59-8f0e-0c9f6b1f2a11"
    before = _value("overseer_routing_decisions_total",
                    {"pipeline": "document_intake", "after": "run_pipeline", "route": "review",
                     "reason": "needs_review"})
    llm_before = _value("overseer_llm_tokens_total", {"model": "unit-model", "direction": "input"})
    cost_before = _value("overseer_llm_cost_usd_total", {"model": "unit-model"})
    sla_before = _value("overseer_approval_sla_breaches_total", {"pipeline": "document_intake"})
    events = [
        NewEvent(run_id=rid, key="r", type="route.decided",
                 data={"after": "run_pipeline", "route": "review", "reason": "needs_review"}),
        NewEvent(run_id=rid, key="l", type="llm.called",
                 data={"model": "unit-model", "input_tokens": 100, "output_tokens": 7,
                       "cost_usd": 0.25, "latency_ms": 120, "outcome": "ok"}),
        NewEvent(run_id=rid, key="s", type="approval.sla_breached", data={"sla_seconds": 2}),
    ]
    await metrics_recording.observe_events(None, events, workflow_id=f"document_intake-{rid}")
    assert _value("overseer_routing_decisions_total",
                  {"pipeline": "document_intake", "after": "run_pipeline", "route": "review",
                   "reason": "needs_review"}) == before + 1
    assert _value("overseer_llm_tokens_total",
                  {"model": "unit-model", "direction": "input"}) == llm_before + 100
    assert _value("overseer_llm_cost_usd_total", {"model": "unit-model"}) == pytest.approx(
        cost_before + 0.25)
    assert _value("overseer_approval_sla_breaches_total",
                  {"pipeline": "document_intake"}) == sla_before + 1


async def test_a_broken_event_never_fails_the_write():
    bad = NewEvent(run_id="not-a-uuid", key="x", type="approval.decided", data={"decision": 1})

    class Conn:
        async def fetchval(self, *args: Any) -> Any:
            raise RuntimeError("database hiccup")

    await metrics_recording.observe_events(Conn(), [bad], workflow_id="nope")  # logged, not raised


def test_observe_llm_call_records_tokens_cost_and_latency():
    metrics_recording.observe_llm_call("helper-model", 10, 5, 0.01, duration_seconds=0.3, trace_id="a" * 32)
    assert _value("overseer_llm_tokens_total", {"model": "helper-model", "direction": "output"}) >= 5
    assert _value("overseer_llm_calls_total", {"model": "helper-model", "outcome": "ok"}) >= 1
    assert _value("overseer_llm_call_duration_seconds_count", {"model": "helper-model"}) >= 1


def test_openmetrics_exposition_carries_trace_id_exemplars():
    metrics_recording.observe_node("unit_pipeline", "unit_node", 0.2, outcome="ok", trace_id="b" * 32)
    body, content_type = metrics_exposition.render("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert re.search(rb'overseer_node_duration_seconds_bucket\{[^}]*node="unit_node"[^}]*\} \S+ '
                     rb'# \{trace_id="b{32}"\}', body)
    plain, plain_type = metrics_exposition.render(None)
    assert plain_type.startswith("text/plain") and b"# {" not in plain


async def test_http_metrics_use_the_route_template_not_the_path():
    app = FastAPI()

    @app.get("/v1/runs/{run_id}")
    async def get_run(run_id: str) -> dict[str, str]:
        return {"run_id": run_id}

    app.add_middleware(HTTPMetricsMiddleware)  # type: ignore[arg-type]
    labels = {"method": "GET", "route": "/v1/runs/{run_id}", "status": "200"}
    before = _value("overseer_http_requests_total", labels)
    missing_before = _value("overseer_http_requests_total",
                            {"method": "GET", "route": "unmatched", "status": "404"})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://t") as client:
        for run in ("a", "b", "c"):
            assert (await client.get(f"/v1/runs/{run}")).status_code == 200
        assert (await client.get("/nowhere/at/all")).status_code == 404
    assert _value("overseer_http_requests_total", labels) == before + 3
    assert _value("overseer_http_requests_total",
                  {"method": "GET", "route": "unmatched", "status": "404"}) == missing_before + 1


def test_committed_dashboards_are_what_the_generator_makes():
    generated = dashboards.render_all()
    on_disk = {p.name: p.read_text() for p in dashboards.DASHBOARD_DIR.glob("*.json")}
    assert on_disk == generated, "run: .venv/bin/python -m observability.dashboards"


def test_dashboards_cover_the_issue_and_reference_only_known_metrics():
    known = set(metrics.metric_names())
    uids = set()
    for name, text in dashboards.render_all().items():
        model = json.loads(text)
        uids.add(model["uid"])
        panels = dashboards.expressions(model)
        assert panels, name
        ids = [p["id"] for p in model["panels"]]
        assert len(ids) == len(set(ids)), name
        for _title, expr in panels:
            for metric in re.findall(r"\b(overseer_[a-z0-9_]+)", expr):
                base = re.sub(r"_(bucket|count|sum)$", "", metric)
                assert metric in known or base in known, (name, metric)
    assert uids == {"overseer-overview", "overseer-pipeline", "overseer-review", "overseer-llm",
                    "overseer-worker"}


def test_only_runs_count_as_runs():
    """A cron's tick and a thread's clean-up or ttl timer are no runs: no ``thread-ttl``
    "pipeline" on the dashboards. Each name is a workflow the worker hosts (a renamed one
    would count again)."""
    from temporalio import workflow

    from observability.interceptors import HOUSEKEEPING_WORKFLOWS, counts_as_run
    from services.worker.main import WORKFLOWS

    hosted = {workflow._Definition.must_from_class(w).name for w in WORKFLOWS}
    assert HOUSEKEEPING_WORKFLOWS < hosted
    assert counts_as_run("SegmentRunWorkflow")
    assert not any(counts_as_run(name) for name in HOUSEKEEPING_WORKFLOWS)
