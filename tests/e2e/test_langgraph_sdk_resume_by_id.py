"""``Command(resume={interrupt_id: value})`` answers the interrupts it names, or is refused (issues 12, 26).

The ``parallel_approvals`` graph pauses on two interrupts at once (one per branch). As
segments (a plain graph's default), one resume map naming both answers them together,
as LangGraph does, with plain LangGraph's result. Each is its own approval, so one at a
time they may be answered in any order; a resume map naming an answered one is refused
with a stable code, and nothing is decided. A resume on an approval another reviewer claimed is
refused with the same code as the admin API gives (``claimed_by_other``).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_sdk import get_client

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def sdk(stack: Stack, role: str) -> Any:
    """The SDK's async client with only the URL and key changed."""
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


async def test_a_resume_map_answers_the_interrupt_it_names(stack: Stack):
    client, reviewer = sdk(stack, "submitter"), sdk(stack, "reviewer")
    tid = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(tid, "parallel_approvals", input={"topic": "a b"})
    ids = sorted(i["id"] for i in paused["__interrupt__"])
    assert len(ids) == 2
    items = {i["id"]: i["value"]["item"] for i in paused["__interrupt__"]}
    current, other = ids

    # the newer one first: each interrupt is its own approval, answered in any order
    nxt = await reviewer.runs.wait(tid, "parallel_approvals",
                                   command={"resume": {other: {"decision": "no"}}})
    assert [i["id"] for i in nxt["__interrupt__"]] == [current]
    with pytest.raises(httpx.HTTPStatusError) as stale:  # already answered
        await reviewer.runs.wait(tid, "parallel_approvals",
                                 command={"resume": {other: {"decision": "again"}}})
    assert stale.value.response.status_code == 409
    assert stale.value.response.json()["code"] == "not_awaiting_approval"
    assert "already answered" in stale.value.response.json()["message"]
    done = await reviewer.runs.wait(tid, "parallel_approvals",
                                    command={"resume": {current: {"decision": "yes"}}})
    assert done["summary"] == ",".join(sorted([f"{items[current]}=yes:", f"{items[other]}=no:"]))
    statuses = [r["status"] for r in await client.runs.list(tid)]
    assert statuses == ["success", "interrupted", "interrupted"]


async def test_one_resume_map_answers_parallel_interrupts_together(stack: Stack):
    from overseer.registry import builder_of, load_langgraph_json

    client, reviewer = sdk(stack, "submitter"), sdk(stack, "reviewer")
    tid = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(tid, "parallel_approvals", input={"topic": "a b"})
    answers = {i["id"]: {"decision": f"ok-{i['value']['item']}"} for i in paused["__interrupt__"]}
    assert len(answers) == 2
    state = await client.threads.get_state(tid)
    assert sorted(i["id"] for i in state["interrupts"]) == sorted(answers)  # both visible

    done = await reviewer.runs.wait(tid, "parallel_approvals", command={"resume": answers})
    app = builder_of(load_langgraph_json(USER_GRAPHS)["parallel_approvals"].graph).compile(
        checkpointer=InMemorySaver())
    ref = {"configurable": {"thread_id": "ref"}}
    first = await app.ainvoke({"topic": "a b"}, ref)
    want = await app.ainvoke(Command(resume={
        i.id: {"decision": f"ok-{i.value['item']}"} for i in first["__interrupt__"]}), ref)
    assert done["summary"] == want["summary"] == "a=ok-a:,b=ok-b:"
    assert [r["status"] for r in await client.runs.list(tid)] == ["success", "interrupted"]
    with stack.client("admin") as admin:  # each question was its own approval
        run_id = (await client.runs.list(tid))[-1]["run_id"]
        requested = [e for e in admin.get(f"/v1/runs/{run_id}/events").json()["items"]
                     if e["type"] == "approval.requested"]
    assert sorted(e["data"]["payload"]["item"] for e in requested) == ["a", "b"]  # one each
    assert sorted(e["data"]["interrupt_id"] for e in requested) == sorted(answers)


async def test_a_resume_on_an_approval_another_reviewer_claimed_is_claimed_by_other(stack: Stack):
    client = sdk(stack, "submitter")
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "approvals", input={"topic": "claimed"})
    run_id = (await client.runs.list(tid))[-1]["run_id"]
    with stack.client("reviewer") as rita:  # rita claims it through the admin API
        assert rita.post(f"/v1/admin/approvals/{run_id}/claim").status_code == 200
    with pytest.raises(httpx.HTTPStatusError) as refused:  # sam resumes it through the SDK
        await sdk(stack, "reviewer2").runs.wait(tid, "approvals",
                                                command={"resume": {"approved": True}})
    assert refused.value.response.status_code == 409
    body = refused.value.response.json()
    assert body["code"] == "claimed_by_other" and body["details"]["claimed_by"] == "rita"
    state = await client.threads.get_state(tid)
    assert state["interrupts"]  # nothing was decided
