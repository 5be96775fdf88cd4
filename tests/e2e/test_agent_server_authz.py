"""Object-level authorization of the Agent Server API, through the official client (issue 29).

Alice (a submitter) owns a thread paused at an interrupt; Bob (another submitter) tries
every call of the issue's table on it with his own key and gets 404 — or, for search and
count, never sees it — and nothing of Alice's changes. Reviewers read everything and
change only their own (403); admins do everything; ``/v1`` answers the same. A second
deployment runs a LangGraph ``Auth`` written the usual way (``tests/graphs/authed/auth.py``)
unchanged: its identities own threads and its filters scope every read and write.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.errors import APIStatusError

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(240)


def sdk(stack: Stack, role: str) -> Any:
    """The SDK's async client with one of the stack's keys."""
    return get_client(url=stack.base_url, api_key=stack.tokens[role])


async def status(call: Awaitable[Any]) -> int:
    """The HTTP status a client call ends with (200 when it returns)."""
    try:
        await call
    except (APIStatusError, httpx.HTTPStatusError) as err:
        return int(err.response.status_code)
    return 200


async def consume(stream: Any) -> list[Any]:
    """Every part of an SSE stream."""
    return [part async for part in stream]


@pytest.fixture(scope="module")
async def alices_thread(stack: Stack) -> dict[str, Any]:
    """Alice's thread with metadata, paused at the approvals graph's first interrupt."""
    alice = sdk(stack, "submitter")
    thread = await alice.threads.create(metadata={"customer": "acme", "secret": "alice-only"})
    values = await alice.runs.wait(thread["thread_id"], "approvals", input={"topic": "q3 plan"})
    assert "__interrupt__" in values
    runs = await alice.runs.list(thread["thread_id"])
    assert len(runs) == 1
    return {"thread_id": thread["thread_id"], "run_id": runs[0]["run_id"]}


async def test_another_submitter_cannot_reach_a_thread_through_any_call(
        stack: Stack, alices_thread: dict[str, Any]):
    bob = sdk(stack, "other")
    tid, rid = alices_thread["thread_id"], alices_thread["run_id"]
    table = {
        "threads.get": bob.threads.get(tid),
        "threads.get_state": bob.threads.get_state(tid),
        "threads.get_history": bob.threads.get_history(tid),
        "threads.update": bob.threads.update(tid, metadata={"secret": "bob was here"}),
        "threads.update_state": bob.threads.update_state(tid, {"topic": "bob"}),
        "threads.copy": bob.threads.copy(tid),
        "runs.list": bob.runs.list(tid),
        "runs.get": bob.runs.get(tid, rid),
        "runs.join": bob.runs.join(tid, rid),
        "runs.join_stream": consume(bob.runs.join_stream(tid, rid)),
        "runs.create": bob.runs.create(tid, "approvals", input={"topic": "bob's"}),
        "runs.create (if_not_exists)": bob.runs.create(tid, "approvals", input={"topic": "b"},
                                                       if_not_exists="create"),
        "runs.wait (resume)": bob.runs.wait(tid, "approvals",
                                            command={"resume": {"decision": "approve"}}),
        "runs.cancel": bob.runs.cancel(tid, rid),
        "runs.delete": bob.runs.delete(tid, rid),
        "threads.delete": bob.threads.delete(tid),
    }
    answers = {name: await status(call) for name, call in table.items()}
    assert answers == {name: 404 for name in table}, answers

    # nothing of Alice's changed: her metadata, her one run, her paused state
    alice = sdk(stack, "submitter")
    thread = await alice.threads.get(tid)
    assert thread["metadata"]["secret"] == "alice-only"
    assert thread["status"] == "interrupted"
    assert [r["run_id"] for r in await alice.runs.list(tid)] == [rid]

    # search and count never list it, not even asked for by id
    assert tid not in {t["thread_id"] for t in await bob.threads.search(limit=1000)}
    assert await bob.threads.search(ids=[tid]) == []
    assert await bob.threads.search(metadata={"customer": "acme"}) == []
    assert await bob.threads.count(metadata={"customer": "acme"}) == 0
    assert tid in {t["thread_id"] for t in await alice.threads.search(
        metadata={"customer": "acme"})}


async def test_search_pages_over_the_callers_threads_only(stack: Stack):
    """The owner is part of the query, so limit/offset count the caller's threads."""
    alice, bob = sdk(stack, "submitter"), sdk(stack, "other")
    mine = [(await bob.threads.create(metadata={"page": "bob"}))["thread_id"] for _ in range(3)]
    for _ in range(3):
        await alice.threads.create(metadata={"page": "bob"})
    page = await bob.threads.search(metadata={"page": "bob"}, limit=2)
    rest = await bob.threads.search(metadata={"page": "bob"}, limit=2, offset=2)
    assert len(page) == 2 and len(rest) == 1
    assert {t["thread_id"] for t in page + rest} == set(mine)
    assert await bob.threads.count(metadata={"page": "bob"}) == 3


