"""A node task's idempotency key: the same on a retry and on a re-run, apart for anything else."""

from __future__ import annotations

import operator
from typing import Annotated

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy, Send
from typing_extensions import TypedDict

from overseer.plugin import idempotency_key


class State(TypedDict, total=False):
    keys: Annotated[list[str], operator.add]
    item: int


def _graph(seen: list[str], fail_once: list[bool]) -> StateGraph:
    def pay(state: State) -> State:
        seen.append(idempotency_key("charge"))
        if fail_once and fail_once.pop():
            raise ConnectionError("the payment API went away")
        return {"keys": [seen[-1], idempotency_key("email")]}

    def each(state: State) -> State:
        return {"keys": [idempotency_key("charge")]}

    graph = StateGraph(State)
    graph.add_node("pay", pay, retry_policy=RetryPolicy(initial_interval=0.01, jitter=False))
    graph.add_node("each", each)
    graph.add_edge(START, "pay")
    graph.add_conditional_edges("pay", lambda _: [Send("each", {"item": i}) for i in range(2)])
    graph.add_edge("each", END)
    return graph


def test_a_retried_task_keeps_its_key_and_every_other_task_or_name_gets_its_own():
    seen: list[str] = []
    app = _graph(seen, [True]).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}, "metadata": {"overseer_run_id": "run-1"}}
    keys = app.invoke({}, config)["keys"]
    assert len(seen) == 2 and seen[0] == seen[1]  # LangGraph's retry: the same key
    assert len(keys) == len(set(keys)) == 4  # charge, email and two Sends: each its own
    again: list[str] = []  # the same run's task run again (a crash re-runs it): the same key
    _graph(again, []).compile(checkpointer=InMemorySaver()).invoke({}, config)
    assert again == seen[:1]
    other: list[str] = []  # another run
    _graph(other, []).compile(checkpointer=InMemorySaver()).invoke(
        {}, {**config, "metadata": {"overseer_run_id": "run-2"}})
    assert other[0] != seen[0]


def test_outside_a_node_there_is_no_key():
    with pytest.raises(RuntimeError):
        idempotency_key("charge", {"configurable": {}, "metadata": {}})
