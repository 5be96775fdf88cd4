"""``/mcp``: the assistants as MCP tools, driven by the official ``mcp`` client.

``mcp``'s ``Client`` (Streamable HTTP, ``mode="auto"``: it probes ``server/discover`` and
falls back to the ``initialize`` handshake) lists the tools the caller's key may see and
calls them; each call is a stateless run, compared with plain LangGraph on the same graph.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def _reference(graph: str) -> Any:
    from overseer.registry import load_langgraph_json

    return load_langgraph_json(USER_GRAPHS)[graph].graph.compile(checkpointer=InMemorySaver())


class _Mcp:
    """An MCP client session on the stack's ``/mcp`` with ``role``'s key."""

    def __init__(self, stack: Stack, role: str) -> None:
        self.url, self.key = f"{stack.base_url}/mcp", stack.tokens[role]

    async def __aenter__(self) -> Client:
        self.http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.key}"})
        await self.http.__aenter__()
        self.client = Client(streamable_http_client(self.url, http_client=self.http))
        return await self.client.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self.client.__aexit__(*exc)
        await self.http.__aexit__(*exc)


async def test_tools_are_the_assistants_and_a_call_is_a_run(stack: Stack):
    async with _Mcp(stack, "submitter") as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert {"counter", "publish_review", "greeter"} <= set(tools)
        assert tools["counter"].input_schema["type"] == "object"
        assert "count" in tools["counter"].input_schema["properties"]

        result = await mcp.call_tool("counter", {"count": 3})
        assert not result.is_error
        want = await _reference("counter").ainvoke({"count": 3}, {"configurable": {"thread_id": "r"}})
        assert result.structured_content == want
        assert result.content[0].text.startswith("{") and '"count": 12' in result.content[0].text
        meta = result.meta or {}
        sdk = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
        with pytest.raises(NotFoundError):  # a stateless run's thread is gone once it answered
            await sdk.threads.get(meta["overseer/thread_id"])

        failed = await mcp.call_tool("poison", {"topic": "x"})
        assert failed.is_error and failed.content[0].text

        # a chat graph takes the user's message as a string, as a model fills a tool's input
        assert tools["chatty"].input_schema["properties"]["messages"]["type"] == "string"
        assert "$defs" not in tools["chatty"].input_schema
        chat = await mcp.call_tool("chatty", {"messages": "hi"})
        plain = await _reference("chatty").ainvoke({"messages": "hi"},
                                                   {"configurable": {"thread_id": "c"}})
        assert [(m["type"], m["content"]) for m in chat.structured_content["messages"]] == \
            [(m.type, m.content) for m in plain["messages"]]


async def test_a_paused_call_keeps_its_thread_for_a_person(stack: Stack):
    async with _Mcp(stack, "submitter") as mcp:
        paused = await mcp.call_tool("publish_review", {"topic": "tides"})
    assert not paused.is_error
    [asked] = paused.structured_content["__interrupt__"]
    assert asked["value"] == {"question": "publish?", "draft": "post about tides"}
    thread_id = (paused.meta or {})["overseer/thread_id"]
    reviewer = get_client(url=stack.base_url, api_key=stack.tokens["reviewer"])
    done = await reviewer.runs.wait(thread_id, "publish_review", command={"resume": {"publish": True}})
    assert done["published"] is True


async def test_protocol_edges_answer_as_mcp_and_overseer_say(stack: Stack):
    async with _Mcp(stack, "submitter") as mcp:
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError, match="unknown tool"):
            await mcp.call_tool("no_such_tool", {})
    headers = {"Authorization": f"Bearer {stack.tokens['submitter']}",
               "Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers) as http:
        assert (await http.get("/mcp")).status_code == 405
        assert (await http.delete("/mcp")).status_code == 405
        bad = await http.post("/mcp", content=b"{nope")
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_mcp_message"
        batch = await http.post("/mcp", json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}])
        assert batch.status_code == 400
        note = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert note.status_code == 202
        unknown = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "resources/list"})
        assert unknown.json() == {"jsonrpc": "2.0", "id": 7, "error": {
            "code": -32601, "message": "method not found: resources/list"}}
        old = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                            "params": {"protocolVersion": "2024-11-05"}})
        assert old.json()["result"]["protocolVersion"] == "2024-11-05" and old.json()["id"] == 0
        assert (await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                headers={"Authorization": ""})).status_code == 401
