"""The official client on graphs that run as segments (issue 25): LangGraph's own checkpoints.

The user's graphs, under the names tests/graphs/segments gives them, are
assistants like any other; a thread's state lives in LangGraph's Postgres checkpointer.
Through ``langgraph-sdk`` with only the URL and the key changed:

- two runs on one thread end as plain LangGraph's do on one thread (reducers over the
  thread's state), and ``runs.stream`` gives ``values`` and ``updates`` chunks;
- interrupts pause the run and ``Command(resume=...)`` answers them;
- ``threads.get_history`` is LangGraph's own: one state per superstep, as many as plain
  LangGraph keeps for the same inputs, each with its ``checkpoint_id``; a past checkpoint
  reads back; ``threads.update_state`` writes a checkpoint as LangGraph does;
- ``rollback`` (a new run's multitask strategy, or ``runs.cancel(action="rollback")``)
  deletes the checkpoints the rolled-back run wrote, so the thread is as the run found it;
  ``threads.copy`` copies LangGraph's checkpoints, and the copy goes its own way.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client

from tests.e2e.conftest import SEGMENT_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def sdk(stack: Stack, role: str = "submitter") -> Any:
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


def reference_app(graph: str) -> Any:
    from overseer.registry import builder_of, load_langgraph_json

    return builder_of(load_langgraph_json(SEGMENT_GRAPHS)[graph].graph).compile(
        checkpointer=InMemorySaver())


async def test_runs_on_a_thread_end_as_plain_langgraph_and_history_is_langgraphs(stack: Stack):
    client = sdk(stack)
    thread = await client.threads.create(metadata={"model": "segments"})
    tid = thread["thread_id"]
    first = await client.runs.wait(tid, "seg_constructs", input={"topic": "one two"})
    second = await client.runs.wait(tid, "seg_constructs", input={"topic": "three"})

    app = reference_app("seg_constructs")
    config = {"configurable": {"thread_id": "reference"}}
    want = [await app.ainvoke(i, config) for i in ({"topic": "one two"}, {"topic": "three"})]
    for got, ref in zip([first, second], want, strict=True):
        assert sorted(got["results"]) == sorted(ref["results"])
        assert sorted(got["trail"]) == sorted(ref["trail"])
        assert [m["content"] for m in got["messages"]] == [m.content for m in ref["messages"]]
    assert "ONE" in second["results"] and "THREE" in second["results"]
    run_id = (await client.runs.list(tid))[0]["run_id"]
    with stack.client("admin") as admin:  # each run was one segment, its nodes recorded
        events = admin.get(f"/v1/runs/{run_id}/events").json()["items"]
    placements = {e["data"].get("placement") for e in events if e["type"] == "node.completed"}
    assert placements == {"segment"}

    history = await client.threads.get_history(tid, limit=100)
    reference = [s async for s in app.aget_state_history(config)]
    assert len(history) == len(reference) > 6  # one per superstep, as LangGraph keeps
    ids = [h["checkpoint"]["checkpoint_id"] for h in history]
    assert len(set(ids)) == len(ids) and all(ids)
    assert history[0]["values"]["results"] == second["results"]
    older = history[len(history) // 2]
    at = await client.threads.get_state(tid, checkpoint_id=older["checkpoint"]["checkpoint_id"])
    assert at["values"] == older["values"]
    state = await client.threads.get_state(tid)
    assert state["values"]["results"] == second["results"] and state["next"] == []

    updated = await client.threads.update_state(tid, {"summary": "edited"}, as_node="typed")
    assert updated["checkpoint"]["checkpoint_id"] not in ids
    assert (await client.threads.get_state(tid))["values"]["summary"] == "edited"
    assert len(await client.threads.get_history(tid, limit=100)) == len(history) + 1


async def test_interrupts_resume_and_stream(stack: Stack):
    client, reviewer = sdk(stack), sdk(stack, "reviewer")
    tid = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(tid, "seg_approvals", input={"topic": "launch"})
    assert paused["__interrupt__"][0]["value"]["question"] == "publish?"
    state = await client.threads.get_state(tid)
    assert state["next"] and state["interrupts"]
    again = await reviewer.runs.wait(tid, "seg_approvals", command={"resume": {"decision": "a"}})
    assert again["__interrupt__"][0]["value"]["question"] == "really?"
    done = await reviewer.runs.wait(tid, "seg_approvals", command={"resume": {"decision": "b"}})
    assert done["summary"] == "a then b"

    parts = [p async for p in client.runs.stream(None, "seg_constructs", input={"topic": "x y"},
                                                 stream_mode=["values", "updates"])]
    events = [p.event for p in parts]
    assert events[0] == "metadata" and "values" in events and "updates" in events
    updates = [p.data for p in parts if p.event == "updates"]
    assert any("prepare" in u for u in updates)
    assert parts[-1].event in ("values", "end") or events.count("values") >= 1


async def _written(client: Any, tid: str, topic: str) -> list[dict[str, Any]]:
    """The thread's history once a checkpoint of the run on ``topic`` is in it (the run is busy)."""
    for _ in range(100):
        history = await client.threads.get_history(tid, limit=100)
        if any(h["values"].get("topic") == topic for h in history):
            return list(history)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no checkpoint of the run on {topic!r}")


