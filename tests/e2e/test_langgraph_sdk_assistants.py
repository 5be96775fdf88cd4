"""Assistants made through the official client: a graph with its own config, context, versions (issue 26).

``greeter`` reads its ``configurable`` language, its tags and its context's name, so what
a run of an assistant gets is visible in its result: the assistant's config and context
under the run's own, the version ``update`` made or ``set_latest`` picked.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(180)


def sdk(stack: Stack, role: str = "submitter") -> Any:
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


async def greeting(client: Any, assistant_id: str, **run: Any) -> str:
    values = await client.runs.wait(None, assistant_id, input={}, **run)
    return str(values["lines"][0])


async def test_an_assistant_runs_its_graph_with_its_config_and_context(stack: Stack):
    client = sdk(stack)
    made = await client.assistants.create(
        "greeter", config={"configurable": {"language": "de"}, "tags": ["user:bot"]},
        context={"name": "Otto"}, name="German greeter", metadata={"team": "a"})
    aid = made["assistant_id"]
    assert (made["graph_id"], made["version"], made["name"]) == ("greeter", 1, "German greeter")
    assert made["context"] == {"name": "Otto"} and made["metadata"] == {"team": "a"}
    assert await greeting(client, aid) == "hello Otto in de [user:bot]"
    assert await greeting(client, aid, context={"name": "Pia"},  # the run's own keys win
                          config={"configurable": {"language": "fr"}, "tags": ["user:web"]}
                          ) == "hello Pia in fr [user:bot,user:web]"

    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, aid, input={})
    assert (await client.runs.list(tid))[0]["assistant_id"] == aid

    second = await client.assistants.update(aid, config={"configurable": {"language": "it"}})
    assert second["version"] == 2 and second["context"] == {"name": "Otto"}
    assert await greeting(client, aid) == "hello Otto in it []"
    assert [v["version"] for v in await client.assistants.get_versions(aid)] == [2, 1]
    back = await client.assistants.set_latest(aid, 1)
    assert back["version"] == 1 and back["config"]["configurable"] == {"language": "de"}
    assert await greeting(client, aid) == "hello Otto in de [user:bot]"

    assert (await client.assistants.get(aid))["name"] == "German greeter"
    graphs = {a["assistant_id"] for a in await client.assistants.search(graph_id="greeter")}
    assert aid in graphs and len(graphs) == 2  # the graph's own and this one
    assert [a["assistant_id"] for a in
            await client.assistants.search(metadata={"team": "a"})] == [aid]
    assert await client.assistants.count(metadata={"team": "a"}) == 1
    by_name = await client.assistants.search(graph_id="greeter", sort_by="name", sort_order="asc",
                                             select=["name", "version"])
    assert by_name == [{"name": "German greeter", "version": 1}, {"name": "greeter", "version": 1}]
    newest = await client.assistants.search(graph_id="greeter", sort_by="created_at")
    assert newest[0]["assistant_id"] == aid  # made now; the graph's own dates from 2026-01-01
    for bad in ({"sort_by": "size"}, {"sort_order": "up"}, {"select": ["secrets"]}):
        with pytest.raises(APIStatusError) as refused:
            await client.assistants.search(**bad)
        assert refused.value.response.status_code == 422
    runs = await client.runs.list(tid, select=["run_id", "status"])
    assert runs and all(set(r) == {"run_id", "status"} for r in runs)
    nodes = {n["id"] for n in (await client.assistants.get_graph(aid))["nodes"]}
    assert nodes >= {"hello", "middle", "bye"}
    assert (await client.assistants.get_schemas(aid))["graph_id"] == "greeter"

    await client.assistants.delete(aid)
    with pytest.raises(APIStatusError) as gone:
        await client.assistants.get(aid)
    assert gone.value.response.status_code == 404


async def test_who_may_change_an_assistant(stack: Stack):
    alice, bob, reviewer = sdk(stack), sdk(stack, "other"), sdk(stack, "reviewer")
    aid = (await alice.assistants.create("greeter", context={"name": "Al"}))["assistant_id"]
    for call in (bob.assistants.update(aid, context={"name": "Bob"}),
                 bob.assistants.delete(aid),
                 reviewer.assistants.create("greeter"),
                 alice.assistants.update("greeter", context={"name": "x"})):
        with pytest.raises(APIStatusError) as refused:
            await call
        assert refused.value.response.status_code == 403
    assert (await bob.assistants.get(aid))["context"] == {"name": "Al"}  # everyone reads
    await sdk(stack, "admin").assistants.update(aid, name="renamed by an admin")
    await alice.assistants.delete(aid)


async def test_a_malformed_assistant_is_refused(stack: Stack):
    with stack.client("submitter") as client:
        assert client.post("/assistants", json={"graph_id": "nowhere"}).status_code == 404
        bad = client.post("/assistants", json={"graph_id": "greeter", "config": [1]})
        assert bad.status_code == 422 and bad.json()["details"]["field"] == "config"
        aid = "5b0c8a4e-3f2a-4c1e-9d7b-0a1b2c3d4e5f"
        assert client.post("/assistants", json={"graph_id": "greeter",
                                                 "assistant_id": aid}).status_code == 200
        assert client.post("/assistants", json={"graph_id": "greeter",
                                                 "assistant_id": aid}).status_code == 409
        same = client.post("/assistants", json={"graph_id": "greeter", "assistant_id": aid,
                                                "if_exists": "do_nothing"})
        assert same.status_code == 200 and same.json()["assistant_id"] == aid
        assert client.delete(f"/assistants/{aid}").status_code == 204
