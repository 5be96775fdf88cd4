"""The chat-load scenario's own parts: the chat agent, and checking a stream against its thread."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import message_to_dict
from langgraph.checkpoint.memory import InMemorySaver

from bench import chat_load as cl
from bench.user_graph import chat


@pytest.fixture
def quick_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"BENCH_CHAT_FIRST_TOKEN_MS": "1", "BENCH_CHAT_TOKEN_GAP_MS": "0",
                        "BENCH_CHAT_TOOL_MS": "1", "BENCH_CHAT_TOKENS": "6"}.items():
        monkeypatch.setenv(name, value)


def _as_sent(message: Any) -> dict[str, Any]:
    """A message as the official client receives it (LangChain's dict, flattened)."""
    return {**message_to_dict(message)["data"], "type": message_to_dict(message)["type"]}


async def test_the_agent_streams_two_replies_around_its_tool_and_the_stream_rebuilds_the_thread(
        quick_model: None) -> None:
    app = chat.build_chat_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    parts = [_as_sent(message) async for message, _ in app.astream(
        {"messages": [{"role": "user", "content": "where is my order"}]}, config,
        stream_mode="messages")]
    state = await app.aget_state(config)
    kept = cl.thread_messages({"messages": [_as_sent(m) for m in state.values["messages"]]})
    assert [t for _, t, _ in kept] == ["ai", "tool", "ai"]
    assert kept[0][2] == "".join(chat.reply_tokens(0)) and kept[2][2] == "".join(chat.reply_tokens(1))
    assert sum(1 for p in parts if p["type"] == "AIMessageChunk") >= 12  # token by token
    assert cl.rebuild_messages(parts) == kept


def test_a_reply_shown_twice_or_cut_short_does_not_match_its_thread() -> None:
    thread = {"messages": [{"id": "h", "type": "human", "content": "hi"},
                           {"id": "a", "type": "ai", "content": "Hello there"}]}
    whole = [{"id": "a", "type": "AIMessageChunk", "content": "Hello"},
             {"id": "a", "type": "AIMessageChunk", "content": " there"}]
    assert cl.rebuild_messages(whole) == cl.thread_messages(thread) == [("a", "ai", "Hello there")]
    cut = [*whole[:1], {"id": "b", "type": "AIMessageChunk", "content": "Hello there"}]
    assert cl.rebuild_messages(cut) != cl.thread_messages(thread)
    twice = [*whole, *whole]
    assert cl.rebuild_messages(twice) != cl.thread_messages(thread)


def test_both_sides_get_the_same_pacing_and_widening() -> None:
    cfg = cl.ChatBenchConfig(chat_first_token_ms=300, chat_token_gap_ms=25, chat_tokens=30,
                             chat_tool_ms=500)
    assert cl.pacing_env(cfg) == {"BENCH_CHAT_FIRST_TOKEN_MS": "300", "BENCH_CHAT_TOKEN_GAP_MS": "25",
                                  "BENCH_CHAT_TOKENS": "30", "BENCH_CHAT_TOOL_MS": "500"}
    assert cl.widened_worker_env(100) == {"OVERSEER_WORKER_ACTIVITY_SLOTS": "fixed",
                                          "OVERSEER_WORKER_MAX_CONCURRENT_ACTIVITIES": "100"}


def test_a_retracted_reply_leaves_the_rebuilt_messages_as_the_thread_keeps_them() -> None:
    thread = {"messages": [{"id": "h", "type": "human", "content": "hi"},
                           {"id": "a", "type": "ai", "content": "Hello there"}]}
    dead = [{"id": "d", "type": "AIMessageChunk", "content": "Hello th"}]
    again = [{"id": "a", "type": "AIMessageChunk", "content": "Hello"},
             {"id": "a", "type": "AIMessageChunk", "content": " there"}]
    retracted = [*dead, {"id": "d", "type": "remove", "content": ""}, *again]
    assert cl.rebuild_messages(retracted) == cl.thread_messages(thread)
    assert cl.rebuild_messages([*dead, *again]) != cl.thread_messages(thread)