async def test_rollback_puts_the_thread_back_as_the_run_found_it(stack: Stack):
    """``seg_long`` naps 4.5 s in its second node: a run is busy long enough to roll back."""
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "seg_long", input={"topic": "first"})
    before = await client.threads.get_history(tid, limit=100)

    await client.runs.create(tid, "seg_long", input={"topic": "second"})
    await _written(client, tid, "second")
    third = await client.runs.create(tid, "seg_long", input={"topic": "third"},
                                     multitask_strategy="rollback")
    await client.runs.join(tid, third["run_id"])
    after = await client.threads.get_history(tid, limit=100)
    assert not any(h["values"].get("topic") == "second" for h in after)  # all of it is gone
    assert {h["checkpoint"]["checkpoint_id"] for h in before} < {
        h["checkpoint"]["checkpoint_id"] for h in after}
    state = await client.threads.get_state(tid)
    assert state["values"]["topic"] == "third" and state["values"]["summary"] == "slept long"

    # runs.cancel(action="rollback") of a busy run: the thread is as it was after "third"
    fourth = await client.runs.create(tid, "seg_long", input={"topic": "fourth"})
    await _written(client, tid, "fourth")
    await client.runs.cancel(tid, fourth["run_id"], action="rollback", wait=True)
    back = await client.threads.get_state(tid)
    assert back["checkpoint"]["checkpoint_id"] == state["checkpoint"]["checkpoint_id"]
    assert back["values"] == state["values"]
    assert len(await client.threads.get_history(tid, limit=100)) == len(after)


