"""The benchmark's generic-graph scenarios and ``--quick``: command line, history counts, the graph itself.

The scenarios' speed is measured by ``make bench``, never here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench import graph_scenarios as gs
from bench.__main__ import GRAPH_FUNCS, ORDER, QUICK, QUICK_SIZES, parse
from overseer.registry import builder_of, load_langgraph_json


def test_quick_selects_the_headline_scenarios_at_small_sizes():
    inv = parse(["--quick"])
    assert inv.quick and inv.only == set(QUICK)
    assert {"text_throughput", "pipeline_latency", "graph_throughput"} <= inv.only
    assert inv.cfg.repeats == QUICK_SIZES["repeats"]
    assert inv.cfg.text_runs == QUICK_SIZES["text_runs"]
    assert inv.gcfg.graph_runs == QUICK_SIZES["graph_runs"]


def test_quick_keeps_explicit_sizes_and_only():
    inv = parse(["--quick", "--repeats", "5", "--only", "graph_throughput"])
    assert inv.only == {"graph_throughput"} and inv.cfg.repeats == 5


def test_without_quick_everything_runs_at_full_size():
    inv = parse(["--graph-io-ms", "5"])
    assert not inv.quick and inv.only == set(ORDER)
    assert inv.cfg.repeats == 3 and inv.gcfg.graph_io_ms == 5.0


def test_workflow_shapes_runs_with_the_bench_graph_registered_and_not_in_quick():
    inv = parse(["--only", "workflow_shapes", "--graph-runs", "50"])
    assert inv.only == {"workflow_shapes"} and inv.gcfg.graph_runs == 50
    assert "workflow_shapes" in GRAPH_FUNCS  # so the bench graph is registered before the stack starts
    assert "workflow_shapes" not in QUICK


def _event(event_id: int, kind: str, at_ms: float, **attrs: object) -> HistoryEvent:
    e = HistoryEvent(event_id=event_id, event_type=EventType.Value(f"EVENT_TYPE_{kind}"))
    e.event_time.FromDatetime(datetime(2026, 1, 1, tzinfo=UTC) + timedelta(milliseconds=at_ms))
    for field, values in attrs.items():
        sub = getattr(e, field)
        for k, v in values.items():  # type: ignore[attr-defined]
            if k == "activity_type":
                sub.activity_type.name = v
            else:
                setattr(sub, k, v)
    return e


def test_count_history_counts_round_trips_and_segment_times():
    events = [
        _event(1, "WORKFLOW_EXECUTION_STARTED", 0),
        _event(2, "WORKFLOW_TASK_SCHEDULED", 0),
        _event(3, "WORKFLOW_TASK_STARTED", 4, workflow_task_started_event_attributes={
            "scheduled_event_id": 2}),
        _event(4, "WORKFLOW_TASK_COMPLETED", 24, workflow_task_completed_event_attributes={
            "started_event_id": 3}),
        _event(5, "UPSERT_WORKFLOW_SEARCH_ATTRIBUTES", 24),
        _event(6, "MARKER_RECORDED", 24, marker_recorded_event_attributes={
            "marker_name": "core_local_activity"}),
        _event(7, "ACTIVITY_TASK_SCHEDULED", 24, activity_task_scheduled_event_attributes={
            "activity_type": "run_segment"}),
        _event(8, "ACTIVITY_TASK_STARTED", 25),
        _event(9, "ACTIVITY_TASK_COMPLETED", 54, activity_task_completed_event_attributes={
            "scheduled_event_id": 7}),
        _event(10, "WORKFLOW_TASK_SCHEDULED", 54),
        _event(11, "WORKFLOW_TASK_STARTED", 60, workflow_task_started_event_attributes={
            "scheduled_event_id": 10}),
        _event(12, "WORKFLOW_TASK_COMPLETED", 70, workflow_task_completed_event_attributes={
            "started_event_id": 11}),
        _event(13, "WORKFLOW_EXECUTION_COMPLETED", 70),
    ]
    c = gs.count_history(events)
    assert c["workflow_tasks"] == 2 and c["activities"] == 1 and c["local_activities"] == 1
    assert c["activity_types"] == {"run_segment": 1} and c["upserts"] == 1 and c["events"] == 13
    assert c["wft_schedule_to_start_ms"] == pytest.approx(5.0)
    assert c["wft_start_to_complete_ms"] == pytest.approx(15.0)
    assert c["activity_schedule_to_close_ms"] == pytest.approx(30.0)
    assert c["end_to_end_ms"] == pytest.approx(70.0)
    summary = gs.summarize_counts([c, {**c, "workflow_tasks": 4}, {**c, "workflow_tasks": 6}])
    assert summary["workflow_tasks"] == 4 and summary["activity_types"] == {"run_segment": 1}
    assert "2 workflow tasks" in gs.describe_counts(c)


async def test_bench_graph_is_a_plain_langgraph_project(monkeypatch):
    """The bench's langgraph.json loads like a user's and runs its four nodes in order."""
    monkeypatch.setenv(gs.IO_ENV, "0")
    pipelines = load_langgraph_json(gs.GRAPHS_JSON)
    assert list(pipelines) == [gs.GRAPH_NAME, "bench_chat"]
    app = builder_of(pipelines[gs.GRAPH_NAME].graph).compile()
    out = await app.ainvoke({"topic": "durable agents"})
    assert out["trail"] == ["fetch", "enrich", "score", "publish"] and out["published"] is True
    assert not any(s.metadata for s in builder_of(pipelines[gs.GRAPH_NAME].graph).nodes.values())


def test_run_overhead_pairs_overseer_with_the_bare_shape_trial_by_trial():
    from bench.shapes import run_overhead
    from bench.stats import ScenarioResult, Trial

    graph = ScenarioResult("graph_throughput", "runs/s", True, overseer=[Trial(9.0), Trial(8.0)])
    per_run = ScenarioResult("workflow_shapes.per_run", "runs/s", True,
                             overseer=[Trial(10.0), Trial(10.0)])
    overhead = run_overhead(graph, per_run)
    assert overhead is not None and overhead.ratio_spread().median == pytest.approx(0.85)  # type: ignore[union-attr]
    assert overhead.verdict() is True
    assert run_overhead(graph, ScenarioResult("workflow_shapes.per_run", "runs/s", True)) is None
