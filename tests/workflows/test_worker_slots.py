"""A worker's activity slots: sized by what runs use by default, a fixed count as an option.

On the real dev server, Postgres and worker. Runs whose one node waits (as a chat waits on
its model) each hold an activity slot for their whole segment: on the default sizing
(Temporal's resource-based slot supplier) many more of them run at once than the fixed
count of eight the worker used to have; with ``worker_activity_slots="fixed"`` the count is
exactly what is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, PendingActivityState
from temporalio.worker import FixedSizeSlotSupplier, ResourceBasedSlotSupplier

from overseer.registry import load_registry, set_registry
from overseer.settings import Settings
from services.worker.main import build_worker, worker_tuner
from tests.helpers import assert_eventually
from tests.workflows.test_graph_runtime import USER_GRAPHS
from tests.workflows.test_graph_runtime import start as start_graph_run
from workflows.segment_run import SegmentRunWorkflow

RUNS = 20
"""Runs started at once: more than the old fixed eight slots, few enough for one test."""


@pytest.fixture(scope="module", autouse=True)
def user_graphs() -> Iterator[None]:
    set_registry(load_registry(str(USER_GRAPHS)))
    yield
    set_registry(None)


def test_the_default_is_resource_based_with_the_old_count_as_its_floor() -> None:
    default = worker_tuner(Settings())._get_activity_task_slot_supplier()  # noqa: SLF001
    assert isinstance(default, ResourceBasedSlotSupplier)
    assert default.slot_config.minimum_slots == 8
    assert default.slot_config.maximum_slots == 1000
    fixed = worker_tuner(Settings(worker_activity_slots="fixed", worker_max_concurrent_activities=3))
    assert fixed._get_activity_task_slot_supplier() == FixedSizeSlotSupplier(3)  # noqa: SLF001


async def _running(handles: list[Any]) -> int:
    """How many of the runs have their segment activity started right now."""
    count = 0
    for handle in handles:
        described = await handle.describe()
        count += sum(1 for a in described.raw_description.pending_activities
                     if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED)
    return count


async def _start_waiting_runs(client: Any, pool: Any, task_queue: str, seconds: float) -> list[Any]:
    started = await asyncio.gather(*(
        start_graph_run(client, pool, task_queue, "slow_plain", {"topic": str(seconds)},
                        run=SegmentRunWorkflow.run) for _ in range(RUNS)))
    return [handle for _, handle in started]


async def test_runs_that_wait_all_hold_a_slot_at_once_on_the_default_sizing(dev_server, db, task_queue):
    async with build_worker(dev_server.client, task_queue=task_queue):
        handles = await _start_waiting_runs(dev_server.client, db, task_queue, 6)

        async def all_running() -> None:
            assert await _running(handles) == RUNS

        await assert_eventually(all_running, timeout=5.5, interval=0.2)
        results = await asyncio.gather(*(h.result() for h in handles))
    assert all(r.status == "completed" for r in results)


async def test_a_fixed_count_is_never_exceeded(dev_server, db, task_queue):
    settings = Settings(worker_activity_slots="fixed", worker_max_concurrent_activities=3)
    async with build_worker(dev_server.client, task_queue=task_queue, settings=settings):
        handles = await _start_waiting_runs(dev_server.client, db, task_queue, 1)
        results = await asyncio.gather(*(h.result() for h in handles))
    assert all(r.status == "completed" for r in results)
    # each segment's time in its slot, from the server's history: at most 3 at any moment
    marks: list[tuple[Any, int]] = []
    for handle in handles:
        events = (await handle.fetch_history()).events
        started = [e.event_time.ToDatetime() for e in events
                   if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
        ended = [e.event_time.ToDatetime() for e in events
                 if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
        assert len(started) == len(ended) == 1
        marks += [(started[0], 1), (ended[0], -1)]
    held = peak = 0
    for _, step in sorted(marks):  # at the same instant an end comes before a start
        held += step
        peak = max(peak, held)
    assert peak == 3
