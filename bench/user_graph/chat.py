"""The benchmark's chat agent: a model that streams two replies around a tool, as a user writes it.

It never imports Overseer, so the Agent Server peer loads the same file by path. One run is
one turn of a support chat: the model streams a first reply that ends in a tool call, the
tool answers, and the model streams the final reply. The model is a fake one paced as a
hosted model streams (no network, no key): its first token comes after
``BENCH_CHAT_FIRST_TOKEN_MS`` (default 300), then one token every ``BENCH_CHAT_TOKEN_GAP_MS``
(default 25), ``BENCH_CHAT_TOKENS`` tokens a reply (default 30); the tool awaits
``BENCH_CHAT_TOOL_MS`` (default 500). Each is read at call time. So a run spends about
2.5 s waiting and almost no CPU of its own: what a benchmark of it compares is the cost of
hosting many such chats at once and of carrying their tokens to the people watching.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Annotated, Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, AnyMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

WORDS = ("thanks", "for", "waiting", "while", "I", "look", "at", "your", "order", "and", "the",
         "delivery", "window", "we", "promised", "last", "week", "so", "that", "nothing", "is",
         "missed", "in", "what", "I", "tell", "you", "about", "it", "now")
"""The words a reply is made of (cycled to ``BENCH_CHAT_TOKENS``)."""
TOOL_NAME = "look_up_order"


def _env_ms(name: str, default: float) -> float:
    return float(os.environ.get(name, str(default))) / 1000


def reply_tokens(turn: int, count: int | None = None) -> list[str]:
    """The tokens of reply ``turn`` (0: before the tool, 1: after it), each with its leading space.

    Args:
        turn: which reply of the run.
        count: tokens in the reply (default ``BENCH_CHAT_TOKENS``, 30).
    """
    n = int(os.environ.get("BENCH_CHAT_TOKENS", "30")) if count is None else count
    lead = "Let me check that." if turn == 0 else "Your order is on its way."
    words = [WORDS[(i + 7 * turn) % len(WORDS)] for i in range(max(n - 1, 0))]
    return [lead, *(f" {w}" for w in words)]


class PacedChatModel(BaseChatModel):
    """A fake chat model that streams as a hosted one does; replies depend only on the messages.

    Its first reply (no tool result yet among the messages) streams text and ends with a call
    of :func:`look_up_order`; its second streams the final answer. Stateless, so one instance
    serves every run at once.
    """

    @property
    def _llm_type(self) -> str:
        return "bench-paced-chat"

    @staticmethod
    def _turn(messages: Sequence[BaseMessage]) -> int:
        return 1 if any(isinstance(m, ToolMessage) for m in messages) else 0

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        turn = self._turn(messages)
        message = AIMessage(content="".join(reply_tokens(turn)),
                            tool_calls=[_tool_call()] if turn == 0 else [])
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None,
                         **kwargs: Any) -> ChatResult:
        """The whole reply at once, after as long as streaming it takes (no one watches tokens)."""
        n = len(reply_tokens(self._turn(messages)))
        await asyncio.sleep(_env_ms("BENCH_CHAT_FIRST_TOKEN_MS", 300)
                            + max(n - 1, 0) * _env_ms("BENCH_CHAT_TOKEN_GAP_MS", 25))
        return self._generate(messages, stop)

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:  # pragma: no cover - async only
        raise NotImplementedError("the bench chat model streams asynchronously only")

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                       run_manager: AsyncCallbackManagerForLLMRun | None = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        turn = self._turn(messages)
        await asyncio.sleep(_env_ms("BENCH_CHAT_FIRST_TOKEN_MS", 300))
        gap = _env_ms("BENCH_CHAT_TOKEN_GAP_MS", 25)
        for i, token in enumerate(reply_tokens(turn)):
            if i:
                await asyncio.sleep(gap)
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        if turn == 0:
            call = _tool_call()
            last = ChatGenerationChunk(message=AIMessageChunk(
                content="", tool_call_chunks=[{"name": call["name"], "args": '{"order_id": "A-1042"}',
                                               "id": call["id"], "index": 0}]))
            if run_manager is not None:
                await run_manager.on_llm_new_token("", chunk=last)
            yield last


def _tool_call() -> dict[str, Any]:
    return {"name": TOOL_NAME, "args": {"order_id": "A-1042"}, "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "tool_call"}


@tool(TOOL_NAME)
async def look_up_order(order_id: str) -> str:
    """Look an order up in the shop's system (a stand-in network call of ``BENCH_CHAT_TOOL_MS``)."""
    await asyncio.sleep(_env_ms("BENCH_CHAT_TOOL_MS", 500))
    return f"order {order_id}: shipped, arrives Thursday"


class ChatState(TypedDict):
    """One chat's state: its messages (``agent`` and ``tools`` append)."""

    messages: Annotated[list[AnyMessage], add_messages]


MODEL = PacedChatModel()


async def agent(state: ChatState) -> dict[str, Any]:
    """Ask the model (it streams its reply token by token)."""
    return {"messages": [await MODEL.ainvoke(state["messages"])]}


def build_chat_graph() -> StateGraph[Any]:
    """``START → agent ⇄ tools → END`` (uncompiled, as ``langgraph.json`` allows)."""
    graph = StateGraph(ChatState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([look_up_order]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    return graph