async def test_a_copied_thread_has_langgraphs_checkpoints_and_goes_its_own_way(stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(tid, "seg_constructs", input={"topic": "one two"})
    history = await client.threads.get_history(tid, limit=100)
    copy = (await client.threads.copy(tid))["thread_id"]
    copied = await client.threads.get_history(copy, limit=100)
    assert [h["checkpoint"]["checkpoint_id"] for h in copied] == [
        h["checkpoint"]["checkpoint_id"] for h in history]
    assert [h["values"] for h in copied] == [h["values"] for h in history]
    assert (await client.threads.get_state(copy))["values"]["results"] == first["results"]
    # a run on the copy goes on from the copied state; the original does not move
    more = await client.runs.wait(copy, "seg_constructs", input={"topic": "three"})
    assert set(first["results"]) < set(more["results"])
    assert len(await client.threads.get_history(tid, limit=100)) == len(history)


async def test_a_run_from_a_past_checkpoint_forks_as_langgraph_does(stack: Stack):
    """Time travel: ``runs.wait(..., checkpoint_id=...)`` starts from that checkpoint."""
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(tid, "seg_constructs", input={"topic": "one two"})
    await client.runs.wait(tid, "seg_constructs", input={"topic": "three"})
    history = await client.threads.get_history(tid, limit=100)
    end_of_first = next(h for h in history
                        if h["values"].get("results") == first["results"] and not h["next"])
    forked = await client.runs.wait(tid, "seg_constructs", input={"topic": "four"},
                                    checkpoint_id=end_of_first["checkpoint"]["checkpoint_id"])

    app = reference_app("seg_constructs")
    config = {"configurable": {"thread_id": "reference"}}
    ref_first = await app.ainvoke({"topic": "one two"}, config)
    await app.ainvoke({"topic": "three"}, config)
    ref_cp = [s async for s in app.aget_state_history(config)
              if s.values.get("results") == ref_first["results"] and not s.next][0]
    want = await app.ainvoke({"topic": "four"}, ref_cp.config)
    assert sorted(forked["results"]) == sorted(want["results"])
    assert "FOUR" in forked["results"] and "THREE" not in forked["results"]
    assert (await client.threads.get_state(tid))["values"]["results"] == forked["results"]


async def test_subgraphs_are_listed_with_their_schemas(stack: Stack):
    client = sdk(stack)
    subgraphs = await client.assistants.get_subgraphs("constructs")
    assert set(subgraphs) == {"sub"}  # the compiled subgraph node of the user's graph
    assert subgraphs["sub"]["graph_id"] == "constructs"
    assert subgraphs["sub"]["input_schema"] is not None
    assert await client.assistants.get_subgraphs("constructs", namespace="sub") == subgraphs
    assert await client.assistants.get_subgraphs("approvals") == {}


async def test_tasks_checkpoints_and_debug_stream_as_langgraph_streams_them(stack: Stack):
    """As segments, ``tasks``, ``checkpoints`` and ``debug`` are LangGraph's own chunks: as
    many of each kind as plain LangGraph streams for the same input, in its shapes."""
    client = sdk(stack)
    modes = ["tasks", "checkpoints", "debug"]
    parts = [p async for p in client.runs.stream(None, "seg_constructs",
                                                 input={"topic": "one two"}, stream_mode=modes)]
    got = {m: [p.data for p in parts if p.event == m] for m in modes}
    app = reference_app("seg_constructs")
    want: dict[str, list[Any]] = {m: [] for m in modes}
    async for mode, chunk in app.astream({"topic": "one two"},
                                         {"configurable": {"thread_id": "streams"}},
                                         stream_mode=modes):
        want[mode].append(chunk)
    for mode in modes:
        assert len(got[mode]) == len(want[mode]) > 0, mode
    assert [t["name"] for t in got["tasks"]] == [t["name"] for t in want["tasks"]]
    assert {"id", "name", "input", "triggers"} <= set(got["tasks"][0])
    assert [c["metadata"]["step"] for c in got["checkpoints"]] == [
        c["metadata"]["step"] for c in want["checkpoints"]]
    assert [(d["type"], d["step"]) for d in got["debug"]] == [
        (d["type"], d["step"]) for d in want["debug"]]


def _plain(value: Any) -> Any:
    """A chunk as JSON, interrupts as ``{"value"}`` (their ids differ between two threads)."""
    from langgraph.types import Interrupt

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Interrupt):
        return {"value": value.value}
    return value


async def test_streams_match_plain_langgraph_event_by_event_across_a_pause(stack: Stack):
    """No repeated ``values`` before a pause; at a pause ``updates`` then ``values`` (issue 26)."""
    from langgraph.types import Command

    client, reviewer = sdk(stack), sdk(stack, "reviewer")
    tid = (await client.threads.create())["thread_id"]
    modes = ["values", "updates"]
    app, ref = reference_app("seg_approvals"), {"configurable": {"thread_id": "reference"}}
    for given, as_sent in (({"topic": "launch"}, {"input": {"topic": "launch"}}),
                           (Command(resume={"decision": "a"}),
                            {"command": {"resume": {"decision": "a"}}}),
                           (Command(resume={"decision": "b"}),
                            {"command": {"resume": {"decision": "b"}}})):
        caller = reviewer if "command" in as_sent else client
        got = [(p.event, _plain(p.data)) async for p in caller.runs.stream(
            tid, "seg_approvals", stream_mode=modes, **as_sent)
            if p.event in modes]
        for _, data in got:
            for i in (data.get("__interrupt__") or []) if isinstance(data, dict) else []:
                i.pop("id", None)
        want = [(m, _plain(c)) async for m, c in app.astream(given, ref, stream_mode=modes)]
        assert got == want


