"""``python -m bench``: start an embedded stack, run every scenario, print ratios, write JSON.

Examples::

    .venv/bin/python -m bench                      # everything (make bench)
    .venv/bin/python -m bench --only text_throughput pipeline_latency --repeats 5
    .venv/bin/python -m bench --parked 10000       # the full docs/performance.md count
    .venv/bin/python -m bench --quick              # headline ratios in < 3 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench import agent_server_peer as asp
from bench import chat_load as cl
from bench import graph_scenarios as gs
from bench import scenarios as sc
from bench import shapes
from bench.harness import Harness
from bench.report import table, write_json
from bench.stats import ScenarioResult
from services.local.managed import ManagedStack

ORDER = ("temporal_floor", "round_trips", "pipeline_latency", "graph_latency", "text_throughput",
         "graph_throughput", "workflow_shapes", "agent_server_peer", "chat_load", "waiting_chats",
         "scanned_throughput", "recovery",
         "text_throughput_2_workers", "parked_approvals", "due_diligence_agreement",
         "resume_tailoring_review", "thematic_example", "pricing_signoff", "api_post_no_worker",
         "api_post")
"""Scenarios in running order: the API scenario last (it leaves runs queued behind it)."""

QUICK = ("temporal_floor", "round_trips", "pipeline_latency", "text_throughput",
         "graph_throughput")
"""``--quick``: the headline ratios (text-layer throughput and the generic graph against their
peers, the 4-step p50) and the round trips per run, in under 3 minutes on 2 cores."""
QUICK_SIZES: dict[str, object] = {"repeats": 2, "text_runs": 16, "latency_runs": 8,
                                  "graph_runs": 16}
"""``--quick`` sizes (an explicit option still wins)."""

GraphFunc = Callable[[Harness, sc.BenchConfig, gs.GraphBenchConfig],
                     Awaitable[ScenarioResult | list[ScenarioResult]]]
GRAPH_FUNCS: dict[str, GraphFunc] = {
    "graph_throughput": gs.graph_throughput,
    "agent_server_peer": asp.agent_server_peer,
    "graph_latency": gs.graph_latency, "round_trips": gs.round_trips,
    "workflow_shapes": shapes.workflow_shapes}
"""Scenarios that need the bench graph registered (:mod:`bench.graph_scenarios`, and
``agent_server_peer`` of :mod:`bench.agent_server_peer`, which gives two results, and
``workflow_shapes`` of :mod:`bench.shapes`, one result per shape)."""

API_SCENARIOS = frozenset({"api_post", "api_post_no_worker", "agent_server_peer", "chat_load",
                           "waiting_chats"})
"""Scenarios that need the stack's API process."""

DESIGN_TARGETS: dict[str, tuple[str, float]] = {"pipeline_latency": ("p50 ≤ 60 ms", 60.0)}
"""docs/performance.md targets that moved since the scenario was written (verdicts use these)."""


async def run(cfg: sc.BenchConfig, only: set[str], out_dir: Path, data_dir: Path,
              gcfg: gs.GraphBenchConfig | None = None,
              pcfg: asp.PeerBenchConfig | None = None,
              ccfg: cl.ChatBenchConfig | None = None) -> int:
    """Bring the stack up, run the selected scenarios, report; returns an exit code."""
    gcfg = gcfg or gs.GraphBenchConfig()
    pcfg = pcfg or asp.PeerBenchConfig()
    ccfg = ccfg or cl.ChatBenchConfig()
    if only & {*GRAPH_FUNCS, "chat_load", "waiting_chats"}:
        gs.use_bench_graphs(gcfg.graph_io_ms)  # before the stack starts: its children inherit it
        cl.use_chat_pacing(ccfg)
    stack = ManagedStack(data_dir)
    t0 = time.perf_counter()
    stack.start(workers=1, api=bool(API_SCENARIOS & only))
    results: list[ScenarioResult] = []
    h = await Harness.connect(stack)
    try:
        await sc.wait_worker_polling(h)
        _say(f"stack up in {time.perf_counter() - t0:.1f} s ({data_dir})")
        for name in ORDER:
            if name not in only:
                continue
            started = time.perf_counter()
            _say(f"── {name} …")
            out: ScenarioResult | list[ScenarioResult]
            if name == "text_throughput_2_workers":
                one = next((r for r in results if r.name == "text_throughput"), None)
                if one is None:
                    one = await sc.text_throughput(h, cfg)
                out = await sc.scaling(h, cfg, one)
            elif name == "agent_server_peer":
                out = await asp.agent_server_peer(h, cfg, gcfg, pcfg)
            elif name == "chat_load":
                out = await cl.chat_load(h, cfg, ccfg)
            elif name == "waiting_chats":
                out = await cl.waiting_chats(h, cfg, ccfg)
            elif name in GRAPH_FUNCS:
                out = await GRAPH_FUNCS[name](h, cfg, gcfg)
            else:
                out = await getattr(sc, _FUNCS[name])(h, cfg)
            for result in out if isinstance(out, list) else [out]:
                if name in DESIGN_TARGETS:
                    result.target, result.target_value = DESIGN_TARGETS[name]
                results.append(result)
                _say("\n".join(table([result]).splitlines()[2:])
                     + f"   ({time.perf_counter() - started:.0f} s)")
                for note in result.notes:
                    _say(f"    {note}")
    finally:
        await h.close()
        stack.stop()
    named = {r.name: r for r in results}
    if "graph_throughput" in named and "workflow_shapes.per_run" in named:
        overhead = shapes.run_overhead(named["graph_throughput"], named["workflow_shapes.per_run"])
        if overhead is not None:
            results.append(overhead)
    _say("\n" + table(results))
    path = write_json(results, out_dir, config={**dataclasses.asdict(cfg), **dataclasses.asdict(gcfg),
                                                **dataclasses.asdict(pcfg), **dataclasses.asdict(ccfg)},
                      tuning=tuning())
    _say(f"\nwrote {path} (total {time.perf_counter() - t0:.0f} s)")
    return 0


