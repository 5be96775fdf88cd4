"""SDK methods that failed against Overseer, now answered as the Agent Server does (issue 12).

``runs.join_stream`` without ``stream_mode`` (the SDK sends an empty one: the run's own
modes apply), ``threads.get_state(checkpoint=...)`` (``POST .../state/checkpoint``) and
``threads.copy``.
"""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest
from langgraph_sdk import get_client

from tests.e2e.conftest import Stack

pytestmark = pytest.mark.timeout(180)


async def test_join_stream_state_at_a_checkpoint_and_copy(stack: Stack):
    client: Any = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create(metadata={"who": "copy"}))["thread_id"]
    streamed = [p async for p in client.runs.stream(tid, "constructs", input={"topic": "a"},
                                                   stream_mode="updates")]
    run_id = streamed[0].data["run_id"]
    joined = [p async for p in client.runs.join_stream(tid, run_id)]
    assert [p.event for p in joined] == [p.event for p in streamed]  # the run's own modes

    state = await client.threads.get_state(tid)
    checkpoint = state["checkpoint"]
    at = await client.threads.get_state(tid, checkpoint=checkpoint)
    assert at["values"] == state["values"]
    assert at == await client.threads.get_state(tid, checkpoint_id=checkpoint["checkpoint_id"])

    copy = await client.threads.copy(tid)
    assert copy["thread_id"] != tid and copy["metadata"] == {"who": "copy"}
    copied = await client.threads.get_state(copy["thread_id"])
    assert copied["values"] == state["values"]
    assert copied["checkpoint"]["thread_id"] == copy["thread_id"]
    history = await client.threads.get_history(copy["thread_id"])
    assert history and history[0]["checkpoint"]["thread_id"] == copy["thread_id"]
    # the copy goes on from the state it was given, independently of the original
    out = await client.runs.wait(copy["thread_id"], "constructs", input={"topic": "b"})
    assert "B" in out["results"] and "A" in out["results"]
    assert (await client.threads.get_state(tid))["values"] == state["values"]


async def test_runs_wait_keeps_the_connection_alive_while_it_blocks(stack: Stack):
    """A run longer than the keep-alive interval: newlines first, then the values (issue 12)."""
    import time

    import httpx

    from services.api.routes.agent_run_streams import WAIT_KEEPALIVE_SECONDS

    headers = {"x-api-key": stack.tokens["submitter"]}
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=60) as http:
        tid = (await http.post("/threads", json={}, headers=headers)).json()["thread_id"]
        started = time.monotonic()
        chunks: list[tuple[float, bytes]] = []
        seconds = WAIT_KEEPALIVE_SECONDS + 2
        async with http.stream("POST", f"/threads/{tid}/runs/wait", headers=headers,
                               json={"assistant_id": "slow",
                                     "input": {"topic": str(seconds)}}) as res:
            assert res.status_code == 200
            async for chunk in res.aiter_bytes():
                chunks.append((time.monotonic() - started, chunk))
    body = b"".join(c for _, c in chunks)
    first_newline = next(t for t, c in chunks if c.strip() == b"" and c)
    assert first_newline < seconds  # sent while the run was still going
    assert body.startswith(b"\n") and body.strip().startswith(b"{")
    import json

    assert json.loads(body)["summary"] == "slept"
    client: Any = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    out = await client.runs.wait(tid, "slow", input={"topic": str(seconds)})
    assert out["summary"] == "slept"  # the SDK reads the padded answer


def test_info_answers_without_a_key_as_the_agent_server_does(stack: Stack):
    import httpx

    body = httpx.get(f"{stack.base_url}/info", timeout=10).json()
    assert body["flags"] == {"assistants": True, "crons": True, "langsmith": False}
    assert body["langgraph_py_version"].split(".")[0] == "1" and body["version"]


