"""Benchmark scenarios for a generic user graph, and the round trips every run costs.

The graph (:mod:`bench.user_graph`, four async I/O nodes) is registered the way a
user registers theirs: its ``langgraph.json`` goes into ``OVERSEER_GRAPHS`` before the stack
starts (:func:`use_bench_graphs`), so the worker, the API and this process load it through
the one registry. Overseer runs it as the API does (:func:`overseer.runs.submit_run`: the
``run.submitted`` event, then ``SegmentRunWorkflow``: LangGraph's loop in one segment
activity on ``AsyncPostgresSaver``); the peer is the same ``StateGraph`` compiled with
``AsyncPostgresSaver`` on the same Postgres, in this process.

* ``graph_throughput`` — runs/s, ``BenchConfig.concurrency`` in flight, CPU per run of
  every process (target: ≥ 0.8 × the peer).
* ``graph_latency`` — p50 of one run at a time (reference).
* ``round_trips`` — workflow tasks, activities and local activities per run, read from one
  run's history, for ``document_intake`` (a text-layer form) and the generic graph, with the
  median time of each segment (server dispatch, worker activation, activity).
"""

from __future__ import annotations

import os
import statistics
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from bench import inputs
from bench import scenarios as sc
from bench.baselines import truncate_checkpoints
from bench.harness import Harness, cpu_per_run_ms, run_bounded
from bench.stats import ScenarioResult, Trial, latency_summary, load_average

GRAPHS_JSON = Path(__file__).resolve().parent / "user_graph" / "langgraph.json"
"""The bench's own ``langgraph.json`` (shipped in the package; never under ``tests/``)."""
GRAPH_NAME = "bench_four_io"
IO_ENV = "BENCH_GRAPH_IO_MS"
PEER_NAME = "plain LangGraph + AsyncPostgresSaver (same graph, same Postgres, in-process)"


@dataclass
class GraphBenchConfig:
    """Sizes of the generic-graph scenarios.

    Attributes:
        graph_runs: runs per side per throughput trial.
        graph_io_ms: what each node awaits (a stand-in network call), in milliseconds; set
            for the worker and this process before the stack starts.
    """

    graph_runs: int = 40
    graph_io_ms: float = 20.0


def use_bench_graphs(io_ms: float) -> str:
    """Register the bench graph for this process and every child it starts; the new ``OVERSEER_GRAPHS``.

    Call before the stack starts: workers and the API inherit this process's environment
    (:func:`services.local.embedded.child_env`). A ``langgraph.json`` the caller already named
    stays registered.
    """
    from overseer.registry import set_registry

    files = [f for f in os.environ.get("OVERSEER_GRAPHS", "").split(":") if f.strip()]
    if str(GRAPHS_JSON) not in files:
        files.append(str(GRAPHS_JSON))
    os.environ["OVERSEER_GRAPHS"] = ":".join(files)
    os.environ[IO_ENV] = f"{io_ms:g}"
    set_registry(None)  # re-read on first use, with the bench graph
    return os.environ["OVERSEER_GRAPHS"]


class PlainGraphPeer:
    """The bench graph compiled with ``AsyncPostgresSaver`` (LangGraph's default durability).

    Args:
        database_url: the Postgres Overseer uses.
        pool_size: psycopg connections (>= the runs in flight).
    """

    def __init__(self, database_url: str, *, pool_size: int = 10, graph: str = GRAPH_NAME) -> None:
        self.database_url = database_url
        self.graph = graph
        self.pool_size = pool_size
        self._pool: Any = None
        self.app: Any = None

    async def __aenter__(self) -> PlainGraphPeer:
        from bench.baselines import open_postgres_saver
        from overseer.registry import get_registry

        self._pool, saver = await open_postgres_saver(self.database_url, self.pool_size)
        self.app = get_registry().builder(self.graph).compile(checkpointer=saver)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._pool is not None:
            await self._pool.close()

    async def run(self, topic: str) -> dict[str, Any]:
        """One run on a fresh thread; the final state."""
        out: dict[str, Any] = await self.app.ainvoke(
            {"topic": topic}, {"configurable": {"thread_id": str(uuid.uuid4())}})
        return out


