"""Live ``messages`` of runs as segments: token rows and the events made of them (issue 26).

The writer and reader on the real Postgres; the SSE ids and the Agent Server's event
shapes from ``StreamDeriver.token``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import asyncpg
from langchain_core.messages import AIMessage, AIMessageChunk, RemoveMessage

from overseer import token_reader, token_stream
from overseer.thread_streams import StreamDeriver, parse_last_event_id

RUN = {"run_id": "r-1", "thread_id": "t-1", "graph_id": "chatty", "assistant_id": "a-1",
       "workflow_run_id": "w-1"}


def test_sse_ids_sort_tokens_before_the_item_they_precede():
    token, item = parse_last_event_id("7.t42"), parse_last_event_id("7.0")
    assert token == (7, 0, 42) and item == (7, 1, 0)
    assert token is not None and item is not None and token < item
    assert parse_last_event_id("6.3") < token  # type: ignore[operator]
    assert parse_last_event_id("7.tx") is None and parse_last_event_id(None) is None


def _chunk(text: str, mid: str = "m-1") -> list[Any]:
    return token_stream.token_item(AIMessageChunk(content=text, id=mid),
                                   {"langgraph_node": "talk", "langgraph_step": 1,
                                    "overseer_run_id": "w-1", "checkpoint_ns": "talk:x"})


def test_a_token_item_leaves_out_overseers_bookkeeping():
    message, metadata = _chunk("Hi")
    assert message["type"] == "AIMessageChunk" and message["content"] == "Hi"
    assert metadata == {"langgraph_node": "talk", "langgraph_step": 1}


def test_messages_tuple_gives_each_chunk_with_the_runs_metadata():
    deriver = StreamDeriver(RUN, ["messages-tuple"], live_messages=True)  # type: ignore[arg-type]
    (name, (message, metadata)), = deriver.token(_chunk("Hi"))
    assert name == "messages" and message["content"] == "Hi"
    assert metadata["langgraph_node"] == "talk" and metadata["run_id"] == "r-1"
    assert metadata["thread_id"] == "t-1"


def test_messages_mode_sends_metadata_once_then_the_message_so_far():
    deriver = StreamDeriver(RUN, ["messages"], live_messages=True)  # type: ignore[arg-type]
    first = deriver.token(_chunk("Hel"))
    assert [n for n, _ in first] == ["messages/metadata", "messages/partial"]
    assert list(first[0][1]) == ["m-1"]
    second = deriver.token(_chunk("lo"))
    assert [n for n, _ in second] == ["messages/partial"]
    assert second[0][1][0]["content"] == "Hello" and second[0][1][0]["type"] == "ai"
    whole = deriver.token(token_stream.token_item(AIMessage(content="done", id="m-2"), {}))
    assert [n for n, _ in whole] == ["messages/metadata", "messages/complete"]
    assert whole[1][1][0]["content"] == "done"


def test_not_asked_for_messages_gives_nothing():
    deriver = StreamDeriver(RUN, ["values"], live_messages=True)  # type: ignore[arg-type]
    assert deriver.token(_chunk("Hi")) == []


async def test_rows_come_back_in_order_and_only_up_to_the_readers_offset(pool: asyncpg.Pool):
    run = str(uuid.uuid4())
    first = token_stream.TokenWriter(pool, run, stream_base=1)
    for word in ("a", "b", "c"):
        await first.add(_chunk(word))
    await first.close()
    later = token_stream.TokenWriter(pool, run, stream_base=4)
    await later.add(_chunk("d"))
    await later.close()
    rows = await token_reader.read_tokens(pool, run, 0, max_base=3)
    assert [r["stream_base"] for r in rows] == [1, 1, 1]  # the later segment's wait
    assert [_json(r["data"])[0]["content"] for r in rows] == ["a", "b", "c"]
    rest = await token_reader.read_tokens(pool, run, rows[-1]["seq"], max_base=4)
    assert [_json(r["data"])[0]["content"] for r in rest] == ["d"]


async def test_a_buffered_token_is_written_without_waiting_for_the_next(pool: asyncpg.Pool):
    run = str(uuid.uuid4())
    writer = token_stream.TokenWriter(pool, run, stream_base=1)
    feed = token_reader.listener(pool)
    woken = await feed.watch(run)
    try:
        await writer.add(_chunk("alone"))
        await asyncio.wait_for(woken.wait(), 5)  # NOTIFY after the timed flush
        assert len(await token_reader.read_tokens(pool, run, 0, max_base=1)) == 1
        await writer.close()
        assert writer.written == 1
    finally:
        await feed.unwatch(run, woken)
    assert feed._conn is None  # the last reader gave the LISTEN connection back


async def test_a_lost_listen_connection_wakes_every_reader_and_they_poll_until_it_is_back(
        pool: asyncpg.Pool):
    """With ``LISTEN`` up a reader waits long (a ``NOTIFY`` wakes it); losing it wakes them all."""
    run = str(uuid.uuid4())
    feed = token_reader.listener(pool)
    woken = await feed.watch(run)
    try:
        assert feed.poll_seconds == token_reader.LISTENING_POLL_SECONDS
        pid = feed._conn.get_server_pid()
        await pool.execute("SELECT pg_terminate_backend($1)", pid)
        await asyncio.wait_for(woken.wait(), 5)  # woken to look again: NOTIFYs are missed now
        assert feed.poll_seconds == token_reader.POLL_SECONDS
        again = await feed.watch(run)  # the next reader listens again, on a new connection
        assert feed.poll_seconds == token_reader.LISTENING_POLL_SECONDS
        assert feed._conn.get_server_pid() != pid
        await feed.unwatch(run, again)
    finally:
        await feed.unwatch(run, woken)
    assert feed._conn is None


async def test_a_runs_wait_wakes_on_its_runs_state_not_on_its_live_chunks(pool: asyncpg.Pool):
    run = str(uuid.uuid4())
    feed = token_reader.listener(pool)
    reader = await feed.watch(run)  # a stream's reader of the run's tokens
    waiting = await feed.watch(run, states_only=True)  # a runs.wait of the run
    try:
        await pool.execute("SELECT pg_notify($1, $2)", token_stream.CHANNEL, run)
        await asyncio.wait_for(reader.wait(), 5)
        await asyncio.sleep(0.2)  # the same NOTIFY reached both, or neither would wake
        assert not waiting.is_set()
        reader.clear()
        await pool.execute("SELECT pg_notify($1, $2)", token_stream.STATE_CHANNEL, run)
        await asyncio.wait_for(waiting.wait(), 5)
        await asyncio.wait_for(reader.wait(), 5)
    finally:
        await feed.unwatch(run, reader)
        await feed.unwatch(run, waiting)
    assert feed._conn is None and not feed._states_only


def _json(value: Any) -> Any:
    import json

    return json.loads(value) if isinstance(value, str) else value


def test_a_custom_row_is_a_custom_event_only_when_asked():
    row = token_stream.custom_item({"step": 1})
    assert row == {"custom": {"step": 1}}
    assert StreamDeriver(RUN, ["custom"]).token(row) == [("custom", {"step": 1})]  # type: ignore[arg-type]
    assert StreamDeriver(RUN, ["values", "messages-tuple"]).token(row) == []  # type: ignore[arg-type]
    nested = token_stream.custom_item({"step": 2}, ("sub:1",))
    assert StreamDeriver(RUN, ["custom"]).token(nested) == [("custom|sub:1", {"step": 2})]  # type: ignore[arg-type]


async def test_chunks_wait_for_the_next_token_and_keep_the_loops_order(pool: asyncpg.Pool):
    """A state chunk alone is not written at once; the next token takes it along, in order."""
    run = str(uuid.uuid4())
    writer = token_stream.TokenWriter(pool, run, stream_base=1)
    await writer.add(token_stream.chunk_item("values", {"n": 1}),
                     within=token_stream.CHUNK_FLUSH_SECONDS)
    await asyncio.sleep(3 * token_stream.FLUSH_SECONDS)
    assert await token_reader.read_tokens(pool, run, 0, max_base=1) == []  # not yet
    await writer.add(_chunk("tok"))
    await asyncio.sleep(3 * token_stream.FLUSH_SECONDS)
    rows = [_json(r["data"]) for r in await token_reader.read_tokens(pool, run, 0, max_base=1)]
    assert rows[0] == {"item": "values", "data": {"n": 1}} and rows[1][0]["content"] == "tok"
    await writer.close()
    assert writer.written == 2


async def test_closing_while_a_write_is_under_way_loses_nothing(pool: asyncpg.Pool):
    run = str(uuid.uuid4())
    writer = token_stream.TokenWriter(pool, run, stream_base=1)
    for i in range(5):
        await writer.add(_chunk(f"t{i}"))
        await asyncio.sleep(token_stream.FLUSH_SECONDS * (0.6 + 0.2 * i))  # timers fire now and then
    await writer.add(token_stream.chunk_item("updates", {"sign": {"m": 1}}),
                     within=token_stream.CHUNK_FLUSH_SECONDS)
    await writer.close()  # whatever timer is writing finishes its write first
    rows = [_json(r["data"]) for r in await token_reader.read_tokens(pool, run, 0, max_base=1)]
    assert [r[0]["content"] for r in rows[:5]] == [f"t{i}" for i in range(5)]
    assert rows[5] == {"item": "updates", "data": {"sign": {"m": 1}}} and len(rows) == 6
    assert StreamDeriver(RUN, ["updates"]).token(rows[5], 1) == [  # type: ignore[arg-type]
        ("updates", {"sign": {"m": 1}})]


def _reader(pool: asyncpg.Pool, run: str, got: list[tuple[Any, ...]],
            seen_row: asyncio.Event | None = None,
            ) -> tuple[asyncio.Queue[tuple[Any, ...]], asyncio.Task[None]]:
    """A :func:`merge_live` reader of ``run`` (into ``got``) over a durable stream fed by hand.

    Returns the feed (put ``("item", offset, data)``; item 1 ends the stream) and the reader's
    task; ``seen_row`` is set at the first row given.
    """
    feed: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()

    async def durable() -> Any:
        while True:
            entry = await feed.get()
            yield entry
            if entry[1] == 1:
                return

    async def read() -> None:
        async for entry in token_reader.merge_live(pool, durable(), run, lambda e: e[1] == 1):
            got.append(entry)
            if entry[0] == "token" and seen_row is not None:
                seen_row.set()

    return feed, asyncio.create_task(read())


async def test_a_row_due_after_an_item_comes_right_after_that_item_not_at_the_next_poll(
        pool: asyncpg.Pool, monkeypatch: Any):
    """A segment's rows wait for the durable item before them, and no longer.

    Its rows are written (and their ``NOTIFY`` sent) while the reader still waits for the
    item that precedes them; once that item arrives they follow it at once. The poll is set
    to a minute, so a reader that dropped the wake-up would not give them within the test.
    """
    monkeypatch.setattr(token_reader, "POLL_SECONDS", 60.0)
    run = str(uuid.uuid4())
    got: list[tuple[Any, ...]] = []
    seen_row = asyncio.Event()
    feed, reader = _reader(pool, run, got, seen_row)
    try:
        await asyncio.sleep(0.2)  # the reader waits for item 0
        writer = token_stream.TokenWriter(pool, run, stream_base=1)  # the next segment's rows
        await writer.add(token_stream.custom_item({"step": "second segment"}))
        await writer.close()
        await asyncio.sleep(0.3)  # the reader woke, found nothing it may give yet
        await feed.put(("item", 0, "first"))
        await asyncio.wait_for(seen_row.wait(), timeout=5)
        await feed.put(("item", 1, "last"))
        await asyncio.wait_for(reader, timeout=5)
    finally:
        reader.cancel()
    assert [(e[0], e[1]) for e in got][:1] == [("item", 0)]
    assert got[1][0] == "token" and got[1][2] == 1 and got[-1][:2] == ("item", 1)


def _lazy_reader(pool: asyncpg.Pool, run: str, got: list[tuple[Any, ...]],
                 opened: asyncio.Event) -> tuple[asyncio.Queue[tuple[Any, ...]], asyncio.Task[None]]:
    """A lazy :func:`merge_live` reader of ``run``; ``opened`` is set when it follows the
    durable stream (whose items, 4-tuples as ``_stream_items`` gives them, the test feeds)."""
    feed: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()

    async def durable() -> Any:
        opened.set()
        while True:
            entry = await feed.get()
            yield entry
            if entry[2] == "end":
                return

    async def read() -> None:
        async for entry in token_reader.merge_live(pool, durable(), run,
                                                   lambda e: e[2] == "end", lazy=True):
            got.append(entry)

    return feed, asyncio.create_task(read())


async def _hand_off_row(pool: asyncpg.Pool, run: str, item: dict[str, Any] | None) -> None:
    """What a hand-off writes for a lazy reader: the ending's row (if any), then its NOTIFY."""
    async with pool.acquire() as conn, conn.transaction():
        if item is not None:
            await conn.execute(token_stream.INSERT_ENDING_ROW, uuid.UUID(run), 0, json.dumps(item))
        await conn.execute("SELECT pg_notify($1, $2)", token_stream.STATE_CHANNEL, run)