async def test_create_batch_starts_every_run_or_none(stack: Stack):
    from langgraph_sdk.errors import APIStatusError

    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    runs = await client.runs.create_batch([  # kept, to be joined (the default deletes them)
        {"assistant_id": "seg_constructs", "input": {"topic": "one two"}, "on_completion": "keep"},
        {"assistant_id": "seg_constructs", "input": {"topic": "three"}, "on_completion": "keep"}])
    assert len(runs) == 2 and runs[0]["thread_id"] != runs[1]["thread_id"]
    done = [await client.runs.join(r["thread_id"], r["run_id"]) for r in runs]
    assert "THREE" in done[1]["results"] and "THREE" not in done[0]["results"]

    before = await client.threads.count()
    with pytest.raises(APIStatusError) as refused:
        await client.runs.create_batch([
            {"assistant_id": "seg_constructs", "input": {"topic": "fine"}},
            {"assistant_id": "seg_constructs", "input": {"topic": "x"},
             "stream_mode": "lifecycle"}])
    assert refused.value.response.status_code == 422
    assert refused.value.response.json()["details"]["index"] == 1
    assert await client.threads.count() == before  # the good one was not created either
    with pytest.raises(APIStatusError) as bad_hook:  # a webhook is checked up front too
        await client.runs.create_batch([
            {"assistant_id": "seg_constructs", "input": {"topic": "fine"}},
            {"assistant_id": "seg_constructs", "input": {"topic": "x"}, "webhook": "ftp://x"}])
    assert bad_hook.value.response.json()["details"] == {"field": "webhook", "index": 1}
    assert await client.threads.count() == before


async def test_a_background_stateless_runs_thread_is_deleted_once_it_ends_unless_kept(
        stack: Stack):
    import asyncio

    from langgraph_sdk.errors import APIStatusError

    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    dropped = await client.runs.create(None, "greeter", input={}, context={})
    kept = await client.runs.create(None, "greeter", input={}, context={}, on_completion="keep")
    paused = await client.runs.create(None, "approvals", input={"topic": "x"})
    async def status_of(tid: str) -> int:
        try:
            await client.threads.get(tid)
        except APIStatusError as err:
            return int(err.response.status_code)
        return 200

    for _ in range(150):
        if await status_of(dropped["thread_id"]) == 404:
            break
        await asyncio.sleep(0.2)
    else:
        raise AssertionError("the stateless run's thread was not deleted")
    assert (await client.runs.join(kept["thread_id"], kept["run_id"]))["lines"][-1] == "bye"
    assert (await client.threads.get(kept["thread_id"]))["status"] == "idle"
    await client.runs.join(paused["thread_id"], paused["run_id"])
    await asyncio.sleep(2.5)  # past the clean-up's poll: a paused run keeps its thread
    assert (await client.threads.get(paused["thread_id"]))["status"] == "interrupted"
    with pytest.raises(APIStatusError) as bad:
        await client.runs.create(None, "greeter", input={}, on_completion="archive")
    assert bad.value.response.status_code == 422


async def test_prune_keeps_the_latest_state_or_deletes_and_only_the_callers_threads(stack: Stack):
    from langgraph_sdk.errors import APIStatusError

    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    mine = (await client.threads.create())["thread_id"]
    await client.runs.wait(mine, "seg_constructs", input={"topic": "one"})
    await client.runs.wait(mine, "seg_constructs", input={"topic": "two"})
    state = await client.threads.get_state(mine)
    assert len(await client.threads.get_history(mine, limit=100)) > 2
    assert await client.threads.prune([mine], strategy="keep_latest") == {"pruned_count": 1}
    history = await client.threads.get_history(mine, limit=100)
    assert len(history) == 1 and history[0]["values"] == state["values"]
    assert (await client.threads.get_state(mine))["values"] == state["values"]

    admin = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    theirs = (await admin.threads.create())["thread_id"]
    gone = "00000000-0000-4000-8000-000000000000"
    assert await client.threads.prune([mine, theirs, gone]) == {"pruned_count": 1}
    with pytest.raises(APIStatusError) as missing:
        await client.threads.get(mine)
    assert missing.value.response.status_code == 404
    assert (await admin.threads.get(theirs))["thread_id"] == theirs  # not the caller's: kept