async def start_graph_run(h: Harness, topic: str, graph: str = GRAPH_NAME
                          ) -> WorkflowHandle[Any, Any]:
    """Start one run of a bench graph exactly as ``POST /v1/pipelines/{name}/runs`` does."""
    from overseer.runs import submit_run

    submitted = await submit_run(h.pool, h.client, h.settings, pipeline_name=graph,
                                 subject="bench", metadata={}, graph_input={"topic": topic})
    return h.client.get_workflow_handle(f"{graph}-{submitted.run_id}")


async def graph_run_to_end(h: Harness, topic: str, graph: str = GRAPH_NAME) -> Any:
    """Start one run of a bench graph and wait for its result."""
    return await (await start_graph_run(h, topic, graph)).result()


def topics(n: int) -> list[str]:
    """``n`` distinct bench-graph inputs (fresh seeds, so no two runs share a topic)."""
    return [f"durable agents {s}" for s in sc.fresh_seeds(n)]


async def graph_throughput(h: Harness, cfg: sc.BenchConfig, gcfg: GraphBenchConfig, *,
                           graph: str = GRAPH_NAME, name: str = "graph_throughput"
                           ) -> ScenarioResult:
    """Runs/s of the 4-I/O-node graph, ``cfg.concurrency`` in flight: Overseer vs the peer."""
    res = ScenarioResult(
        name, "runs/s (4 I/O nodes in one segment activity)", higher_is_better=True,
        baseline_name=PEER_NAME, target="≥ 0.8 × baseline", target_value=0.8,
        extra={"graph": graph, "concurrency": cfg.concurrency, "runs_per_trial": gcfg.graph_runs,
               "io_ms_per_node": gcfg.graph_io_ms, "workers": len(h.stack.workers)})
    async with PlainGraphPeer(h.stack.database_url, pool_size=cfg.concurrency + 2,
                              graph=graph) as peer:
        await run_bounded(topics(2), lambda t: graph_run_to_end(h, t, graph), concurrency=2)
        await run_bounded(topics(2), peer.run, concurrency=2)
        for i in range(cfg.repeats):
            for side in _order(i):
                batch = topics(gcfg.graph_runs)
                if side == "baseline":
                    await truncate_checkpoints(h.pool)
                load, cpu0 = load_average(), h.cpu_seconds()
                if side == "overseer":
                    spy = sc._start_profile(h, cfg, name) if i == 0 else None
                    elapsed, lat, out = await run_bounded(
                        batch, lambda t: graph_run_to_end(h, t, graph),
                        concurrency=cfg.concurrency)
                    statuses = Counter(_status(r) for r in out)
                    if spy is not None:
                        assert cfg.profile_dir is not None  # the profiler runs only with a profile dir
                        spy.wait(60)
                        res.extra["profile"] = str(cfg.profile_dir / f"{name}-worker.svg")
                else:
                    elapsed, lat, out = await run_bounded(batch, peer.run,
                                                          concurrency=cfg.concurrency)
                    statuses = Counter("completed" if r.get("published") else "?" for r in out)
                cpu = cpu_per_run_ms(cpu0, h.cpu_seconds(), len(batch))
                trial = Trial(len(batch) / elapsed, load, {
                    "elapsed_s": round(elapsed, 3), "statuses": dict(statuses),
                    "latency": latency_summary(lat), "cpu_ms_per_run": cpu,
                    "cpu_ms_per_run_total": round(sum(cpu.values()), 1)})
                (res.overseer if side == "overseer" else res.baseline).append(trial)
    return res


