"""A user's LangGraph project, written the way people write graphs: it never imports Overseer.

Each graph exercises constructs a graph runtime must host (sync and async nodes and
routers, lambdas, ``functools.partial``, ``Send`` fan-out with a reducer, ``Command`` from
nodes, a compiled subgraph as a node, LangChain messages in state, interrupts in sequence
and in parallel branches, a poison node, a large state, a transient failure, chat-model
calls that spend tokens).
"""

from __future__ import annotations

import asyncio
import functools
import operator
import os
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    topic: str
    items: list[str]
    results: Annotated[list[str], operator.add]
    messages: Annotated[list[AnyMessage], add_messages]
    trail: Annotated[list[str], operator.add]
    sub_total: int
    greeting: str
    decisions: list[Any]
    summary: str


# -- constructs ---------------------------------------------------------------------------------

def prepare(state: State) -> dict[str, Any]:
    """A sync node."""
    return {"items": [w for w in state["topic"].split() if w], "trail": ["prepare"],
            "greeting": os.environ.get("USER_GRAPH_GREETING", "unset")}


def fan_out(state: State) -> list[Send]:
    """A sync router returning ``Send`` per item (fan-out)."""
    return [Send("work", {"topic": item}) for item in state["items"]]


async def work(state: State) -> dict[str, Any]:
    """An async node run once per ``Send``; the reducer gathers the results."""
    return {"results": [state["topic"].upper()]}


def shout(suffix: str, state: State) -> dict[str, Any]:
    return {"trail": [f"partial{suffix}"]}


def commander(state: State) -> Command:
    """A node steering with ``Command(goto=..., update=...)``, carrying a LangChain message."""
    return Command(goto="sub", update={"trail": ["commander"],
                                       "messages": [AIMessage(content=f"{len(state['results'])} results")]})


class SubState(TypedDict, total=False):
    results: list[str]
    sub_total: int
    trail: Annotated[list[str], operator.add]


def count(state: SubState) -> dict[str, Any]:
    return {"sub_total": sum(len(r) for r in state.get("results", [])), "trail": ["sub.count"]}


def double(state: SubState) -> dict[str, Any]:
    return {"sub_total": state["sub_total"] * 2, "trail": ["sub.double"]}


def build_sub() -> Any:
    sub = StateGraph(SubState)
    sub.add_node("count", count)
    sub.add_node("double", double)
    sub.add_edge(START, "count")
    sub.add_edge("count", "double")
    sub.add_edge("double", END)
    return sub.compile()


def spread(state: State) -> Command:
    """``Command(goto=[Send(...)])`` from a node."""
    return Command(goto=[Send("echo", {"topic": m.content}) for m in state["messages"]
                         if isinstance(m, AIMessage)], update={"trail": ["spread"]})


def echo(state: State) -> dict[str, Any]:
    return {"trail": [f"echo:{state['topic']}"]}


def is_message_typed(state: State) -> str:
    """A sync router that reads a LangChain message: it must arrive as an AIMessage, not a dict."""
    last = state["messages"][-1]
    return "typed" if isinstance(last, AIMessage) else "untyped"


def build_constructs() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("prepare", prepare)
    graph.add_node("work", work)
    graph.add_node("lambda_node", lambda state: {"trail": ["lambda"]})
    graph.add_node("partial_node", functools.partial(shout, "!"))
    graph.add_node("commander", commander)
    graph.add_node("sub", build_sub())
    graph.add_node("spread", spread)
    graph.add_node("echo", echo)
    graph.add_node("typed", lambda state: {"summary": "messages kept their type"},
                   metadata={"overseer": {"run_in": "workflow"}})
    graph.add_node("untyped", lambda state: {"summary": "messages lost their type"})
    graph.add_edge(START, "prepare")
    graph.add_conditional_edges("prepare", fan_out, ["work"])
    graph.add_edge("work", "lambda_node")
    graph.add_edge("lambda_node", "partial_node")
    graph.add_edge("partial_node", "commander")
    graph.add_edge("sub", "spread")
    graph.add_conditional_edges("echo", is_message_typed, ["typed", "untyped"])
    graph.add_edge("typed", END)
    graph.add_edge("untyped", END)
    return graph