async def test_cancel_many_cancels_the_callers_runs_only(stack: Stack):
    """``seg_long`` naps 4.5 s: runs are still busy or queued when they are cancelled."""
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    admin = get_client(url=stack.base_url, api_key=stack.tokens["admin"])
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "seg_long", input={"topic": "a"})
    queued = await client.runs.create(tid, "seg_long", input={"topic": "b"},
                                      multitask_strategy="enqueue")
    other = (await admin.threads.create())["thread_id"]
    theirs = await admin.runs.create(other, "seg_long", input={"topic": "c"})

    await client.runs.cancel_many(status="all")
    statuses = {r["run_id"]: r["status"] for r in await client.runs.list(tid)}
    assert statuses[first["run_id"]] == "interrupted"
    assert statuses[queued["run_id"]] == "interrupted"
    assert (await admin.runs.join(other, theirs["run_id"]))["summary"] == "slept long"

    again = await client.runs.create(tid, "seg_long", input={"topic": "d"})
    await client.runs.cancel_many(thread_id=tid, run_ids=[again["run_id"]], action="rollback")
    assert (await client.runs.get(tid, again["run_id"]))["status"] == "interrupted"


async def test_a_thread_stream_follows_every_run_of_the_thread(stack: Stack):
    """``threads.join_stream``: the runs so far, then new ones as they come, each ending in
    ``run_done``; ``Last-Event-ID`` resumes after the event it names; ``lifecycle`` gives
    only the runs' starts and ends."""
    import asyncio

    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.wait(tid, "greeter", input={}, context={"name": "A"})
    seen: list[Any] = []

    async def follow() -> None:
        stream = await client.threads.join_stream(tid)
        try:
            async for part in stream:
                seen.append(part)
                if sum(1 for p in seen if p.event == "metadata"
                       and p.data.get("status") == "run_done") == 2:
                    return
        finally:  # a thread stream has no end: the client closes it
            await stream.aclose()

    following = asyncio.create_task(follow())
    await asyncio.sleep(0.5)
    second = await client.runs.create(tid, "greeter", input={}, context={"name": "B"})
    await asyncio.wait_for(following, 60)
    runs = [p.data["run_id"] for p in seen
            if p.event == "metadata" and p.data.get("status") == "run_done"]
    assert runs[1] == second["run_id"] and len(set(runs)) == 2
    values = [p.data for p in seen if p.event == "values"]
    assert values[-1]["lines"] == first["lines"] + ["hello B in ? []", "middle after 4", "bye"]
    ids = [getattr(p, "id", None) for p in seen]
    assert all(i and i.split(":")[0] in runs for i in ids if i)

    with stack.client("submitter") as raw:  # a rejoin after the first run's end
        done_id = next(f"{r}:done" for r in runs[:1])
        with raw.stream("GET", f"/threads/{tid}/stream",
                        headers={"Last-Event-ID": done_id}, timeout=30) as resp:
            again = []
            for line in resp.iter_lines():
                if line.startswith("data: ") and '"run_done"' in line:
                    again.append(line)
                    break
        assert second["run_id"] in again[0] and runs[0] not in again[0]

        with raw.stream("GET", f"/threads/{tid}/stream?stream_modes=lifecycle",
                        timeout=30) as resp:
            events = []
            for line in resp.iter_lines():
                if line.startswith("event: "):
                    events.append(line.removeprefix("event: "))
                if events.count("metadata") == 4:
                    break
        assert set(events) == {"metadata"}
        assert raw.get(f"/threads/{tid}/stream?stream_modes=everything").status_code == 422


