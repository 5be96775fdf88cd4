"""The run's checkpointer keeps one checkpoint per namespace, and LangGraph still resumes from it."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from workflows.graph_run import LatestCheckpointSaver


class S(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]
    answer: Any


def step(state: S) -> dict[str, Any]:
    return {"n": state.get("n", 0) + 1, "log": [f"step{state.get('n', 0)}"]}


def loop(state: S) -> str:
    return "step" if state["n"] < 6 else "ask"


def ask(state: S) -> dict[str, Any]:
    return {"answer": interrupt({"question": "ok?"}), "log": ["asked"]}


def _graph() -> StateGraph:
    graph = StateGraph(S)
    graph.add_node("step", step)
    graph.add_node("ask", ask)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", loop, ["step", "ask"])
    graph.add_edge("ask", END)
    return graph


async def test_only_the_latest_checkpoint_is_kept_and_an_interrupt_resumes():
    lean, full = LatestCheckpointSaver(), InMemorySaver()
    outs = []
    for saver in (lean, full):
        app = _graph().compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        paused = await app.ainvoke({"n": 0}, config)
        assert paused["__interrupt__"][0].value == {"question": "ok?"}
        outs.append(await app.ainvoke(Command(resume="yes"), config))
    assert outs[0] == outs[1] and outs[0]["answer"] == "yes" and outs[0]["n"] == 6
    assert len(lean.storage["t"][""]) == 1 < len(full.storage["t"][""])
    assert len(lean.blobs) < len(full.blobs)
