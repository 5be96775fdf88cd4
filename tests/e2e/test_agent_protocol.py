"""The thread protocol ("Protocol v2") of ``@langchain/react`` 1.x ``useStream``, on the real stack.

``POST /threads/{id}/commands`` and ``POST /threads/{id}/stream/events``
(``services/api/routes/agent_protocol_commands.py`` and ``agent_protocol_stream.py``) with
httpx, then the real hook (``tests/e2e/js/protocol.mjs``: ``useStream`` from
``@langchain/react`` 1.1.0, rendered with ``react-test-renderer`` in Node; npm, pinned in
``tests/e2e/js/package-lock.json``, installed by ``make setup``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import USER_GRAPHS, Stack
from tests.e2e.test_js_client import run_script

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

JS = Path(__file__).resolve().parent / "js"
CHATTY_REPLY = "Tokens arrive one by one while the node is still running"
"""What ``chatty``'s ``talk`` node streams (``tests/graphs/user_graph/graph.py``)."""
RESEARCH_NOTE = "Notes from the research desk, token by token"
"""What ``research_desk``'s subgraph node ``draft`` streams."""
SUBAGENT_TASK = "find three sources on durable execution"
SUBAGENT_NOTE = "Three sources agree: checkpoints make agents durable"
"""``deep_desk``: what its main agent hands its subagent, and the subagent's answer."""
ROOT_PUMP = {"channels": ["values", "checkpoints", "lifecycle", "input", "messages", "tools"],
             "namespaces": [[]], "depth": 1}
"""The body of the hook's content connection, exactly as it sends it."""
WATCHER = {"channels": ["lifecycle", "input"]}
"""The body of the hook's lifecycle watcher."""


def _key(stack: Stack, role: str) -> dict[str, str]:
    return {"x-api-key": stack.tokens[role]}


