"""Time travel through the official client: edit a past state, run on from the fork.

LangGraph's own recipe (``get_state_history`` → ``update_state`` at a past checkpoint →
``invoke(None)``), here ``threads.get_history`` → ``threads.update_state(checkpoint_id=…)``
→ ``runs.wait(input=None)``, compared step by step with plain LangGraph on the same graph
(``counter``: ticks until twelve). An update inside a subgraph (``checkpoint_ns``) is
compared too (``nested_review``: a person asked inside ``editor_desk``).
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def _reference(graph: str) -> Any:
    from overseer.registry import load_langgraph_json

    return load_langgraph_json(USER_GRAPHS)[graph].graph.compile(checkpointer=InMemorySaver())


async def test_an_edit_of_a_past_state_forks_and_runs_on_as_plain_langgraph(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    app, ref = _reference("counter"), {"configurable": {"thread_id": "ref"}}
    tid = (await client.threads.create())["thread_id"]
    assert await client.runs.wait(tid, "counter", input={"count": 0}) == \
        await app.ainvoke({"count": 0}, ref)

    history = await client.threads.get_history(tid, limit=100)
    past = next(h for h in history if h["values"].get("count") == 5)
    plain_past = [s async for s in app.aget_state_history(ref) if s.values.get("count") == 5][0]
    assert past["next"] == list(plain_past.next) == ["tick"]

    forked = await client.threads.update_state(tid, {"count": 9}, checkpoint_id=past[
        "checkpoint"]["checkpoint_id"])
    plain_fork = await app.aupdate_state(plain_past.config, {"count": 9})
    fork = await client.threads.get_state(tid)  # the fork is the thread's latest
    assert (await client.threads.get(tid))["status"] == "interrupted"  # as the Agent Server: next set
    assert fork["checkpoint"]["checkpoint_id"] == forked["checkpoint"]["checkpoint_id"]
    assert fork["parent_checkpoint"]["checkpoint_id"] == past["checkpoint"]["checkpoint_id"]
    want = await app.aget_state(plain_fork)
    assert (fork["values"], fork["next"]) == (want.values, list(want.next))

    done = await client.runs.wait(tid, "counter", input=None)
    assert done == await app.ainvoke(None, plain_fork)
    assert done["seen"][-4:] == [4, 9, 10, 11]  # ran on from the edit, not from twelve

    with pytest.raises(NotFoundError):  # never an edit of an empty state in its place
        await client.threads.update_state(tid, {"count": 1}, checkpoint_id="1f0-no-such")
    assert (await client.threads.get_state(tid))["values"] == done


async def test_an_edit_inside_a_paused_subgraph_as_plain_langgraph(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    app, ref = _reference("nested_review"), {"configurable": {"thread_id": "ref"}}
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "nested_review", input={"topic": "tides"})
    await app.ainvoke({"topic": "tides"}, ref)
    task = (await client.threads.get_state(tid))["tasks"][0]
    with pytest.raises(NotFoundError):  # refused before the paused run is let go
        await client.threads.update_state(tid, {"draft": "x"}, checkpoint_id="1f0-no-such")
    paused_run = (await client.runs.list(tid))[0]["run_id"]
    with stack.client("admin") as admin:
        events = admin.get(f"/v1/runs/{paused_run}/events").json()["items"]
    assert "run.cancelled" not in {e["type"] for e in events}

    await client.threads.update_state(tid, {"draft": "a better post"},
                                      checkpoint=task["checkpoint"])
    await app.aupdate_state((await app.aget_state(ref)).tasks[0].state, {"draft": "a better post"})
    inner = await client.threads.get_state(tid, checkpoint=task["checkpoint"])
    want = await app.aget_state((await app.aget_state(ref)).tasks[0].state)
    assert (inner["values"], inner["next"]) == (want.values, list(want.next))
    assert inner["values"]["draft"] == "a better post"

    done = await client.runs.wait(tid, "nested_review",
                                  command={"resume": {"publish": True, "note": "ok"}})
    assert done == await app.ainvoke(Command(resume={"publish": True, "note": "ok"}), ref)


async def test_remote_graph_reads_and_edits_state_as_on_the_agent_server(stack: Stack):
    """``RemoteGraph`` (LangGraph's own client of a deployed graph): a paused subgraph's
    nested state, a filtered history and an edit of a past state, each as plain LangGraph.
    It reads every task's ``state`` and ``checkpoint``, which a paused thread lacked before."""
    from langgraph.pregel.remote import RemoteGraph

    thread = (await get_client(url=stack.base_url, api_key=stack.tokens["admin"])
              .threads.create())["thread_id"]
    remote = RemoteGraph("nested_review", url=stack.base_url, api_key=stack.tokens["admin"])
    config, app, ref = ({"configurable": {"thread_id": thread}}, _reference("nested_review"),
                        {"configurable": {"thread_id": "ref"}})
    await remote.ainvoke({"topic": "tides"}, config)
    await app.ainvoke({"topic": "tides"}, ref)
    got, want = await remote.aget_state(config, subgraphs=True), \
        await app.aget_state(ref, subgraphs=True)
    assert (got.values, got.next) == (want.values, want.next)
    inner, want_inner = got.tasks[0].state, want.tasks[0].state
    assert (inner.values, inner.next) == (want_inner.values, want_inner.next)
    assert [i.value for i in got.interrupts] == [i.value for i in want.interrupts]

    history = [s async for s in remote.aget_state_history(config, filter={"source": "loop"})]
    assert [s.metadata["step"] for s in history] == \
        [s.metadata["step"] async for s in app.aget_state_history(ref, filter={"source": "loop"})]
    first = history[-1]  # write_post's checkpoint: edit it, as LangGraph's time travel does
    edited = await remote.aupdate_state(first.config, {"topic": "tides, edited"})
    assert (await remote.aget_state(config)).config["configurable"]["checkpoint_id"] == \
        edited["configurable"]["checkpoint_id"]
