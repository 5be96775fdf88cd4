"""The Temporal floor: a workflow of four no-op activities, on its own task queue.

Whatever Overseer adds (LangGraph in the workflow, node work, event writes) sits on top of
what this costs, so the benchmark measures it beside every dev-server configuration it
tries: it isolates the server's workflow-task round trip from the worker's own CPU.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

MICRO_TASK_QUEUE = "overseer-bench-micro"


@activity.defn(name="bench_noop")
async def noop(step: int) -> int:
    """Does nothing; returns ``step + 1``."""
    return step + 1


@workflow.defn(name="BenchFourSteps")
class FourStepsWorkflow:
    """Four activities in a row (the shape of a 4-step pipeline with nothing inside)."""

    @workflow.run
    async def run(self, steps: int) -> int:
        """Run ``steps`` no-op activities one after the other."""
        value = 0
        for _ in range(steps):
            value = await workflow.execute_activity(
                noop, value, start_to_close_timeout=timedelta(seconds=30))
        return value


def micro_worker(client: Client, **tuning: Any) -> Worker:
    """A worker for :class:`FourStepsWorkflow` (``tuning``: extra ``Worker`` keyword arguments)."""
    return Worker(client, task_queue=MICRO_TASK_QUEUE, workflows=[FourStepsWorkflow],
                  activities=[noop], **tuning)


async def four_step_latencies(client: Client, *, runs: int, steps: int = 4) -> Sequence[float]:
    """End-to-end seconds of ``runs`` sequential :class:`FourStepsWorkflow` runs (a worker must poll)."""
    out: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        await client.execute_workflow(FourStepsWorkflow.run, steps, id=f"bench-micro-{uuid.uuid4()}",
                                      task_queue=MICRO_TASK_QUEUE)
        out.append(time.perf_counter() - start)
    return out