async def test_a_run_ended_by_its_row_is_read_from_postgres_alone(pool: asyncpg.Pool):
    """The ending row ends a lazy reader after every token, and the workflow is never asked."""
    run = str(uuid.uuid4())
    got: list[tuple[Any, ...]] = []
    opened = asyncio.Event()
    _, reader = _lazy_reader(pool, run, got, opened)
    try:
        writer = token_stream.TokenWriter(pool, run, stream_base=0)
        for word in ("a", " b"):
            await writer.add(_chunk(word))
        await writer.close()
        end = token_stream.ending_item(0, "end", {"status": "completed", "outcome": "done"})
        await _hand_off_row(pool, run, end)
        await _hand_off_row(pool, run, end)  # a retried hand-off writes it once
        await asyncio.wait_for(reader, timeout=5)
    finally:
        reader.cancel()
    assert [e[0] for e in got] == ["token", "token", "item"]
    assert got[-1] == ("item", 0, "end", {"status": "completed", "outcome": "done"})
    assert not opened.is_set()
    rows = await pool.fetchval("SELECT count(*) FROM agent_run_tokens WHERE workflow_run_id = $1",
                               uuid.UUID(run))
    assert rows == 3


async def test_a_run_that_pauses_is_followed_on_its_workflows_stream(pool: asyncpg.Pool):
    """A state written without an ending row (a pause, an error) opens the durable stream;
    an item given from a row is not given again from it."""
    run = str(uuid.uuid4())
    got: list[tuple[Any, ...]] = []
    opened = asyncio.Event()
    feed, reader = _lazy_reader(pool, run, got, opened)
    try:
        await asyncio.sleep(0.3)
        assert not opened.is_set()
        await _hand_off_row(pool, run, None)  # paused: the state, no ending row
        await asyncio.wait_for(opened.wait(), timeout=5)
        await feed.put(("item", 0, "interrupt", [{"id": "i-1", "value": "ok?"}]))
        await feed.put(("item", 1, "end", {"status": "completed"}))
        await asyncio.wait_for(reader, timeout=5)
    finally:
        reader.cancel()
    assert [(e[1], e[2]) for e in got] == [(0, "interrupt"), (1, "end")]


