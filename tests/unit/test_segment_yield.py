"""A local try that hands over at a superstep boundary (overseer.runtime.segment_setup.YieldAfter, echoed).

On a real LangGraph graph with LangGraph's in-memory checkpointer: a run split into legs
wherever a ``YieldAfter`` falls due, each leg going on from the checkpoint of the one before
with no input (as the workflow's next leg does), streams what the run not split streams, once
each leg drops the chunks it repeats, and ends in the same state, each node run once.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from langchain_core.load import dumpd
from langgraph.checkpoint.memory import InMemorySaver

from overseer.registry import builder_of, load_langgraph_json
from overseer.runtime.segment_setup import ECHOED_MODES, YieldAfter, echoed

USER_GRAPHS = Path(__file__).parents[1] / "graphs" / "user_graph" / "langgraph.json"
MODES = ["values", "updates", "checkpoints", "debug", "tasks"]
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def text(value: Any) -> str:
    """``value`` as JSON, without the ids LangChain gives each new message."""
    return UUID.sub("<id>", json.dumps(dumpd(value), sort_keys=True))


def app_of(name: str) -> Any:
    return builder_of(load_langgraph_json(USER_GRAPHS)[name].graph).compile(
        checkpointer=InMemorySaver())


def shape(mode: str, chunk: Any) -> tuple[str, str]:
    """What a chunk says, without the ids and times that differ between two threads."""
    if mode == "debug":
        return mode, f"{chunk['type']}:{chunk['step']}:{chunk['payload'].get('name')}"
    if mode == "checkpoints":
        return mode, f"{chunk['metadata']['step']}:{sorted(chunk['next'])}"
    if mode == "tasks":
        return mode, f"{chunk['name']}:{'result' in chunk}:{text(chunk.get('result'))}"
    return mode, text(chunk)


async def test_yield_after_stops_only_on_the_runs_own_nodes_until_it_is_due():
    due = YieldAfter(["review"], 60)
    assert "review" in due and "draft" not in due and not due.fired
    assert list(due) == ["review"] and len(due) == 1 and due  # what LangGraph validates
    now = YieldAfter([], 0)
    assert not now.fired and bool(now)  # empty, yet LangGraph must not skip it
    assert "__start__" not in now and not now.fired  # LangGraph's own nodes never stop it
    assert "draft" in now and now.fired


async def test_a_run_split_at_every_superstep_streams_and_ends_as_the_run_not_split():
    """``constructs`` has ``Send`` fan-out, a subgraph node and ``Command`` hand-offs."""
    plain_app, split_app = app_of("constructs"), app_of("constructs")
    start = {"topic": "alpha beta"}
    plain = [shape(m, c) async for m, c in plain_app.astream(
        start, {"configurable": {"thread_id": "p"}}, stream_mode=MODES)]

    config = {"configurable": {"thread_id": "s"}}
    joined: list[tuple[str, str]] = []
    graph_input: Any = start
    legs = 0
    while True:
        due = YieldAfter([], 0)  # due at once: every superstep ends its leg
        echo = set(ECHOED_MODES) if legs else set()
        ran = False
        async for mode, chunk in split_app.astream(graph_input, config, stream_mode=MODES,
                                                   interrupt_after=due):
            ran = ran or mode == "tasks"
            if not ran and echoed(echo, mode, chunk):
                continue
            if mode == "updates" and "__interrupt__" in chunk:  # the stop, not the client's
                continue
            joined.append(shape(mode, chunk))
        legs += 1
        state = await split_app.aget_state(config)
        if not state.next:
            break
        assert due.fired and legs < 20
        graph_input = None
    assert legs > 4  # the run was split, at each of its supersteps
    assert joined == plain
    plain_state = await plain_app.aget_state({"configurable": {"thread_id": "p"}})
    assert text(state.values) == text(plain_state.values)


async def test_a_yield_waits_for_the_superstep_in_flight():
    """Due in the middle of a node: the node finishes, its checkpoint is written, and the
    loop stops before the next superstep (nothing cancelled, nothing to run twice)."""
    app = app_of("slow_plain")
    config = {"configurable": {"thread_id": "w"}}
    due = YieldAfter([], 0.2)
    began = time.monotonic()
    tasks = [c["name"] async for m, c in app.astream(
        {"topic": "0.5"}, config, stream_mode=["tasks"], interrupt_after=due) if "result" in c]
    assert tasks == ["first", "slow_step"] and due.fired
    assert time.monotonic() - began >= 0.5
    state = await app.aget_state(config)
    assert state.next == ("last",) and state.values["trail"] == ["first", "slow"]
