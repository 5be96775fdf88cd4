"""A run's own LangGraph options through the official client: config, context, breakpoints, subgraphs.

On graphs that run as segments (a plain graph of a ``langgraph.json``), with only the URL
and the key changed, each compared with plain LangGraph given the same options:

- ``config`` (``configurable`` keys, ``tags``) and ``context`` reach the nodes as LangGraph
  gives them (``greeter`` reads both);
- ``interrupt_before`` / ``interrupt_after`` stop the run where LangGraph stops; the thread
  is then ``interrupted`` with ``next`` set, its state can be edited, and a run with no
  input goes on from there;
- ``stream_subgraphs`` streams a subgraph's chunks as ``<mode>|<namespace>`` events, the
  same chunks plain LangGraph's ``astream(subgraphs=True)`` gives;
- ``after_seconds`` holds the run until then (Temporal's start delay);
- options a graph cannot honour are refused with 422 before anything runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from tests.e2e.conftest import SEGMENT_GRAPHS, USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def sdk(stack: Stack) -> Any:
    return get_client(url=stack.base_url, api_key=stack.tokens["submitter"])


def reference_app(graph: str, project: Any = USER_GRAPHS) -> Any:
    from overseer.registry import builder_of, load_langgraph_json

    return builder_of(load_langgraph_json(project)[graph].graph).compile(
        checkpointer=InMemorySaver())


CONFIG = {"configurable": {"language": "fr"}, "tags": ["user:web", "other"]}


async def test_config_and_context_reach_the_nodes_as_on_plain_langgraph(stack: Stack):
    got = await sdk(stack).runs.wait(None, "greeter", input={}, config=CONFIG,
                                     context={"name": "Ada"})
    app = reference_app("greeter")
    want = await app.ainvoke({}, {**CONFIG, "configurable": {
        **CONFIG["configurable"], "thread_id": "ref"}}, context={"name": "Ada"})
    assert got == want
    assert got["lines"][0] == "hello Ada in fr [user:web]"

    empty = await sdk(stack).runs.wait(None, "greeter", input={}, context={})  # the schema's default
    assert empty["lines"][0] == "hello nobody in ? []"


async def test_breakpoints_stop_the_run_and_the_next_run_goes_on(stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    stopped = await client.runs.wait(tid, "greeter", input={}, context={"name": "Bo"},
                                     interrupt_before=["middle"])
    app = reference_app("greeter")
    ref = {"configurable": {"thread_id": "ref"}}
    want = await app.ainvoke({}, ref, context={"name": "Bo"}, interrupt_before=["middle"])
    assert stopped == want == {"lines": ["hello Bo in ? []"]}
    thread = await client.threads.get(tid)
    state = await client.threads.get_state(tid)
    assert thread["status"] == "interrupted" and state["next"] == ["middle"]
    runs = await client.runs.list(tid)
    assert runs[0]["status"] == "success"

    await client.threads.update_state(tid, {"lines": ["edited"]})  # a human edits, then it goes on
    await app.aupdate_state(ref, {"lines": ["edited"]})
    assert (await client.threads.get_state(tid))["next"] == ["middle"]
    done = await client.runs.wait(tid, "greeter", input=None)
    assert done == await app.ainvoke(None, ref)
    assert done["lines"] == ["hello Bo in ? []", "edited", "middle after 2", "bye"]
    assert (await client.threads.get(tid))["status"] == "idle"

    tid = (await client.threads.create())["thread_id"]
    after = await client.runs.wait(tid, "greeter", input={}, context={},
                                   interrupt_after=["middle"])
    assert after["lines"] == ["hello nobody in ? []", "middle after 1"]
    assert (await client.threads.get_state(tid))["next"] == ["bye"]
    assert (await client.runs.wait(tid, "greeter"))["lines"][-1] == "bye"


async def test_breakpoints_given_to_compile_stop_runs_as_in_plain_langgraph(stack: Stack):
    """A graph compiled with ``interrupt_before`` / ``interrupt_after`` (LangGraph's static
    breakpoints): each run stops where plain LangGraph's ``ainvoke`` stops, and one that
    names its own breakpoints stops at those instead (the runtime compiled the builder
    afresh and dropped them, so every run went through)."""
    from overseer.registry import builder_of, load_langgraph_json

    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    app = builder_of(load_langgraph_json(USER_GRAPHS)["greeter_paused"].graph).compile(
        checkpointer=InMemorySaver(), interrupt_before=["middle"], interrupt_after=["middle"])
    ref: dict[str, Any] = {"configurable": {"thread_id": "ref"}}
    for graph_input in ({}, None, None):  # before middle, after it, then to the end
        got = await client.runs.wait(tid, "greeter_paused", input=graph_input,
                                     context={"name": "Di"})
        want = await app.ainvoke(graph_input, ref, context={"name": "Di"})
        assert got == want
        assert (await client.threads.get_state(tid))["next"] == \
            list((await app.aget_state(ref)).next)
    assert got["lines"][-1] == "bye" and (await client.threads.get(tid))["status"] == "idle"
    own = await client.runs.wait(None, "greeter_paused", input={}, context={},
                                 interrupt_after=["hello"])
    assert own == await app.ainvoke({}, {"configurable": {"thread_id": "own"}}, context={},
                                    interrupt_after=["hello"]) == \
        {"lines": ["hello nobody in ? []"]}


async def test_breakpoints_on_every_node_stop_where_plain_langgraph_stops(stack: Stack):
    # "*" reaches LangGraph as the string it compares with (the segment's call once decoded
    # it as ["*"], which names no node: the run went through)
    client = sdk(stack)
    for option in ("interrupt_before", "interrupt_after"):
        tid = (await client.threads.create())["thread_id"]
        stopped = await client.runs.wait(tid, "greeter", input={"lines": ["start"]},
                                         context={"name": "Cy"}, **{option: "*"})
        app = reference_app("greeter")
        ref = {"configurable": {"thread_id": "ref"}}
        want = await app.ainvoke({"lines": ["start"]}, ref, context={"name": "Cy"},
                                 **{option: "*"})
        assert stopped == want, option
        assert (await client.threads.get_state(tid))["next"] == \
            list((await app.aget_state(ref)).next), option
        assert (await client.threads.get(tid))["status"] == "interrupted", option


def _named(event: str) -> str:
    """``updates|sub:<task id>`` → ``updates|sub``: task ids differ between two runs."""
    mode, *ns = event.split("|")
    return "|".join([mode, *(part.split(":")[0] for part in ns)])


async def test_stream_subgraphs_namespaces_as_plain_langgraph(stack: Stack):
    """``seg_constructs``: the user's ``constructs`` (a compiled subgraph as node ``sub``) as segments."""
    parts = [p async for p in sdk(stack).runs.stream(
        None, "seg_constructs", input={"topic": "a b"}, stream_mode="updates",
        stream_subgraphs=True)]
    got = [(_named(p.event), p.data) for p in parts if p.event.startswith("updates")]
    app = reference_app("seg_constructs", SEGMENT_GRAPHS)
    want = [(_named("|".join(["updates", *ns])), chunk) async for ns, chunk in app.astream(
        {"topic": "a b"}, {"configurable": {"thread_id": "ref"}}, stream_mode="updates",
        subgraphs=True)]
    assert [e for e, _ in got] == [e for e, _ in want]
    assert ("updates|sub", {"count": {"sub_total": 2, "trail": ["sub.count"]}}) in got
    assert sorted(map(repr, (d for e, d in got if "|" in e))) == \
        sorted(map(repr, (d for e, d in want if "|" in e)))

    plain = [p.event async for p in sdk(stack).runs.stream(
        None, "seg_constructs", input={"topic": "a b"}, stream_mode="updates")]
    assert not any("|" in e for e in plain)  # without stream_subgraphs: the parent's only


