"""``multitask_strategy="enqueue"``, the Agent Server's default, is durable (issue 12).

A run queued on a busy thread survives the API process that accepted it.

The queue is ``agent_runs`` rows in Postgres with status ``pending``; the run before
ends and its workflow starts the next one (``overseer.thread_queue.hand_off``). The stack's API
looks for forgotten queued runs only at start-up here (``OVERSEER_QUEUE_RECOVERY_SECONDS``
is an hour in the e2e stack), so these tests pass by the hand-off alone. The second test
queues a run through an API process of its own, kills that process with SIGKILL, and
watches the run start and finish with nobody asking about the thread. The third leaves a
queued run that no process started (as an API that died between accepting and starting it
does) and shows a new API process starting it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from langgraph_sdk import get_client

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(180)


def sdk(url: str, stack: Stack, role: str = "submitter") -> Any:
    """The SDK's async client with only the URL and key changed."""
    return get_client(url=url, api_key=stack.tokens[role])


async def test_a_run_on_a_busy_thread_waits_its_turn_by_default(stack: Stack):
    client = sdk(stack.base_url, stack)
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "slow", input={"topic": "2"})
    second = await client.runs.create(tid, "slow", input={"topic": "0"})
    third = await client.runs.wait(tid, "slow", input={"topic": "0"})  # queued, then waited on
    assert first["status"] == "running"
    assert second["status"] == "pending" and second["multitask_strategy"] == "enqueue"
    # three runs one after the other, each from the state the one before it left
    assert third["trail"] == ["first", "slow", "last"] * 3
    runs = await client.runs.list(tid)
    assert [r["run_id"] for r in runs][1:] == [second["run_id"], first["run_id"]]
    assert [r["status"] for r in runs] == ["success"] * 3
    # a queued run can be cancelled before it starts; it never runs
    running = await client.runs.create(tid, "slow", input={"topic": "2"})
    queued = await client.runs.create(tid, "slow", input={"topic": "0"},
                                      multitask_strategy="enqueue")
    cancelled = await client.runs.cancel(tid, queued["run_id"], wait=True)
    assert cancelled["status"] == "interrupted"
    await client.runs.join(tid, running["run_id"])
    state = await client.threads.get_state(tid)
    assert state["values"]["trail"] == ["first", "slow", "last"] * 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _api_process(stack: Stack) -> tuple[subprocess.Popen[bytes], str]:
    """One more API process over the same Postgres and Temporal (as after a restart or a scale-out)."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "--factory", "services.api.main:app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        env={**stack.env, "OVERSEER_API_PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("the second API did not become ready")
        time.sleep(0.2)


async def test_a_queued_run_survives_the_api_that_accepted_it(stack: Stack):
    proc, url = _api_process(stack)
    try:
        doomed = sdk(url, stack)
        tid = (await doomed.threads.create())["thread_id"]
        first = await doomed.runs.create(tid, "slow", input={"topic": "3"})
        queued = await doomed.runs.create(tid, "slow", input={"topic": "0"},
                                          metadata={"queued": True})
        assert queued["status"] == "pending"
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # the API goes away with the run still queued
        proc.wait(10)
    # nobody asks the Agent Server API about the thread: the stack's API starts the run when
    # the first one ends, and it completes as an Overseer run
    deadline = time.monotonic() + 90
    with stack.client("admin") as admin:
        while True:
            got = admin.get(f"/v1/runs/{queued['run_id']}")
            if got.status_code == 200 and got.json()["status"] == "completed":
                break
            assert time.monotonic() < deadline, got.text
            time.sleep(0.5)
        assert admin.get(f"/v1/runs/{first['run_id']}").json()["status"] == "completed"
    client = sdk(stack.base_url, stack)
    run = await client.runs.get(tid, queued["run_id"])
    assert run["status"] == "success" and run["metadata"] == {"queued": True}
    state = await client.threads.get_state(tid)
    assert state["values"]["trail"] == ["first", "slow", "last"] * 2


async def test_a_claimed_run_whose_start_never_came_is_started_by_the_next_read(
        stack: Stack, pool: asyncpg.Pool):
    """What an API process leaves that died between claiming a thread for a run and starting
    its workflow: the thread ``busy`` and held by a ``pending`` run with no workflow. The
    next read of the thread starts it; the missing workflow is not taken for one that
    closed without its ending (which would have failed the thread and the run)."""
    client = sdk(stack.base_url, stack)
    tid = (await client.threads.create())["thread_id"]
    run_id = uuid.uuid4()
    await pool.execute(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   kind, status, metadata, kwargs, multitask_strategy,
                                   created_by)
           SELECT $1, thread_id, 'slow', 'slow', $1, 'start', 'pending', '{}'::jsonb,
                  '{"input": {"topic": "0"}}'::jsonb, 'enqueue', created_by
           FROM agent_threads WHERE thread_id = $2""", run_id, uuid.UUID(tid))
    await pool.execute("UPDATE agent_threads SET status = 'busy', graph_id = 'slow', "
                       "last_run_id = $1 WHERE thread_id = $2", run_id, uuid.UUID(tid))
    assert (await client.threads.get(tid))["status"] in ("busy", "idle")
    assert await client.runs.join(tid, str(run_id)) == \
        {"topic": "0", "trail": ["first", "slow", "last"], "results": [], "summary": "slept",
         "messages": []}
    assert (await client.runs.get(tid, str(run_id)))["status"] == "success"


async def test_a_queued_run_nobody_started_is_started_by_the_next_api(stack: Stack,
                                                                      pool: asyncpg.Pool):
    client = sdk(stack.base_url, stack)
    tid = (await client.threads.create())["thread_id"]
    run_id = uuid.uuid4()
    # what an API process leaves that died after accepting the run and before starting it
    # (a minute ago: the recovery pass leaves younger runs to the request still starting them)
    await pool.execute(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   kind, status, metadata, kwargs, multitask_strategy,
                                   created_by, created_at)
           SELECT $1, thread_id, 'slow', 'slow', $1, 'start', 'pending', '{}'::jsonb,
                  '{"input": {"topic": "0"}}'::jsonb, 'enqueue', created_by,
                  now() - interval '1 minute'
           FROM agent_threads WHERE thread_id = $2""", run_id, uuid.UUID(tid))
    await asyncio.sleep(2)
    assert await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1",
                               run_id) == "pending"  # nobody looks: it waits
    proc, _ = _api_process(stack)  # a new API process looks once at start-up
    try:
        deadline = time.monotonic() + 60
        while (status := await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1",
                                             run_id)) != "success":
            assert status in ("pending", "running") and time.monotonic() < deadline, status
            await asyncio.sleep(0.3)
    finally:
        proc.terminate()
        proc.wait(15)
    state = await client.threads.get_state(tid)
    assert state["values"]["trail"] == ["first", "slow", "last"]