async def graph_latency(h: Harness, cfg: sc.BenchConfig, gcfg: GraphBenchConfig) -> ScenarioResult:
    """p50 of one run of the 4-I/O-node graph at a time: Overseer vs the peer (reference)."""
    res = ScenarioResult(
        "graph_latency", "p50 ms, one generic-graph run at a time", higher_is_better=False,
        baseline_name=PEER_NAME,
        target=f"(reference: the nodes alone await 4 × {gcfg.graph_io_ms:g} ms)",
        extra={"io_ms_per_node": gcfg.graph_io_ms})
    async with PlainGraphPeer(h.stack.database_url, pool_size=2) as peer:
        await run_bounded(topics(2), lambda t: graph_run_to_end(h, t), concurrency=1)
        await run_bounded(topics(2), peer.run, concurrency=1)
        for i in range(cfg.repeats):
            for side in _order(i):
                load = load_average()
                fn = (lambda t: graph_run_to_end(h, t)) if side == "overseer" else peer.run
                _, lat, _ = await run_bounded(topics(cfg.latency_runs), fn, concurrency=1)
                summary = latency_summary(lat)
                (res.overseer if side == "overseer" else res.baseline).append(
                    Trial(summary["p50_ms"], load, {"latency": summary}))
    return res


async def round_trips(h: Harness, cfg: sc.BenchConfig, gcfg: GraphBenchConfig) -> ScenarioResult:
    """Workflow tasks and activities per run, from histories (median of ``cfg.repeats`` runs each).

    The headline value is workflow tasks per ``document_intake`` text-layer run; ``extra``
    holds every count and segment time for it, both bench graphs and the four-no-op floor
    workflow (``cfg.latency_runs`` runs: its workflow-task waits show the dev server's
    queue poll rate).
    """
    res = ScenarioResult("round_trips", "workflow tasks per document_intake run",
                         higher_is_better=False, target="(reference: no target)")
    per: dict[str, list[dict[str, Any]]] = {"document_intake": [], GRAPH_NAME: []}
    for _ in range(max(cfg.repeats, 1)):
        load = load_average()
        inp = (await h.store([inputs.text_pdf(sc.fresh_seeds(1)[0])]))[0]
        doc = await h.start(inp)
        await doc.result()
        per["document_intake"].append(await history_counts(doc))
        graph = await start_graph_run(h, topics(1)[0])
        await graph.result()
        per[GRAPH_NAME].append(await history_counts(graph))
        res.overseer.append(Trial(per["document_intake"][-1]["workflow_tasks"], load,
                                  {"runs": {k: v[-1] for k, v in per.items()}}))
    per["temporal_floor"] = await _floor_counts(h, runs=max(cfg.latency_runs, 3))
    for pipeline, runs in per.items():
        res.extra[pipeline] = summarize_counts(runs)
        res.notes.append(f"{pipeline}: {describe_counts(res.extra[pipeline])}")
    return res


async def _floor_counts(h: Harness, *, runs: int) -> list[dict[str, Any]]:
    """:func:`count_history` of ``runs`` sequential four-no-op-activity workflows (the floor)."""
    from bench.micro import MICRO_TASK_QUEUE, FourStepsWorkflow, micro_worker

    out: list[dict[str, Any]] = []
    async with micro_worker(h.client):
        for _ in range(runs):
            handle = await h.client.start_workflow(
                FourStepsWorkflow.run, 4, id=f"bench-micro-{uuid.uuid4()}",
                task_queue=MICRO_TASK_QUEUE)
            await handle.result()
            out.append(await history_counts(handle))
    return out