class Sse:
    """One ``stream/events`` connection read in the background: its events, as they come."""

    def __init__(self, http: httpx.AsyncClient, thread_id: str, body: dict[str, Any],
                 headers: dict[str, str]) -> None:
        self.http, self.thread_id, self.body, self.headers = http, thread_id, body, headers
        self.events: list[dict[str, Any]] = []
        self.frames: list[dict[str, str]] = []
        self.comments: list[str] = []
        self.status: int | None = None
        self.content_type: str | None = None
        self.arrived = asyncio.Event()
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async with self.http.stream("POST", f"/threads/{self.thread_id}/stream/events",
                                    json=self.body, headers=self.headers, timeout=None) as r:
            self.status, self.content_type = r.status_code, r.headers.get("content-type")
            self.arrived.set()
            if r.status_code != 200:
                await r.aread()
                return
            frame: dict[str, str] = {}
            async for line in r.aiter_lines():
                if line.startswith(":"):
                    self.comments.append(line)
                elif line == "":
                    if "data" in frame:
                        self.frames.append(frame)
                        self.events.append(json.loads(frame["data"]))
                        self.arrived.set()
                    frame = {}
                else:
                    name, _, value = line.partition(":")
                    frame[name] = value.removeprefix(" ")

    async def until(self, done: Callable[[list[dict[str, Any]]], bool],
                    timeout: float = 60) -> list[dict[str, Any]]:
        """Wait until ``done(events)``; the events so far."""
        async with asyncio.timeout(timeout):
            while not done(self.events):
                self.arrived.clear()
                if self.task.done():
                    self.task.result()
                    raise AssertionError(f"the stream ended: {self.status} {self.events}")
                await self.arrived.wait()
        return self.events

    async def close(self) -> None:
        """Hang up."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await self.task


def _terminal(run_ordinal: int) -> Callable[[list[dict[str, Any]]], bool]:
    """``done`` once ``run_ordinal`` terminal root lifecycle events have arrived."""
    return lambda events: len([e for e in events if e["method"] == "lifecycle" and
                               e["params"]["namespace"] == [] and e["params"]["data"]["event"]
                               in ("completed", "failed", "interrupted")]) >= run_ordinal


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=60) as client:
        yield client


async def _command(http: httpx.AsyncClient, thread_id: str, body: Any,
                   headers: dict[str, str]) -> httpx.Response:
    return await http.post(f"/threads/{thread_id}/commands", json=body, headers=headers)


def _methods(events: list[dict[str, Any]]) -> list[str]:
    """Each event as ``method`` (``lifecycle:<event>``, ``messages:<event>``)."""
    out = []
    for e in events:
        data = e["params"]["data"]
        out.append(f"{e['method']}:{data['event']}" if e["method"] in ("lifecycle", "messages")
                   else e["method"])
    return out


def _of_run(events: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event_id"].startswith(f"{run_id}:")]


def _ids(events: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(e["event_id"], e["seq"]) for e in events]


def _start(thread_id: str, command_id: int, assistant: str, value: Any) -> dict[str, Any]:
    """A ``run.start`` as the hook sends it."""
    return {"id": command_id, "method": "run.start", "params": {
        "input": value, "assistant_id": assistant,
        "config": {"configurable": {"thread_id": thread_id}}}}


async def test_a_message_to_chatty_streams_tokens_then_values_then_completed(
        stack: Stack, http: httpx.AsyncClient):
    thread_id = str(uuid.uuid4())  # minted by the client, as the hook does (a uuidv7 there)
    headers = _key(stack, "submitter")
    human = {"type": "human", "content": "hi", "id": str(uuid.uuid4())}
    command = _start(thread_id, 1, "chatty", {"messages": [human]})
    started = await _command(http, thread_id, command, headers)
    assert started.status_code == 200
    answer = started.json()
    assert answer["type"] == "success" and answer["id"] == 1
    assert answer["meta"] == {"applied_through_seq": 0}
    run_id = answer["result"]["run_id"]
    retried = await _command(http, thread_id, command, headers)  # the client retrying it
    assert retried.json()["result"] == {"run_id": run_id}
    thread = (await http.get(f"/threads/{thread_id}", headers=headers)).json()
    assert thread["thread_id"] == thread_id  # made on its first run, the caller's

    pump = Sse(http, thread_id, ROOT_PUMP, headers)
    watcher = Sse(http, thread_id, WATCHER, headers)
    try:
        events = list(await pump.until(_terminal(1)))
        watched = list(await watcher.until(_terminal(1)))
        assert pump.status == 200 and pump.content_type.startswith("text/event-stream")
        assert pump.comments[0] == ": open"

        methods = _methods(events)
        assert methods[0] == "lifecycle:running" and methods[-1] == "lifecycle:completed"
        tokens = [e for e in events if e["method"] == "messages"]
        assert _methods(tokens) == ["messages:message-start", "messages:content-block-start",
                                    *["messages:content-block-delta"] * (len(tokens) - 4),
                                    "messages:content-block-finish", "messages:message-finish"]
        assert len(tokens) > 8  # token by token, as the model streamed
        assert {(e["params"]["node"], tuple(e["params"]["namespace"])) for e in tokens} == \
            {("talk", ())}
        deltas = [e["params"]["data"]["delta"] for e in tokens[2:-2]]
        assert {d["type"] for d in deltas} == {"text-delta"}
        assert "".join(d["text"] for d in deltas) == CHATTY_REPLY
        assert tokens[-2]["params"]["data"]["content"] == {"type": "text", "text": CHATTY_REPLY}
        # as LangGraph streams it: the input state first, the tokens, then the state after
        # the node (a UI never sees a state without the message it just streamed)
        values_at = [i for i, m in enumerate(methods) if m == "values"]
        assert values_at[0] < methods.index("messages:message-start")
        assert values_at[1] > methods.index("messages:message-finish")
        first = [e for e in events if e["method"] == "values"][0]["params"]["data"]
        assert [(m["type"], m["content"]) for m in first["messages"]] == [("human", "hi")]
        state = [e for e in events if e["method"] == "values"][-1]["params"]["data"]
        assert [(m["type"], m["content"]) for m in state["messages"]] == [
            ("human", "hi"), ("ai", CHATTY_REPLY), ("ai", "signed")]
        assert state["messages"][0]["id"] == human["id"]  # the client's own id
        assert tokens[0]["params"]["data"] == {"event": "message-start", "role": "ai",
                                               "id": state["messages"][1]["id"]}
        assert "__interrupt__" not in state

        seqs = [e["seq"] for e in events]
        assert seqs == sorted(set(seqs))
        assert len({e["event_id"] for e in events}) == len(events)
        assert all(e["type"] == "event" and isinstance(e["params"]["timestamp"], int)
                   for e in events)
        assert [(f["event"], f["id"]) for f in pump.frames] == \
            [(e["method"], str(e["seq"])) for e in events]
        # the watcher sees the same events, same ids and seqs, on its own channels only
        assert {e["method"] for e in watched} == {"lifecycle"}
        assert set(_ids(watched)) <= set(_ids(events))

        # a new connection (a reload, a reconnect) replays the run with the same ids
        again = Sse(http, thread_id, ROOT_PUMP, headers)
        try:
            assert _ids(await again.until(_terminal(1))) == _ids(events)
        finally:
            await again.close()

        # the next message: a new run on the same, still open connections, higher seqs
        human2 = {"type": "human", "content": "again", "id": str(uuid.uuid4())}
        second = (await _command(http, thread_id, _start(thread_id, 2, "chatty",
                                                         {"messages": [human2]}), headers)).json()
        assert second["type"] == "success" and second["result"]["run_id"] != run_id
        assert second["meta"]["applied_through_seq"] >= max(seqs)
        later = Sse(http, thread_id, ROOT_PUMP, headers)
        try:
            both = await pump.until(_terminal(2))
            run2 = _of_run(both, second["result"]["run_id"])
            assert _methods(run2)[0] == "lifecycle:running"
            assert _methods(run2)[-1] == "lifecycle:completed"
            assert min(e["seq"] for e in run2) > second["meta"]["applied_through_seq"]
            assert [(m["type"], m["content"]) for m in [
                e for e in run2 if e["method"] == "values"][-1]["params"]["data"]["messages"]] \
                == [("human", "hi"), ("ai", CHATTY_REPLY), ("ai", "signed"),  # sig-1 again
                    ("human", "again"), ("ai", CHATTY_REPLY)]
            # a connection opened now replays from the current run only
            replayed = await later.until(_terminal(1))
            assert _ids(replayed) == _ids(run2)
        finally:
            await later.close()
    finally:
        await pump.close()
        await watcher.close()
    runs = (await http.get(f"/threads/{thread_id}/runs", headers=headers)).json()
    assert len(runs) == 2  # the retried run.start started no second run


async def _plain_subgraph_values(graph: str, value: Any) -> list[tuple[str, list[Any]]]:
    """Plain LangGraph's subgraph ``values`` chunks for ``value``: (node, messages' type and text)."""
    from langgraph.checkpoint.memory import InMemorySaver

    from overseer.registry import load_langgraph_json

    app = load_langgraph_json(USER_GRAPHS)[graph].graph.compile(checkpointer=InMemorySaver())
    return [(ns[-1].split(":")[0], [(m.type, m.content) for m in chunk["messages"]])
            async for ns, chunk in app.astream(value, {"configurable": {"thread_id": "t"}},
                                               stream_mode="values", subgraphs=True) if ns]


async def test_a_subgraphs_events_come_at_its_namespace_opened_and_closed_by_lifecycle(
        stack: Stack, http: httpx.AsyncClient):
    """``research_desk`` runs a compiled subgraph whose model streams: its values and tokens
    come at ``["research:<task id>"]`` (the hook's depth-1 content connection gets them),
    between ``lifecycle started`` and ``completed`` there, as plain LangGraph streams them."""
    thread_id = str(uuid.uuid4())
    headers = _key(stack, "submitter")
    ask = {"messages": [{"type": "human", "content": "dig", "id": str(uuid.uuid4())}]}
    assert (await _command(http, thread_id, _start(thread_id, 1, "research_desk", ask),
                           headers)).json()["type"] == "success"
    pump = Sse(http, thread_id, ROOT_PUMP, headers)
    root_only = Sse(http, thread_id, {**ROOT_PUMP, "depth": 0}, headers)
    again = None
    try:
        events = list(await pump.until(_terminal(1)))
        shallow = list(await root_only.until(_terminal(1)))
        # a connection opened after the run (the hook reopens its pump when a subgraph's
        # card subscribes) replays the same events, ids and data
        again = Sse(http, thread_id, {**ROOT_PUMP, "namespaces": [[], list(
            next(e for e in events if e["params"]["namespace"])["params"]["namespace"])]},
            headers)
        replayed = list(await again.until(_terminal(1)))
    finally:
        for sse in (pump, root_only, again):
            if sse is not None:
                await sse.close()
    assert [(e["event_id"], e["seq"], e["method"], e["params"]["namespace"],
             e["params"]["data"]) for e in replayed] == \
        [(e["event_id"], e["seq"], e["method"], e["params"]["namespace"], e["params"]["data"])
         for e in events]
    inner = [e for e in events if e["params"]["namespace"]]
    spaces = {tuple(e["params"]["namespace"]) for e in inner}
    assert len(spaces) == 1
    (space,) = spaces
    assert len(space) == 1 and space[0].startswith("research:")
    assert all(not e["params"]["namespace"] for e in shallow)  # depth 0: the root only
    assert _ids([e for e in events if not e["params"]["namespace"]]) == _ids(shallow)

    methods = _methods(inner)
    assert methods[0] == "lifecycle:started" and methods[-1] == "lifecycle:completed"
    assert {e["params"]["data"]["graph_name"] for e in inner if e["method"] == "lifecycle"} \
        == {"research"}
    values = [(space[0].split(":")[0], [(m["type"], m["content"])
                                        for m in e["params"]["data"]["messages"]])
              for e in inner if e["method"] == "values"]
    assert values == await _plain_subgraph_values("research_desk", {
        "messages": [("human", "dig")]})
    tokens = [e for e in inner if e["method"] == "messages"]
    assert {e["params"]["node"] for e in tokens} == {"draft"}
    assert "".join(e["params"]["data"]["delta"]["text"] for e in tokens
                   if e["params"]["data"]["event"] == "content-block-delta") == RESEARCH_NOTE
    assert len(tokens) > 6  # token by token
    # the namespace closes when the parent's step with it ends, before the parent goes on
    # (its "sign" node's state) and before the root's own ending
    order = [(tuple(e["params"]["namespace"]), _methods([e])[0]) for e in events]
    closed = order.index((space, "lifecycle:completed"))
    root_values = [i for i, (ns, m) in enumerate(order) if not ns and m == "values"]
    assert root_values[0] < order.index((space, "lifecycle:started"))
    assert closed < root_values[-1] < order.index(((), "lifecycle:completed"))
    final = [e for e in events if e["method"] == "values" and not e["params"]["namespace"]][-1]
    assert [(m["type"], m["content"]) for m in final["params"]["data"]["messages"]] == [
        ("human", "dig"), ("ai", RESEARCH_NOTE), ("ai", "signed")]
    assert _methods(events).count("lifecycle:started") == 1


async def test_an_interrupt_inside_a_subgraph_is_asked_at_the_root_and_its_namespace_closes(
        stack: Stack, http: httpx.AsyncClient):
    """``nested_review`` asks inside its compiled ``editor_desk`` subgraph: the pause closes
    the subgraph's namespace before it asks (at the root, where ``input.respond`` answers),
    and the resumed run opens and closes it again around the subgraph's remaining work."""
    thread_id = str(uuid.uuid4())
    owner, reviewer = _key(stack, "submitter"), _key(stack, "reviewer")
    assert (await _command(http, thread_id, _start(thread_id, 1, "nested_review",
                                                   {"topic": "launch"}), owner)).json()["type"] \
        == "success"
    pump = Sse(http, thread_id, {"channels": ["lifecycle", "input", "values"]}, owner)
    try:
        first = list(await pump.until(_terminal(1)))
        spaces = {tuple(e["params"]["namespace"]) for e in first if e["params"]["namespace"]}
        assert len(spaces) == 1 and next(iter(spaces))[0].startswith("editor_desk:")
        (space,) = spaces
        assert [(m, tuple(e["params"]["namespace"])) for m, e in zip(_methods(first), first,
                                                                     strict=True)
                if m.startswith(("lifecycle", "input"))] == [
            ("lifecycle:running", ()), ("lifecycle:started", space),
            ("lifecycle:completed", space), ("input.requested", ()),
            ("lifecycle:interrupted", ())]
        inner = [e["params"]["data"] for e in first
                 if e["method"] == "values" and e["params"]["namespace"]]
        assert inner and all("__interrupt__" not in v for v in inner)
        assert inner[0]["draft"] == "post about launch"
        asked = [e for e in first if e["method"] == "input.requested"][0]["params"]["data"]
        assert asked["payload"] == {"question": "publish?", "draft": "post about launch"}

        respond = {"id": 2, "method": "input.respond", "params": {
            "namespace": [], "interrupt_id": asked["interrupt_id"],
            "response": {"publish": True, "note": "nested"}}}
        assert (await _command(http, thread_id, respond, reviewer)).json()["type"] == "success"
        resumed = (await pump.until(_terminal(2)))[len(first):]
        lifecycle = [(m, tuple(e["params"]["namespace"])) for m, e in zip(
            _methods(resumed), resumed, strict=True) if m.startswith("lifecycle")]
        assert lifecycle == [("lifecycle:running", ()), ("lifecycle:started", space),
                             ("lifecycle:completed", space), ("lifecycle:completed", ())]
        final = [e for e in resumed if e["method"] == "values"
                 and not e["params"]["namespace"]][-1]["params"]["data"]
        assert final["published"] is True and final["reviewer_note"] == "nested"
    finally:
        await pump.close()


async def test_an_interrupt_is_asked_then_answered_by_input_respond(
        stack: Stack, http: httpx.AsyncClient):
    thread_id = str(uuid.uuid4())
    owner, reviewer = _key(stack, "submitter"), _key(stack, "reviewer")
    started = (await _command(http, thread_id, _start(thread_id, 1, "publish_review",
                                                      {"topic": "launch"}), owner)).json()
    assert started["type"] == "success"
    pump = Sse(http, thread_id, ROOT_PUMP, owner)
    try:
        events = list(await pump.until(_terminal(1)))
        assert _methods(events)[0] == "lifecycle:running"
        assert _methods(events)[-2:] == ["input.requested", "lifecycle:interrupted"]
        asked = events[-2]["params"]["data"]
        assert asked["payload"] == {"question": "publish?", "draft": "post about launch"}
        assert events[-2]["params"]["namespace"] == []
        state = (await http.get(f"/threads/{thread_id}/state", headers=owner)).json()
        assert [i["id"] for t in state["tasks"] for i in t["interrupts"]] == \
            [asked["interrupt_id"]]

        respond = {"id": 3, "method": "input.respond", "params": {
            "namespace": [], "interrupt_id": asked["interrupt_id"],
            "response": {"publish": True, "note": "ship it"}}}
        refused = (await _command(http, thread_id, respond, owner)).json()
        assert refused["type"] == "error" and refused["error"] == "permission_denied"
        answered = (await _command(http, thread_id, respond, reviewer)).json()
        assert answered["type"] == "success" and answered["id"] == 3
        assert answered["result"] == {}
        assert answered["meta"]["applied_through_seq"] >= events[-1]["seq"]

        both = await pump.until(_terminal(2))  # the same connection, still open
        resumed = both[len(events):]
        assert _methods(resumed)[0] == "lifecycle:running"
        assert _methods(resumed)[-1] == "lifecycle:completed"
        assert resumed[0]["seq"] > events[-1]["seq"]
        final = [e for e in resumed if e["method"] == "values"][-1]["params"]["data"]
        assert final["published"] is True and final["reviewer_note"] == "ship it"

        retried = (await _command(http, thread_id, respond, reviewer)).json()
        assert retried["type"] == "success"  # the same answer again: a retry, nothing resumed
        other = {**respond, "params": {**respond["params"], "response": {"publish": False}}}
        late = (await _command(http, thread_id, other, reviewer)).json()
        assert late["type"] == "error" and late["error"] == "no_such_interrupt"
        assert asked["interrupt_id"] in late["message"]
        runs = (await http.get(f"/threads/{thread_id}/runs", headers=owner)).json()
        assert len(runs) == 2

        # a reload replays the current run: the resumed one
        again = Sse(http, thread_id, WATCHER, owner)
        try:
            replayed = await again.until(_terminal(1))
            assert _ids(replayed) == _ids([e for e in resumed if e["method"] == "lifecycle"])
        finally:
            await again.close()
    finally:
        await pump.close()


async def test_run_start_on_a_paused_thread_resumes_it_with_the_whole_input(
        stack: Stack, http: httpx.AsyncClient):
    thread_id = str(uuid.uuid4())
    headers = _key(stack, "admin")
    await _command(http, thread_id, _start(thread_id, 1, "publish_review", {"topic": "x"}),
                   headers)
    pump = Sse(http, thread_id, WATCHER, headers)
    try:
        await pump.until(_terminal(1))
        command = _start(thread_id, 2, "publish_review", {"publish": False, "note": "later"})
        first = (await _command(http, thread_id, command, headers)).json()
        assert first["type"] == "success"
        assert (await _command(http, thread_id, command, headers)).json() == first  # a retry
        events = await pump.until(_terminal(2))
        assert _methods(events)[-2:] == ["lifecycle:running", "lifecycle:completed"]
    finally:
        await pump.close()
    values = (await http.get(f"/threads/{thread_id}/state", headers=headers)).json()["values"]
    assert values["published"] is False and values["reviewer_note"] == "later"
    runs = (await http.get(f"/threads/{thread_id}/runs", headers=headers)).json()
    assert [r["run_id"] for r in runs][0] == first["result"]["run_id"] and len(runs) == 2


async def test_responses_answer_several_interrupts_in_one_run(stack: Stack,
                                                              http: httpx.AsyncClient):
    thread_id = str(uuid.uuid4())
    headers = _key(stack, "admin")
    await _command(http, thread_id, _start(thread_id, 1, "parallel_approvals",
                                           {"topic": "x y"}), headers)
    pump = Sse(http, thread_id, {"channels": ["lifecycle", "input", "values"]}, headers)
    try:
        events = list(await pump.until(_terminal(1)))
        asked = {e["params"]["data"]["payload"]["item"]: e["params"]["data"]["interrupt_id"]
                 for e in events if e["method"] == "input.requested"}
        assert set(asked) == {"x", "y"}
        answer = (await _command(http, thread_id, {"id": 2, "method": "input.respond", "params": {
            "responses": [
                {"interrupt_id": asked["x"], "response": {"decision": "ok"}, "namespace": []},
                {"interrupt_id": asked["y"], "response": {"decision": "no", "note": "why"},
                 "namespace": []}]}}, headers)).json()
        assert answer["type"] == "success"
        both = await pump.until(_terminal(2))
        assert _methods(both[len(events):])[-1] == "lifecycle:completed"
        final = [e for e in both if e["method"] == "values"][-1]["params"]["data"]
        assert final["summary"] == "x=ok:,y=no:why"
    finally:
        await pump.close()


async def test_tasks_checkpoints_and_tools_channels_follow_a_tool_that_interrupts(
        stack: Stack, http: httpx.AsyncClient):
    """A prebuilt agent whose tool asks a human: LangGraph's task, checkpoint and tool-call
    events on their channels, as plain LangGraph streams them for the same graph."""
    thread_id = str(uuid.uuid4())
    owner, reviewer = _key(stack, "submitter"), _key(stack, "reviewer")
    ask = {"messages": [{"type": "human", "content": "refund order 7", "id": str(uuid.uuid4())}]}
    assert (await _command(http, thread_id, _start(thread_id, 1, "refund_agent", ask),
                           owner)).json()["type"] == "success"
    pump = Sse(http, thread_id, {"channels": ["lifecycle", "input", "tasks", "checkpoints",
                                              "tools"]}, owner)
    try:
        first = list(await pump.until(_terminal(1)))
        tools = [e["params"]["data"] for e in first if e["method"] == "tools"]
        assert [(t["event"], t["tool_name"]) for t in tools] == [("tool-started", "refund")]
        assert tools[0]["input"] == {"order": 7, "amount": 40}  # the scripted model's call
        tasks = [e for e in first if e["method"] == "tasks"]
        assert [e["params"]["node"] for e in tasks if "input" in e["params"]["data"]] == \
            ["agent", "tools"]
        assert all(e["params"]["node"] == e["params"]["data"]["name"] for e in tasks)
        marks = [e["params"]["data"] for e in first if e["method"] == "checkpoints"]
        assert marks[0]["source"] == "input" and marks[0]["step"] == -1
        assert [m["step"] for m in marks] == list(range(-1, len(marks) - 1))
        assert all(m["parent_id"] == p["id"] for p, m in zip(marks, marks[1:], strict=False))
        history = (await http.post(f"/threads/{thread_id}/history", json={"limit": 50},
                                   headers=owner)).json()
        assert {m["id"] for m in marks} <= {h["checkpoint"]["checkpoint_id"] for h in history}
        asked = [e for e in first if e["method"] == "input.requested"][0]["params"]["data"]

        respond = {"id": 2, "method": "input.respond", "params": {
            "namespace": [], "interrupt_id": asked["interrupt_id"],
            "response": {"approved": True}}}
        assert (await _command(http, thread_id, respond, reviewer)).json()["type"] == "success"
        resumed = (await pump.until(_terminal(2)))[len(first):]
        tools = [e["params"]["data"] for e in resumed if e["method"] == "tools"]
        assert [t["event"] for t in tools] == ["tool-started", "tool-finished"]
        assert tools[0]["tool_call_id"] == tools[1]["tool_call_id"]
        assert "refund of 40 for order 7 approved" in str(tools[1]["output"])
        later = [e["params"]["data"] for e in resumed if e["method"] == "checkpoints"]
        # as LangGraph streams a resume: the checkpoint it goes on from, then new ones
        assert later[0] == marks[-1]
        assert [m["step"] for m in later] == list(range(marks[-1]["step"], marks[-1]["step"]
                                                        + len(later)))
        assert all(m["parent_id"] == p["id"] for p, m in zip(later, later[1:], strict=False))
    finally:
        await pump.close()


async def test_a_failed_run_and_a_cancelled_one_end_as_failed_and_interrupted(
        stack: Stack, http: httpx.AsyncClient):
    headers = _key(stack, "admin")
    failing = str(uuid.uuid4())
    await _command(http, failing, _start(failing, 1, "poison", {"topic": "x"}), headers)
    slow = str(uuid.uuid4())
    started = (await _command(http, slow, _start(slow, 1, "slow_plain", {"topic": "3"}),
                              headers)).json()
    failed, cancelled = Sse(http, failing, WATCHER, headers), Sse(http, slow, WATCHER, headers)
    try:
        ending = (await failed.until(_terminal(1)))[-1]["params"]["data"]
        assert ending["event"] == "failed" and "KeyError" in ending["error"]
        await cancelled.until(lambda events: len(events) >= 1)  # running
        cancel = await http.post(f"/threads/{slow}/runs/{started['result']['run_id']}/cancel",
                                 params={"wait": 0, "action": "interrupt"}, headers=headers)
        assert cancel.status_code == 202
        assert _methods(await cancelled.until(_terminal(1))) == [
            "lifecycle:running", "lifecycle:interrupted"]
    finally:
        await failed.close()
        await cancelled.close()


async def test_another_submitters_thread_is_404_and_bad_commands_get_an_error_envelope(
        stack: Stack, http: httpx.AsyncClient):
    owner, other = _key(stack, "submitter"), _key(stack, "other")
    thread_id = (await http.post("/threads", json={}, headers=owner)).json()["thread_id"]
    for headers in (other, {}):
        status = 404 if headers else 401
        refused = await _command(http, thread_id, _start(thread_id, 1, "chatty", None), headers)
        assert refused.status_code == status
        assert refused.json()["code"] == ("not_found" if headers else "unauthenticated")
        stream = await http.post(f"/threads/{thread_id}/stream/events", json=WATCHER,
                                 headers=headers)
        assert stream.status_code == status and stream.json()["code"]
    missing = str(uuid.uuid4())
    nobody = await _command(http, missing, {"id": 1, "method": "input.respond", "params": {
        "interrupt_id": "0" * 32, "response": 1}}, owner)
    assert nobody.status_code == 404 and nobody.json()["code"] == "not_found"

    for body in ([], {"id": "1", "method": "run.start"}, {"id": 1}):
        bad = await _command(http, thread_id, body, owner)
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_command"

    async def envelope(body: dict[str, Any], headers: dict[str, str] = owner) -> str:
        answer = await _command(http, thread_id, body, headers)
        assert answer.status_code == 200
        refusal = answer.json()
        assert set(refusal) == {"type", "id", "error", "message"}
        assert refusal["type"] == "error" and refusal["id"] == body["id"]
        assert isinstance(refusal["message"], str) and refusal["message"]
        return str(refusal["error"])

    assert await envelope({"id": 7, "method": "state.get", "params": {}}) == "unknown_command"
    assert await envelope({"id": 8, "method": "run.start", "params": []}) == "invalid_argument"
    assert await envelope({"id": 9, "method": "run.start", "params": {"input": {}}}) == \
        "invalid_argument"
    assert await envelope(_start(thread_id, 10, "no_such_graph", {})) == "invalid_argument"
    assert await envelope(_start(thread_id, 11, "publish_review", "not an object")) == \
        "invalid_argument"
    assert await envelope(_start(thread_id, 12, "chatty", {}), _key(stack, "reviewer")) == \
        "permission_denied"  # a reviewer reads the thread but starts no run on it
    assert await envelope({"id": 13, "method": "input.respond", "params": {
        "interrupt_id": "0" * 32, "response": 1}}) == "no_such_interrupt"
    assert await envelope({"id": 14, "method": "input.respond", "params": {
        "interrupt_id": "0" * 32, "response": 1, "goto": "x"}}) == "not_supported"
    assert await envelope({"id": 15, "method": "input.respond", "params": {}}) == \
        "invalid_argument"
    assert (await http.get(f"/threads/{thread_id}/runs", headers=owner)).json() == []

    for selector in ({}, {"channels": []}, {"channels": ["nope"]},
                     {"channels": ["values"], "depth": -1}):
        bad = await http.post(f"/threads/{thread_id}/stream/events", json=selector,
                              headers=owner)
        assert bad.status_code == 422 and bad.json()["code"] == "invalid_request"
    websocket = await http.get(f"/threads/{thread_id}/stream/events", headers=owner)
    assert websocket.status_code == 405 and websocket.json()["code"] == "method_not_allowed"


def test_a_streamed_tool_call_becomes_block_deltas_then_a_tool_call():
    """No stack: none of the test graphs' fake models streams tool calls (the hook assembles
    these events: ``block-delta`` with the whole chunk so far, which SDK 1.11 understands)."""
    from services.api.routes.agent_protocol_events import SEQ_STRIDE, RunTranslator

    run_id = str(uuid.uuid4())
    translator = RunTranslator({"run_id": run_id, "graph_id": "agent"}, 3)
    meta = {"langgraph_node": "agent"}
    chunks = [
        {"type": "AIMessageChunk", "id": "m1", "content": "Let me look.", "tool_call_chunks": [
            {"name": "search", "args": '{"q": ', "id": "call_1", "index": 0}]},
        {"type": "AIMessageChunk", "id": "m1", "content": "", "tool_call_chunks": [
            {"name": None, "args": '"tea"}', "id": None, "index": 0}],
         "usage_metadata": {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8}},
    ]
    events = translator.feed(None, "metadata", {"run_id": run_id})
    for n, chunk in enumerate(chunks):
        events += translator.feed(f"1.t{n + 1}", "messages", [chunk, meta])
    events += translator.feed("1.0", "values", {"messages": []})  # the step closes the message
    events += translator.ended("2.0")
    data = [e["params"]["data"] for e in events]
    assert [d.get("event", e["method"]) for d, e in zip(data, events, strict=True)] == [
        "running", "message-start", "content-block-start", "content-block-delta",
        "content-block-start", "content-block-delta", "content-block-delta",
        "content-block-finish", "content-block-finish", "message-finish", "values", "completed"]
    assert data[5]["delta"] == {"type": "block-delta", "fields": {
        "type": "tool_call_chunk", "id": "call_1", "name": "search", "args": '{"q": ', "index": 0}}
    assert data[6]["delta"]["fields"]["args"] == '{"q": "tea"}'
    assert data[8] == {"event": "content-block-finish", "index": 1, "content": {
        "type": "tool_call", "id": "call_1", "name": "search", "args": {"q": "tea"}}}
    assert data[9] == {"event": "message-finish", "usage": {
        "input_tokens": 3, "output_tokens": 5, "total_tokens": 8}}
    assert [e["seq"] for e in events] == [3 * SEQ_STRIDE + n for n in range(1, 13)]
    assert len({e["event_id"] for e in events}) == 12
    assert all(e["event_id"].startswith(f"{run_id}:") for e in events)


def test_namespaces_open_close_in_order_and_leave_the_roots_open_message_alone():
    """No stack: a fan-out of one subgraph node (two namespaces), a subgraph inside one of
    them, a root node's message still streaming meanwhile, and a run that ends with a
    namespace left open (what LangGraph streams for ``Send`` to a subgraph node)."""
    from services.api.routes.agent_protocol_events import RunTranslator

    t = RunTranslator({"run_id": str(uuid.uuid4()), "graph_id": "g"}, 1)
    a, b = "fan:1", "fan:2"
    token = [{"type": "AIMessageChunk", "id": "m", "content": "hi"}, {"langgraph_node": "chat"}]
    steps = [("metadata", {}), ("messages", token), (f"values|{a}", {"n": 1}),
             (f"values|{b}", {"n": 2}), (f"values|{a}|deep:9", 7),
             (f"updates|{a}", {"deep": {"n": 3}}), ("updates", {"fan": {"n": 1}}),
             (f"values|{b}", {"n": 4, "__interrupt__": [{"id": "x"}]})]
    events = [e for n, (name, data) in enumerate(steps) for e in t.feed(f"1.{n}", name, data)]
    events += t.ended("end")
    shown = [(e["method"], e["params"]["data"].get("event") if isinstance(
        e["params"]["data"], dict) else e["params"]["data"], tuple(e["params"]["namespace"]))
        for e in events]
    assert shown == [
        ("lifecycle", "running", ()),
        ("messages", "message-start", ()), ("messages", "content-block-start", ()),
        ("messages", "content-block-delta", ()),
        ("lifecycle", "started", (a,)), ("values", None, (a,)),
        ("lifecycle", "started", (b,)), ("values", None, (b,)),
        ("lifecycle", "started", (a, "deep:9")), ("values", 7, (a, "deep:9")),
        ("updates", None, (a,)), ("lifecycle", "completed", (a, "deep:9")),
        # the root's step ended: the root's message ends, then the oldest "fan" closes
        ("messages", "content-block-finish", ()), ("messages", "message-finish", ()),
        ("updates", None, ()), ("lifecycle", "completed", (a,)),
        ("values", None, (b,)),
        ("lifecycle", "completed", (b,)), ("lifecycle", "completed", ())]
    assert events[-3]["params"]["data"] == {"n": 4}  # interrupts are asked at the root
    assert {e["params"]["data"]["graph_name"] for e in events
            if e["method"] == "lifecycle" and e["params"]["namespace"]} == {"fan", "deep"}


async def test_state_reports_a_non_empty_next_while_a_run_is_in_progress(
        stack: Stack, http: httpx.AsyncClient):
    """A page reloaded mid-run must see the run going on (useStream reconnects only then)."""
    thread_id = str(uuid.uuid4())
    headers = _key(stack, "admin")
    await _command(http, thread_id, _start(thread_id, 1, "slow_plain", {"topic": "3"}), headers)
    for _ in range(100):
        if (await http.get(f"/threads/{thread_id}", headers=headers)).json()["status"] == "busy":
            break
        await asyncio.sleep(0.1)
    state = (await http.get(f"/threads/{thread_id}/state", headers=headers)).json()
    assert state["next"] != []  # ["__start__"] until the run's first checkpoint
    for _ in range(100):  # then that checkpoint, while slow_step's 3 s go on
        state = (await http.get(f"/threads/{thread_id}/state", headers=headers)).json()
        if state["checkpoint"]["checkpoint_id"]:
            break
        await asyncio.sleep(0.05)
    assert state["next"] != [] and state["checkpoint"]["checkpoint_id"]
    for _ in range(200):  # and once the run has ended, nothing is next
        if (await http.get(f"/threads/{thread_id}", headers=headers)).json()["status"] == "idle":
            break
        await asyncio.sleep(0.1)
    done = (await http.get(f"/threads/{thread_id}/state", headers=headers)).json()
    assert done["next"] == [] and done["values"]


def run_hook(stack: Stack) -> dict[str, Any]:
    """Run ``js/protocol.mjs`` (the real ``useStream``) against the stack; what it printed."""
    return run_script(stack, "protocol.mjs", ("@langchain/react", "react", "react-test-renderer"),
                      timeout=180)


def test_the_real_usestream_hook_streams_tokens_and_answers_an_interrupt(stack: Stack):
    seen = run_hook(stack)
    errors = {k: v["error"] for k, v in seen.items() if v.get("error")}
    assert not errors, errors

    chat = seen["chat"]
    partials = chat["partials"]
    assert len(partials) > 5  # the reply grew on screen token by token
    assert all(CHATTY_REPLY.startswith(p) for p in partials)
    assert all(len(a) < len(b) for a, b in zip(partials, partials[1:], strict=False))
    assert partials[-1] == CHATTY_REPLY
    assert chat["whole_reply_before_values"]  # from the tokens, before the run's state came
    assert [(m["type"], m["text"]) for m in chat["final"]] == [
        ("human", "hi"), ("ai", CHATTY_REPLY), ("ai", "signed")]
    assert chat["final"][1]["id"].startswith("lc_run--")
    assert chat["loading_after"] is False

    review = seen["interrupt"]
    assert review["interrupt"]["value"] == {"question": "publish?",
                                            "draft": "post about durable agents"}
    assert len(review["interrupt"]["id"]) == 32
    assert review["values"]["published"] is True
    assert review["values"]["reviewer_note"] == "ship it"
    assert review["interrupt_after"] is None and review["loading_after"] is False

    view = seen["subgraph_view"]  # the hook's subgraph discovery and a scoped useMessages
    assert [(g["node"], g["status"], len(g["namespace"])) for g in view["entries"]] == [
        ("research", "complete", 1)]
    assert view["entries"][0]["namespace"][0].startswith("research:")
    assert {g: [(m["type"], m["text"]) for m in card] for g, card in view["cards"].items()} \
        == {view["entries"][0]["id"]: [("human", "dig"), ("ai", RESEARCH_NOTE)]}
    assert [(m["type"], m["text"]) for m in view["messages"]] == [
        ("human", "dig"), ("ai", RESEARCH_NOTE), ("ai", "signed")]
    assert view["loading_after"] is False

    # a deep agent's subagent (its task tool runs a graph): the hook's subagents and its card
    deep = seen["subagent_view"]
    assert [(a["name"], a["task"], a["status"]) for a in deep["entries"]] == [
        ("researcher", SUBAGENT_TASK, "complete")]
    (agent,) = deep["entries"]
    assert agent["id"] == "call-task-1" and agent["namespace"][0].startswith("tools:")
    assert {a: [(m["type"], m["text"]) for m in card] for a, card in deep["cards"].items()} \
        == {agent["id"]: [("human", SUBAGENT_TASK), ("ai", SUBAGENT_NOTE)]}
    assert [(m["type"], m["text"]) for m in deep["messages"]] == [
        ("human", "go"), ("ai", ""), ("tool", SUBAGENT_NOTE), ("ai", f"Summary: {SUBAGENT_NOTE}")]
    assert deep["loading_after"] is False