constructs = build_constructs().compile()
"""A compiled graph, as ``langgraph.json`` allows."""


# -- approvals ----------------------------------------------------------------------------------

def two_questions(state: State) -> dict[str, Any]:
    """Two interrupts in one node: each resume re-runs the node with one more answer."""
    first = interrupt({"question": "publish?", "topic": state["topic"]})
    second = interrupt({"question": "really?", "first": first["decision"]})
    return {"decisions": [first, second]}


def finish(state: State) -> dict[str, Any]:
    decided = [d["decision"] for d in state["decisions"]]
    return {"summary": " then ".join(decided)}


def build_approvals() -> StateGraph:
    """A factory returning a StateGraph (the third form ``langgraph.json`` allows)."""
    graph = StateGraph(State)
    graph.add_node("two_questions", two_questions)
    graph.add_node("finish", finish)
    graph.add_edge(START, "two_questions")
    graph.add_edge("two_questions", "finish")
    graph.add_edge("finish", END)
    return graph


def ask_each(state: State) -> list[Send]:
    return [Send("review_item", {"topic": item}) for item in state["topic"].split()]


async def review_item(state: State) -> dict[str, Any]:
    """One interrupt per parallel branch (langgraph#6626's case)."""
    answer = interrupt({"item": state["topic"]})
    return {"results": [f"{state['topic']}={answer['decision']}:{answer.get('note') or ''}"]}


def _parallel() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("review_item", review_item)
    graph.add_node("finish", lambda state: {"summary": ",".join(sorted(state["results"]))})
    graph.add_conditional_edges(START, ask_each, ["review_item"])
    graph.add_edge("review_item", "finish")
    graph.add_edge("finish", END)
    return graph


parallel_approvals = _parallel()
"""A StateGraph (not compiled)."""


# -- failures and size --------------------------------------------------------------------------

def buggy(state: State) -> dict[str, Any]:
    return {"summary": state["missing_key"]}  # KeyError: a bug, not a transient failure


def _poison() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("fine", lambda state: {"trail": ["fine"]})
    graph.add_node("buggy", buggy)
    graph.add_edge(START, "fine")
    graph.add_edge("fine", "buggy")
    graph.add_edge("buggy", END)
    return graph


poison = _poison()


def _poison_local() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("fine", lambda state: {"trail": ["fine"]})
    graph.add_node("buggy", buggy, metadata={"overseer": {"run_in": "local_activity"}})
    graph.add_edge(START, "fine")
    graph.add_edge("fine", "buggy")
    graph.add_edge("buggy", END)
    return graph


poison_local = _poison_local()
"""The poison node placed in a local activity (its failure reaches the workflow unwrapped)."""


def produce(state: State) -> dict[str, Any]:
    """About 3 MB of state: more than a Temporal payload may carry."""
    return {"items": ["x" * 1000 for _ in range(3000)]}


def consume(state: State) -> dict[str, Any]:
    return {"summary": f"{len(state['items'])} items, {sum(map(len, state['items']))} chars"}


def _big() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("produce", produce)
    graph.add_node("consume", consume)
    graph.add_edge(START, "produce")
    graph.add_edge("produce", "consume")
    graph.add_edge("consume", END)
    return graph


big_state = _big()

_ATTEMPTS: dict[str, int] = {}


def sometimes(state: State) -> dict[str, Any]:
    """Fails with a connection error on its first attempt per topic, then works."""
    _ATTEMPTS[state["topic"]] = _ATTEMPTS.get(state["topic"], 0) + 1
    if _ATTEMPTS[state["topic"]] == 1:
        raise ConnectionError("upstream reset the connection")
    return {"summary": f"ok after {_ATTEMPTS[state['topic']]} attempts"}


def _flaky() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("sometimes", sometimes, metadata={"overseer": {"max_attempts": 3}})
    graph.add_edge(START, "sometimes")
    graph.add_edge("sometimes", END)
    return graph


flaky = _flaky()


