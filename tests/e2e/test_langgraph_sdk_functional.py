"""A Functional API graph (``@entrypoint`` / ``@task``) through the official client.

``newsletter`` (tests/graphs/user_graph) drafts three lines as parallel ``@task`` calls that
finish out of order, then asks a person with ``interrupt()``. It runs as segments like a
``StateGraph`` does (its own compiled graph given the runtime's checkpointer and store),
and each answer is compared with plain LangGraph running the same entrypoint on an
``InMemorySaver``.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from langgraph_sdk import get_client
from langgraph_sdk.errors import UnprocessableEntityError

from tests.e2e.conftest import USER_GRAPHS, Stack

pytestmark = pytest.mark.timeout(180)


def _reference_of(graph: str) -> Any:
    from overseer.registry import load_langgraph_json

    entry = load_langgraph_json(USER_GRAPHS)[graph].graph
    return entry.copy(update={"checkpointer": InMemorySaver()})


def _reference() -> Any:
    return _reference_of("newsletter")


def _plain(value: Any) -> Any:
    """LangGraph's ``Interrupt`` objects as the API sends them (``{"value", "id"}``)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and hasattr(value, "id"):
        return {"value": _plain(value.value), "id": value.id}
    return value


def _no_ids(update: dict[str, Any]) -> dict[str, Any]:
    return {k: [i["value"] for i in v] if k == "__interrupt__" else v for k, v in update.items()}


async def test_an_entrypoint_pauses_resumes_and_ends_as_plain_langgraph(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    tid = (await client.threads.create())["thread_id"]
    app, ref = _reference(), {"configurable": {"thread_id": "ref"}}

    paused = await client.runs.wait(tid, "newsletter", input={"topic": "q3"})
    want = _plain(await app.ainvoke({"topic": "q3"}, ref))
    assert [i["value"] for i in paused["__interrupt__"]] == \
        [i["value"] for i in want["__interrupt__"]] == \
        [{"question": "send?", "lines": ["q3 #0", "q3 #1", "q3 #2"]}]
    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted"
    state = await client.threads.get_state(tid)
    assert state["next"] == list((await app.aget_state(ref)).next) == ["newsletter"]

    done = await client.runs.wait(tid, "newsletter", command={"resume": "yes"})
    assert done == await app.ainvoke(Command(resume="yes"), ref) == \
        {"lines": ["q3 #0", "q3 #1", "q3 #2"], "sent": True}
    assert (await client.threads.get(tid))["status"] == "idle"
    assert (await client.threads.get_state(tid))["values"] == done
    history = await client.threads.get_history(tid, limit=50)
    assert len(history) == len([s async for s in app.aget_state_history(ref)])
    # each task's result was checkpointed: the resume ran the entrypoint again, not them
    first = (await client.runs.list(tid))[-1]["run_id"]
    with stack.client("admin") as admin:
        events = admin.get(f"/v1/runs/{first}/events").json()["items"]
    ran = sorted(e["data"]["node"] for e in events if e["type"] == "node.completed")
    assert ran == ["draft_line"] * 3 + ["newsletter"], ran


async def test_an_entrypoint_streams_its_tasks_updates_as_plain_langgraph(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    got = [(part.event, part.data) async for part in client.runs.stream(
        None, "newsletter", input={"topic": "news"}, stream_mode="updates")]
    app = _reference()
    want = [("updates", _plain(chunk)) async for chunk in app.astream(
        {"topic": "news"}, {"configurable": {"thread_id": "s"}}, stream_mode="updates")]
    updates = [_no_ids(data) for event, data in got if event == "updates"]
    # the three tasks finish out of order (#2 first), in both; interrupt ids differ by run
    assert updates == [_no_ids(data) for _, data in want]
    assert [next(iter(u)) for u in updates] == ["draft_line"] * 3 + ["__interrupt__"]
    assert updates[0] == {"draft_line": "news #2"}


async def test_an_entrypoint_takes_and_returns_values_that_are_not_objects(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    tid = (await client.threads.create())["thread_id"]
    assert await client.runs.wait(tid, "salutation", input={"name": "Ann"}) == "dear Ann"
    assert (await client.threads.get_state(tid))["values"] == "dear Ann"
    assert await client.runs.wait(None, "salutation", input={}) == "dear reader"
    # any JSON value as its input, as LangGraph's server passes it (a StateGraph's: 422)
    assert await client.runs.wait(None, "salutation", input="Bo") == \
        await _reference_of("salutation").ainvoke("Bo", {"configurable": {"thread_id": "b"}}) \
        == "dear Bo"
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create(None, "greeter", input="Bo")
    assert len(await client.runs.create_batch([{"assistant_id": "salutation", "input": "Cy"}])) == 1
    with pytest.raises(UnprocessableEntityError):
        await client.runs.create_batch([{"assistant_id": "greeter", "input": "Cy"}])


async def test_an_entrypoints_assistant_shows_its_graph_and_schemas(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    assistant = next(a for a in await client.assistants.search(graph_id="newsletter"))
    graph = await client.assistants.get_graph(assistant["assistant_id"])
    assert {n["id"] for n in graph["nodes"]} == {"__start__", "newsletter", "__end__"}
    schemas = await client.assistants.get_schemas(assistant["assistant_id"])
    assert schemas["graph_id"] == "newsletter" and schemas["input_schema"] is not None
    assert schemas["state_schema"] is None  # an entrypoint keeps no state schema
