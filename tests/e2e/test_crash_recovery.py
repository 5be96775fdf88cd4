"""SIGKILL the worker while it OCRs a scanned document: a new worker finishes the run, nothing doubles."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections import Counter

import asyncpg
import pytest
from temporalio.testing import WorkflowEnvironment

from tests import corpus
from tests.e2e.conftest import Stack
from tests.e2e.test_api import submit, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_worker_killed_during_ocr_resumes_on_a_new_worker(stack: Stack,
                                                                dev_server: WorkflowEnvironment):
    entries = [corpus.make_entry(71)]
    data = corpus.render_scanned_pdf(entries * 1, skew_degrees=1.5, noise=0.02)
    sub = stack.client("submitter")
    res = submit(sub, "scan.pdf", data, "application/pdf")
    assert res.status_code == 202, res.text
    run_id = res.json()["run_id"]
    handle = dev_server.client.get_workflow_handle(f"document_intake-{run_id}")

    deadline = time.monotonic() + 60
    while True:
        desc = await handle.describe()
        pending = [a.activity_type.name for a in desc.raw_description.pending_activities]
        if any(name in ("document_intake.split", "run_segment") for name in pending):
            break
        assert time.monotonic() < deadline, "no OCR activity started"
        time.sleep(0.05)

    replacement = stack.replace_workers()
    killed_at = time.monotonic()

    run = wait_for_status(sub, run_id, {"completed", "awaiting_approval", "failed"}, timeout=180)
    recovery_seconds = time.monotonic() - killed_at
    assert run["status"] in ("completed", "awaiting_approval"), run
    # the worker lowered its own CPU priority (OVERSEER_WORKER_NICE, default 5) so the API
    # on the same cores stays responsive
    assert os.getpriority(os.PRIO_PROCESS, replacement.pid) - \
        os.getpriority(os.PRIO_PROCESS, 0) == 5
    events = sub.get(f"/v1/runs/{run_id}/events").json()["items"]
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    keys = Counter((e["type"], str(e["data"].get("node")), str(e["data"].get("after")))
                   for e in events)
    assert all(n == 1 for n in keys.values()), keys
    print(f"recovered in {recovery_seconds:.1f} s")


@pytest.mark.parametrize("graph", ["slow", "slow_plain"])
async def test_worker_killed_mid_node_of_a_user_graph_loses_and_doubles_nothing(
        stack: Stack, dev_server: WorkflowEnvironment, graph: str):
    """``slow`` sets a 2 s heartbeat on its node; ``slow_plain`` sets nothing and relies on
    the runtime's default heartbeat (6 s), so it too resumes in seconds, not after the
    node's 300 s start-to-close time-out (issue 25)."""
    sub = stack.client("submitter")
    res = sub.post(f"/v1/pipelines/{graph}/runs", json={"input": {"topic": "4"}})
    assert res.status_code == 202, res.text
    run_id = res.json()["run_id"]
    handle = dev_server.client.get_workflow_handle(f"{graph}-{run_id}")
    deadline = time.monotonic() + 60
    while True:
        desc = await handle.describe()
        summaries = [a.activity_type.name for a in desc.raw_description.pending_activities]
        events = sub.get(f"/v1/runs/{run_id}/events").json()["items"]
        # a run_segment activity (slow: its own, for its options; slow_plain: the run's one)
        if "run_segment" in summaries and \
                any(e["data"].get("node") == "first" for e in events):
            break
        assert time.monotonic() < deadline, "the slow node never started"
        time.sleep(0.05)
    stack.replace_workers()
    killed_at = time.monotonic()
    run = wait_for_status(sub, run_id, {"completed", "failed"}, timeout=180)
    assert run["status"] == "completed", run.get("error")
    # heartbeat time-out (2 s or the 6 s default) + retry + the 4 s node again, with room
    # for a loaded machine; without a heartbeat it would take the 300 s start-to-close
    assert time.monotonic() - killed_at < 60
    assert run["result"]["output"]["trail"] == ["first", "slow", "last"]
    events = sub.get(f"/v1/runs/{run_id}/events").json()["items"]
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    nodes = Counter(e["data"]["node"] for e in events if e["type"] == "node.completed")
    assert nodes == {"first": 1, "slow_step": 1, "last": 1}, [
        e["data"] for e in events if e["type"] == "node.completed"]
    assert [e["type"] for e in events].count("run.completed") == 1


