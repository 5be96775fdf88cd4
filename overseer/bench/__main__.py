"""``python -m overseer.bench``: start an embedded stack, run every scenario, print ratios, write JSON.

Examples::

    .venv/bin/python -m overseer.bench                      # everything (make bench)
    .venv/bin/python -m overseer.bench --only text_throughput pipeline_latency --repeats 5
    .venv/bin/python -m overseer.bench --parked 10000       # the full DESIGN §8 count
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import sys
import tempfile
import time
from pathlib import Path

from overseer.bench import scenarios as sc
from overseer.bench.harness import Harness
from overseer.bench.report import table, write_json
from overseer.bench.stats import ScenarioResult
from overseer.stack import ManagedStack

ORDER = ("temporal_floor", "pipeline_latency", "text_throughput", "scanned_throughput",
         "recovery", "text_throughput_2_workers", "parked_approvals", "api_post_no_worker",
         "api_post")
"""Scenarios in running order: the API scenario last (it leaves runs queued behind it)."""


async def run(cfg: sc.BenchConfig, only: set[str], out_dir: Path, data_dir: Path) -> int:
    """Bring the stack up, run the selected scenarios, report; returns an exit code."""
    stack = ManagedStack(data_dir)
    t0 = time.perf_counter()
    stack.start(workers=1, api=bool({"api_post", "api_post_no_worker"} & only))
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
            if name == "text_throughput_2_workers":
                one = next((r for r in results if r.name == "text_throughput"), None)
                if one is None:
                    one = await sc.text_throughput(h, cfg)
                result = await sc.scaling(h, cfg, one)
            else:
                result = await getattr(sc, _FUNCS[name])(h, cfg)
            results.append(result)
            _say("\n".join(table([result]).splitlines()[2:]) + f"   ({time.perf_counter() - started:.0f} s)")
    finally:
        await h.close()
        stack.stop()
    _say("\n" + table(results))
    path = write_json(results, out_dir, config=dataclasses.asdict(cfg), tuning=tuning())
    _say(f"\nwrote {path} (total {time.perf_counter() - t0:.0f} s)")
    return 0


_FUNCS = {"temporal_floor": "temporal_floor", "pipeline_latency": "pipeline_latency",
          "text_throughput": "text_throughput", "scanned_throughput": "scanned_throughput",
          "recovery": "recovery", "parked_approvals": "parked_approvals",
          "api_post_no_worker": "api_post_no_worker", "api_post": "api_post"}


def tuning() -> dict[str, object]:
    """The worker and dev-server settings in force (so a JSON file says what it measured)."""
    import inspect

    from overseer import devstack
    from services.worker import main as worker_main

    return {"build_worker": inspect.signature(worker_main.build_worker).parameters.__repr__(),
            "dev_server_flags": list(getattr(devstack, "DEV_SERVER_TUNING", ()))}


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(prog="python -m overseer.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=ORDER, help="scenarios to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    parser.add_argument("--keep-data", action="store_true", help="keep the stack's data dir")
    parser.add_argument("--profile", action="store_true",
                        help="py-spy flame graph of the worker during a text-layer trial (into --out)")
    for f in dataclasses.fields(sc.BenchConfig):
        if f.name != "profile_dir":
            parser.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default)
    args = parser.parse_args(argv)
    cfg = sc.BenchConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(sc.BenchConfig)
                            if f.name != "profile_dir"})
    cfg.profile_dir = args.out if args.profile else None
    data_dir = Path(tempfile.mkdtemp(prefix="overseer-bench-"))
    try:
        return asyncio.run(run(cfg, set(args.only or ORDER), args.out, data_dir))
    finally:
        if not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