async def slow_step(state: State) -> dict[str, Any]:
    """Long enough to kill the worker in the middle of it."""
    await asyncio.sleep(float(state["topic"]))
    return {"trail": ["slow"], "summary": "slept"}


def _first(state: State) -> dict[str, Any]:
    return {"trail": ["first"]}


def _slow(metadata: dict[str, Any] | None = None, lead: Any = _first,
          lead_name: str = "first") -> StateGraph:
    """``lead`` → ``slow_step`` (sleeps ``topic`` seconds) → ``last``."""
    graph = StateGraph(State)
    graph.add_node(lead_name, lead)
    graph.add_node("slow_step", slow_step, metadata=metadata)
    graph.add_node("last", lambda state: {"trail": ["last"]})
    graph.add_edge(START, lead_name)
    graph.add_edge(lead_name, "slow_step")
    graph.add_edge("slow_step", "last")
    graph.add_edge("last", END)
    return graph


slow = _slow({"overseer": {"heartbeat_seconds": 2, "timeout_seconds": 120}})
slow_plain = _slow()
"""The same graph as a user writes it: no Overseer metadata, so the runtime's defaults apply."""


async def settle(state: State) -> dict[str, Any]:
    """Longer than a local try's 2 s (workflows.segment_calls.LOCAL_YIELD_SECONDS)."""
    await asyncio.sleep(2.5)
    return {"trail": ["settled"]}


settle_then_slow = _slow(lead=settle, lead_name="settle")
"""A stateless run's local try hands over after ``settle``: ``slow_step`` runs in the activity."""


def _reply_model() -> Any:
    """A chat model that answers with 600 tokens of usage (a stand-in for a real provider)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    reply = AIMessage(content="a draft", usage_metadata={
        "input_tokens": 500, "output_tokens": 100, "total_tokens": 600})
    return GenericFakeChatModel(messages=iter([reply]))


async def draft(state: State) -> dict[str, Any]:
    """Calls a chat model the way a user's node does (no config passed)."""
    answer = await _reply_model().ainvoke(f"draft {state['topic']}")
    return {"trail": [f"drafted:{answer.content}"]}


def _spender() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("first_draft", draft)
    graph.add_node("second_draft", draft)
    graph.add_node("publish", lambda state: {"summary": " / ".join(state["trail"])})
    graph.add_edge(START, "first_draft")
    graph.add_edge("first_draft", "second_draft")
    graph.add_edge("second_draft", "publish")
    graph.add_edge("publish", END)
    return graph


spender = _spender()


class Count(TypedDict, total=False):
    count: int
    seen: Annotated[list[int], operator.add]


async def tick(state: Count) -> dict[str, Any]:
    return {"count": state.get("count", 0) + 1, "seen": [state.get("count", 0)]}


def again(state: Count) -> str:
    """A sync router: loop until twelve ticks."""
    return "tick" if state["count"] < 12 else END


def _counter() -> StateGraph:
    graph = StateGraph(Count)
    graph.add_node("tick", tick)
    graph.add_edge(START, "tick")
    graph.add_conditional_edges("tick", again, ["tick", END])
    return graph


counter = _counter()


# -- interrupts whose resume value the graph reads (issue 26) ------------------------------------


def _scripted_tool_model(call: dict[str, Any], report: str) -> Any:
    """A scripted chat model (langchain-core's fake): make one tool call, then report.

    Stateless, so every run and every resume gets the same script: with no tool result yet
    it makes ``call`` (``{"name", "args", "id"}``); after one it answers ``report`` followed
    by the tool's words.
    """
    from langchain_core.language_models import BaseChatModel
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedToolModel(GenericFakeChatModel):
        # a model that does not stream (as many providers' tool-calling modes): with a
        # stream handler attached (messages or tools mode) LangChain calls _generate
        _stream = BaseChatModel._stream
        _astream = BaseChatModel._astream

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            last = messages[-1]
            reply = AIMessage(content=f"{report}{last.content}") if isinstance(
                last, ToolMessage) else AIMessage(content="", tool_calls=[call])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return ScriptedToolModel(messages=iter([]))


