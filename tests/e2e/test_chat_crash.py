"""A chat survives its worker's death: the reply is shown once and whole, live and replayed.

The ``chatty`` user graph's ``talk`` node streams a reply token by token, then works on for
2.5 s; the worker is SIGKILLed in that pause, when the client has the whole reply but the
thread has nothing of it. The retried segment runs ``talk`` again (a new model call, a new
message id) and first takes back what the dead attempt streamed (a ``RemoveMessage`` of its
id, as LangGraph streams one). A client that rebuilds messages as ``add_messages`` and
``useStream`` do (:func:`bench.chat_load.rebuild_messages`) gets exactly the thread's.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from langgraph_sdk import get_client

from bench.chat_load import rebuild_messages, thread_messages
from tests.e2e.conftest import Stack

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
