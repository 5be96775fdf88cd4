"""The benchmark's arithmetic and a tiny smoke run of its parts (the real benchmark is `make bench`)."""

from __future__ import annotations

import json
import math

import pytest
from temporalio.testing import WorkflowEnvironment

from bench import inputs
from bench.baselines import LangGraphBaseline
from bench.harness import cpu_per_run_ms, run_bounded
from bench.loadgen import parse_wrk
from bench.micro import four_step_latencies, micro_worker
from bench.report import table, write_json
from bench.stats import (
    ScenarioResult,
    Spread,
    Trial,
    latency_summary,
    meets,
    paired_ratios,
    percentile,
    ratio,
)
from overseer.settings import Settings


def test_percentile_matches_linear_interpolation():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 100) == 5.0
    assert percentile(values, 25) == 2.0
    assert percentile([1.0, 2.0], 99) == pytest.approx(1.99)
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 50)


def test_latency_summary_is_in_milliseconds():
    summary = latency_summary([0.010, 0.020, 0.030, 0.040])
    assert summary["n"] == 4
    assert summary["p50_ms"] == 25.0
    assert summary["max_ms"] == 40.0
    assert latency_summary([]) == {"n": 0}


def test_spread_ratio_and_direction():
    assert Spread.of([3.0, 1.0, 2.0]) == Spread(min=1.0, median=2.0, max=3.0, n=3)
    assert Spread.of([1.0, 2.0, 3.0]).fmt(1) == "2.0 [1.0–3.0]"
    assert ratio(2.0, 4.0) == 0.5
    assert ratio(1.0, 0.0) == math.inf and math.isnan(ratio(0.0, 0.0))
    assert paired_ratios([10.0, 20.0], [5.0, 40.0]) == [2.0, 0.5]
    with pytest.raises(ValueError, match="as many"):
        paired_ratios([1.0], [1.0, 2.0])
    assert meets(1.0, 1.0, higher_is_better=True) and not meets(0.99, 1.0, higher_is_better=True)
    assert meets(90.0, 100.0, higher_is_better=False) and not meets(101.0, 100.0, higher_is_better=False)


def test_scenario_verdict_uses_paired_ratio_or_value():
    throughput = ScenarioResult("t", "runs/s", True, target_value=1.0)
    throughput.overseer = [Trial(9.0, [], {"cpu_ms_per_run_total": 200.0}),
                           Trial(12.0, [], {"cpu_ms_per_run_total": 100.0})]
    throughput.baseline = [Trial(10.0, [], {"cpu_ms_per_run_total": 100.0}),
                           Trial(10.0, [], {"cpu_ms_per_run_total": 100.0})]
    assert throughput.ratio_spread() == Spread(min=0.9, median=pytest.approx(1.05), max=1.2, n=2)
    assert throughput.verdict() is True
    assert throughput.cpu_ratio_spread() == Spread(min=0.5, median=0.75, max=1.0, n=2)
    latency = ScenarioResult("l", "p50 ms", False, target_value=100.0, target_on="value",
                             overseer=[Trial(120.0, []), Trial(80.0, []), Trial(150.0, [])])
    assert latency.verdict() is False  # median 120 ms > 100 ms
    body = throughput.to_dict()
    assert body["meets_target"] is True and body["ratio_spread"]["n"] == 2


def test_cpu_per_run_only_counts_parts_seen_twice():
    before = {"worker-0": 1.0, "temporal": 2.0}
    after = {"worker-0": 3.0, "temporal": 2.5, "api": 9.0}
    assert cpu_per_run_ms(before, after, 10) == {"worker-0": 200.0, "temporal": 50.0}


def test_parse_wrk_output():
    text = """Running 10s test @ http://127.0.0.1:8000/v1/submissions
  Latency Distribution
     50%   12.50ms
     75%   20.00ms
     90%   30.00ms
     99%    1.20s
  480 requests in 10.00s, 100.00KB read
  Non-2xx or 3xx responses: 3
Requests/sec:     48.00
"""
    assert parse_wrk(text) == {"p50_ms": 12.5, "p99_ms": 1200.0, "requests": 480,
                               "achieved_rate": 48.0, "errors": 3}


async def test_smoke_baseline_and_temporal_floor(db, pg_url: str, dev_server: WorkflowEnvironment,
                                                 tmp_path):
    """One plain-LangGraph run on the test Postgres and two no-op workflows, through the report."""
    settings = Settings(environment="test", database_url=pg_url)
    run = await inputs.store_run(db, inputs.text_pdf(5), settings)
    async with LangGraphBaseline(pg_url, pool_size=2) as lg:
        elapsed, latencies, outs = await run_bounded([run], lg.run, concurrency=1)
    assert outs[0]["status"] == "completed"
    events = await db.fetch("SELECT type FROM events WHERE run_id = $1::uuid", run.run_id)
    # node.completed is the graph runtime's (the plain-LangGraph baseline has none);
    # route.decided comes from the pipeline's own nodes.
    assert {"run.submitted", "route.decided", "run.completed"} <= {r["type"] for r in events}

    async with micro_worker(dev_server.client):
        floor = await four_step_latencies(dev_server.client, runs=2)
    result = ScenarioResult("smoke", "runs/s", True, target_value=1.0,
                            overseer=[Trial(1 / max(floor))], baseline=[Trial(1 / elapsed)])
    assert "smoke" in table([result])
    path = write_json([result], tmp_path, config={}, tuning={})
    assert json.loads(path.read_text())["scenarios"][0]["name"] == "smoke"
    assert latencies[0] > 0


def test_several_targets_must_all_hold():
    parked = ScenarioResult("p", "p99 ms", False, target_value=1000.0, target_on="value",
                            overseer=[Trial(600.0, [])],
                            extra={"checks": {"rss": False, "p99": True}})
    assert parked.verdict() is False
    parked.extra["checks"]["rss"] = True
    assert parked.verdict() is True
