"""The benchmark's generic user graph: four I/O nodes in a row, written as a user writes it.

It never imports Overseer. Each node stands for a short network call (a tool, a search, a
small model): it awaits ``BENCH_GRAPH_IO_MS`` milliseconds (read at call time, default 20)
and writes a small update, so the work per run is the same wherever the graph runs and what
the benchmark compares is the cost of hosting it: Overseer (``SegmentRunWorkflow``, one
segment activity per run) against plain LangGraph with ``AsyncPostgresSaver`` on the same
Postgres.
"""

from __future__ import annotations

import asyncio
import operator
import os
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

NODES = ("fetch", "enrich", "score", "publish")
"""The four nodes, in order."""


class FourIoState(TypedDict, total=False):
    """State of one run.

    Attributes:
        topic: the input.
        trail: one entry per node that ran (every node).
        notes: ``{node: text}`` written by every node.
        score: written by ``score``.
        published: written by ``publish``.
    """

    topic: str
    trail: Annotated[list[str], operator.add]
    notes: Annotated[dict[str, str], operator.or_]
    score: float
    published: bool


async def _io() -> None:
    await asyncio.sleep(float(os.environ.get("BENCH_GRAPH_IO_MS", "20")) / 1000)


async def fetch(state: FourIoState) -> dict[str, Any]:
    """Fetch something about the topic (a stand-in network call)."""
    await _io()
    return {"trail": ["fetch"], "notes": {"fetch": f"3 sources on {state['topic']}"}}


async def enrich(state: FourIoState) -> dict[str, Any]:
    """Enrich what was fetched (a stand-in network call)."""
    await _io()
    return {"trail": ["enrich"], "notes": {"enrich": state["notes"]["fetch"].upper()}}


async def score(state: FourIoState) -> dict[str, Any]:
    """Score the result (a stand-in model call)."""
    await _io()
    return {"trail": ["score"], "notes": {"score": "ok"},
            "score": round(len(state["topic"]) / 10, 2)}


async def publish(state: FourIoState) -> dict[str, Any]:
    """Publish it (a stand-in write to another service)."""
    await _io()
    return {"trail": ["publish"], "notes": {"publish": "done"}, "published": True}


def build_four_io_graph() -> StateGraph[Any]:
    """``START → fetch → enrich → score → publish → END`` (uncompiled, as ``langgraph.json`` allows)."""
    graph = StateGraph(FourIoState)
    for name, fn in zip(NODES, (fetch, enrich, score, publish), strict=True):
        graph.add_node(name, fn)
    graph.add_edge(START, NODES[0])
    for a, b in zip(NODES, NODES[1:], strict=False):
        graph.add_edge(a, b)
    graph.add_edge(NODES[-1], END)
    return graph
