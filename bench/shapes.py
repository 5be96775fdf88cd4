"""What a run's workflow shape costs with LangGraph's real work inside.

The generic-graph target is ≥ 0.8 × plain LangGraph + ``AsyncPostgresSaver``.
``workflow_shapes`` asks which way of handing runs to Temporal can reach it at all. Each
shape runs the bench graph (:mod:`bench.user_graph`, four 20 ms I/O nodes) through the
same :class:`bench.graph_scenarios.PlainGraphPeer` the baseline uses, on its own task queue
with a worker process of its own (``python -m bench.shapes``, started by the scenario, as
Overseer's worker is a process beside the API). Nothing of Overseer's own is in the runs:
no event log, no search attributes, no approval gate, no API. So each shape's figure is an
upper bound for a runtime built on it, and the gap to the baseline is what the shape alone
costs.

Shapes (every run is one LangGraph segment and an ending, as ``SegmentRunWorkflow``'s is):

* ``per_run`` — a workflow per run: the segment as a heartbeating activity, the ending as
  a local activity (today's shape for a user's graph).
* ``per_run_local`` — a workflow per run, the segment as a local activity (today's shape
  for a short document_intake form).
* ``runner`` — long-lived runner workflows, each fed its runs one after another as
  workflow updates; the segment as a heartbeating activity.
* ``runner_local`` — the same runners, the segment as a local activity inside the update.

Each runner workflow continues as new after :data:`RUNNER_UPDATES` updates. The result is
one :class:`ScenarioResult` per shape: runs/s with ``BenchConfig.concurrency`` in flight,
each trial against the baseline trial taken just before the shapes' trials, and (a note
and ``extra["one_at_a_time"]``) the p50 of ``BenchConfig.latency_runs`` runs one at a
time against the baseline's.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import Worker

from bench import scenarios as sc
from bench.baselines import truncate_checkpoints
from bench.graph_scenarios import PEER_NAME, GraphBenchConfig, PlainGraphPeer, topics
from bench.harness import Harness, cpu_per_run_ms, run_bounded
from bench.stats import ScenarioResult, Trial, latency_summary, load_average
from services.local.embedded import child_env, stop_process

SHAPES_TASK_QUEUE = "overseer-bench-shapes"
SHAPES = ("per_run", "per_run_local", "runner", "runner_local")
"""The shapes, in running order within a trial."""
RUNNER_UPDATES = 500
"""Updates a runner workflow takes before it continues as new (keeps its history short)."""
_TIMEOUT = timedelta(seconds=60)
_HEARTBEAT = timedelta(seconds=10)

_peer: PlainGraphPeer | None = None
"""The graph the shapes' segment activity runs (set in the worker process by :func:`_serve`)."""


@activity.defn(name="bench_shape_segment")
async def shape_segment(topic: str) -> bool:
    """One run of the bench graph on a fresh thread (LangGraph's loop + checkpointer); published?"""
    assert _peer is not None, "workflow_shapes sets the peer before its worker runs"
    out = await _peer.run(topic)
    return bool(out.get("published"))


@activity.defn(name="bench_shape_ending")
async def shape_ending(published: bool) -> bool:
    """Stands for the run's ending (Overseer writes its events here); returns its input."""
    return published


@workflow.defn(name="BenchShapePerRun", sandboxed=False)
class PerRunShape:
    """A workflow per run; the segment a heartbeating activity or (``local``) a local activity."""

    @workflow.run
    async def run(self, topic: str, local: bool) -> bool:
        """The segment, then the ending; whether the graph published."""
        return await _segment_then_ending(topic, local)


@workflow.defn(name="BenchShapeRunner", sandboxed=False)
class RunnerShape:
    """A long-lived workflow that runs each run it is sent as an update, one at a time."""

    def __init__(self) -> None:
        self._taken = 0

    @workflow.run
    async def run(self, local: bool) -> None:
        """Take updates until :data:`RUNNER_UPDATES` (or Temporal suggests it), then continue as new."""
        self._local = local
        await workflow.wait_condition(
            lambda: self._taken >= RUNNER_UPDATES or workflow.info().is_continue_as_new_suggested())
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(local)

    @workflow.update(name="run")
    async def run_one(self, topic: str) -> bool:
        """One run: the segment, then the ending; whether the graph published."""
        self._taken += 1
        return await _segment_then_ending(topic, self._local)