async def test_tool_events_stream_as_langgraph_streams_them(stack: Stack):
    """``tools`` mode: a prebuilt agent's tool starts, interrupts, and finishes after the resume."""
    from langgraph.types import Command

    client, reviewer = sdk(stack), sdk(stack, "reviewer")
    tid = (await client.threads.create())["thread_id"]
    app, ref = reference_app("seg_refund_agent"), {"configurable": {"thread_id": "reference"}}
    asked = {"messages": [{"role": "user", "content": "refund order 7"}]}
    seen: list[list[dict[str, Any]]] = []
    for caller, given, as_sent in (
            (client, asked, {"input": asked}),
            (reviewer, Command(resume={"approved": True}),
             {"command": {"resume": {"approved": True}}})):
        got = [_tool_event(p.data) async for p in caller.runs.stream(
            tid, "seg_refund_agent", stream_mode=["tools"], **as_sent) if p.event == "tools"]
        want = [_tool_event(c) async for c in app.astream(given, ref, stream_mode="tools")]
        assert got == want
        seen.append(got)
    assert [e["event"] for e in seen[0]] == ["tool-started"]  # then the interrupt
    assert seen[0][0]["tool_call_id"] == "call-refund-7"
    assert seen[0][0]["input"] == {"order": 7, "amount": 40}
    assert [e["event"] for e in seen[1]][-1] == "tool-finished"


def _tool_event(event: dict[str, Any]) -> dict[str, Any]:
    """A ``tools`` event as JSON; a tool message's ``id`` left out (the reference's message
    object gets its id from the reducer after the event, in place)."""
    from langchain_core.messages import BaseMessage

    output = event.get("output")
    if isinstance(output, BaseMessage):
        output = output.model_dump()
    if isinstance(output, dict):
        output = {k: v for k, v in output.items() if k != "id"}
    return {**event, **({"output": output} if "output" in event else {})}


async def test_a_run_terminated_in_temporal_still_ends_its_runs_wait(stack: Stack):
    """A workflow that cannot hand its state over (terminated from the Temporal UI) ends the
    wait: the waiting API sees it closed (a describe, no query while it runs) and reads it."""
    from temporalio.client import Client

    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    waiting = asyncio.ensure_future(client.runs.wait(tid, "slow_plain", input={"topic": "120"}))
    for _ in range(100):
        runs = await client.runs.list(tid)
        if runs and runs[0]["status"] == "running":
            break
        await asyncio.sleep(0.1)
    temporal = await Client.connect(stack.env["OVERSEER_TEMPORAL_ADDRESS"])
    await temporal.get_workflow_handle(f"slow_plain-{runs[0]['run_id']}").terminate("test")
    answer = await asyncio.wait_for(waiting, timeout=30)  # 120 s if nobody noticed
    assert answer.get("trail") != ["first", "slow", "last"]
    run = await client.runs.get(tid, runs[0]["run_id"])
    assert run["status"] in ("interrupted", "error")  # as a cancelled run, never "running"


async def test_a_paused_threads_state_is_updated_then_resumed_as_plain_langgraph(stack: Stack):
    """``threads.update_state`` on a thread paused at an interrupt, as LangGraph allows: the
    waiting run is let go, LangGraph writes the checkpoint (next tasks kept, no pending
    interrupt), and a resume runs the interrupted node again on the updated state."""
    from langgraph.types import Command

    from overseer.registry import builder_of, load_langgraph_json
    from tests.e2e.conftest import USER_GRAPHS

    owner, reviewer = sdk(stack), sdk(stack, "reviewer")
    tid = (await owner.threads.create())["thread_id"]
    paused = await owner.runs.wait(tid, "publish_review", input={"topic": "launch"})
    assert paused["__interrupt__"][0]["value"]["draft"] == "post about launch"
    await owner.threads.update_state(tid, {"draft": "an edited post"})
    state = await owner.threads.get_state(tid)
    done = await reviewer.runs.wait(tid, "publish_review",
                                    command={"resume": {"publish": True, "note": "ok"}})

    app = builder_of(load_langgraph_json(USER_GRAPHS)["publish_review"].graph).compile(
        checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    await app.ainvoke({"topic": "launch"}, config)
    await app.aupdate_state(config, {"draft": "an edited post"})
    ref_state = await app.aget_state(config)
    want = await app.ainvoke(Command(resume={"publish": True, "note": "ok"}), config)
    assert state["values"] == ref_state.values and state["next"] == list(ref_state.next)
    assert state["interrupts"] == [] == list(ref_state.interrupts)
    assert done == want  # the draft as edited, published, the reviewer's note
    runs = await owner.runs.list(tid)
    assert [r["status"] for r in runs] == ["success", "interrupted"]  # newest first
