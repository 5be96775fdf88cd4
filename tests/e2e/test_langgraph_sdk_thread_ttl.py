"""A thread's ``ttl`` (``threads.create`` / ``threads.update``), swept by its Temporal timer.

Each thread with a ttl has a ``ThreadTtlWorkflow`` (``thread-ttl-<id>``) sleeping on a
durable timer; these tests use ttls of a few seconds (the SDK takes fractions of a minute)
and watch the thread go (``delete``) or lose its older checkpoints (``keep_latest``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError
from temporalio.client import Client
from temporalio.worker import Replayer

from services.worker.main import workflow_runner
from tests.e2e.conftest import Stack
from workflows.thread_ttl import ThreadTtlWorkflow

pytestmark = pytest.mark.timeout(180)


async def _gone(client, tid: str, within: float) -> float:
    """Seconds until ``threads.get`` answers 404 (fails after ``within``)."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        try:
            await client.threads.get(tid)
        except NotFoundError:
            return time.monotonic() - started
        await asyncio.sleep(0.25)
    raise AssertionError(f"thread {tid} still there after {within} s")


async def test_a_thread_is_deleted_when_its_ttl_is_up_and_not_before(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    made = await client.threads.create(ttl=0.05)  # 3 s, strategy delete
    tid = made["thread_id"]
    seen = await client.threads.get(tid, include=["ttl"])
    assert seen["ttl"]["strategy"] == "delete" and seen["ttl"]["ttl_minutes"] == 0.05
    expires = datetime.fromisoformat(seen["ttl"]["expires_at"])
    assert abs((expires - datetime.fromisoformat(seen["updated_at"])).total_seconds() - 3) < 0.5
    assert "ttl" not in await client.threads.get(tid)  # only when asked for
    kept = (await client.threads.create())["thread_id"]  # no ttl: nobody sweeps it

    # a run keeps it in use: its ttl counts from its last change
    await asyncio.sleep(2)
    await client.runs.wait(tid, "greeter", input={}, context={"name": "Ttl"})
    took = await _gone(client, tid, within=30)
    assert took > 1.5, took  # not at the first due time, 3 s after creation
    assert (await client.threads.get(kept))["thread_id"] == kept

    temporal = await Client.connect(stack.env["OVERSEER_TEMPORAL_ADDRESS"])
    timer = temporal.get_workflow_handle(f"thread-ttl-{tid}")
    assert await timer.result() == "deleted"
    # its history (activity, timer, re-arm, activity) replays on today's workflow code
    await Replayer(workflows=[ThreadTtlWorkflow], workflow_runner=workflow_runner()) \
        .replay_workflow(await timer.fetch_history())


async def test_keep_latest_drops_older_checkpoints_and_keeps_the_thread(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create())["thread_id"]
    for name in ("A", "B"):
        await client.runs.wait(tid, "greeter", input={}, context={"name": name})
    before = await client.threads.get_state(tid)
    assert len(await client.threads.get_history(tid, limit=50)) > 1
    await client.threads.update(tid, metadata={}, ttl={"ttl": 0.03, "strategy": "keep_latest"})
    started = time.monotonic()
    while len(await client.threads.get_history(tid, limit=50)) > 1:
        assert time.monotonic() - started < 30, "older checkpoints still there"
        await asyncio.sleep(0.25)
    after = await client.threads.get_state(tid)
    assert after["values"] == before["values"]
    assert after["checkpoint"]["checkpoint_id"] == before["checkpoint"]["checkpoint_id"]
    await client.threads.update(tid, metadata={}, ttl=60)  # an hour, strategy delete
    ttl = (await client.threads.get(tid, include=["ttl"]))["ttl"]
    assert (ttl["strategy"], ttl["ttl_minutes"]) == ("delete", 60)
    await client.threads.delete(tid)  # its timer ends with it, not an hour later
    temporal = await Client.connect(stack.env["OVERSEER_TEMPORAL_ADDRESS"])
    timer = temporal.get_workflow_handle(f"thread-ttl-{tid}")
    assert await asyncio.wait_for(timer.result(), 10) == "gone"


async def test_a_bad_ttl_is_refused_and_creates_nothing(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    for ttl in (0, -1, "soon", {"ttl": 5, "strategy": "archive"}, {"strategy": "delete"}):
        tid = str(uuid.uuid4())
        with pytest.raises(UnprocessableEntityError):
            await client.threads.create(thread_id=tid, ttl=ttl)
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError):
        await client.threads.update(tid, metadata={}, ttl={"ttl": 0})


async def test_a_copy_keeps_its_threads_ttl_and_has_its_own_timer(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    temporal = await Client.connect(stack.env["OVERSEER_TEMPORAL_ADDRESS"])
    source = (await client.threads.create(ttl={"ttl": 60, "strategy": "keep_latest"}))
    copied = (await client.threads.copy(source["thread_id"]))["thread_id"]
    ttl = (await client.threads.get(copied, include=["ttl"]))["ttl"]
    assert (ttl["strategy"], ttl["ttl_minutes"]) == ("keep_latest", 60)
    await client.threads.delete(copied)  # the copy's own timer ends with it
    timer = temporal.get_workflow_handle(f"thread-ttl-{copied}")
    assert await asyncio.wait_for(timer.result(), 10) == "gone"
    assert (await client.threads.get(source["thread_id"]))["thread_id"] == source["thread_id"]

    short = (await client.threads.create(ttl=0.05))["thread_id"]  # 3 s, delete
    await client.runs.wait(short, "greeter", input={}, context={"name": "Copy"})
    copy_of_short = (await client.threads.copy(short))["thread_id"]
    assert await _gone(client, copy_of_short, within=30) > 1.5
    kept = (await client.threads.create())["thread_id"]  # no ttl, no default: none copied
    assert "ttl" not in await client.threads.get(
        (await client.threads.copy(kept))["thread_id"], include=["ttl"])
