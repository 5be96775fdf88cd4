"""``threads.create(supersteps=…)``: a thread that starts from given state, as LangGraph writes it.

The SDK's way to copy a thread between deployments: each superstep's updates go through
LangGraph's ``abulk_update_state`` on the graph named by ``graph_id``, so the new thread's
state, ``next`` and history are what plain LangGraph makes of the same updates, and a run
goes on from there.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, StateUpdate
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)

SUPERSTEPS = [{"updates": [{"values": {"topic": "tides"}, "as_node": "__input__"}]},
              {"updates": [{"values": {"topic": "tides"}, "as_node": "__start__"}]},
              {"updates": [{"values": {"draft": "tides, told twice"}, "as_node": "write_post"}]}]
"""A thread's history as LangGraph writes it: its input, ``__start__``'s write, a node's."""


def _reference() -> Any:
    from overseer.registry import load_langgraph_json

    return load_langgraph_json(USER_GRAPHS)["publish_review"].graph.compile(
        checkpointer=InMemorySaver())


async def test_a_thread_made_from_supersteps_runs_on_as_plain_langgraph(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])  # it resumes too
    app, ref = _reference(), {"configurable": {"thread_id": "ref"}}
    await app.abulk_update_state(ref, [[StateUpdate(u["values"], u["as_node"])
                                        for u in s["updates"]] for s in SUPERSTEPS])
    want = await app.aget_state(ref)

    made = await client.threads.create(supersteps=SUPERSTEPS, graph_id="publish_review")
    tid = made["thread_id"]
    assert made["status"] == "interrupted" and made["values"] == want.values
    assert made["metadata"]["graph_id"] == "publish_review"
    state = await client.threads.get_state(tid)
    assert (state["values"], state["next"]) == (want.values, list(want.next)) == \
        ({"topic": "tides", "draft": "tides, told twice"}, ["review_post"])
    history = await client.threads.get_history(tid, limit=20)
    assert len(history) == len([s async for s in app.aget_state_history(ref)])

    # a run with no input goes on from the given state, as LangGraph's invoke(None) does
    paused = await client.runs.wait(tid, "publish_review", input=None)
    assert [i["value"] for i in paused["__interrupt__"]] == \
        [i.value for i in (await app.ainvoke(None, ref))["__interrupt__"]]
    done = await client.runs.wait(tid, "publish_review", command={"resume": {"publish": True}})
    assert done == await app.ainvoke(Command(resume={"publish": True}), ref)


async def test_refused_supersteps_leave_no_thread(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    bad_node = [{"updates": [{"values": {"topic": "x"}, "as_node": "nowhere"}]}]
    twice = [{"updates": [{"values": {"topic": "x"}, "as_node": "write_post"},
                          {"values": {"topic": "y"}, "as_node": "write_post"}]}]
    for supersteps, graph_id in ((bad_node, "publish_review"), (twice, "publish_review"),
                                 (SUPERSTEPS, None), (SUPERSTEPS, "no_such_graph")):
        tid = str(uuid.uuid4())
        with pytest.raises(UnprocessableEntityError):
            await client.threads.create(thread_id=tid, supersteps=supersteps, graph_id=graph_id)
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)
    with pytest.raises(UnprocessableEntityError):
        await client.http.post("/threads", json={"supersteps": [{"updates": "x"}],
                                                 "metadata": {"graph_id": "publish_review"}})