def _refund_model() -> Any:
    """Asks for the refund tool, then reports its words (:func:`_scripted_tool_model`)."""
    return _scripted_tool_model({"name": "refund", "args": {"order": 7, "amount": 40},
                                 "id": "call-refund-7"}, "Done: ")


def _refund_agent() -> Any:
    """LangGraph's prebuilt ReAct agent whose tool asks a human, as its docs show it."""
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    @tool
    def refund(order: int, amount: int) -> str:
        """Refund an order, once a human approves it."""
        response = interrupt({"action": "refund", "order": order, "amount": amount})
        if response["approved"]:
            return f"refund of {amount} for order {order} approved"
        return f"refund of {amount} for order {order} refused"

    return create_react_agent(_refund_model(), [refund])


refund_agent = _refund_agent()


class Post(TypedDict, total=False):
    topic: str
    draft: str
    published: bool
    reviewer_note: str


def write_post(state: Post) -> dict[str, Any]:
    return {"draft": f"post about {state['topic']}"}


def review_post(state: Post) -> dict[str, Any]:
    """Reads keys of the resume value, as graphs usually do."""
    answer = interrupt({"question": "publish?", "draft": state["draft"]})
    return {"published": bool(answer["publish"]), "reviewer_note": answer.get("note", "")}


def _publish_review() -> StateGraph:
    graph = StateGraph(Post)
    graph.add_node("write_post", write_post)
    graph.add_node("review_post", review_post)
    graph.add_edge(START, "write_post")
    graph.add_edge("write_post", "review_post")
    graph.add_edge("review_post", END)
    return graph


publish_review = _publish_review()


def _editor_desk() -> Any:
    """A subgraph whose node asks a person: the pause is inside the subgraph, not the parent."""
    desk = StateGraph(Post)
    desk.add_node("review_post", review_post)
    desk.add_edge(START, "review_post")
    return desk.compile()


def _nested_review() -> StateGraph:
    graph = StateGraph(Post)
    graph.add_node("write_post", write_post)
    graph.add_node("editor_desk", _editor_desk())
    graph.add_edge(START, "write_post")
    graph.add_edge("write_post", "editor_desk")
    graph.add_edge("editor_desk", END)
    return graph


nested_review = _nested_review()
"""``publish_review`` with its question asked inside a compiled subgraph node."""


# -- a 3 s + 1 s graph for the crash scenario (issue 25) --------------------------------------


async def think(state: State) -> dict[str, Any]:
    """Three seconds of waiting on something (a model call, a tool)."""
    await asyncio.sleep(3)
    return {"trail": ["think"]}


async def answer(state: State) -> dict[str, Any]:
    """One more second, then the run's answer."""
    await asyncio.sleep(1)
    return {"trail": ["answer"], "summary": f"answered {state['topic']}"}


def _three_one() -> StateGraph:
    graph = StateGraph(State)
    graph.add_node("think", think)
    graph.add_node("answer", answer)
    graph.add_edge(START, "think")
    graph.add_edge("think", "answer")
    graph.add_edge("answer", END)
    return graph


three_one = _three_one()
"""No Overseer metadata: what the runtime's defaults do after a crash is what is measured."""


# -- tokens as the model makes them (issue 26) ----------------------------------------------------

CHATTY_REPLY = "Tokens arrive one by one while the node is still running"
CHATTY_PAUSE_SECONDS = 2.5
"""How long ``talk`` goes on after its model call: its tokens must reach a client before."""


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _replying(text: str, pause: float, think: float = 0.0, gap: float = 0.0) -> Any:
    """A node whose streaming chat model (langchain-core's fake) says ``text``, token by token,
    as a real model does when ``think`` and ``gap`` are given: its first token ``think``
    seconds after the call, then one every ``gap`` seconds; the node then keeps working
    ``pause`` seconds (its tokens must reach a client before)."""

    async def reply(state: ChatState) -> dict[str, Any]:
        from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

        class Paced(GenericFakeChatModel):
            async def _astream(self, *args: Any, **kwargs: Any) -> Any:
                await asyncio.sleep(think)
                async for chunk in super()._astream(*args, **kwargs):
                    yield chunk
                    await asyncio.sleep(gap)

        model = Paced(messages=iter([AIMessage(content=text)]))
        said = await model.ainvoke(state["messages"])
        await asyncio.sleep(pause)
        return {"messages": [said]}

    return reply


