"""Crons through the official client, each one a Temporal Schedule (issue 26, item 3).

With only the URL and the key changed: ``crons.create_for_thread`` / ``create`` make a
Temporal Schedule (seen with Temporal's own client: its workflow, its next fire time,
paused while disabled, gone when deleted); each fire makes an ordinary Overseer run (on
the cron's thread, or on a new thread deleted after the run unless
``on_run_completed="keep"``); ``update``, ``search``, ``count`` and ``delete`` answer as
the Agent Server does; another submitter's key never reaches a cron. Ticks are fired with
Temporal's ``trigger`` (the same action a fire time takes), so no test waits a minute.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError
from temporalio.client import Client
from temporalio.service import RPCError

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(240)


def sdk(stack: Stack, role: str = "submitter") -> Any:
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


async def temporal(stack: Stack) -> Client:
    return await Client.connect(stack.env["OVERSEER_TEMPORAL_ADDRESS"])


async def tick(client: Client, cron_id: str, seen: int) -> dict[str, Any]:
    """Fire the cron's schedule once and return its tick workflow's result."""
    handle = client.get_schedule_handle(f"cron-{cron_id}")
    await handle.trigger()
    for _ in range(300):
        actions = (await handle.describe()).info.recent_actions
        if len(actions) > seen:
            started = actions[-1].action
            result: dict[str, Any] = await client.get_workflow_handle(
                started.workflow_id, run_id=started.first_execution_run_id).result()
            return result
        await asyncio.sleep(0.1)
    raise AssertionError("the schedule did not fire")


async def ended(client: Any, thread_id: str, run_id: str) -> dict[str, Any]:
    for _ in range(300):
        run = await client.runs.get(thread_id, run_id)
        if run["status"] not in ("pending", "running"):
            return dict(run)
        await asyncio.sleep(0.1)
    raise AssertionError(f"run {run_id} did not end")


async def test_a_thread_cron_is_a_schedule_and_each_tick_an_ordinary_run(stack: Stack):
    client, t = sdk(stack), await temporal(stack)
    tid = (await client.threads.create())["thread_id"]
    cron = await client.crons.create_for_thread(
        tid, "greeter", schedule="0 9 * * 1", input={}, context={"name": "Cy"},
        metadata={"team": "ops"})
    cid = cron["cron_id"]
    assert cron["thread_id"] == tid and cron["schedule"] == "0 9 * * 1" and cron["enabled"]
    assert cron["user_id"] == "alice" and cron["metadata"] == {"team": "ops"}
    when = datetime.fromisoformat(cron["next_run_date"])
    assert (when.weekday(), when.hour, when.minute) == (0, 9, 0)  # Monday 09:00 UTC

    described = await t.get_schedule_handle(f"cron-{cid}").describe()
    assert described.schedule.action.workflow == "CronTickWorkflow"  # type: ignore[union-attr]
    assert not described.schedule.state.paused

    first = await tick(t, cid, 0)
    assert first["thread_id"] == tid and not first["stateless"]
    run = await ended(client, tid, first["run_id"])
    assert run["status"] == "success"
    assert run["metadata"]["cron_id"] == cid and run["metadata"]["team"] == "ops"
    await asyncio.sleep(1.1)  # the next trigger gets another scheduled time (its tick id)
    second = await tick(t, cid, 1)
    assert second["run_id"] != first["run_id"]
    await ended(client, tid, second["run_id"])
    lines = (await client.threads.get_state(tid))["values"]["lines"]
    assert lines.count("hello Cy in ? []") == 2 and lines[-1] == "bye"  # two runs on the thread
    with stack.client("admin") as admin:  # an ordinary run: its events in the audit trail
        types = [e["type"] for e in admin.get(f"/v1/runs/{second['run_id']}/events").json()["items"]]
    assert types[0] == "run.submitted" and "run.completed" in types

    paused = await client.crons.update(cid, enabled=False, schedule="*/5 * * * *")
    assert paused["enabled"] is False and paused["next_run_date"] is None
    assert paused["schedule"] == "*/5 * * * *"
    assert (await t.get_schedule_handle(f"cron-{cid}").describe()).schedule.state.paused
    resumed = await client.crons.update(cid, enabled=True)
    assert resumed["next_run_date"] and datetime.fromisoformat(
        resumed["next_run_date"]).minute % 5 == 0

    assert [c["cron_id"] for c in await client.crons.search(thread_id=tid)] == [cid]
    assert await client.crons.count(thread_id=tid) == 1
    assert cid in {c["cron_id"] for c in await client.crons.search(assistant_id="greeter")}
    await client.crons.delete(cid)
    with pytest.raises(RPCError):
        await t.get_schedule_handle(f"cron-{cid}").describe()
    assert await client.crons.count(thread_id=tid) == 0


async def test_deleting_a_thread_deletes_its_crons_and_their_schedules(stack: Stack):
    client, t = sdk(stack), await temporal(stack)
    tid = (await client.threads.create())["thread_id"]
    kept_tid = (await client.threads.create())["thread_id"]
    cid = (await client.crons.create_for_thread(tid, "greeter", schedule="0 9 * * 1",
                                                input={}))["cron_id"]
    kept = (await client.crons.create_for_thread(kept_tid, "greeter", schedule="0 9 * * 1",
                                                 input={}))["cron_id"]
    await client.threads.delete(tid)
    assert await client.crons.count(thread_id=tid) == 0
    with pytest.raises(RPCError):
        await t.get_schedule_handle(f"cron-{cid}").describe()
    assert [c["cron_id"] for c in await client.crons.search(thread_id=kept_tid)] == [kept]
    await t.get_schedule_handle(f"cron-{kept}").describe()  # another thread's cron stays
    await client.crons.delete(kept)


async def test_a_stateless_cron_deletes_each_runs_thread_unless_kept(stack: Stack):
    client, t = sdk(stack), await temporal(stack)
    dropping = await client.crons.create("greeter", schedule="0 0 1 1 *", input={},
                                         context={"name": "Dee"})
    assert dropping["thread_id"] is None and dropping["on_run_completed"] == "delete"
    fired = await tick(t, dropping["cron_id"], 0)
    assert fired["stateless"] and fired["ended"] == "success"
    with pytest.raises(APIStatusError) as gone:
        await client.threads.get(fired["thread_id"])
    assert gone.value.response.status_code == 404

    keeping = await client.crons.create("greeter", schedule="0 0 1 1 *", input={},
                                        context={"name": "Eve"}, on_run_completed="keep")
    kept = await tick(t, keeping["cron_id"], 0)
    run = await ended(client, kept["thread_id"], kept["run_id"])
    assert run["status"] == "success" and "ended" not in kept
    state = await client.threads.get_state(kept["thread_id"])
    assert state["values"]["lines"][0] == "hello Eve in ? []"
    for cron in (dropping, keeping):
        await client.crons.delete(cron["cron_id"])


async def test_another_submitter_never_reaches_a_cron(stack: Stack):
    alice, bob, reviewer = sdk(stack), sdk(stack, "other"), sdk(stack, "reviewer")
    cron = await alice.crons.create("greeter", schedule="0 0 1 1 *", input={})
    cid = cron["cron_id"]
    assert cid not in {c["cron_id"] for c in await bob.crons.search(limit=100)}
    for call in (bob.crons.delete(cid), bob.crons.update(cid, enabled=False)):
        with pytest.raises(APIStatusError) as hidden:
            await call
        assert hidden.value.response.status_code == 404
    assert cid in {c["cron_id"] for c in await reviewer.crons.search(limit=100)}
    with pytest.raises(APIStatusError) as refused:
        await reviewer.crons.create("greeter", schedule="0 0 1 1 *", input={})
    assert refused.value.response.status_code == 403
    await alice.crons.delete(cid)


@pytest.mark.parametrize(("body", "field"), [
    ({"assistant_id": "greeter", "schedule": "not a cron"}, "schedule"),
    ({"assistant_id": "greeter"}, "schedule"),
    ({"assistant_id": "greeter", "schedule": "0 9 * * *", "timezone": "Mars/Base"}, "timezone"),
    ({"assistant_id": "greeter", "schedule": "0 9 * * *", "on_run_completed": "x"},
     "on_run_completed"),
    ({"assistant_id": "greeter", "schedule": "0 9 * * *", "interrupt_before": ["nowhere"]},
     "interrupt_before"),
])
def test_a_cron_the_server_cannot_keep_is_a_clear_422(stack: Stack, body: dict[str, Any],
                                                      field: str):
    with stack.client("submitter") as client:
        answer = client.post("/runs/crons", json=body)
        assert answer.status_code == 422, answer.text
        assert answer.json()["details"]["field"] == field
        assert client.post("/runs/crons/count", json={}).status_code == 200
