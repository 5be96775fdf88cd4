"""Reading Agent Server runs and threads: their streams, ``runs.wait`` and ``join``.

A run (a row of ``agent_runs``, :mod:`overseer.thread_runs`) reads its stretch of a
``SegmentRunWorkflow``'s durable stream together with the live rows its segments write
(tokens, custom writes, LangGraph's chunks: :mod:`overseer.token_stream`), derived into the
Agent Server's events by :class:`StreamDeriver` (:func:`run_events`); a thread's stream is
its runs in order (:func:`thread_events`, :func:`thread_runs`); ``runs.wait`` and ``join``
wait on Postgres for the run's hand-off (:func:`wait_values`). Runs are started, resumed
and cancelled in :mod:`overseer.thread_runs`, queued and handed on in
:mod:`overseer.thread_queue`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client

from overseer import token_reader
from overseer.errors import InvalidRequestError
from overseer.graph_codec import to_jsonable
from overseer.registry import get_registry
from overseer.run_body import SEGMENT_STREAM_MODES, asks_for_messages, stream_modes
from overseer.run_types import STREAM_TOPIC
from overseer.thread_queue import advance_queue, run_error, sync_thread
from overseer.thread_sync import refresh
from overseer.threads import (
    ACTIVE_RUN_STATUSES,
    RUN_ENDINGS,
    get_thread,
    parse_json,
    parse_uuid,
    workflow_id,
)

MESSAGE_TYPES = frozenset({
    "human", "ai", "system", "tool", "function", "chat", "AIMessageChunk", "HumanMessageChunk",
    "SystemMessageChunk", "ToolMessageChunk", "FunctionMessageChunk", "ChatMessageChunk"})
"""``type`` of a LangChain message's JSON form (``model_dump``); ``remove`` is not a message."""

# --- reading a run's segment of the stream -----------------------------------------------------


def parse_last_event_id(value: str | None) -> tuple[int, int, int] | None:
    """An SSE id as a sortable key: ``"k.j"`` → ``(k, 1, j)``; a token's ``"k.tN"`` → ``(k, 0, N)``.

    ``k.j`` is the ``j``-th event made from durable stream item ``k``; ``k.tN`` is token row
    ``N``, due before item ``k`` (:mod:`overseer.token_stream`). None for a missing or
    malformed id (read from the start).
    """
    if not value:
        return None
    item, _, sub = value.partition(".")
    try:
        if sub.startswith("t"):
            return int(item), 0, int(sub[1:])
        return int(item), 1, int(sub or 0)
    except ValueError:
        return None


async def _live_messages(pool: asyncpg.Pool, run: asyncpg.Record) -> bool:
    """Whether the run's segments write LangGraph's ``messages`` chunks (tokens) for it.

    They do when the run that started its workflow asked for ``messages`` or
    ``messages-tuple`` (LangGraph attaches its messages handler, and models stream, only
    then); a resume keeps what its start asked.
    """
    start = run if run["run_id"] == run["workflow_run_id"] else await pool.fetchrow(
        "SELECT kwargs FROM agent_runs WHERE run_id = $1", run["workflow_run_id"])
    return start is not None and asks_for_messages(
        (parse_json(start["kwargs"]) or {}).get("stream_mode"))


async def _stream_items(temporal: Client, wid: str, run: asyncpg.Record,
                        poll_cooldown: timedelta) -> AsyncIterator[tuple[Any, ...]]:
    """The workflow's durable stream from offset 0: ``("item", offset, kind, data)`` entries.

    Ends after the run's ending: the first ``interrupt``/``end``/``error`` item at or after
    its ``from_offset`` (those before it end earlier runs of the same workflow); or with
    one ``("fail", sse id, error payload)`` entry when the stream ends without one or
    Temporal cannot be read.
    """

    def ending(offset: int, data: Any) -> bool:
        return isinstance(data, dict) and data.get("event") in RUN_ENDINGS \
            and offset >= run["from_offset"]

    async for entry in token_reader.durable_items(temporal, wid, STREAM_TOPIC, ending,
                                                  poll_cooldown=poll_cooldown):
        if entry[0] == "item":
            event = entry[2] if isinstance(entry[2], dict) else {}
            yield "item", entry[1], event.get("event"), event.get("data")
            continue
        _, offset, code = entry
        yield "fail", f"{offset}.0", (
            {"error": "run_ended", "message": "the run ended without a final event"}
            if code == "run_ended" else
            {"error": "dependency_unavailable", "message": "Temporal did not answer"}
            if code == "dependency_unavailable" else
            {"error": "run_cancelled", "message": "the run was cancelled before it started"}
            if run["status"] == "interrupted" else
            {"error": "not_found", "message": "run not found"})