async def test_a_reviewer_reads_all_changes_only_its_own_and_an_admin_does_everything(
        stack: Stack, alices_thread: dict[str, Any]):
    tid, rid = alices_thread["thread_id"], alices_thread["run_id"]
    rita, root = sdk(stack, "reviewer"), sdk(stack, "admin")
    assert (await rita.threads.get(tid))["metadata"]["customer"] == "acme"
    assert (await rita.runs.get(tid, rid))["run_id"] == rid
    assert tid in {t["thread_id"] for t in await rita.threads.search(
        metadata={"customer": "acme"})}
    assert await status(rita.threads.update(tid, metadata={"x": 1})) == 403
    assert await status(rita.threads.delete(tid)) == 403
    assert (await root.threads.get(tid))["thread_id"] == tid
    # a copy keeps its owner, whoever makes it: the admin's copy of Alice's thread is hers
    alice = sdk(stack, "submitter")
    idle = await alice.threads.create(metadata={"copy": "me"})
    await alice.runs.wait(idle["thread_id"], "constructs", input={"topic": "copy me"})
    copied = await root.threads.copy(idle["thread_id"])
    assert (await alice.threads.get(copied["thread_id"]))["metadata"] == {"copy": "me"}
    assert await status(sdk(stack, "other").threads.get(copied["thread_id"])) == 404
    own_copy = await alice.threads.copy(idle["thread_id"])
    assert await status(sdk(stack, "other").threads.get(own_copy["thread_id"])) == 404


def test_v1_gives_the_same_answers(stack: Stack, alices_thread: dict[str, Any]):
    """The Agent Server run is an Overseer run: /v1 hides it from Bob by the same rule."""
    rid = alices_thread["run_id"]
    with stack.client("submitter") as alice, httpx.Client(
            base_url=stack.base_url, timeout=30,
            headers={"Authorization": f"Bearer {stack.tokens['other']}"}) as bob:
        assert alice.get(f"/v1/runs/{rid}").status_code == 200
        assert bob.get(f"/v1/runs/{rid}").status_code == 404
        assert bob.get(f"/v1/runs/{rid}/events").status_code == 404
        assert bob.post(f"/v1/runs/{rid}/retry").status_code == 404
        listed = {r["run_id"] for r in bob.get("/v1/runs", params={"limit": 500}).json()["items"]}
        assert rid not in listed
    with stack.client("reviewer") as rita:
        assert rita.get(f"/v1/runs/{rid}").status_code == 200


# --- a deployment with its own LangGraph Auth ------------------------------------------------


def bearer(stack: Stack, user: str) -> Any:
    """The SDK client as LangGraph's custom-auth tutorial makes it: an Authorization header."""
    return get_client(url=stack.base_url, api_key=None,
                      headers={"Authorization": f"Bearer {stack.tokens[user]}"})


async def test_a_langgraph_auth_handler_runs_unchanged(authed_stack: Stack):
    user1, user2 = bearer(authed_stack, "user1"), bearer(authed_stack, "user2")
    thread = await user1.threads.create(metadata={"topic": "mine"})
    tid = thread["thread_id"]
    assert thread["metadata"] == {"topic": "mine", "owner": "user1"}  # stamped by @auth.on
    values = await user1.runs.wait(tid, "constructs", input={"topic": "one two"})
    assert "ONE" in values["results"]

    # the handler's filter {"owner": identity} scopes every read and write
    answers = {
        "get": await status(user2.threads.get(tid)),
        "get_state": await status(user2.threads.get_state(tid)),
        "update": await status(user2.threads.update(tid, metadata={"owner": "user2"})),
        "runs.list": await status(user2.runs.list(tid)),
        "runs.create": await status(user2.runs.create(tid, "constructs", input={"topic": "x"})),
    }
    assert answers == {k: 404 for k in answers}, answers
    assert tid not in {t["thread_id"] for t in await user2.threads.search(limit=1000)}
    assert await user2.threads.count() == 0
    assert [t["thread_id"] for t in await user1.threads.search(metadata={"topic": "mine"})] == [tid]
    # stateless runs and threads made by runs are stamped too
    await user2.runs.wait(None, "constructs", input={"topic": "stateless"},
                          on_completion="keep")
    assert {t["metadata"].get("owner") for t in await user2.threads.search(limit=100)} == {
        "user2"}

    # the most specific handler wins: deleting takes a permission user2 lacks (403)
    assert await status(user2.threads.delete(tid)) == 403
    assert await status(user1.threads.delete(tid)) == 200
    assert await status(user1.threads.get(tid)) == 404

    # the store by its own handler (namespace[0] is the user): 403 elsewhere
    await user1.store.put_item(["user1", "notes"], "n", {"text": "mine"})
    assert (await user1.store.get_item(["user1", "notes"], "n"))["value"] == {"text": "mine"}
    assert await status(user2.store.get_item(["user1", "notes"], "n")) == 403
    assert await status(user2.store.put_item(["user1", "notes"], "n", {"text": "x"})) == 403
    assert await status(user2.store.search_items(["user1"])) == 403
    assert (await user2.store.search_items(["user2"]))["items"] == []

    # assistants are public by their own handler
    assert {a["graph_id"] for a in await user2.assistants.search(limit=100)} >= {"constructs"}

    # the handler replaced the key lookup: no token, a wrong one, or an Overseer key -> 401
    async with httpx.AsyncClient(base_url=authed_stack.base_url) as raw:
        assert (await raw.post("/threads/search", json={})).status_code == 401
        wrong = await raw.post("/threads/search", json={},
                               headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["code"] == "unauthenticated"
        key = await raw.post("/threads/search", json={},
                             headers={"x-api-key": authed_stack.tokens["overseer-admin"]})
        assert key.status_code == 401
