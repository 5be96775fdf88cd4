"""A chat survives its worker's death: each reply shown once and whole, side effects done once.

The ``chatty`` user graph's ``talk`` node streams a reply token by token, then works on for
2.5 s; the worker is SIGKILLed in that pause, when the client has the whole reply but the
thread has nothing of it. The retried segment runs ``talk`` again (a new model call, a new
message id) and first takes back what the dead attempt streamed (a ``RemoveMessage`` of its
id, as LangGraph streams one). A client that rebuilds messages as ``add_messages`` and
``useStream`` do (:func:`bench.chat_load.rebuild_messages`) gets exactly the thread's.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import asyncpg
import pytest
from langgraph_sdk import get_client

from bench.chat_load import rebuild_messages, thread_messages
from tests.e2e.conftest import Stack
from tests.payment_stub import PaymentStub

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

QUESTION = {"messages": [{"type": "human", "content": "tell me"}]}


async def test_a_reply_cut_by_a_worker_death_is_taken_back_and_shown_once(stack: Stack):
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create())["thread_id"]
    parts: list[Any] = []
    killed_at: list[float] = []

    async def watch() -> None:
        async for part in client.runs.stream(tid, "chatty", input=QUESTION,
                                             stream_mode="messages-tuple"):
            parts.append(part)
            if part.event == "messages" and not killed_at:
                await asyncio.sleep(0.5)  # the reply has streamed; talk works on
                await asyncio.to_thread(stack.replace_workers)
                killed_at.append(time.monotonic())

    await asyncio.wait_for(watch(), timeout=180)
    assert killed_at, "no token came before the kill"
    messages = [p.data[0] for p in parts if p.event == "messages"]
    # the dead attempt's reply, then its retraction, then the reply again under a new id
    removed = [m["id"] for m in messages if m["type"] == "remove"]
    assert len(removed) == 1, [m["type"] for m in messages]
    replies = {m["id"] for m in messages if m["type"] == "AIMessageChunk"}
    assert len(replies) == 2 and removed[0] in replies
    state = await client.threads.get_state(tid)
    kept = thread_messages(state["values"])
    assert [t for _, t, _ in kept] == ["ai", "ai"]  # the reply and the signature, once each
    assert removed[0] not in {i for i, _, _ in kept}
    assert rebuild_messages(messages) == kept

    # replayed from any point, as a client that reconnects with Last-Event-ID gets it
    run_id = parts[0].data["run_id"]
    ids = [p.id for p in parts if p.event == "messages"]
    for cut in (1, len(ids) // 2, ids.index(next(
            p.id for p in parts if p.event == "messages" and p.data[0]["type"] == "remove"))):
        rest = [p.data[0] async for p in client.runs.join_stream(
            tid, run_id, stream_mode="messages-tuple", last_event_id=ids[cut - 1])
            if p.event == "messages"]
        assert rebuild_messages(messages[:cut] + rest) == kept, cut


async def _writes(pg_url: str, thread_id: str) -> dict[str, int]:
    """What the runs of ``thread_id`` have written: checkpoints, task writes, stream rows, events."""
    conn = await asyncpg.connect(pg_url)
    try:
        runs = "(SELECT workflow_run_id FROM agent_runs WHERE thread_id = $1::uuid)"
        return {
            "checkpoints": await conn.fetchval(
                "SELECT count(*) FROM checkpoints WHERE thread_id = $1", thread_id),
            "checkpoint_writes": await conn.fetchval(
                "SELECT count(*) FROM checkpoint_writes WHERE thread_id = $1", thread_id),
            "stream_rows": await conn.fetchval(
                f"SELECT count(*) FROM agent_run_tokens WHERE workflow_run_id IN {runs}",
                thread_id),
            # a replaced attempt's model calls stay in the usage ledger (llm.called): they
            # were made, and billed; nothing else of it may be recorded
            "events": await conn.fetchval(
                f"SELECT count(*) FROM events WHERE run_id IN {runs} AND type <> 'llm.called'",
                thread_id),
        }
    finally:
        await conn.close()


async def test_a_paused_worker_woken_after_its_replacement_writes_nothing(stack: Stack,
                                                                          pg_url: str):
    """SIGSTOP the worker mid-reply (past its segment's heartbeat time-out Temporal runs the
    segment on a new worker), let the run end there, then SIGCONT the old one: its segment
    goes on where it stopped and finds itself fenced off (overseer.fencing) before any write."""
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create())["thread_id"]
    parts: list[Any] = []
    paused: list[Any] = []

    async def watch() -> None:
        async for part in client.runs.stream(tid, "chatty", input=QUESTION,
                                             stream_mode="messages-tuple"):
            parts.append(part)
            if part.event == "messages" and not paused:
                await asyncio.sleep(0.3)
                old = next(w for w in stack.workers if w.poll() is None)
                old.send_signal(signal.SIGSTOP)
                paused.append(old)
                await asyncio.to_thread(stack.start_worker)

    try:
        await asyncio.wait_for(watch(), timeout=180)
        assert paused, "no token came before the pause"
        state = await client.threads.get_state(tid)
        kept = thread_messages(state["values"])
        messages = [p.data[0] for p in parts if p.event == "messages"]
        assert rebuild_messages(messages) == kept
        before = await _writes(pg_url, tid)
        assert before["checkpoints"] > 0 and before["stream_rows"] > 0
        paused[0].send_signal(signal.SIGCONT)
        await asyncio.sleep(8)  # its loop goes on: the node returns, tokens flush, it heartbeats
        assert await _writes(pg_url, tid) == before
        assert (await client.threads.get_state(tid))["values"] == state["values"]
    finally:
        for proc in paused:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


async def test_a_node_killed_right_after_its_charge_charges_once(stack: Stack):
    """The worker is SIGKILLed right after the node's POST: the re-run node POSTs again with
    the same idempotency key, and the payment API keeps one charge."""
    stub = await asyncio.to_thread(PaymentStub)
    try:
        client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
        tid = (await client.threads.create())["thread_id"]
        run = await client.runs.create(tid, "charge", input={"url": stub.url_for(0)})
        deadline = time.monotonic() + 60
        while not await asyncio.to_thread(stub.posts):
            assert time.monotonic() < deadline, "the node never POSTed"
            await asyncio.sleep(0.05)
        await asyncio.to_thread(stack.replace_workers)
        await asyncio.wait_for(client.runs.join(tid, run["run_id"]), timeout=120)
        assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"
        keys = [key for _, key in await asyncio.to_thread(stub.posts)]
        assert len(keys) == 2  # the node ran again after the kill …
        assert len(set(keys)) == 1  # … and the payment API kept one charge
        state = await client.threads.get_state(tid)
        assert state["values"]["charged"] == keys[0]
    finally:
        stub.stop()


async def test_a_chat_accepted_while_no_worker_runs_is_answered_once_when_one_starts(
        stack: Stack):
    """The worker dies before the run's first segment (none runs when it is accepted): the
    accepted run waits in Temporal, and its client gets the whole reply once a worker starts."""
    client = get_client(url=stack.base_url, api_key=stack.tokens["submitter"])
    tid = (await client.threads.create())["thread_id"]
    await asyncio.to_thread(stack.kill_workers)
    parts: list[Any] = []
    try:
        async def watch() -> None:
            async for part in client.runs.stream(tid, "chatty", input=QUESTION,
                                                 stream_mode="messages-tuple"):
                parts.append(part)

        watching = asyncio.create_task(watch())
        await asyncio.sleep(3)
        assert not watching.done() and not any(p.event == "messages" for p in parts)
    finally:
        await asyncio.to_thread(stack.start_worker)
    await asyncio.wait_for(watching, timeout=120)
    state = await client.threads.get_state(tid)
    messages = [p.data[0] for p in parts if p.event == "messages"]
    assert rebuild_messages(messages) == thread_messages(state["values"])
    assert [t for _, t, _ in thread_messages(state["values"])] == ["ai", "ai"]
