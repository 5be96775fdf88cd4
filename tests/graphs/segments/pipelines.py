"""The user's graphs (tests/graphs/user_graph) under names of their own, and graphs of the tests.

The graphs are the user's, unchanged (every graph runs as segments). ``seg_retry`` adds one
graph of its own: a node that counts its executions before a node that fails once, so a
test can see that the retried segment resumes from the checkpoint instead of re-running it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from langgraph.graph import END, START, StateGraph

from overseer.pipelines import Pipeline
from overseer.registry import load_langgraph_json

_USER = load_langgraph_json(Path(__file__).resolve().parents[1] / "user_graph" / "langgraph.json")


def _segments(name: str, graph: Any = None) -> Pipeline:
    """The user's graph ``name`` (or ``graph``) as ``seg_<name>``, the key langgraph.json gives it."""
    return Pipeline(name=f"seg_{name}", graph=graph if graph is not None else _USER[name].graph,
                    description=f"{name} as segments")


EXECUTIONS: dict[str, int] = {}
"""How many times ``count_me`` ran, per topic (tests read it: the worker runs in-process)."""


def count_me(state: dict[str, Any]) -> dict[str, Any]:
    EXECUTIONS[state["topic"]] = EXECUTIONS.get(state["topic"], 0) + 1
    return {"trail": ["counted"]}


def _counted(name: str, node: Any) -> StateGraph:
    """``START → count_me → <name> → END`` on the user graph's state."""
    user_graph = sys.modules[_USER["flaky"].graph.nodes["sometimes"].runnable.func.__module__]
    graph = StateGraph(user_graph.State)
    graph.add_node("count_me", count_me)
    graph.add_node(name, node)
    graph.add_edge(START, "count_me")
    graph.add_edge("count_me", name)
    graph.add_edge(name, END)
    return graph


def _retry() -> StateGraph:
    user_graph = sys.modules[_USER["flaky"].graph.nodes["sometimes"].runnable.func.__module__]
    return _counted("sometimes", user_graph.sometimes)


async def nap(state: dict[str, Any]) -> dict[str, Any]:
    """Longer than a local try's time-out in the tests (1.5 s)."""
    import asyncio

    await asyncio.sleep(1.5)
    return {"summary": "napped"}


async def long_nap(state: dict[str, Any]) -> dict[str, Any]:
    """Longer than three of the heartbeat time-outs the tests give a segment (1.5 s)."""
    import asyncio

    await asyncio.sleep(4.5)
    return {"summary": "slept long"}


BROKEN = {"on": False}
"""While on, ``fragile`` has a bug (the tests of retry from a failed node switch it)."""


def fragile(state: dict[str, Any]) -> dict[str, Any]:
    if BROKEN["on"]:
        raise KeyError("lookup table not loaded")  # a bug: the run fails, not retried
    return {"summary": f"fixed; counted {EXECUTIONS.get(state['topic'], 0)} time(s)"}


seg_fixable = _segments("fixable", _counted("fragile", fragile))
seg_constructs = _segments("constructs")
seg_approvals = _segments("approvals")
seg_refund_agent = _segments("refund_agent")
seg_poison = _segments("poison")
seg_retry = _segments("retry", _retry())
seg_slow = _segments("slow", _counted("nap", nap))
seg_long = _segments("long", _counted("long_nap", long_nap))
seg_three_one = _segments("three_one")
seg_spender = _segments("spender")
