"""A thread paused inside a subgraph, read through the official client as LangGraph reads it.

``nested_review`` (tests/graphs/user_graph) asks its question from a node of a compiled
subgraph (``editor_desk``). ``threads.get_state`` names the subgraph's checkpoint on the
parent's task; ``subgraphs=True`` nests the subgraph's own state there, and the task's
``checkpoint`` reads that state on its own, as plain LangGraph's ``aget_state`` gives them.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def _reference() -> Any:
    from overseer.registry import load_langgraph_json

    entry = load_langgraph_json(USER_GRAPHS)["nested_review"].graph
    return entry.compile(checkpointer=InMemorySaver())


def _shape(state: Any) -> dict[str, Any]:
    """What both sides agree on: values, next, and per task its name, interrupts, subgraph."""
    if isinstance(state, dict):
        return {"values": state["values"], "next": list(state["next"]),
                "tasks": [{"name": t["name"], "interrupts": [i["value"] for i in t["interrupts"]],
                           "state": _shape(t["state"]) if t.get("state") else None}
                          for t in state["tasks"]]}
    return {"values": state.values, "next": list(state.next),
            "tasks": [{"name": t.name, "interrupts": [i.value for i in t.interrupts],
                       "state": _shape(t.state) if hasattr(t.state, "next") else None}
                      for t in state.tasks]}


async def test_a_pause_inside_a_subgraph_reads_as_plain_langgraph(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    tid = (await client.threads.create())["thread_id"]
    app, ref = _reference(), {"configurable": {"thread_id": "ref"}}
    await app.ainvoke({"topic": "tides"}, ref)
    await client.runs.wait(tid, "nested_review", input={"topic": "tides"})
    assert (await client.threads.get(tid))["status"] == "interrupted"

    flat = await client.threads.get_state(tid)
    assert _shape(flat) == _shape(await app.aget_state(ref))
    [task] = flat["tasks"]
    assert task["name"] == "editor_desk" and task["state"] is None
    assert task["path"] == ["__pregel_pull", "editor_desk"]
    assert task["checkpoint"]["checkpoint_ns"] == f"editor_desk:{task['id']}"

    nested = await client.threads.get_state(tid, subgraphs=True)
    want = _shape(await app.aget_state(ref, subgraphs=True))
    assert _shape(nested) == want
    assert want["tasks"][0]["state"] == {
        "values": {"topic": "tides", "draft": "post about tides"}, "next": ["review_post"],
        "tasks": [{"name": "review_post", "state": None, "interrupts": [
            {"question": "publish?", "draft": "post about tides"}]}]}
    inner = nested["tasks"][0]["state"]
    assert inner["checkpoint"]["checkpoint_ns"] == task["checkpoint"]["checkpoint_ns"]
    assert inner["checkpoint"]["checkpoint_id"]

    # the task's checkpoint reads the subgraph's own state; so does its exact checkpoint id
    own = await client.threads.get_state(tid, checkpoint=task["checkpoint"])
    assert _shape(own) == want["tasks"][0]["state"]
    at = await client.threads.get_state(tid, checkpoint=inner["checkpoint"])
    assert at["checkpoint"]["checkpoint_id"] == inner["checkpoint"]["checkpoint_id"]
    # the root's past checkpoint with subgraphs, through GET /state/{checkpoint_id}
    root_id = flat["checkpoint"]["checkpoint_id"]
    again = await client.threads.get_state(tid, checkpoint_id=root_id, subgraphs=True)
    assert _shape(again) == want
    with pytest.raises(NotFoundError):
        await client.threads.get_state(tid, checkpoint={"checkpoint_ns": "nowhere:1"})

    # select: one key of values, through each of the three reads
    assert await client.threads.get_state(tid, select=["values.draft", "next"]) == \
        {"values": {"draft": "post about tides"}, "next": ["editor_desk"]}
    assert await client.threads.get_state(tid, checkpoint_id=root_id, select=["next"]) == \
        {"next": ["editor_desk"]}
    assert await client.threads.get_state(tid, checkpoint=task["checkpoint"],
                                          select=["values.topic"]) == {"values": {"topic": "tides"}}
    # history: the subgraph's own (its checkpoint), filtered by metadata, selected
    sub_history = await client.threads.get_history(tid, checkpoint=task["checkpoint"], limit=20)
    want_sub = [s async for s in app.aget_state_history(
        (await app.aget_state(ref)).tasks[0].state)]
    assert [(h["values"], h["next"]) for h in sub_history] == \
        [(s.values, list(s.next)) for s in want_sub]
    assert len(sub_history) >= 2 and all(
        h["checkpoint"]["checkpoint_ns"] == task["checkpoint"]["checkpoint_ns"]
        for h in sub_history)
    loop_steps = await client.threads.get_history(tid, metadata={"source": "loop"},
                                                  select=["metadata"])
    want_loop = [s async for s in app.aget_state_history(ref, filter={"source": "loop"})]
    assert [h["metadata"]["step"] for h in loop_steps] == [s.metadata["step"] for s in want_loop]
    assert all(set(h) == {"metadata"} for h in loop_steps) and len(loop_steps) >= 2
    with pytest.raises(UnprocessableEntityError):
        await client.http.post(f"/threads/{tid}/state/checkpoint",
                               json={"checkpoint": {}, "subgraphs": "yes"})

    done = await client.runs.wait(tid, "nested_review",
                                  command={"resume": {"publish": True, "note": "ok"}})
    assert done == await app.ainvoke(Command(resume={"publish": True, "note": "ok"}), ref)
    idle = await client.threads.get_state(tid, subgraphs=True)
    assert _shape(idle) == _shape(await app.aget_state(ref, subgraphs=True))
    assert idle["tasks"] == [] and idle["values"]["published"] is True