async def test_a_stateless_runs_wait_answers_then_deletes_its_thread_unless_kept(stack: Stack,
                                                                              pg_url: str):
    """The thread goes once the answer is sent (not before it), as the Agent Server's worker
    deletes it after the run, with its runs and LangGraph's checkpoints, blobs and writes;
    ``on_completion="keep"`` keeps it."""
    import asyncio

    def thread_of(answer: Any) -> str:
        return str(answer.headers["Content-Location"].split("/")[2])

    with stack.client("submitter") as http:
        dropped = http.post("/runs/wait", json={"assistant_id": "greeter", "input": {}, "context": {}})
        kept = http.post("/runs/wait", json={"assistant_id": "greeter", "input": {}, "context": {},
                                             "on_completion": "keep"})
        assert dropped.status_code == kept.status_code == 200, dropped.text
        assert dropped.json()["lines"][-1] == kept.json()["lines"][-1] == "bye"
        for _ in range(50):
            if http.get(f"/threads/{thread_of(dropped)}").status_code == 404:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the stateless run's thread was not deleted")
        assert http.get(f"/threads/{thread_of(kept)}").json()["status"] == "idle"

    async def left(thread_id: str) -> list[int]:  # its runs, tokens and LangGraph rows
        conn = await asyncpg.connect(pg_url)
        try:
            return [await conn.fetchval(sql, thread_id) for sql in (
                "SELECT count(*) FROM agent_runs WHERE thread_id = $1::uuid",
                "SELECT count(*) FROM agent_run_tokens WHERE workflow_run_id IN (SELECT "
                "workflow_run_id FROM agent_runs WHERE thread_id = $1::uuid)",
                "SELECT count(*) FROM checkpoints WHERE thread_id = $1",
                "SELECT count(*) FROM checkpoint_blobs WHERE thread_id = $1",
                "SELECT count(*) FROM checkpoint_writes WHERE thread_id = $1")]
        finally:
            await conn.close()

    assert await left(thread_of(dropped)) == [0, 0, 0, 0, 0]
    runs, _, checkpoints, blobs, _ = await left(thread_of(kept))
    assert runs == 1 and checkpoints > 0 and blobs > 0  # what a kept thread keeps


async def test_thread_search_filters_by_values_sorts_and_selects(stack: Stack):
    """``values`` containment, ``sort_by`` / ``sort_order``, ``select`` and ``extract``, as the
    SDK sends them (they were ignored: every search came newest first, whole)."""
    from langgraph_sdk.errors import UnprocessableEntityError

    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tag = {"search_case": str(uuid.uuid4())}
    made = [(await client.threads.create(metadata=tag))["thread_id"] for _ in range(3)]
    done = await client.runs.wait(made[1], "greeter", input={}, context={"name": "Val"})
    found = await client.threads.search(metadata=tag, values={"lines": done["lines"][:1]})
    assert [t["thread_id"] for t in found] == [made[1]]
    by_id = await client.threads.search(metadata=tag, sort_by="thread_id", sort_order="asc")
    assert [t["thread_id"] for t in by_id] == sorted(made)
    oldest = await client.threads.search(metadata=tag, sort_by="created_at", sort_order="asc")
    assert [t["thread_id"] for t in oldest] == made
    newest = await client.threads.search(metadata=tag)  # the default: updated_at, newest first
    assert newest[0]["thread_id"] == made[1]  # its run wrote it last
    slim = await client.threads.search(metadata=tag, select=["thread_id", "status"])
    assert all(set(t) == {"thread_id", "status"} for t in slim) and len(slim) == 3
    picked = await client.threads.search(
        metadata=tag, select=["thread_id"], sort_by="thread_id", sort_order="asc",
        extract={"last": "values.lines[-1]", "case": "metadata.search_case",
                 "gone": "values.lines[9]", "deep": "values.lines.x"})
    ran = [t for t in picked if t["thread_id"] == made[1]][0]
    assert ran == {"thread_id": made[1], "extracted": {
        "last": done["lines"][-1], "case": tag["search_case"], "gone": None, "deep": None}}
    assert all(t["extracted"]["last"] is None for t in picked if t is not ran)
    for bad in ({"sort_by": "size"}, {"sort_order": "up"}, {"select": ["secrets"]},
                {"extract": {"values": "values.lines"}}, {"extract": {"x": "secrets.a"}}):
        with pytest.raises(UnprocessableEntityError):
            await client.threads.search(metadata=tag, **bad)
