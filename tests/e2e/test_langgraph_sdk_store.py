"""The store through the official client, on LangGraph's own Postgres store (issue 26, item 4).

With only the URL and the key changed, ``client.store.*`` puts, reads, searches (filters,
pages, semantic ``query`` on the offline embeddings) and deletes items, and lists
namespaces, as the Agent Server answers; a graph's nodes get the same store as LangGraph's
``BaseStore`` in its segment, so what a run remembers the API reads.
A submitter's items live under its own namespace; reviewers read all, admins do all.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(180)


def sdk(stack: Stack, role: str = "submitter") -> Any:
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


async def test_items_put_read_search_and_delete_as_on_the_agent_server(stack: Stack):
    store = sdk(stack).store
    base = ["alice", f"t{uuid.uuid4().hex[:8]}"]  # alice's own, apart from other tests' items
    ns, old = [*base, "prefs"], [*base, "prefs", "old"]
    await store.put_item(ns, "theme", {"mode": "dark", "size": 3})
    await store.put_item(ns, "lang", {"mode": "fr", "size": 5})
    await store.put_item(old, "theme", {"mode": "light", "size": 1})

    item = await store.get_item(ns, "theme")
    assert item["namespace"] == ns and item["key"] == "theme"
    assert item["value"] == {"mode": "dark", "size": 3}
    assert item["created_at"] and item["updated_at"]
    assert await store.get_item(ns, "missing") is None

    await store.put_item(ns, "theme", {"mode": "dim", "size": 3})  # replaced
    assert (await store.get_item(ns, "theme"))["value"]["mode"] == "dim"

    found = (await store.search_items(ns, limit=10))["items"]
    assert {(*i["namespace"], i["key"]) for i in found} == {
        (*ns, "theme"), (*ns, "lang"), (*old, "theme")}
    matched = (await store.search_items(base, filter={"mode": "fr"}))["items"]
    assert [i["key"] for i in matched] == ["lang"]
    bigger = (await store.search_items(base, filter={"size": {"$gt": 2}}))["items"]
    assert sorted(i["key"] for i in bigger) == ["lang", "theme"]
    first = (await store.search_items(ns, limit=2, offset=0))["items"]
    rest = (await store.search_items(ns, limit=2, offset=2))["items"]
    assert len(first) == 2 and len(rest) == 1
    assert {i["key"] for i in first + rest} == {"theme", "lang"} and len(first + rest) == 3

    spaces = (await store.list_namespaces(prefix=base))["namespaces"]
    assert sorted(spaces) == [ns, old]
    assert (await store.list_namespaces(prefix=base, max_depth=3))["namespaces"] == [ns]
    assert (await store.list_namespaces(prefix=base, suffix=["old"]))["namespaces"] == [old]

    await store.delete_item(ns, "lang")
    assert await store.get_item(ns, "lang") is None


async def test_semantic_search_ranks_by_meaning_on_the_offline_embeddings(stack: Stack):
    store = sdk(stack).store
    ns = ["alice", "notes"]
    texts = {"fruit": "She buys apples, pears and ripe bananas at the market.",
             "tax": "The quarterly tax return is due to the revenue office in April.",
             "dog": "Walk the puppy in the park twice a day."}
    for key, text in texts.items():
        await store.put_item(ns, key, {"text": text})
    await store.put_item(ns, "unindexed", {"text": "apples and pears"}, index=False)
    ranked = (await store.search_items(ns, query="income taxes owed to the government"))["items"]
    assert ranked[0]["key"] == "tax"
    assert all(isinstance(i["score"], float) for i in ranked if i["key"] in texts)
    scores = [i["score"] for i in ranked if i["score"] is not None]
    assert scores == sorted(scores, reverse=True)
    fruit = (await store.search_items(ns, query="fruit from the grocer"))["items"]
    assert fruit[0]["key"] == "fruit"


async def test_a_graph_remembers_in_the_same_store_the_api_reads(stack: Stack):
    client = sdk(stack)
    first = await client.runs.wait(None, "memory", input={"note": "likes green tea"})
    second = await client.runs.wait(None, "memory", input={"note": "allergic to nuts"})
    assert first["recalled"] == ["likes green tea"]  # the run's own user: alice
    assert second["recalled"] == ["allergic to nuts", "likes green tea"]
    items = (await client.store.search_items(["alice", "memories"]))["items"]
    assert sorted(i["value"]["text"] for i in items) == second["recalled"]


async def test_a_submitter_reaches_only_its_own_namespace(stack: Stack):
    alice, bob = sdk(stack).store, sdk(stack, "other").store
    reviewer, admin = sdk(stack, "reviewer").store, sdk(stack, "admin").store
    await alice.put_item(["alice", "secrets"], "pin", {"pin": "1234"})

    with pytest.raises(APIStatusError) as refused:
        await bob.put_item(["alice", "secrets"], "pin", {"pin": "0000"})
    assert refused.value.response.status_code == 403
    with pytest.raises(APIStatusError) as refused:
        await bob.delete_item(["alice", "secrets"], "pin")
    assert refused.value.response.status_code == 403
    assert await bob.get_item(["alice", "secrets"], "pin") is None  # as if there were none
    assert (await bob.search_items(["alice"]))["items"] == []
    assert (await bob.list_namespaces(prefix=["alice"]))["namespaces"] == []
    assert all(ns[0] == "bob" for ns in (await bob.list_namespaces())["namespaces"])
    assert (await alice.get_item(["alice", "secrets"], "pin"))["value"] == {"pin": "1234"}

    assert (await reviewer.get_item(["alice", "secrets"], "pin"))["value"] == {"pin": "1234"}
    with pytest.raises(APIStatusError) as refused:
        await reviewer.put_item(["alice", "secrets"], "pin", {"pin": "9"})
    assert refused.value.response.status_code == 403
    await admin.put_item(["alice", "secrets"], "pin", {"pin": "4321"})
    assert (await alice.get_item(["alice", "secrets"], "pin"))["value"] == {"pin": "4321"}


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("PUT", "/store/items", {"namespace": ["alice"], "key": "k", "value": [1]}, "value"),
    ("PUT", "/store/items", {"namespace": ["al.ice"], "key": "k", "value": {}}, "namespace"),
    ("PUT", "/store/items", {"namespace": ["alice"], "key": "", "value": {}}, "key"),
    ("PUT", "/store/items", {"namespace": ["alice"], "key": "k", "value": {}, "ttl": -1}, "ttl"),
    ("POST", "/store/items/search", {"namespace_prefix": ["alice"], "limit": 0}, "limit"),
    ("POST", "/store/namespaces", {"max_depth": "two"}, "max_depth"),
])
def test_malformed_requests_get_a_clear_422(stack: Stack, method: str, path: str,
                                            body: dict[str, Any], field: str):
    with stack.client("submitter") as client:
        answer = client.request(method, path, json=body)
    assert answer.status_code == 422
    assert answer.json()["details"]["field"] == field
