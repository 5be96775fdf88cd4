"""Tokens as the model makes them, through the official client (issue 26 item 1).

The ``chatty`` user graph (tests/graphs/user_graph) runs as segments: its ``talk`` node
calls a streaming chat model (langchain-core's ``GenericFakeChatModel``) and then works on
for 1.5 s; ``sign`` returns a whole message without a model. Plain LangGraph's
``stream_mode="messages"`` on the same graph is the reference: the same chunks, in the
same order, with the same node, and each token reaches the client while ``talk`` still
runs. A client that rejoins with ``Last-Event-ID`` gets the rest once.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)

QUESTION = {"messages": [{"type": "human", "content": "tell me"}]}


def sdk(stack: Stack) -> Any:
    return get_client(url=stack.base_url, api_key=stack.tokens["submitter"])


async def reference_chunks() -> list[tuple[str, str, str]]:
    """``(message type, content, node)`` of plain LangGraph's ``messages`` stream for the question."""
    from overseer.registry import builder_of, load_langgraph_json

    app = builder_of(load_langgraph_json(USER_GRAPHS)["chatty"].graph).compile(
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    return [(m.type, m.content, meta["langgraph_node"]) async for m, meta in
            app.astream(QUESTION, config, stream_mode="messages")]


async def test_tokens_reach_the_client_while_the_node_runs_as_plain_langgraph_streams_them(
        stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    parts: list[tuple[float, Any]] = []
    async for part in client.runs.stream(tid, "chatty", input=QUESTION,
                                         stream_mode=["messages-tuple", "updates"]):
        parts.append((time.monotonic(), part))
    tuples = [(t, p.data) for t, p in parts if p.event == "messages"]
    got = [(m["type"], m["content"], meta["langgraph_node"]) for _, (m, meta) in tuples]
    want = await reference_chunks()
    assert len(want) > 5  # the fake model streams word by word
    assert got == want
    talk = [(t, m, meta) for t, (m, meta) in tuples if meta["langgraph_node"] == "talk"]
    assert "".join(m["content"] for _, m, _ in talk) == \
        "Tokens arrive one by one while the node is still running"
    assert {m["id"] for _, m, _ in talk} == {talk[0][1]["id"]}  # chunks of one message
    run_id = parts[0][1].data["run_id"]
    assert all(meta["run_id"] == run_id and meta["thread_id"] == tid and
               meta["langgraph_step"] == 1 for _, _, meta in talk)
    # live: the first token arrived while talk still had over a second of its 2.5 s pause to
    # go (a stream given at the node's end would bring it with the update); the other 1.5 s
    # leave room for delivery on a loaded CI machine
    talk_done = next(t for t, p in parts if p.event == "updates" and "talk" in p.data)
    assert talk_done - talk[0][0] > 1.0
    # every token before the update of its node; sign's whole message once, after
    order = [p.event for _, p in parts]
    assert order.index("updates") > max(i for i, (_, p) in enumerate(parts)
                                        if p.event == "messages" and
                                        p.data[1]["langgraph_node"] == "talk")
    signed = [m for _, (m, meta) in tuples if meta["langgraph_node"] == "sign"]
    assert [m["content"] for m in signed] == ["signed"]

    # rejoin after the third token: the rest, once, and nothing before it
    ids = [p.id for _, p in parts if p.event == "messages"]
    rest = [(p.id, p.data) async for p in client.runs.join_stream(
        tid, run_id, stream_mode="messages-tuple", last_event_id=ids[2])]
    assert [i for i, _ in rest if i in ids] == ids[3:]
    assert [d[0]["content"] for i, d in rest if i in ids] == \
        [d[0]["content"] for _, d in tuples[3:]]


async def test_messages_mode_sends_partials_then_the_complete_message(stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    parts = [(p.event, p.data) async for p in client.runs.stream(
        tid, "chatty", input=QUESTION, stream_mode="messages")]
    names = [e for e, _ in parts]
    assert names[:2] == ["metadata", "messages/metadata"] and names[-1] == "end"
    partials = [d[0] for e, d in parts if e == "messages/partial"]
    assert len(partials) > 5
    # each partial is the message so far, as a whole message
    assert partials[-1]["content"] == "Tokens arrive one by one while the node is still running"
    assert all(p["type"] == "ai" for p in partials)
    assert [len(p["content"]) for p in partials] == sorted(len(p["content"]) for p in partials)
    (sig_meta,) = [d for e, d in parts if e == "messages/metadata"][1:]
    assert list(sig_meta) == ["sig-1"]
    assert [d for e, d in parts if e == "messages/complete"] == [
        [{**[d for e, d in parts if e == "messages/complete"][0][0], "content": "signed"}]]
    state = await client.threads.get_state(tid)
    assert [m["content"] for m in state["values"]["messages"]][1:] == [
        partials[-1]["content"], "signed"]


async def test_custom_writes_reach_the_client_while_the_node_runs(stack: Stack):
    """``progress``: ``crunch`` writes three steps with ``get_stream_writer()``, 0.6 s apart."""
    from overseer.registry import builder_of, load_langgraph_json

    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    parts: list[tuple[float, Any]] = []
    async for part in client.runs.stream(tid, "progress", input={"job": "index"},
                                         stream_mode=["custom", "updates"]):
        parts.append((time.monotonic(), part))
    got = [(p.event, p.data) for _, p in parts if p.event in ("custom", "updates")]
    app = builder_of(load_langgraph_json(USER_GRAPHS)["progress"].graph).compile(
        checkpointer=InMemorySaver())
    want = [tuple(c) async for c in app.astream(
        {"job": "index"}, {"configurable": {"thread_id": "ref"}},
        stream_mode=["custom", "updates"])]
    assert got == want
    assert [d["step"] for e, d in got if e == "custom"] == [1, 2, 3]
    first = next(t for t, p in parts if p.event == "custom")
    update = next(t for t, p in parts if p.event == "updates")
    assert update - first > 1.0  # the first write arrived while crunch still worked

    run_id = parts[0][1].data["run_id"]  # joined afterwards: each write once, in order
    again = [p.data async for p in client.runs.join_stream(tid, run_id, stream_mode="custom")
             if p.event == "custom"]
    assert [d["step"] for d in again] == [1, 2, 3]


async def reference_events() -> list[tuple[str, str, str | None]]:
    """``(event, name, node)`` of plain LangGraph's ``astream_events(version="v2")`` for the question.

    Filtered as the Agent Server filters its ``events`` stream mode: no event tagged
    ``langsmith:hidden``, and not the graph's own ``on_chain_stream`` (its chunks go out as
    their stream modes).
    """
    from overseer.registry import builder_of, load_langgraph_json

    app = builder_of(load_langgraph_json(USER_GRAPHS)["chatty"].graph).compile(
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reference-events"}}
    return [(e["event"], e["name"], e.get("metadata", {}).get("langgraph_node"))
            async for e in app.astream_events(QUESTION, config, version="v2",
                                              stream_mode=["values"], subgraphs=True)
            if "langsmith:hidden" not in (e.get("tags") or [])
            and not (e["event"] == "on_chain_stream" and not e["parent_ids"])]


async def test_events_mode_streams_langchain_callback_events_as_plain_langgraph_makes_them(
        stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    parts = [(p.event, p.data) async for p in client.runs.stream(
        tid, "chatty", input=QUESTION, stream_mode=["events", "values"])]
    events = [data for name, data in parts if name == "events"]
    got = [(e["event"], e["name"], e.get("metadata", {}).get("langgraph_node")) for e in events]
    want = await reference_events()
    assert len(want) > 20 and got == want
    streamed = "".join(e["data"]["chunk"]["content"] for e in events
                       if e["event"] == "on_chat_model_stream")
    assert streamed == "Tokens arrive one by one while the node is still running"
    assert not any(k.startswith("overseer") for e in events for k in e.get("metadata", {}))
    assert [name for name, _ in parts].count("values") >= 2  # the values chunks still come
    assert parts[-1][0] == "end"


async def test_a_streamed_run_that_ends_asks_its_workflow_nothing(stack: Stack, dev_server: Any):
    """The segment that ends the run writes its ending as a row with the thread's hand-off, so
    the stream ends from Postgres: no workflow update, no workflow task to accept one."""
    from temporalio.api.enums.v1 import EventType

    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    parts = [p async for p in client.runs.stream(tid, "chatty", input=QUESTION,
                                                 stream_mode="messages-tuple")]
    run_id = parts[0].data["run_id"]
    assert [p.event for p in parts][-1] != "error"
    assert "".join(p.data[0]["content"] for p in parts if p.event == "messages"
                   and p.data[1]["langgraph_node"] == "talk") == \
        "Tokens arrive one by one while the node is still running"
    handle = dev_server.client.get_workflow_handle(f"chatty-{run_id}")
    await handle.result()  # the stream may end before the workflow's last task: it ends on the row
    kinds = [e.event_type for e in (await handle.fetch_history()).events]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED not in kinds
    assert kinds.count(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) == 2
    # joined after its end, the run's stream is the same, from the rows alone
    joined = [p async for p in client.runs.join_stream(tid, run_id,
                                                       stream_mode="messages-tuple")]
    assert [(p.event, p.data) for p in joined if p.event != "metadata"] == \
        [(p.event, p.data) for p in parts if p.event != "metadata"]