async def _started(pool: asyncpg.Pool, temporal: Client, run: asyncpg.Record
                   ) -> tuple[asyncpg.Record | None, dict[str, Any] | None]:
    """``(the run's row once it left the queue, None)``, or ``(row or None, error payload)``.

    A run still ``pending`` (queued behind another) is started here if its turn came
    (:func:`overseer.thread_queue.advance_queue`), else waited for. The error is
    ``not_found`` for a run deleted meanwhile, or why a queued run was refused when its
    turn came (it never started).
    """
    while run["status"] == "pending":
        await advance_queue(pool, temporal, str(run["thread_id"]))
        fresh = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1", run["run_id"])
        if fresh is None:
            return None, {"error": "not_found", "message": "the run was deleted"}
        run = fresh
        if run["status"] == "pending":
            await asyncio.sleep(0.25)
    failed = (parse_json(run["kwargs"]) or {}).get("error")
    if run["status"] == "error" and failed:
        return run, failed
    return run, None


async def run_events(pool: asyncpg.Pool, temporal: Client, run: asyncpg.Record,
                     modes: list[str], *, after: tuple[int, int, int] | None = None,
                     poll_cooldown: timedelta = timedelta(milliseconds=30),
                     ) -> AsyncIterator[tuple[str | None, str, Any]]:
    """``(sse id, event, data)`` of a run in the SDK's shapes, from its first offset (or after ``after``).

    ``metadata`` first (fresh reads only), then per ``modes`` what :class:`StreamDeriver`
    makes of each durable stream item; ``error`` or ``end`` last. The workflow's stream is
    read from offset 0 (items before the run's segment only feed the deriver, so a rejoin
    derives exactly what the first read did); ids are ``"<item offset>.<j>"``. For a run
    started with ``messages`` / ``messages-tuple``, those come from LangGraph's own
    ``messages`` mode as the segment writes them (tokens while the model streams; ids
    ``"<item offset>.t<row>"``, :mod:`overseer.token_stream`), and ``custom`` writes come
    the same way, as the nodes make them. A run still ``pending``
    (queued behind another) is started here if its turn came (:func:`overseer.thread_queue.advance_queue`).
    """
    if after is None:
        yield None, "metadata", {"run_id": str(run["run_id"]), "attempt": 1}
    started, failed = await _started(pool, temporal, run)
    if started is None or failed is not None:
        yield "0.0", "error", failed
        return
    run = started
    first = run["from_offset"]
    live = await _live_messages(pool, run)
    deriver = StreamDeriver(run, modes, live_messages=live)
    wid = workflow_id(run["graph_id"], str(run["workflow_run_id"]))
    entries = _stream_items(temporal, wid, run, poll_cooldown)
    # chunks, tokens and custom writes come as rows; so does the ending of a run whose
    # durable stream begins with it, written by the segment that ends it: such a run is
    # read from Postgres alone unless it pauses, fails or is cancelled (merge_live's lazy)
    lazy = first == 0 and get_registry().get(run["graph_id"]).run.stream is None
    entries = token_reader.merge_live(
        pool, entries, str(run["workflow_run_id"]),
        lambda entry: entry[2] in RUN_ENDINGS and entry[1] >= first, lazy=lazy)
    async for entry in entries:
        if entry[0] == "fail":
            yield entry[1], "error", entry[2]
            return
        if entry[0] == "token":
            _, seq, base, data = entry
            out = deriver.token(data, base)
            if base < first:
                continue
            for name, payload in out:
                if after is None or (base, 0, seq) > after:
                    yield f"{base}.t{seq}", name, payload
            continue
        _, offset, kind, data = entry
        out = deriver.feed(offset, kind, data)
        if offset < first:
            continue
        for j, (name, payload) in enumerate(out):
            if after is None or (offset, 1, j) > after:
                yield f"{offset}.{j}", name, payload
        if kind in RUN_ENDINGS:
            return


THREAD_STREAM_MODES = ("run_modes", "lifecycle", "state_update")
"""``GET /threads/{id}/stream`` modes, as the Agent Server names them."""
THREAD_STREAM_POLL_SECONDS = 0.5
"""How often a thread stream with no run in progress looks for the thread's next run."""