async def test_a_quiet_run_is_followed_on_its_workflows_stream_after_a_while(
        pool: asyncpg.Pool, monkeypatch: Any):
    """No row and no state for a while (a workflow ended without a hand-off): the stream opens."""
    monkeypatch.setattr(token_reader, "LISTENING_POLL_SECONDS", 0.5)
    run = str(uuid.uuid4())
    got: list[tuple[Any, ...]] = []
    opened = asyncio.Event()
    feed, reader = _lazy_reader(pool, run, got, opened)
    try:
        await asyncio.wait_for(opened.wait(), timeout=5)
        await feed.put(("item", 0, "end", {"status": "cancelled"}))
        await asyncio.wait_for(reader, timeout=5)
    finally:
        reader.cancel()
    assert got == [("item", 0, "end", {"status": "cancelled"})]


def test_a_batch_carried_after_what_the_reader_gave_is_taken_a_gap_or_a_lost_notify_is_not():
    wake = token_reader.Wake()
    wake.batches.extend([token_reader.Batch(1, 4, [(5, "a"), (6, "b")]),
                         token_reader.Batch(1, 6, [(7, "c")]),
                         token_reader.Batch(2, 7, [(9, "d")])])  # the next segment's: waits
    assert wake.take(4, bound=1) == [(5, 1, "a"), (6, 1, "b"), (7, 1, "c")]
    assert wake.take(7, bound=1) == [] and len(wake.batches) == 1
    assert wake.take(7, bound=2) == [(9, 2, "d")]
    wake.batches.append(token_reader.Batch(2, 11, [(12, "f")]))  # row 10 was never carried
    assert wake.take(9, bound=2) is None and not wake.batches
    wake.batches.append(token_reader.Batch(2, 12, [(13, "g")]))
    wake.stale = True  # a NOTIFY without its rows, or a lost connection
    assert wake.take(12, bound=2) is None and not wake.stale


