"""``/mcp``: the assistants as MCP tools, driven by the clients LangGraph users have.

``langchain-mcp-adapters`` (on the official ``mcp`` client, Streamable HTTP) lists the
tools the caller's key may see and calls them; each call is a stateless run, compared with
plain LangGraph on the same graph. A LangGraph agent in this process then calls a graph
Overseer hosts as one of its tools. The ``mcp`` client's own session reads what the
adapter folds away (``_meta``, ``isError``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def _reference(graph: str) -> Any:
    from overseer.registry import load_langgraph_json

    return load_langgraph_json(USER_GRAPHS)[graph].graph.compile(checkpointer=InMemorySaver())


def _adapter(stack: Stack, role: str = "submitter") -> MultiServerMCPClient:
    return MultiServerMCPClient({"overseer": {
        "transport": "streamable_http", "url": f"{stack.base_url}/mcp",
        "headers": {"Authorization": f"Bearer {stack.tokens[role]}"}}})


async def _call(stack: Stack, name: str, arguments: dict[str, Any]) -> Any:
    """One ``tools/call`` through the ``mcp`` client's session: the whole ``CallToolResult``."""
    headers = {"Authorization": f"Bearer {stack.tokens['submitter']}"}
    async with create_mcp_http_client(headers=headers) as http, \
            streamable_http_client(f"{stack.base_url}/mcp", http_client=http) as (read, write, _), \
            ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool(name, arguments)


async def test_tools_are_the_assistants_and_a_call_is_a_run(stack: Stack):
    tools = {t.name: t for t in await _adapter(stack).get_tools()}
    assert {"counter", "publish_review", "greeter", "chatty"} <= set(tools)
    assert "count" in tools["counter"].args_schema["properties"]

    called = await tools["counter"].ainvoke(
        {"type": "tool_call", "name": "counter", "args": {"count": 3}, "id": "call-1"})
    assert isinstance(called, ToolMessage)
    want = await _reference("counter").ainvoke({"count": 3}, {"configurable": {"thread_id": "r"}})
    assert called.artifact["structured_content"] == want
    assert json.loads(called.content[0]["text"] if isinstance(called.content, list)
                      else called.content) == want

    result = await _call(stack, "counter", {"count": 11})
    assert not result.isError and result.structuredContent["count"] == 12
    sdk = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    with pytest.raises(NotFoundError):  # a stateless run's thread is gone once it answered
        await sdk.threads.get(result.meta["overseer/thread_id"])
    failed = await _call(stack, "poison", {"topic": "x"})
    assert failed.isError and failed.content[0].text
    with pytest.raises(NotFoundError):  # nor a failed one's (it was left behind)
        await sdk.threads.get(failed.meta["overseer/thread_id"])

    # a chat graph takes the user's message as a string, as a model fills a tool's input
    assert tools["chatty"].args_schema["properties"]["messages"]["type"] == "string"
    assert "$defs" not in tools["chatty"].args_schema
    chat = await _call(stack, "chatty", {"messages": "hi"})
    plain = await _reference("chatty").ainvoke({"messages": "hi"},
                                               {"configurable": {"thread_id": "c"}})
    assert [(m["type"], m["content"]) for m in chat.structuredContent["messages"]] == \
        [(m.type, m.content) for m in plain["messages"]]


class _Scripted(GenericFakeChatModel):
    """langchain-core's fake chat model, answering whole messages (no streaming) to an agent."""

    _stream = BaseChatModel._stream
    _astream = BaseChatModel._astream

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


async def test_a_langgraph_agent_calls_a_graph_overseer_hosts(stack: Stack):
    from langchain.agents import create_agent

    model = _Scripted(messages=iter([  # asks for the counter tool, then answers
        AIMessage(content="", tool_calls=[{"name": "counter", "args": {"count": 10},
                                           "id": "call-count"}]),
        AIMessage(content="counted")]))
    agent = create_agent(model, await _adapter(stack).get_tools())
    done = await agent.ainvoke({"messages": [{"role": "user", "content": "count to twelve"}]})
    answered = [m for m in done["messages"] if isinstance(m, ToolMessage)][0]
    assert answered.name == "counter" and answered.status == "success"
    assert '"count": 12' in str(answered.content)  # the run Overseer made answered the agent
    assert done["messages"][-1].content == "counted"


async def test_a_paused_call_keeps_its_thread_for_a_person(stack: Stack):
    paused = await _call(stack, "publish_review", {"topic": "tides"})
    assert not paused.isError
    [asked] = paused.structuredContent["__interrupt__"]
    assert asked["value"] == {"question": "publish?", "draft": "post about tides"}
    reviewer = get_client(url=stack.base_url, api_key=stack.tokens["reviewer"])
    done = await reviewer.runs.wait(paused.meta["overseer/thread_id"], "publish_review",
                                    command={"resume": {"publish": True}})
    assert done["published"] is True


async def test_protocol_edges_answer_as_mcp_and_overseer_say(stack: Stack):
    headers = {"Authorization": f"Bearer {stack.tokens['submitter']}",
               "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers) as http:
        unknown_tool = await http.post("/mcp", json={
            "jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "no_such_tool", "arguments": {}}})
        assert unknown_tool.json()["error"] == {"code": -32602, "message": "unknown tool: no_such_tool"}
        assert (await http.get("/mcp")).status_code == 405
        assert (await http.delete("/mcp")).status_code == 405
        bad = await http.post("/mcp", content=b"{nope")
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_mcp_message"
        batch = await http.post("/mcp", json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
        assert batch.status_code == 400
        note = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert note.status_code == 202
        # a 2026 client probes server/discover first and falls back to initialize on this
        probe = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "server/discover"})
        assert probe.json() == {"jsonrpc": "2.0", "id": 7, "error": {
            "code": -32601, "message": "method not found: server/discover"}}
        old = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                            "params": {"protocolVersion": "2024-11-05"}})
        assert old.json()["result"]["protocolVersion"] == "2024-11-05" and old.json()["id"] == 0
        assert (await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                headers={"Authorization": ""})).status_code == 401