def check_thread_stream_modes(modes: list[str]) -> None:
    """Refuse a thread stream mode the Agent Server does not have.

    Raises:
        InvalidRequestError: an unknown mode (422, ``details.unknown``).
    """
    unknown = [m for m in modes if m not in THREAD_STREAM_MODES]
    if unknown:
        raise InvalidRequestError(f"thread stream modes are {THREAD_STREAM_MODES}",
                                  details={"field": "stream_modes", "unknown": unknown})


async def thread_runs(pool: asyncpg.Pool, thread_id: uuid.UUID,
                      first: asyncpg.Record | None = None) -> AsyncIterator[asyncpg.Record]:
    """The thread's runs (``agent_runs`` rows) in the order they were made, then each new one.

    From ``first`` (a row with its ``created_at`` and ``run_id``) on, or from the thread's
    first run. With none left, the thread is looked at again every
    :data:`THREAD_STREAM_POLL_SECONDS`; the iteration ends when the thread is deleted.
    Shared by the thread streams (:func:`thread_events`, the protocol's in
    :mod:`services.api.routes.agent_protocol_stream`).
    """
    seen: set[uuid.UUID] = set()
    while True:
        rows = [r for r in await pool.fetch(
            "SELECT * FROM agent_runs WHERE thread_id = $1 AND ($2::timestamptz IS NULL "
            "OR (created_at, run_id) >= ($2::timestamptz, $3::uuid)) ORDER BY created_at, run_id",
            thread_id, first["created_at"] if first else None, first["run_id"] if first else None)
            if r["run_id"] not in seen]
        if not rows:
            if await pool.fetchval("SELECT 1 FROM agent_threads WHERE thread_id = $1",
                                   thread_id) is None:
                return  # the thread was deleted
            await asyncio.sleep(THREAD_STREAM_POLL_SECONDS)
            continue
        seen.add(rows[0]["run_id"])
        yield rows[0]


async def thread_events(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                        modes: list[str], after: str | None = None,
                        ) -> AsyncIterator[tuple[str | None, str, Any]]:
    """``GET /threads/{id}/stream``: every run of the thread in order, then each new one as it comes.

    Each run's events are what its own stream gives (:func:`run_events`, in the stream
    modes the run asked for), its ``end`` replaced by ``metadata`` ``{"status":
    "run_done", "run_id"}``; ids are ``"<run id>:<the run's own event id>"``, so
    ``after`` (a ``Last-Event-ID``) resumes inside the run it names. ``modes``:
    ``run_modes`` (every event, the default), ``lifecycle`` (only ``metadata``: a run's
    start and its ``run_done``); ``state_update`` is accepted and has no events here.
    The stream ends when the thread is deleted; otherwise the client closes it.

    Raises:
        InvalidRequestError: an unknown mode (422).
    """
    check_thread_stream_modes(modes)
    everything = "run_modes" in modes
    resume_run: uuid.UUID | None = None
    resume_at: str | None = None
    if after and ":" in after:
        head, _, tail = after.partition(":")
        resume_run, resume_at = parse_uuid(head, "run"), tail
    tid = parse_uuid(thread_id)
    first = None if resume_run is None else await pool.fetchrow(  # the runs before it are behind
        "SELECT created_at, run_id FROM agent_runs WHERE run_id = $1", resume_run)
    async for run in thread_runs(pool, tid, first):
        rid = str(run["run_id"])
        inner = resume_at if run["run_id"] == resume_run else None
        if inner == "done":
            continue
        kwargs = parse_json(run["kwargs"]) or {}
        try:
            run_modes = stream_modes(kwargs.get("stream_mode"))
        except InvalidRequestError:
            run_modes = ["values"]
        async for event_id, name, data in run_events(
                pool, temporal, run, run_modes, after=parse_last_event_id(inner)):
            if name == "end":
                break
            if everything or name == "metadata":
                yield f"{rid}:{event_id}" if event_id else None, name, data
        yield f"{rid}:done", "metadata", {"status": "run_done", "run_id": rid}