def _then_signed(name: str, node: Any, sign_id: str) -> StateGraph:
    """``node`` (as ``name``), then a ``sign`` node adding a whole message with id ``sign_id``."""
    graph = StateGraph(ChatState)
    graph.add_node(name, node)
    graph.add_node("sign", lambda state: {"messages": [AIMessage(content="signed", id=sign_id)]})
    graph.add_edge(START, name)
    graph.add_edge(name, "sign")
    graph.add_edge("sign", END)
    return graph


chatty = _then_signed("talk", _replying(CHATTY_REPLY, CHATTY_PAUSE_SECONDS), "sig-1")
"""A chat graph written as people write them: it runs as segments, tokens stream live."""

RESEARCH_NOTE = "Notes from the research desk, token by token"


def _desk(node: str, text: str, name: str | None = None) -> Any:
    """A compiled one-node chat graph whose model streams ``text`` as a real one does (its
    first token a third of a second after the call, then one every 20 ms), then works a
    second more."""
    desk = StateGraph(ChatState)
    desk.add_node(node, _replying(text, 1.0, think=0.3, gap=0.02))
    desk.add_edge(START, node)
    return desk.compile(name=name)


research_desk = _then_signed("research", _desk("draft", RESEARCH_NOTE), "sig-2")
"""A compiled subgraph node whose model streams: its events come at its own namespace."""

SUBAGENT_TASK = "find three sources on durable execution"
SUBAGENT_NOTE = "Three sources agree: checkpoints make agents durable"


def _deep_desk() -> Any:
    """A deep agent as ``deepagents`` writes one: the main agent's ``task`` tool hands work to a
    subagent (a compiled graph of its own, invoked inside the tool), whose messages a UI
    shows in the subagent's own card. The main agent's model is scripted (langchain-core's
    fake): it calls ``task`` once, then reports the subagent's answer."""
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool

    subagent = _desk("answer", SUBAGENT_NOTE, name="researcher")

    @tool
    async def task(description: str, subagent_type: str) -> str:
        """Hand a task to a subagent; its final answer."""
        done = await subagent.ainvoke({"messages": [HumanMessage(content=description)]})
        return str(done["messages"][-1].content)

    planner = _scripted_tool_model({"name": "task", "id": "call-task-1", "args": {
        "description": SUBAGENT_TASK, "subagent_type": "researcher"}}, "Summary: ")
    return create_agent(planner, tools=[task])


deep_desk = _deep_desk()
"""A main agent whose ``task`` tool runs a subagent: its events come under ``tools:<task id>``."""


# -- a run's own config, context and breakpoints (issues 25, 26) -----------------------------------

@dataclass
class Caller:
    """The graph's runtime context (``context_schema``): who the run is for."""

    name: str = "nobody"


class GreetState(TypedDict, total=False):
    lines: Annotated[list[str], operator.add]


def hello(state: GreetState, config: RunnableConfig, runtime: Runtime[Caller]) -> dict[str, Any]:
    """Reads the run's ``configurable`` keys and tags, and its runtime context."""
    language = config.get("configurable", {}).get("language", "?")
    tags = ",".join(sorted(t for t in config.get("tags", []) if t.startswith("user:")))
    return {"lines": [f"hello {runtime.context.name} in {language} [{tags}]"]}


def _greeter() -> Any:
    graph = StateGraph(GreetState, context_schema=Caller)
    graph.add_node("hello", hello)
    graph.add_node("middle", lambda state: {"lines": [f"middle after {len(state['lines'])}"]})
    graph.add_node("bye", lambda state: {"lines": ["bye"]})
    graph.add_edge(START, "hello")
    graph.add_edge("hello", "middle")
    graph.add_edge("middle", "bye")
    graph.add_edge("bye", END)
    return graph