_FUNCS = {"temporal_floor": "temporal_floor", "pipeline_latency": "pipeline_latency",
          "text_throughput": "text_throughput", "scanned_throughput": "scanned_throughput",
          "recovery": "recovery", "parked_approvals": "parked_approvals",
          "due_diligence_agreement": "due_diligence_agreement",
          "resume_tailoring_review": "resume_tailoring_review",
          "thematic_example": "thematic_example", "pricing_signoff": "pricing_signoff",
          "api_post_no_worker": "api_post_no_worker", "api_post": "api_post"}


def tuning() -> dict[str, object]:
    """The worker and dev-server settings in force (so a JSON file says what it measured)."""
    import inspect

    from overseer.settings import Settings
    from services.local import embedded
    from services.worker import main as worker_main

    worker = Settings().model_dump(include={
        "worker_activity_slots", "worker_max_concurrent_activities", "worker_max_activity_slots",
        "worker_target_cpu_usage", "worker_target_memory_usage", "worker_activity_slot_ramp_ms",
        "worker_max_cached_workflows"})
    return {"build_worker": inspect.signature(worker_main.build_worker).parameters.__repr__(),
            "worker_defaults": worker,
            "dev_server_flags": list(getattr(embedded, "DEV_SERVER_TUNING", ()))}


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@dataclasses.dataclass
class Invocation:
    """What one ``python -m bench`` command line asks for."""

    cfg: sc.BenchConfig
    gcfg: gs.GraphBenchConfig
    pcfg: asp.PeerBenchConfig
    ccfg: cl.ChatBenchConfig
    only: set[str]
    out: Path
    keep_data: bool
    quick: bool


def parse(argv: list[str] | None = None) -> Invocation:
    """The command line as an :class:`Invocation` (``--quick`` sets :data:`QUICK_SIZES` defaults)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=ORDER, help="scenarios to run (default: all)")
    parser.add_argument("--quick", action="store_true",
                        help=f"headline ratios in < 3 minutes: {' '.join(QUICK)}, smaller sizes "
                             "(--only and explicit sizes still apply)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--keep-data", action="store_true", help="keep the stack's data dir")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy flame graph of the worker during a text-layer trial (into --out)")
    sized = [f for f in dataclasses.fields(sc.BenchConfig) if f.name != "profile_dir"]
    graph_sized = list(dataclasses.fields(gs.GraphBenchConfig))
    peer_sized = list(dataclasses.fields(asp.PeerBenchConfig))
    chat_sized = list(dataclasses.fields(cl.ChatBenchConfig))
    for f in [*sized, *graph_sized, *peer_sized, *chat_sized]:
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    if "--quick" in argv:
        parser.set_defaults(**QUICK_SIZES)
    args = parser.parse_args(argv)
    cfg = sc.BenchConfig(**{f.name: getattr(args, f.name) for f in sized})
    cfg.profile_dir = args.out if args.profile else None
    gcfg = gs.GraphBenchConfig(**{f.name: getattr(args, f.name) for f in graph_sized})
    pcfg = asp.PeerBenchConfig(**{f.name: getattr(args, f.name) for f in peer_sized})
    ccfg = cl.ChatBenchConfig(**{f.name: getattr(args, f.name) for f in chat_sized})
    only = set(args.only or (QUICK if args.quick else ORDER))
    return Invocation(cfg=cfg, gcfg=gcfg, pcfg=pcfg, ccfg=ccfg, only=only, out=args.out,
                      keep_data=args.keep_data, quick=args.quick)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    inv = parse(argv)
    data_dir = Path(tempfile.mkdtemp(prefix="overseer-bench-"))
    try:
        return asyncio.run(run(inv.cfg, inv.only, inv.out, data_dir, inv.gcfg, inv.pcfg, inv.ccfg))
    finally:
        if not inv.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