async def test_after_seconds_holds_the_run_until_then(stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    asked = time.monotonic()
    run = await client.runs.create(tid, "greeter", input={}, context={}, after_seconds=2)
    assert (await client.runs.get(tid, run["run_id"]))["status"] in ("pending", "running")
    values = await client.runs.join(tid, run["run_id"])
    assert time.monotonic() - asked >= 2.0
    assert values["lines"][-1] == "bye"


@pytest.mark.parametrize(("graph", "body", "field"), [
    ("greeter", {"interrupt_before": ["nowhere"]}, "interrupt_before"),
    ("greeter", {"interrupt_after": "middle"}, "interrupt_after"),
    ("greeter", {"config": {"recursion_limit": 0}}, "config"),
    ("greeter", {"after_seconds": -1}, "after_seconds"),
])
async def test_options_a_graph_cannot_honour_are_refused(stack: Stack, graph: str,
                                                         body: dict[str, Any], field: str):
    with pytest.raises(APIStatusError) as refused:
        await sdk(stack).runs.create(None, graph, input={}, **body)
    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["details"]["field"] == field


async def _leave_after_metadata(stream: Any) -> str:
    """Read a run stream up to its ``metadata`` event, then hang up; the run's id."""
    run_id = ""
    async for part in stream:
        if part.event == "metadata":
            run_id = part.data["run_id"]
            break
    await stream.aclose()
    return run_id


async def _status_within(client: Any, tid: str, run_id: str, want: str, seconds: float) -> str:
    deadline = time.monotonic() + seconds
    status = ""
    while time.monotonic() < deadline:
        status = (await client.runs.get(tid, run_id))["status"]
        if status == want:
            break
        await asyncio.sleep(0.2)
    return status


async def test_on_disconnect_cancel_cancels_the_run_when_its_client_leaves(stack: Stack):
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    run_id = await _leave_after_metadata(client.runs.stream(
        tid, "slow_plain", input={"topic": "30"}, stream_mode="values", on_disconnect="cancel"))
    assert await _status_within(client, tid, run_id, "interrupted", 15) == "interrupted"
    assert (await client.threads.get(tid))["status"] == "idle"

    waited = (await client.threads.create())["thread_id"]  # a wait whose client gives up
    waiting = asyncio.create_task(client.runs.wait(waited, "slow_plain", input={"topic": "30"},
                                                   on_disconnect="cancel"))
    runs: list[Any] = []
    for _ in range(75):  # its run is on the thread within 15 s
        runs = await client.runs.list(waited)
        if runs:
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(0.5)
    waiting.cancel()  # the client hangs up
    assert await _status_within(client, waited, runs[0]["run_id"], "interrupted", 15) == \
        "interrupted"

    kept = (await client.threads.create())["thread_id"]  # the default: the run goes on
    run_id = await _leave_after_metadata(client.runs.stream(
        kept, "slow_plain", input={"topic": "1"}, stream_mode="values"))
    assert await _status_within(client, kept, run_id, "success", 30) == "success"

    with pytest.raises(httpx.HTTPStatusError) as refused:  # runs.wait raises httpx's own
        await client.runs.wait(kept, "slow_plain", input={"topic": "0"}, on_disconnect="later")
    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["details"] == {"field": "on_disconnect"}


async def test_a_stateless_runs_cancel_reaches_its_local_segment_mid_node(
        stack: Stack, dev_server: Any):
    """A stateless run's segment is a local try, which holds its workflow's task: while its
    30 s node runs, ``runs.get``, ``threads.get``, ``threads.get_state`` and a cancel answer
    at once (the API does not ask the busy workflow), and the cancel stops the try at the
    workflow task's heartbeat (about 8 s in), not after the node; the run is
    ``interrupted`` and its thread kept, as on a thread."""
    client = sdk(stack)
    run = await client.runs.create(None, "slow_plain", input={"topic": "30"},
                                   on_completion="keep")
    tid, run_id = run["thread_id"], run["run_id"]
    await asyncio.sleep(2)  # the slow node has started
    asked = time.monotonic()
    assert (await client.runs.get(tid, run_id))["status"] == "running"
    assert (await client.threads.get(tid))["status"] == "busy"
    assert (await client.threads.get_state(tid))["next"] == ["slow_step"]
    assert time.monotonic() - asked < 2  # each queried the busy workflow (~6 s) before
    asked = time.monotonic()
    await client.runs.cancel(tid, run_id)
    assert time.monotonic() - asked < 5  # it waited 12-15 s for two queries before
    assert await _status_within(client, tid, run_id, "interrupted", 20) == "interrupted"
    handle = dev_server.client.get_workflow_handle(f"slow_plain-{run_id}")
    with contextlib.suppress(Exception):
        await asyncio.wait_for(handle.result(), 25)
    assert (await handle.describe()).status.name == "CANCELED"
    assert time.monotonic() - asked < 20  # the try stopped well before the node's 30 s
    assert (await client.threads.get(tid))["status"] == "idle"


async def test_a_run_whose_workflow_was_terminated_is_settled_by_runs_get(
        stack: Stack, dev_server: Any):
    """Terminated from Temporal's UI, a run's workflow never writes its ending: ``runs.get``
    trusts a ``running`` row only while the server says the workflow runs, so it reads the
    closed workflow's state and the run is ``interrupted`` (as a cancelled run is); the
    thread is ``idle``, shows LangGraph's latest checkpoint, and runs again."""
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    run_id = (await client.runs.create(tid, "slow_plain", input={"topic": "30"}))["run_id"]
    handle = dev_server.client.get_workflow_handle(f"slow_plain-{run_id}")
    deadline = time.monotonic() + 20
    while not (await handle.describe()).raw_description.pending_activities:  # slow_step's
        assert time.monotonic() < deadline, "the segment never started"
        await asyncio.sleep(0.2)
    await handle.terminate("a test")
    assert (await client.runs.get(tid, run_id))["status"] == "interrupted"
    thread = await client.threads.get(tid)  # LangGraph's latest checkpoint: after `first`
    assert (thread["status"], thread["values"]["trail"]) == ("idle", ["first"])
    assert (await client.threads.get_state(tid))["values"]["trail"] == ["first"]
    again = await client.runs.wait(tid, "slow_plain", input={"topic": "0"})
    assert again["trail"][-3:] == ["first", "slow", "last"]


async def test_a_workflow_closed_before_its_first_task_does_not_make_its_thread_unreadable(
        stack: Stack, dev_server: Any, pool: asyncpg.Pool):
    """A workflow terminated (or failed) while a workflow task was in flight refuses queries
    ("closed before WorkflowTaskStarted"): every read of its thread answered 503 for ever.
    Now its thread and run are settled from the server's ``describe``: the run is
    ``interrupted``, the thread ``idle`` and free for the next run."""
    client = sdk(stack)
    tid = (await client.threads.create())["thread_id"]
    run_id = uuid.uuid4()
    # a run's workflow no worker has taken yet (its task queue has none), then terminated
    handle = await dev_server.client.start_workflow(
        "SegmentRunWorkflow", id=f"slow_plain-{run_id}", task_queue=f"nobody-{run_id}")
    await handle.terminate("a test")
    await pool.execute("UPDATE agent_threads SET status = 'busy', graph_id = 'slow_plain', "
                       "last_run_id = $1 WHERE thread_id = $2", run_id, uuid.UUID(tid))
    await pool.execute(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   kind, status) VALUES ($1, $2, 'slow_plain', 'slow_plain', $1,
                                   'start', 'running')""", run_id, uuid.UUID(tid))
    assert (await client.runs.get(tid, str(run_id)))["status"] == "interrupted"
    assert (await client.threads.get(tid))["status"] == "idle"
    again = await client.runs.wait(tid, "slow_plain", input={"topic": "0"})
    assert again["trail"] == ["first", "slow", "last"]


async def test_a_stateless_runs_local_try_hands_over_to_the_activity_after_two_seconds(
        stack: Stack, dev_server: Any):
    """A local try stops at the first superstep boundary after 2 s (after ``settle``'s 2.5 s);
    the 30 s ``slow_step`` then runs in the heartbeating activity: its heartbeat names the
    node in progress (the Temporal UI's view), and a cancel reaches it through the activity."""
    client = sdk(stack)
    run = await client.runs.create(None, "settle_then_slow", input={"topic": "30"},
                                   on_completion="keep")
    tid, run_id = run["thread_id"], run["run_id"]
    handle = dev_server.client.get_workflow_handle(f"settle_then_slow-{run_id}")
    deadline = time.monotonic() + 30
    while True:  # the activity's first heartbeat comes 60% of its 6 s time-out in
        pending = (await handle.describe()).raw_description.pending_activities
        if pending and pending[0].heartbeat_details.payloads:
            break
        assert time.monotonic() < deadline, "no heartbeating activity took over"
        await asyncio.sleep(0.2)
    assert json.loads(pending[0].heartbeat_details.payloads[0].data)["node"] == "slow_step"
    await client.runs.cancel(tid, run_id)
    assert await _status_within(client, tid, run_id, "interrupted", 20) == "interrupted"
    kinds = [e.WhichOneof("attributes") for e in (await handle.fetch_history()).events]
    assert kinds.count("marker_recorded_event_attributes") == 1, kinds  # the local try, ended
    assert kinds.count("activity_task_scheduled_event_attributes") == 1, kinds
    assert "activity_task_cancel_requested_event_attributes" in kinds, kinds
    assert kinds.index("marker_recorded_event_attributes") < \
        kinds.index("activity_task_scheduled_event_attributes"), kinds
    with stack.client("admin") as admin:
        events = admin.get(f"/v1/runs/{run_id}/events").json()["items"]
    assert [e["data"]["node"] for e in events if e["type"] == "node.completed"] == ["settle"]


async def test_a_stateless_run_split_by_its_hand_over_streams_what_plain_langgraph_streams(
        stack: Stack):
    """The leg after the hand-over starts from the checkpoint the local try wrote; LangGraph
    streams that state (and checkpoint) first again, and the runtime drops the repeat."""
    modes = ["values", "updates", "checkpoints"]
    got = [(c.event, c.data) async for c in sdk(stack).runs.stream(
        None, "settle_then_slow", input={"topic": "0.1"}, stream_mode=modes)
        if c.event not in ("metadata", "end")]
    want = [(m, c) async for m, c in reference_app("settle_then_slow").astream(
        {"topic": "0.1"}, {"configurable": {"thread_id": "ref"}}, stream_mode=modes)]
    assert [e for e, _ in got] == [m for m, _ in want], ([e for e, _ in got], [m for m, _ in want])
    assert [d for e, d in got if e != "checkpoints"] == \
        [c for m, c in want if m != "checkpoints"]
    assert [(d["metadata"]["step"], d["next"]) for e, d in got if e == "checkpoints"] == \
        [(c["metadata"]["step"], c["next"]) for m, c in want if m == "checkpoints"]
