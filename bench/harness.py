"""The benchmark's handle on a running stack: Postgres pool, Temporal client, run helpers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import asyncpg
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from bench.inputs import Doc, store_run
from overseer import resources as runtime
from overseer.run_types import DEFAULT_TASK_QUEUE, PIPELINE_ATTRIBUTE, STATUS_ATTRIBUTE, GraphRunInput
from overseer.settings import Settings
from overseer.store.db import create_pool
from services.local.managed import ManagedStack
from workflows.segment_run import SegmentRunWorkflow

T = TypeVar("T")


@dataclass
class Harness:
    """What every scenario uses: the stack, a pool and a Temporal client.

    The pool is also this process's activity runtime, which the in-process baselines need.
    """

    stack: ManagedStack
    pool: asyncpg.Pool
    client: Client
    settings: Settings

    @classmethod
    async def connect(cls, stack: ManagedStack, *, pool_size: int = 20) -> Harness:
        """Connect to ``stack`` and install this process's activity runtime on its database."""
        settings = Settings(environment="test", database_url=stack.database_url)
        pool = await create_pool(stack.database_url, max_size=pool_size)
        runtime.configure(pool, settings)
        client = await Client.connect(stack.temporal_address)
        return cls(stack=stack, pool=pool, client=client, settings=settings)

    async def close(self) -> None:
        """Close the pool (the client needs no closing)."""
        await self.pool.close()

    async def store(self, docs: Sequence[Doc]) -> list[GraphRunInput]:
        """Store documents and their ``run.submitted`` events; inputs in the same order."""
        return [await store_run(self.pool, d, self.settings) for d in docs]

    async def start(self, inp: GraphRunInput) -> WorkflowHandle[Any, Any]:
        """Start one run as the API does: its pipeline's workflow, id, task queue, search attributes."""
        return await self.client.start_workflow(
            SegmentRunWorkflow.run, inp, id=f"{inp.pipeline}-{inp.run_id}",
            task_queue=DEFAULT_TASK_QUEUE,
            search_attributes=TypedSearchAttributes([
                SearchAttributePair(PIPELINE_ATTRIBUTE, "document_intake"),
                SearchAttributePair(STATUS_ATTRIBUTE, "running")]),
        )

    async def run_to_end(self, inp: GraphRunInput) -> Any:
        """Start one run and wait for its result."""
        handle = await self.start(inp)
        return await handle.result()

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far by each part of the stack and this process.

        Wall-clock figures on a shared 2-core machine move with everyone else's load; CPU
        seconds per run barely do, so every throughput trial records both.
        """
        import os

        import psutil

        out: dict[str, float] = {"bench": _cpu(psutil.Process(os.getpid()))}
        parts = [("temporal", self.stack.temporal), ("api", self.stack.api),
                 *((f"worker-{i}", w) for i, w in enumerate(self.stack.workers))]
        for name, proc in parts:
            if proc is not None and proc.poll() is None:
                out[name] = _cpu(psutil.Process(proc.pid))
        data_dir = str(self.stack.data_dir.resolve())
        pg = 0.0
        for ps in psutil.process_iter(["name", "cmdline"]):
            try:
                if ps.info["name"] == "postgres" and _is_stack_postgres(ps, data_dir):
                    pg += _cpu(ps)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        out["postgres"] = pg
        return out

    async def run_to_rest(self, inp: GraphRunInput, *, poll_seconds: float = 0.1) -> str:
        """Start one run and wait until it completes, fails or waits for a human; its status.

        A scanned form whose OCR is not confident enough parks on the approval gate: its
        machine work is done then, and waiting for its result would wait for a reviewer.
        """
        handle = await self.start(inp)
        result = asyncio.ensure_future(handle.result())
        try:
            while True:
                done, _ = await asyncio.wait({result}, timeout=poll_seconds)
                if done:
                    return str(result.result().status)
                view = await handle.query("get_status")
                status = view["status"] if isinstance(view, dict) else view.status
                if status == "awaiting_approval":
                    return "awaiting_approval"
        finally:
            if not result.done():
                result.cancel()

    async def count_status(self, status: str) -> int:
        """Runs with ``status`` in the ``runs`` read model."""
        return int(await self.pool.fetchval("SELECT count(*) FROM runs WHERE status = $1", status))


def _cpu(proc: Any) -> float:
    """User + system CPU seconds of ``proc`` and its reaped children (Tesseract, OCR pools)."""
    times = proc.cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


def _is_stack_postgres(proc: Any, data_dir: str) -> bool:
    """A postgres process of this stack: its postmaster's command line names our data dir."""
    chain = [proc, *proc.parents()]
    return any(data_dir in " ".join(p.cmdline()) for p in chain if p.name() == "postgres")


def cpu_per_run_ms(before: dict[str, float], after: dict[str, float], runs: int) -> dict[str, float]:
    """CPU milliseconds per run of each part between two :meth:`Harness.cpu_seconds` snapshots."""
    return {k: round((after[k] - before.get(k, 0.0)) * 1000 / max(runs, 1), 1)
            for k in after if k in before}


async def run_bounded(items: Sequence[T], fn: Callable[[T], Awaitable[Any]], *,
                      concurrency: int) -> tuple[float, list[float], list[Any]]:
    """Run ``fn`` over ``items`` with at most ``concurrency`` in flight.

    Returns:
        ``(elapsed_seconds, per_item_latency_seconds, results)``, results in input order.
    """
    sem = asyncio.Semaphore(concurrency)
    latencies: list[float] = [0.0] * len(items)
    results: list[Any] = [None] * len(items)

    async def one(i: int, item: T) -> None:
        async with sem:
            t0 = time.perf_counter()
            results[i] = await fn(item)
            latencies[i] = time.perf_counter() - t0

    start = time.perf_counter()
    await asyncio.gather(*(one(i, it) for i, it in enumerate(items)))
    return time.perf_counter() - start, latencies, results