async def test_a_streaming_reply_reaches_its_reader_in_the_notifies_not_in_a_read_per_write(
        pool: asyncpg.Pool, monkeypatch: Any):
    """Every row comes once and in order; the table is read only at the start, at durable
    items and for the batch too large to ride in its ``NOTIFY``."""
    reads = 0
    real_read = token_reader.read_tokens

    async def counted(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return await real_read(*args)

    monkeypatch.setattr(token_reader, "read_tokens", counted)
    monkeypatch.setattr(token_reader, "POLL_SECONDS", 60.0)
    run = str(uuid.uuid4())
    got: list[tuple[Any, ...]] = []
    feed, reader = _reader(pool, run, got)
    try:
        await feed.put(("item", 0, "start"))
        await asyncio.sleep(0.2)
        reads_before = reads
        writer = token_stream.TokenWriter(pool, run, stream_base=1)
        for i in range(20):
            await writer.add(_chunk(f" t{i}"))
            await asyncio.sleep(0.025)  # a model's pace: one write per WRITE_INTERVAL_SECONDS
        await writer.add(token_stream.custom_item({"big": "x" * 9000}))  # too large for a NOTIFY
        await writer.close()
        await asyncio.sleep(0.3)
        writes, streamed_reads = writer.written, reads - reads_before
        await feed.put(("item", 1, "end"))
        await asyncio.wait_for(reader, timeout=5)
    finally:
        reader.cancel()
    tokens = [e for e in got if e[0] == "token"]
    assert [e[3][0]["content"] for e in tokens[:20]] == [f" t{i}" for i in range(20)]
    assert tokens[20][3] == {"custom": {"big": "x" * 9000}} and len(tokens) == 21
    assert [e[1] for e in tokens] == sorted(e[1] for e in tokens)
    assert writes == 21 and streamed_reads <= 2  # the large batch's read (and no other)


def _row(message: Any, node: str = "talk", ns: list[str] | None = None) -> list[Any]:
    return token_stream.token_item(message, {"langgraph_node": node},
                                   namespace=tuple(ns or ()))


def test_a_retried_segment_takes_back_what_the_thread_did_not_keep():
    cut = AIMessageChunk(content="the late delivery of", id="dead")
    kept_tool = AIMessage(content="42", id="tool-1")
    removed = AIMessage(content="gone", id="r")
    rows = [_row(AIMessageChunk(content="the late", id="dead")), _row(cut),
            _row(kept_tool, node="tools"), {"custom": {"x": 1}},
            {"item": "values", "data": {"messages": []}},
            _row(AIMessageChunk(content="inner", id="sub"), ns=["child:1"]),
            _row(removed), _row(RemoveMessage(id="r"))]
    back = token_stream.retractions([json.dumps(r) for r in rows], {"tool-1"})
    # the cut-off reply, once, with its first row's metadata; not the kept tool result, not a
    # subgraph's message, not one a node already removed
    assert [(m["type"], m["id"], meta) for m, meta in back] == \
        [("remove", "dead", {"langgraph_node": "talk"})]
    assert token_stream.retractions(rows, {"dead", "tool-1"}) == []


def test_message_ids_finds_messages_as_objects_and_as_json():
    state = {"messages": [AIMessage(content="a", id="1")], "nested": {"m": [
        {"type": "tool", "content": "x", "id": "2"}]}, "other": {"id": "3", "name": "not one"}}
    assert token_stream.message_ids(state) == {"1", "2"}
    assert token_stream.message_ids([None, {"messages": [AIMessage(content="b")]}]) == set()


def test_the_thread_protocol_ends_a_retracted_message_and_says_running_again():
    from services.api.routes.agent_protocol_events import RunTranslator

    tr = RunTranslator({"run_id": "r-1", "graph_id": "chatty"}, 1)
    chunk = [{"type": "AIMessageChunk", "id": "dead", "content": "the late"},
             {"langgraph_node": "talk"}]
    started = tr.feed("0.t1", "messages", chunk)
    assert [e["params"]["data"]["event"] for e in started] == \
        ["message-start", "content-block-start", "content-block-delta"]
    remove = [{"type": "remove", "id": "dead", "content": ""}, {"langgraph_node": "talk"}]
    back = tr.feed("0.t2", "messages", remove) + tr.feed("0.t3", "messages", remove)
    assert [(e["method"], e["params"]["data"]["event"]) for e in back] == \
        [("messages", "error"), ("lifecycle", "running")]
    assert back[0]["params"]["data"]["code"] == "attempt_lost"
    assert back[0]["params"]["node"] == "talk"
    again = tr.feed("0.t4", "messages", [{"type": "AIMessageChunk", "id": "new", "content": "x"},
                                         {"langgraph_node": "talk"}])
    assert again[0]["params"]["data"] == {"event": "message-start", "role": "ai", "id": "new"}
    # a second crash later in the run says running again
    assert [e["method"] for e in tr.feed("0.t5", "messages", remove)] == ["lifecycle"]