async def _segment_then_ending(topic: str, local: bool) -> bool:
    if local:
        published = await workflow.execute_local_activity(
            shape_segment, topic, start_to_close_timeout=_TIMEOUT)
    else:
        published = await workflow.execute_activity(
            shape_segment, topic, start_to_close_timeout=_TIMEOUT, heartbeat_timeout=_HEARTBEAT)
    return await workflow.execute_local_activity(shape_ending, published,
                                                 start_to_close_timeout=_TIMEOUT)


def shapes_worker(client: Client, *, activity_slots: int) -> Worker:
    """A worker for the shapes on :data:`SHAPES_TASK_QUEUE` (in the process :func:`main` starts)."""
    return Worker(client, task_queue=SHAPES_TASK_QUEUE, workflows=[PerRunShape, RunnerShape],
                  activities=[shape_segment, shape_ending],
                  max_concurrent_activities=activity_slots,
                  max_concurrent_local_activities=max(activity_slots, 8))


async def _runners(client: Client, shape: str, lanes: int) -> list[str]:
    """Start (or find) ``lanes`` runner workflows for ``shape``; their workflow ids."""
    ids = [f"bench-shape-{shape}-{i}" for i in range(lanes)]
    for wid in ids:
        await client.start_workflow(RunnerShape.run, shape == "runner_local", id=wid,
                                    task_queue=SHAPES_TASK_QUEUE,
                                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
    return ids


def _runner_fn(client: Client, runner_ids: list[str]) -> Callable[[str], Awaitable[bool]]:
    """A run function handing each run to a free runner workflow (one run per runner at a time)."""
    free = list(runner_ids)

    async def one(topic: str) -> bool:
        wid = free.pop()
        try:
            return bool(await client.get_workflow_handle(wid).execute_update(
                "run", topic, result_type=bool))
        finally:
            free.append(wid)

    return one


def _per_run_fn(client: Client, local: bool) -> Callable[[str], Awaitable[bool]]:
    async def one(topic: str) -> bool:
        out: bool = await client.execute_workflow(
            PerRunShape.run, args=[topic, local], id=f"bench-shape-{uuid.uuid4()}",
            task_queue=SHAPES_TASK_QUEUE)
        return out

    return one


def run_overhead(graph: ScenarioResult, per_run: ScenarioResult) -> ScenarioResult | None:
    """Overseer's own cost on a run: its ``graph_throughput`` against the bare ``per_run`` shape.

    Both ran the bench graph with the same runs in flight in the same invocation; trial i of
    one is paired with trial i of the other. The target (DESIGN §8): Overseer ≥ 0.85 × the
    bare shape, its own work at most 15 % on top of Temporal plus LangGraph.

    Returns:
        ``run_overhead`` (Overseer's trials against the shape's), or None when either has no
        trials or their counts differ.
    """
    if not graph.overseer or len(graph.overseer) != len(per_run.overseer):
        return None
    return ScenarioResult(
        "run_overhead", "runs/s: Overseer (graph_throughput) ÷ the bare per_run shape",
        higher_is_better=True, overseer=list(graph.overseer), baseline=list(per_run.overseer),
        baseline_name="workflow_shapes.per_run (a workflow per run, the segment an activity, "
                      "nothing of Overseer's)",
        target="≥ 0.85 × the bare per_run shape", target_value=0.85)


async def workflow_shapes(h: Harness, cfg: sc.BenchConfig, gcfg: GraphBenchConfig
                          ) -> list[ScenarioResult]:
    """Runs/s of the bench graph in each shape, ``cfg.concurrency`` in flight, against the peer."""
    results = {shape: ScenarioResult(
        f"workflow_shapes.{shape}", f"runs/s, the bench graph in the {shape} shape (no Overseer)",
        higher_is_better=True, baseline_name=PEER_NAME,
        target="(reference: what the shape alone allows; the runtime's target is ≥ 0.8 ×)",
        extra={"concurrency": cfg.concurrency, "runs_per_trial": gcfg.graph_runs,
               "io_ms_per_node": gcfg.graph_io_ms, "worker": "its own process"})
        for shape in SHAPES}
    async with PlainGraphPeer(h.stack.database_url, pool_size=cfg.concurrency + 2) as peer:
        worker = _start_worker(h, cfg.concurrency)
        try:
            fns: dict[str, Callable[[str], Awaitable[Any]]] = {
                "per_run": _per_run_fn(h.client, False),
                "per_run_local": _per_run_fn(h.client, True),
                "runner": _runner_fn(h.client, await _runners(h.client, "runner", cfg.concurrency)),
                "runner_local": _runner_fn(
                    h.client, await _runners(h.client, "runner_local", cfg.concurrency))}
            for fn in fns.values():  # warm every path (and the runner workflows)
                await run_bounded(topics(cfg.concurrency), fn, concurrency=cfg.concurrency)
            for _ in range(cfg.repeats):
                await truncate_checkpoints(h.pool)
                base = await _trial(h, worker, peer.run, gcfg.graph_runs, cfg.concurrency,
                                    lambda r: bool(r.get("published")))
                for shape in SHAPES:
                    await truncate_checkpoints(h.pool)
                    results[shape].baseline.append(base)
                    results[shape].overseer.append(await _trial(
                        h, worker, fns[shape], gcfg.graph_runs, cfg.concurrency, bool))
            # one run at a time: what the shape adds to a single run's latency
            _, lat, _ = await run_bounded(topics(cfg.latency_runs), peer.run, concurrency=1)
            alone = latency_summary(lat)
            for shape in SHAPES:
                _, lat, _ = await run_bounded(topics(cfg.latency_runs), fns[shape], concurrency=1)
                mine = latency_summary(lat)
                results[shape].extra["one_at_a_time"] = {"shape": mine, "baseline": alone}
                results[shape].notes.append(
                    f"one run at a time: p50 {mine['p50_ms']:.0f} ms against "
                    f"{alone['p50_ms']:.0f} ms ({cfg.latency_runs} runs each)")
        finally:
            stop_process(worker)
    return list(results.values())


async def _trial(h: Harness, worker: subprocess.Popen[bytes], fn: Callable[[str], Awaitable[Any]],
                 runs: int, concurrency: int, published: Callable[[Any], bool]) -> Trial:
    load, cpu0 = load_average(), {**h.cpu_seconds(), "shapes-worker": _cpu_of(worker)}
    elapsed, lat, out = await run_bounded(topics(runs), fn, concurrency=concurrency)
    cpu = cpu_per_run_ms(cpu0, {**h.cpu_seconds(), "shapes-worker": _cpu_of(worker)}, runs)
    return Trial(runs / elapsed, load, {
        "elapsed_s": round(elapsed, 3), "published": dict(Counter(published(r) for r in out)),
        "latency": latency_summary(lat), "cpu_ms_per_run": cpu,
        "cpu_ms_per_run_total": round(sum(cpu.values()), 1)})


def _start_worker(h: Harness, slots: int) -> subprocess.Popen[bytes]:
    """The shapes' worker process (:func:`main`), inheriting the bench graph's registration."""
    return subprocess.Popen(
        [sys.executable, "-m", "bench.shapes", "--temporal", h.stack.temporal_address,
         "--database-url", h.stack.database_url, "--slots", str(slots)], env=child_env())


def _cpu_of(proc: subprocess.Popen[bytes]) -> float:
    import psutil

    from bench.harness import _cpu

    return _cpu(psutil.Process(proc.pid))


async def _serve(temporal: str, database_url: str, slots: int) -> None:
    """The shapes' worker process: the bench graph on ``AsyncPostgresSaver``, until killed."""
    global _peer
    client = await Client.connect(temporal)
    async with PlainGraphPeer(database_url, pool_size=slots + 2) as peer:
        _peer = peer
        await shapes_worker(client, activity_slots=slots).run()


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.shapes --temporal ADDR --database-url URL --slots N`` (started by the scenario)."""
    parser = argparse.ArgumentParser(prog="python -m bench.shapes")
    parser.add_argument("--temporal", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--slots", type=int, default=8)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.temporal, args.database_url, args.slots))


if __name__ == "__main__":
    main()