async def test_worker_killed_mid_node_of_a_stateless_run_goes_on_from_its_checkpoints(
        stack: Stack, dev_server: WorkflowEnvironment):
    """A stateless run's segment is a local try (no activity task on the server). When its
    worker dies, the workflow task times out and its replay runs the try again, from attempt
    1: it goes on from the run's own checkpoints (``first`` does not run again, the input is
    not applied twice), and nothing doubles in the log. (That try hands over to the
    activity after ``slow_step``, for ``last``: workflows.segment_calls.LOCAL_YIELD_SECONDS.)"""
    from langgraph_sdk import get_client
    from temporalio.api.enums.v1 import PendingWorkflowTaskState

    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    run = await client.runs.create(None, "slow_plain", input={"topic": "6"},
                                   on_completion="keep")
    run_id, thread_id = run["run_id"], run["thread_id"]
    handle = dev_server.client.get_workflow_handle(f"slow_plain-{run_id}")
    with stack.client("admin") as admin:
        deadline = time.monotonic() + 60
        while True:  # `first` done and the local try holding the workflow task: in slow_step
            done = {e["data"].get("node") for e in
                    admin.get(f"/v1/runs/{run_id}/events").json()["items"]}
            task = (await handle.describe()).raw_description.pending_workflow_task
            if "first" in done and \
                    task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED:
                break
            assert time.monotonic() < deadline, f"the first node never finished: {done}"
            time.sleep(0.05)
        assert "slow_step" not in done, "the kill would land after the slow node"
        stack.replace_workers()
        killed_at = time.monotonic()
        final = await client.runs.join(thread_id, run_id)
        # the workflow task's 10 s time-out + the 6 s node again, with room for a loaded machine
        assert time.monotonic() - killed_at < 60
        assert final["trail"] == ["first", "slow", "last"]
        events = admin.get(f"/v1/runs/{run_id}/events").json()["items"]
    nodes = Counter(e["data"]["node"] for e in events if e["type"] == "node.completed")
    assert nodes == {"first": 1, "slow_step": 1, "last": 1}, nodes
    assert [e["type"] for e in events].count("run.completed") == 1
    history = await handle.fetch_history()
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "workflow_task_timed_out_event_attributes" in kinds, kinds  # the dead worker's task
    # slow_step ran in the local tries (the first died in it); the second try handed over
    # after it (its 6 s are past the 2 s hand-over), so only `last` ran in an activity
    assert kinds.count("activity_task_scheduled_event_attributes") == 1, kinds
    assert kinds.index("marker_recorded_event_attributes") < \
        kinds.index("activity_task_scheduled_event_attributes"), kinds


async def test_a_paused_thread_reads_from_its_rows_while_no_worker_runs(stack: Stack,
                                                                        pool: asyncpg.Pool):
    """With every worker down (crashed, restarting), a read of a thread paused at an
    interrupt asked its workflow, and a query waits for a worker: ``threads.get`` and
    ``threads.get_state`` each took 29 s and answered 503. Now each answers from the rows
    within the paused read's query deadline (3 s), with the pause, even one no client had
    read before the workers died; the run goes on once a worker is back."""
    from langgraph_sdk import get_client

    from overseer.thread_sync import PAUSED_QUERY_SECONDS

    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    tid = (await client.threads.create())["thread_id"]
    run_id = (await client.runs.create(tid, "approvals", input={"topic": "q3"}))["run_id"]
    deadline = time.monotonic() + 60
    while await pool.fetchval(  # in Postgres: a read through the API would show the pause
            "SELECT status FROM agent_threads WHERE thread_id = $1", uuid.UUID(tid)) != \
            "interrupted":
        assert time.monotonic() < deadline, "the run never paused"
        await asyncio.sleep(0.1)
    stack.kill_workers()
    try:
        for read in (client.threads.get(tid), client.threads.get_state(tid),
                     client.runs.get(tid, run_id)):
            asked = time.monotonic()
            got = await read
            assert time.monotonic() - asked < PAUSED_QUERY_SECONDS + 5  # 29 s, then 503
            if "interrupts" in got and isinstance(got["interrupts"], dict):  # threads.get
                assert got["status"] == "interrupted"
                [(_, [interrupt])] = got["interrupts"].items()
                assert interrupt["value"]["question"] == "publish?"
            elif "next" in got:  # threads.get_state: the pause's checkpoint, shown now
                assert got["next"] == ["two_questions"]
                assert got["tasks"][0]["interrupts"][0]["value"]["question"] == "publish?"
            else:
                assert got["status"] == "interrupted"
    finally:
        stack.start_worker()
    values = await client.runs.wait(tid, "approvals", command={"resume": {"decision": "yes"}})
    assert values["__interrupt__"][0]["value"]["question"] == "really?"
    values = await client.runs.wait(tid, "approvals", command={"resume": {"decision": "no"}})
    assert values["summary"] == "yes then no"