class StreamDeriver:
    """Turns a ``SegmentRunWorkflow``'s durable stream items into the Agent Server's events.

    - ``values`` / ``updates`` / ``custom``: the item itself, when its mode is asked for.
    - ``interrupt``: ``updates`` (``{"__interrupt__": [...]}``), ``values`` (the last
      values plus ``__interrupt__``), then ``end``, in LangGraph's own order at a pause.
    - ``messages-tuple`` (``messages`` events, ``[message, metadata]``) and ``messages``
      (``messages/metadata`` then ``messages/complete``): every LangChain message a node
      returns in its update, once per message id, as LangGraph's ``stream_mode="messages"``
      emits a node's output messages (``StreamMessagesHandler.on_chain_end``: messages
      already in the node's input are not emitted again). Nodes run in activities, so there
      are no token chunks: each message comes whole, after its node finished, before the
      ``values`` of its step. A message returned without an id gets the id the graph's
      reducer gave it (read from the next ``values``).
    - ``tasks`` / ``checkpoints`` / ``debug`` (graphs that run as segments): LangGraph's own
      chunks, as its ``astream`` gave them to the segment.
    - ``<mode>|<namespace>`` (``stream_subgraphs``, graphs that run as segments): a
      subgraph's chunk in an asked mode, under the Agent Server's event name.
    - ``error`` → ``error`` ``{error, message}``; ``end`` → ``end``.
    """

    def __init__(self, run: asyncpg.Record, modes: list[str], *,
                 live_messages: bool = False) -> None:
        """Derive for ``run`` (its ids go into message metadata) in ``modes``.

        ``live_messages``: the run's messages come from LangGraph's own ``messages`` mode
        (:meth:`token`; a graph that runs as segments), not from its nodes' updates.
        """
        self.modes = set(modes)
        self.tuples = "messages-tuple" in self.modes
        self.messages = self.tuples or "messages" in self.modes
        self.live = live_messages
        self.last_values: Any = {}
        self.known: set[str] = set()
        self.pending: list[tuple[str, dict[str, Any], int, int]] = []
        self.partial: dict[str, Any] = {}
        self.base_metadata = {"run_id": str(run["run_id"]), "thread_id": str(run["thread_id"]),
                              "graph_id": run["graph_id"], "assistant_id": run["assistant_id"]}
        self.workflow_run_id = str(run["workflow_run_id"])

    def feed(self, offset: int, kind: str | None, data: Any) -> list[tuple[str, Any]]:
        """The events one stream item gives (possibly none)."""
        out: list[tuple[str, Any]] = []
        if kind == "values":
            out += self._flush(data)
            self.last_values = data
            self.known |= {m["id"] for m in _messages_in(data) if m.get("id")}
            if "values" in self.modes:
                out.append(("values", data))
        elif kind == "updates":
            if "updates" in self.modes:
                out.append(("updates", data))
            if self.messages and not self.live and isinstance(data, dict):
                for node, update in data.items():
                    self.pending += [(node, m, offset, i)
                                     for i, m in enumerate(_messages_in(update))]
        elif kind in ("custom", *SEGMENT_STREAM_MODES):
            if kind in self.modes:
                out.append((kind, data))
        elif kind is not None and "|" in kind:  # a subgraph's chunk (stream_subgraphs)
            if kind.split("|", 1)[0] in self.modes:
                out.append((kind, data))
        elif kind == "interrupt":  # as LangGraph streams a pause: updates, then values
            out += self._flush(None)
            if "updates" in self.modes:
                out.append(("updates", {"__interrupt__": data}))
            if "values" in self.modes:
                out.append(("values", {**(self.last_values if isinstance(self.last_values, dict)
                                          else {}), "__interrupt__": data}))
            out.append(("end", None))
        elif kind == "error":
            out += self._flush(None)
            data = data or {}
            out.append(("error", {"error": data.get("code", "error"),
                                  "message": data.get("message", "")}))
        elif kind == "end":
            out += self._flush(None)
            out.append(("end", None))
        return out

    def token(self, data: Any, base: int = 0) -> list[tuple[str, Any]]:
        """The events of one live row: a token, a custom write or one of LangGraph's chunks.

        Rows are ``[message, metadata]`` (``messages``), ``{"custom": …}`` or
        ``{"item": mode, "data": …}``. A chunk row (``values``, ``updates`` … as the
        segment's loop made it; ``base`` is the segment's stream base) is derived as a
        durable item of that kind would be (:meth:`feed`). A ``custom`` row (a node's
        ``get_stream_writer()`` write) is a ``custom`` event (``custom|<namespace>`` from a
        subgraph) when ``custom`` is asked for.

        As the Agent Server sends them: ``messages`` ``[message, metadata]`` for
        ``messages-tuple``; for ``messages``, ``messages/metadata`` the first time a message
        id is seen, then ``messages/partial`` with the message so far (chunks of one id
        added up, as a whole message) or ``messages/complete`` for a whole message. A
        ``RemoveMessage`` (``type: remove``: a retried segment takes back what its dead
        attempt streamed, :func:`overseer.token_stream.retractions`) goes out as a whole
        message does, as LangGraph streams a node's ``RemoveMessage``.
        """
        if isinstance(data, dict) and "item" in data:  # a chunk of the segment's loop
            return self.feed(base, str(data["item"]), data.get("data"))
        if isinstance(data, dict) and "custom" in data:  # a node's get_stream_writer() write
            if "custom" not in self.modes:
                return []
            return [("|".join(["custom", *map(str, data.get("ns") or [])]), data["custom"])]
        if not self.messages or not isinstance(data, list) or len(data) not in (2, 3):
            return []
        message, metadata = data[0], data[1]
        if not isinstance(message, dict):
            return []
        metadata = {**(metadata if isinstance(metadata, dict) else {}), **self.base_metadata}
        mid = str(message.get("id") or "")
        if self.tuples:  # a subgraph's: "messages|<namespace>", as the Agent Server names it
            self.known.add(mid)
            name = "|".join(["messages", *map(str, data[2])]) if len(data) == 3 else "messages"
            return [(name, [message, metadata])]
        out: list[tuple[str, Any]] = []
        if mid not in self.known:
            self.known.add(mid)
            out.append(("messages/metadata", {mid: {"metadata": metadata}}))
        if str(message.get("type", "")).endswith("Chunk"):
            self.partial[mid] = _added(self.partial.get(mid), message)
            return [*out, ("messages/partial", [_whole(self.partial[mid])])]
        self.partial.pop(mid, None)
        return [*out, ("messages/complete", [message])]

    def _flush(self, values: Any) -> list[tuple[str, Any]]:
        """The messages of the step that ``values`` closes (ids resolved against ``values``)."""
        out: list[tuple[str, Any]] = []
        fresh = [m for m in _messages_in(values) if m.get("id") and m["id"] not in self.known]
        for node, message, offset, index in self.pending:
            mid = message.get("id")
            if not mid:
                match = next((m for m in fresh if m.get("type") == message.get("type")
                              and m.get("content") == message.get("content")), None)
                if match is not None:
                    fresh.remove(match)
                    mid = match["id"]
                else:  # the reducer kept no trace of it: an id stable across reads
                    mid = str(uuid.uuid5(uuid.NAMESPACE_URL,
                                         f"overseer:{self.workflow_run_id}:{offset}:{index}"))
                message = {**message, "id": mid}
            if mid in self.known:
                continue
            self.known.add(mid)
            metadata = {**self.base_metadata, "langgraph_node": node}
            if self.tuples:
                out.append(("messages", [message, metadata]))
            else:
                out.append(("messages/metadata", {mid: {"metadata": metadata}}))
                out.append(("messages/complete", [message]))
        self.pending = []
        return out