greeter = _greeter()
"""Config, context and breakpoints as a run passes them (``config``, ``context``, ``interrupt_*``)."""

greeter_paused = _greeter().compile(interrupt_before=["middle"], interrupt_after=["middle"])
"""Breakpoints given to ``compile()``, as LangGraph's docs show them: runs stop there."""


# -- long-term memory in LangGraph's store (issue 26) ----------------------------------------------

class MemoryState(TypedDict, total=False):
    note: str
    recalled: list[str]


async def remember(state: MemoryState, config: RunnableConfig, *,
                   store: BaseStore) -> dict[str, Any]:
    """Puts the note under the caller's namespace, then reads back every note it holds."""
    user = config.get("configurable", {}).get("langgraph_auth_user_id") or "anonymous"
    namespace = (user, "memories")
    held = await store.asearch(namespace, limit=100)
    await store.aput(namespace, f"note-{len(held) + 1}", {"text": state["note"]})
    return {"recalled": sorted(i.value["text"] for i in await store.asearch(namespace, limit=100))}


def _memory() -> Any:
    graph = StateGraph(MemoryState)
    graph.add_node("remember", remember)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", END)
    return graph


memory = _memory()
"""A graph with long-term memory: it gets LangGraph's ``BaseStore`` (``store`` argument)."""


# -- progress a node writes while it works (issue 26) ----------------------------------------------

PROGRESS_STEPS = 3
PROGRESS_PAUSE_SECONDS = 0.6
"""How long ``crunch`` works after each write: a client must see each before the node ends."""


class Progress(TypedDict, total=False):
    job: str
    done: bool


async def crunch(state: Progress) -> dict[str, Any]:
    """Writes its progress with ``get_stream_writer()`` (generative UI, progress bars)."""
    write = get_stream_writer()
    for step in range(1, PROGRESS_STEPS + 1):
        write({"job": state["job"], "step": step, "of": PROGRESS_STEPS})
        await asyncio.sleep(PROGRESS_PAUSE_SECONDS)
    return {"done": True}


def _progress() -> Any:
    graph = StateGraph(Progress)
    graph.add_node("crunch", crunch)
    graph.add_edge(START, "crunch")
    graph.add_edge("crunch", END)
    return graph


progress = _progress()
"""A node that streams ``custom`` progress: as segments each write reaches a client at once."""


# -- human-in-the-loop shapes a UI knows (issue 26, items 7 and 10) --------------------------------

def _mail_model() -> Any:
    """A scripted tool-calling chat model (langchain-core's fake): send a mail, then report."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class ScriptedMailModel(GenericFakeChatModel):
        # a model that does not stream (as many providers' tool-calling modes): with a
        # stream handler attached (messages or tools mode) LangChain calls _generate
        _stream = BaseChatModel._stream
        _astream = BaseChatModel._astream

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            last = messages[-1]
            if isinstance(last, ToolMessage):
                reply = AIMessage(content=f"Mail tool said: {last.content}")
            else:
                reply = AIMessage(content="", tool_calls=[{
                    "name": "send_email", "args": {"to": "alice@example.com", "subject": "Q3"},
                    "id": "call-mail-1"}])
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return ScriptedMailModel(messages=iter([]))


def _mail_agent() -> Any:
    """LangChain's ``create_agent`` with ``HumanInTheLoopMiddleware``, as its docs write it."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langchain_core.tools import tool

    @tool
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        return f"sent {subject!r} to {to}"

    return create_agent(_mail_model(), [send_email], middleware=[
        HumanInTheLoopMiddleware(interrupt_on={"send_email": True})])


mail_agent = _mail_agent()


class Inbox(TypedDict, total=False):
    to: str
    outcome: str


