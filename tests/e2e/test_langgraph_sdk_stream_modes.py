"""Stream modes ``messages-tuple`` and ``messages``, and the modes Overseer refuses (issue 12).

``messages-tuple`` and ``messages`` come in the shapes the SDK, ``RemoteGraph`` and
agent-chat-ui read; a mode Overseer cannot honour faithfully is refused with a stable code.

The ``constructs`` graph's ``commander`` node returns ``AIMessage("<n> results")`` without
an id (its ``add_messages`` reducer gives it one). LangGraph's own ``stream_mode="messages"``
emits such a node output once, with the node in its metadata; Overseer derives the same
from the run's durable stream.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(180)


def sdk(stack: Stack, role: str = "submitter") -> Any:
    """The SDK's async client with only the URL and key changed."""
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


async def collect(stream: Any) -> list[tuple[str, Any]]:
    return [(part.event, part.data) async for part in stream]


async def test_messages_tuple_gives_each_node_message_once_with_its_node(stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(client.runs.stream(tid, "constructs", input={"topic": "a b"},
                                             stream_mode=["values", "messages-tuple"]))
    assert parts[0][0] == "metadata" and parts[-1][0] == "end"
    run_id = parts[0][1]["run_id"]
    messages = [d for e, d in parts if e == "messages"]
    assert len(messages) == 1
    message, metadata = messages[0]
    assert message["type"] == "ai" and message["content"] == "2 results"
    assert metadata["langgraph_node"] == "commander"
    assert metadata["run_id"] == run_id and metadata["thread_id"] == tid
    final = [d for e, d in parts if e == "values"][-1]
    # the id is the one the graph's reducer gave the message: the state holds the same one
    assert [m["id"] for m in final["messages"]] == [message["id"]]
    # the message comes before the values of the step that applied it
    events = [e for e, _ in parts]
    first_with_it = next(i for i, (e, d) in enumerate(parts)
                         if e == "values" and d.get("messages"))
    assert events.index("messages") < first_with_it

    # a second run on the thread emits only its own new message, not the thread's old one
    again = await collect(client.runs.stream(tid, "constructs", input={"topic": "c"},
                                             stream_mode="messages-tuple"))
    assert {e for e, _ in again} == {"metadata", "messages", "end"}
    (new, _), = [d for e, d in again if e == "messages"]
    state = await client.threads.get_state(tid)
    # (the thread's saved state carries other message ids than the live stream: add_messages
    # draws them from uuid4 when the closed workflow is replayed for its state; reported)
    assert [m["content"] for m in state["values"]["messages"]] == ["2 results", new["content"]]
    assert new["id"] != message["id"]


async def test_messages_mode_sends_metadata_then_the_complete_message(stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    parts = await collect(client.runs.stream(tid, "constructs", input={"topic": "x"},
                                             stream_mode="messages"))
    names = [e for e, _ in parts]
    assert names == ["metadata", "messages/metadata", "messages/complete", "end"]
    (mid, meta), = parts[1][1].items()
    assert meta["metadata"]["langgraph_node"] == "commander"
    assert parts[2][1] == [{**parts[2][1][0], "id": mid, "content": "1 results", "type": "ai"}]
    # joining the finished run's stream derives the same events
    run_id = parts[0][1]["run_id"]
    joined = [(p.event, p.data) async for p in client.runs.join_stream(
        tid, run_id, stream_mode="messages")]
    assert [e for e, _ in joined] == names


async def test_remote_graph_streams_messages(stack: Stack):
    from langgraph.pregel.remote import RemoteGraph

    remote = RemoteGraph("constructs", url=stack.base_url, api_key=stack.tokens["submitter"])
    chunks = [c async for c in remote.astream({"topic": "p q r"}, stream_mode="messages")]
    assert len(chunks) == 1
    message, metadata = chunks[0]
    assert message["content"] == "3 results" and metadata["langgraph_node"] == "commander"


@pytest.mark.parametrize("mode", ["lifecycle"])
async def test_a_mode_overseer_cannot_honour_is_refused_before_the_run_starts(
        stack: Stack, mode: str):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError) as refused:
        await collect(client.runs.stream(tid, "constructs", input={"topic": "t"},
                                         stream_mode=["values", mode]))
    body = refused.value.response.json()
    assert body["code"] == "stream_mode_unsupported"
    assert body["details"]["unsupported"] == [mode]
    assert "messages-tuple" in body["details"]["supported"]
    assert await client.runs.list(tid) == []  # nothing was started
    assert (await client.threads.get(tid))["status"] == "idle"
    # joining a run's stream in such a mode is refused the same way
    run = await client.runs.create(tid, "constructs", input={"topic": "t"})
    with pytest.raises(UnprocessableEntityError) as joined:
        await collect(client.runs.join_stream(tid, run["run_id"], stream_mode=mode))
    assert joined.value.response.json()["code"] == "stream_mode_unsupported"
    await client.runs.join(tid, run["run_id"])
