"""The worker process: plugins, graceful shutdown, crash-friendly settings.

Run with ``overseer worker`` (or ``python -m services.worker.main``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import (
    FixedSizeSlotSupplier,
    ResourceBasedSlotConfig,
    ResourceBasedSlotSupplier,
    ResourceBasedTunerConfig,
    Worker,
    WorkerTuner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from observability.interceptors import ObservabilityInterceptor
from observability.tracing import setup_tracing
from overseer import resources as runtime
from overseer.compiled_graphs import checkpointer
from overseer.graph_store import graph_store
from overseer.node_options import node_options
from overseer.registry import get_registry
from overseer.runtime.crons import delete_thread_after_run, expire_thread, fire_cron
from overseer.runtime.events import record_events
from overseer.runtime.notify import notify_webhook
from overseer.runtime.segments import run_segment
from overseer.settings import Settings, get_settings
from overseer.store.db import create_pool
from overseer.temporal_client import connect_client
from workflows.cron_tick import CronTickWorkflow, ThreadCleanupWorkflow
from workflows.segment_run import SegmentRunWorkflow
from workflows.thread_ttl import ThreadTtlWorkflow

log = logging.getLogger("overseer.worker")

PLATFORM_ACTIVITIES: Sequence[Any] = (record_events, notify_webhook, run_segment, fire_cron,
                                      delete_thread_after_run, expire_thread)


def pipeline_parts() -> tuple[list[type], list[Any]]:
    """Workflows and activities of the registry.

    ``SegmentRunWorkflow`` (every run), ``CronTickWorkflow`` (a cron's tick),
    ``ThreadCleanupWorkflow``, ``ThreadTtlWorkflow`` (a thread's ttl) and the platform
    activities, plus what a pipeline declares
    besides its graph (``Pipeline.worker_parts``, e.g. a split activity).
    """
    workflows: list[type] = [SegmentRunWorkflow, CronTickWorkflow, ThreadCleanupWorkflow,
                             ThreadTtlWorkflow]
    activities: list[Any] = list(PLATFORM_ACTIVITIES)
    for pipeline in get_registry():
        if pipeline.worker_parts is not None:
            parts = pipeline.worker_parts()
            workflows += [w for w in parts.get("workflows", []) if w not in workflows]
            activities += [a for a in parts.get("activities", []) if a not in activities]
    return workflows, activities


WORKFLOWS: Sequence[type] = tuple(pipeline_parts()[0])
"""Every workflow type the worker hosts (for workers and replayers)."""

SANDBOX_PASSTHROUGH = ("workflows", "activities", "overseer", "observability", "services",
                       "opentelemetry", "pydantic", "yaml", "typing_extensions")
"""Modules the workflow sandbox imports once per process instead of once per workflow run.

Measured with ``make bench`` (docs/performance-history.md): re-importing (and re-compiling)
``workflows.*`` into a fresh sandbox was a quarter of the worker's CPU per run; passing
them through cut worker CPU per run by about a third, memory per parked run from ~0.6
to ~0.35 MB, and ended workflow-task time-outs under a burst of starts. The sandbox
still isolates everything else; determinism of our own workflow code is guarded by the
replay tests over recorded histories (``tests/workflows/test_replay.py``). Only the cron
and thread-ttl workflows run in it: ``SegmentRunWorkflow`` runs no user code and is not sandboxed.
"""


def check_graphs() -> list[str]:
    """Load every registered graph and read its nodes' options; the names checked.

    The worker calls it before it polls, so a graph that cannot be hosted (an import
    error, malformed node metadata) stops the worker at start instead of failing runs.

    Raises:
        overseer.registry.RegistryError, pydantic.ValidationError, ValueError: a graph
            cannot be hosted.
    """
    names = []
    for pipeline in get_registry():
        for metadata in get_registry().node_metadata(pipeline.name).values():
            node_options(metadata)
        names.append(pipeline.name)
    return names



def workflow_runner() -> SandboxedWorkflowRunner:
    """The default sandbox with :data:`SANDBOX_PASSTHROUGH` passed through."""
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*SANDBOX_PASSTHROUGH))


def worker_tuner(settings: Settings | None = None) -> WorkerTuner:
    """The worker's slot sizing from ``settings`` (None: read from the environment, ``OVERSEER_*``).

    Activity slots by ``worker_activity_slots``: Temporal's resource-based slot supplier
    (``resource``: from ``worker_max_concurrent_activities`` slots, given without a check, up to
    ``worker_max_activity_slots`` while system CPU and memory stay under their targets, a new
    slot at most every ``worker_activity_slot_ramp_ms``) or ``fixed`` (exactly
    ``worker_max_concurrent_activities``). Workflow tasks (short, CPU-bound) and local activities
    keep fixed counts of 100, Temporal's defaults.
    """
    settings = settings or Settings()
    fixed = FixedSizeSlotSupplier(100)
    activity: FixedSizeSlotSupplier | ResourceBasedSlotSupplier
    if settings.worker_activity_slots == "fixed":
        activity = FixedSizeSlotSupplier(settings.worker_max_concurrent_activities)
    else:
        activity = ResourceBasedSlotSupplier(
            ResourceBasedSlotConfig(
                minimum_slots=min(settings.worker_max_concurrent_activities,
                                  settings.worker_max_activity_slots),
                maximum_slots=settings.worker_max_activity_slots,
                ramp_throttle=timedelta(milliseconds=settings.worker_activity_slot_ramp_ms)),
            ResourceBasedTunerConfig(target_memory_usage=settings.worker_target_memory_usage,
                                     target_cpu_usage=settings.worker_target_cpu_usage))
    return WorkerTuner.create_composite(workflow_supplier=fixed, activity_supplier=activity,
                                        local_activity_supplier=fixed, nexus_supplier=fixed)


def build_worker(client: Client, *, task_queue: str, settings: Settings | None = None) -> Worker:
    """The Overseer worker for ``task_queue`` on ``client`` (the activity runtime must be configured).

    Slots come from :func:`worker_tuner`, the sticky cache from
    ``settings.worker_max_cached_workflows`` (``settings`` None: read from the environment).
    Sticky queue schedule-to-start of a few seconds plus heartbeats make a replacement
    worker pick up a dead worker's runs in seconds instead of ~17 s (docs/reliability.md).

    Every registered graph is checked here (:func:`check_graphs`).

    Raises:
        overseer.registry.RegistryError, pydantic.ValidationError: a graph cannot be hosted.
    """
    settings = settings or Settings()
    check_graphs()
    workflows, activities = pipeline_parts()
    return Worker(
        client,
        task_queue=task_queue,
        workflows=workflows,
        activities=activities,
        interceptors=[ObservabilityInterceptor()],
        workflow_runner=workflow_runner(),
        tuner=worker_tuner(settings),
        max_cached_workflows=settings.worker_max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=3),
        graceful_shutdown_timeout=timedelta(seconds=10),
    )


async def serve(settings: Settings | None = None) -> None:
    """Run the worker until SIGINT/SIGTERM, then shut down gracefully."""
    settings = settings or get_settings()
    setup_tracing("overseer-worker")
    if not settings.database_url:
        raise SystemExit("OVERSEER_DATABASE_URL is not set (overseer run sets it for you)")
    if settings.worker_nice:
        with contextlib.suppress(OSError):
            os.nice(settings.worker_nice)  # the API on the same cores goes first
    temporal_runtime = setup_worker_telemetry(settings)
    pool = await create_pool(settings.database_url, max_size=settings.database_pool_max_size)
    runtime.configure(pool, settings)
    # LangGraph's checkpointer and store, their tables made before the first task: a worker
    # paused or killed while it makes them has taken no work yet
    await checkpointer()
    await graph_store(settings)
    client = await connect_client(settings, temporal_runtime)
    worker = build_worker(client, task_queue=settings.task_queue, settings=settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker polling", extra={"task_queue": settings.task_queue})
    async with worker:
        await stop.wait()
    await pool.close()


def setup_worker_telemetry(settings: Settings) -> Any:
    """Spans for LangGraph nodes, LLM calls and SQL, and ``/metrics`` (Overseer + Temporal SDK).

    Returns:
        The Temporal runtime whose SDK metrics feed ``/metrics`` (None when it is off).
    """
    from observability import metrics, metrics_exposition, metrics_temporal
    from observability.genai import instrument_langchain
    from observability.tracing import instrument_asyncpg

    instrument_langchain()
    instrument_asyncpg()
    metrics.set_build_info("overseer-worker")
    if not settings.metrics_port_worker:
        return None
    temporal_runtime = metrics_temporal.temporal_runtime()
    port = metrics_exposition.start_metrics_server(settings.metrics_host_worker,
                                                   settings.metrics_port_worker,
                                                   token=settings.metrics_token)
    if port is not None:
        log.info("metrics endpoint listening",
                 extra={"url": f"http://{settings.metrics_host_worker}:{port}/metrics"})
    return temporal_runtime


def main() -> None:
    """Entry point; exits with ``os._exit`` after a clean shutdown (sdk-python#300)."""
    from observability.logging import setup_logging

    setup_logging("overseer-worker")
    code = 0
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if not isinstance(exc.code, int):
            log.error("%s", exc.code)
    os._exit(code)


if __name__ == "__main__":
    main()