async def history_counts(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """Round trips in one finished run's history, and how long each kind of segment took.

    Returns:
        ``{events, workflow_tasks, activities, activity_types: {name: n}, local_activities,
        timers, child_workflows, upserts, wft_schedule_to_start_ms, wft_start_to_complete_ms,
        activity_schedule_to_close_ms, end_to_end_ms}``; the ``_ms`` figures are medians
        over the run's segments (server-side timestamps).
    """
    history = await handle.fetch_history()
    return count_history(history.events)


def count_history(events: Any) -> dict[str, Any]:
    """:func:`history_counts` of a list of history event protos (pure; unit-tested)."""
    kinds: Counter[str] = Counter()
    activity_types: Counter[str] = Counter()
    at: dict[int, float] = {}
    wft_wait: list[float] = []
    wft_run: list[float] = []
    act: list[float] = []
    scheduled_by_id: dict[int, int] = {}
    for e in events:
        kind = EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")
        kinds[kind] += 1
        at[e.event_id] = e.event_time.ToDatetime().timestamp()
        if kind == "ACTIVITY_TASK_SCHEDULED":
            activity_types[e.activity_task_scheduled_event_attributes.activity_type.name] += 1
        elif kind == "MARKER_RECORDED" and e.marker_recorded_event_attributes.marker_name \
                == "core_local_activity":
            kinds["LOCAL_ACTIVITY"] += 1
        elif kind == "WORKFLOW_TASK_STARTED":
            scheduled = e.workflow_task_started_event_attributes.scheduled_event_id
            scheduled_by_id[e.event_id] = scheduled
            wft_wait.append(at[e.event_id] - at.get(scheduled, at[e.event_id]))
        elif kind == "WORKFLOW_TASK_COMPLETED":
            started = e.workflow_task_completed_event_attributes.started_event_id
            wft_run.append(at[e.event_id] - at.get(started, at[e.event_id]))
        elif kind in ("ACTIVITY_TASK_COMPLETED", "ACTIVITY_TASK_FAILED"):
            attrs = (e.activity_task_completed_event_attributes if kind == "ACTIVITY_TASK_COMPLETED"
                     else e.activity_task_failed_event_attributes)
            act.append(at[e.event_id] - at.get(attrs.scheduled_event_id, at[e.event_id]))
    times = sorted(at.values())

    def med(xs: list[float]) -> float | None:
        return round(statistics.median(xs) * 1000, 1) if xs else None

    return {"events": sum(v for k, v in kinds.items() if k != "LOCAL_ACTIVITY"),
            "workflow_tasks": kinds["WORKFLOW_TASK_COMPLETED"],
            "workflow_task_failures": kinds["WORKFLOW_TASK_FAILED"] + kinds["WORKFLOW_TASK_TIMED_OUT"],
            "activities": kinds["ACTIVITY_TASK_SCHEDULED"], "activity_types": dict(activity_types),
            "local_activities": kinds["LOCAL_ACTIVITY"], "timers": kinds["TIMER_STARTED"],
            "child_workflows": kinds["START_CHILD_WORKFLOW_EXECUTION_INITIATED"],
            "upserts": kinds["UPSERT_WORKFLOW_SEARCH_ATTRIBUTES"],
            "wft_schedule_to_start_ms": med(wft_wait), "wft_start_to_complete_ms": med(wft_run),
            "activity_schedule_to_close_ms": med(act),
            "end_to_end_ms": round((times[-1] - times[0]) * 1000, 1) if times else None}


def summarize_counts(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of every numeric figure over several runs' :func:`count_history` (types of the first)."""
    out: dict[str, Any] = {}
    for key, value in runs[0].items():
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        out[key] = statistics.median(values) if values and not isinstance(value, dict) else value
    return out


def describe_counts(c: dict[str, Any]) -> str:
    """One line: ``N workflow tasks, M activities (types), L local activities, …``."""
    types = ", ".join(f"{k} ×{v}" for k, v in sorted(c.get("activity_types", {}).items()))
    return (f"{c['workflow_tasks']:g} workflow tasks, {c['activities']:g} activities ({types}), "
            f"{c['local_activities']:g} local activities, {c['upserts']:g} search-attribute "
            f"upserts, {c['events']:g} history events; medians: workflow task scheduled→started "
            f"{c['wft_schedule_to_start_ms']} ms, started→completed {c['wft_start_to_complete_ms']} "
            f"ms, activity scheduled→closed {c['activity_schedule_to_close_ms']} ms; run "
            f"{c['end_to_end_ms']} ms end to end")


def _status(result: Any) -> str:
    """A ``GraphRunResult``'s status (the untyped client hands it back as a dict)."""
    return str(result.get("status") if isinstance(result, dict) else getattr(result, "status", "?"))


def _order(i: int) -> tuple[str, str]:
    return ("overseer", "baseline") if i % 2 == 0 else ("baseline", "overseer")


__all__ = ["GRAPHS_JSON", "GRAPH_NAME", "GraphBenchConfig", "PlainGraphPeer", "count_history",
           "graph_latency", "graph_throughput", "round_trips", "start_graph_run",
           "use_bench_graphs"]