def draft_reply(state: Inbox) -> dict[str, Any]:
    """Asks in Agent Inbox's ``HumanInterrupt`` shape and reads its ``HumanResponse``."""
    request = {"action_request": {"action": "send_reply",
                                  "args": {"to": state["to"], "body": "Thanks!"}},
               "config": {"allow_accept": True, "allow_edit": True, "allow_respond": True,
                          "allow_ignore": True},
               "description": f"Reply to {state['to']}?"}
    response = interrupt([request])[0]
    if response["type"] == "accept":
        return {"outcome": f"sent: {request['action_request']['args']['body']}"}
    if response["type"] == "edit":
        return {"outcome": f"sent: {response['args']['args']['body']}"}
    if response["type"] == "response":
        return {"outcome": f"noted: {response['args']}"}
    return {"outcome": "ignored"}


def _inbox() -> Any:
    graph = StateGraph(Inbox)
    graph.add_node("draft_reply", draft_reply)
    graph.add_edge(START, "draft_reply")
    graph.add_edge("draft_reply", END)
    return graph


inbox_reply = _inbox()


# -- the Functional API ----------------------------------------------------------------------------

@task
async def draft_line(topic: str, n: int) -> str:
    """One line of a newsletter (a ``@task``: its result is checkpointed, not run again)."""
    await asyncio.sleep(0.05 * (3 - n))  # finishes out of order: #2 first
    return f"{topic} #{n}"


@entrypoint()
async def newsletter(inp: dict[str, Any]) -> dict[str, Any]:
    """A Functional API graph as LangGraph's docs write one: tasks in parallel, then a person."""
    lines = [await line for line in [draft_line(inp["topic"], n) for n in range(3)]]
    answer = interrupt({"question": "send?", "lines": lines})
    return {"lines": lines, "sent": answer == "yes"}


@entrypoint()
def salutation(inp: Any) -> str:
    """An entrypoint whose input and value need not be dicts: it returns the thread's values."""
    return f"dear {inp if isinstance(inp, str) else inp.get('name', 'reader')}"


class ChargeState(TypedDict, total=False):
    url: str
    charged: str


async def _charge(state: ChargeState) -> dict[str, Any]:
    """POST a charge with the task's idempotency key, then work on 3 s (time to kill the worker)."""
    import httpx

    from overseer.plugin import idempotency_key

    key = idempotency_key("charge")
    async with httpx.AsyncClient() as http:
        res = await http.post(state["url"], json={"amount_cents": 1250},
                              headers={"Idempotency-Key": key})
        res.raise_for_status()
    await asyncio.sleep(3)
    return {"charged": key}


def _charging() -> Any:
    graph = StateGraph(ChargeState)
    graph.add_node("charge", _charge)
    graph.add_edge(START, "charge")
    graph.add_edge("charge", END)
    return graph


charge = _charging()
"""A node with a side effect outside the graph: a charge POSTed with ``idempotency_key()``."""


class ChatChargeState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    url: str


CHAT_CHARGE_REPLY = ("Your order of the blue kettle is confirmed and the payment goes through "
                     "now, the receipt follows by mail and delivery comes within three days")


async def _charge_for_chat(state: ChatChargeState) -> dict[str, Any]:
    """POST the chat's charge with the task's idempotency key; answer with a whole message."""
    import httpx

    from overseer.plugin import idempotency_key

    key = idempotency_key("charge")
    async with httpx.AsyncClient() as http:
        res = await http.post(state["url"], json={"amount_cents": 1250},
                              headers={"Idempotency-Key": key})
        res.raise_for_status()
    return {"messages": [AIMessage(content=f"charged ({key[:8]})")]}


def _chat_charge() -> Any:
    graph = StateGraph(ChatChargeState)
    graph.add_node("talk", _replying(CHAT_CHARGE_REPLY, 0.0, think=0.3, gap=0.08))
    graph.add_node("charge", _charge_for_chat)
    graph.add_node("sign", lambda state: {"messages": [AIMessage(content="signed")]})
    graph.add_edge(START, "talk")
    graph.add_edge("talk", "charge")
    graph.add_edge("charge", "sign")
    graph.add_edge("sign", END)
    return graph


chat_charge = _chat_charge()
"""A chat that streams a reply (~2.3 s: its first token after 0.3 s, then one every 80 ms),
charges a card through a local payment stub with ``idempotency_key()``, and signs off: the
chat of ``make reliability``'s chat scenarios."""
