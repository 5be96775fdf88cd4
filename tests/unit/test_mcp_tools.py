"""``/mcp``'s tool names and input schemas, from an assistant's name and its graph's schema."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel
from typing_extensions import TypedDict

from services.api.routes.agent_mcp import tool_input_schema, tool_name


class EmailMessage(BaseModel):
    to: str
    body: str


class Inbox(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    outbox: list[EmailMessage]
    topic: str


def _schema() -> dict[str, Any]:
    graph = StateGraph(Inbox)
    graph.add_node("noop", lambda state: {})
    graph.add_edge(START, "noop")
    return graph.compile().get_input_jsonschema()


def test_a_message_list_becomes_the_users_message_and_other_lists_stay():
    before = _schema()
    schema = tool_input_schema(before)
    assert schema["type"] == "object"
    assert schema["properties"]["messages"]["type"] == "string"
    assert schema["properties"]["outbox"] == before["properties"]["outbox"]  # not a LangChain one
    assert set(schema["$defs"]) == {"EmailMessage"}  # the message classes' defs are gone
    assert "HumanMessage" in before["$defs"]  # the graph's own schema is left as it was


def test_tool_names_keep_to_the_mcp_alphabet():
    assert tool_name("German greeter") == "German_greeter"
    assert tool_name("a/b:c.d-e_f") == "a_b_c.d-e_f"
    assert tool_name("  ") == "assistant"
    assert len(tool_name("x" * 300)) == 128