def _added(so_far: Any, chunk: dict[str, Any]) -> Any:
    """A message chunk (JSON) added to the chunks of its id so far (LangChain's ``+``)."""
    from langchain_core.messages import AIMessageChunk

    if chunk.get("type") != "AIMessageChunk":
        return chunk  # another chunk type: the latest stands for the message so far
    piece = AIMessageChunk.model_validate(chunk)
    return piece if so_far is None else so_far + piece


def _whole(message: Any) -> dict[str, Any]:
    """The message so far as a whole message's JSON (``type: ai``), as ``messages/partial`` shows it."""
    from langchain_core.messages import BaseMessageChunk, message_chunk_to_message

    if isinstance(message, BaseMessageChunk):
        whole = to_jsonable(message_chunk_to_message(message))
        return whole if isinstance(whole, dict) else {}
    return dict(message)


def _is_message(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in MESSAGE_TYPES and "content" in value


def _messages_in(value: Any) -> list[dict[str, Any]]:
    """LangChain messages (JSON form) in a node's update or a state.

    The value itself, a list of them, or a top-level key holding one or a list (where
    LangGraph's messages mode looks).
    """
    if _is_message(value):
        return [value]
    if isinstance(value, list):
        found: list[dict[str, Any]] = [v for v in value if _is_message(v)]
        for v in value:  # a node's several updates in one step
            if isinstance(v, dict) and not _is_message(v):
                found += _messages_in(v)
        return found
    found = []
    if isinstance(value, dict):
        for v in value.values():
            if _is_message(v):
                found.append(v)
            elif isinstance(v, list):
                found += [item for item in v if _is_message(item)]
    return found


WAIT_SYNC_SECONDS = 5.0
"""``runs.wait`` asks Temporal whether the run's workflow has closed (a describe, which the
server answers alone) after this long without word from it in Postgres, then after twice as
long each time (at most :data:`WAIT_SYNC_MAX_SECONDS`); a closed workflow then settles the
thread and its runs from how it closed (:func:`overseer.thread_sync.refresh`), so a run whose
workflow could not hand its state over (terminated from the Temporal UI) still ends a wait.
No query: it costs the worker a workflow task, and asked of every waiting run it slowed a
hundred concurrent ``runs.wait`` (the run's status is read from Postgres every half second
anyway)."""
WAIT_SYNC_MAX_SECONDS = 120.0


async def wait_values(pool: asyncpg.Pool, temporal: Client, run: asyncpg.Record) -> Any:
    """Block until the run's segment ends; the thread's values, with ``__interrupt__`` / ``__error__``.

    Waits on Postgres, not on the workflow's stream: the run's workflow writes the thread's
    state and the run's status when it pauses on an interrupt or ends
    (:func:`overseer.thread_queue.hand_off`) and a ``NOTIFY`` wakes the wait; after
    :data:`WAIT_SYNC_SECONDS` without word it asks the workflow
    (:func:`overseer.thread_queue.sync_thread`'s query), then less and less often. A
    pipeline with its own stream protocol (which hands nothing over) is followed on its
    stream.
    """
    if get_registry().get(run["graph_id"]).run.stream is not None:
        return await _wait_following_stream(pool, temporal, run)
    started, failed = await _started(pool, temporal, run)
    if started is None or failed is not None:
        return {"__error__": failed}
    run = started
    wid = str(run["workflow_run_id"])
    feed = token_reader.listener(pool)
    wake = await feed.watch(wid, states_only=True)  # not woken by its live chunks
    loop = asyncio.get_running_loop()
    asked, every = loop.time(), WAIT_SYNC_SECONDS
    try:
        while True:
            status = await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1",
                                         run["run_id"])
            if status is None:
                return {"__error__": {"error": "not_found", "message": "the run was deleted"}}
            if status not in ACTIVE_RUN_STATUSES:
                break
            if loop.time() - asked >= every:
                await refresh(pool, temporal, str(run["thread_id"]))  # closed unheard?
                asked, every = loop.time(), min(every * 2, WAIT_SYNC_MAX_SECONDS)
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), feed.poll_seconds)
            wake.clear()
    finally:
        await feed.unwatch(wid, wake)
    if status == "error":
        return {"__error__": await run_error(pool, wid)}
    # at an interrupt, reading the workflow's state shows it (the resume that follows may
    # answer it); an ended run's state is already the thread's
    thread = await (sync_thread(pool, temporal, str(run["thread_id"])) if status == "interrupted"
                    else get_thread(pool, str(run["thread_id"])))
    values = parse_json(thread["values"]) or {}
    interrupts = sorted((i for found in (parse_json(thread["interrupts"]) or {}).values()
                         for i in found), key=lambda i: str(i.get("id")))
    if status == "interrupted" and interrupts:
        return {**(values if isinstance(values, dict) else {}), "__interrupt__": interrupts}
    return values


async def _wait_following_stream(pool: asyncpg.Pool, temporal: Client,
                                 run: asyncpg.Record) -> Any:
    """:func:`wait_values` by reading the run's durable stream to its ending."""
    ending: tuple[str, Any] = ("end", None)
    interrupts: Any = None
    async for _, name, data in run_events(pool, temporal, run, ["updates"]):
        if name == "updates" and isinstance(data, dict) and "__interrupt__" in data:
            interrupts = data["__interrupt__"]
        if name in ("end", "error"):
            ending = (name, data)
            break
    thread = await sync_thread(pool, temporal, str(run["thread_id"]))
    await pool.execute("UPDATE agent_runs SET status = $2, updated_at = now() WHERE run_id = $1 "
                       "AND status = ANY($3)", run["run_id"],
                       "error" if ending[0] == "error" else
                       "interrupted" if interrupts else "success", list(ACTIVE_RUN_STATUSES))
    values = parse_json(thread["values"]) or {}
    if ending[0] == "error":
        return {"__error__": ending[1]}
    if interrupts:
        return {**(values if isinstance(values, dict) else {}), "__interrupt__": interrupts}
    return values
