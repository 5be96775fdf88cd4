"""Live streams for Agent Server runs: tokens, custom writes and LangGraph's chunks, as rows.

A run segment (:func:`overseer.runtime.segments.run_segment`) runs LangGraph's own loop with its
``messages`` stream mode, which gives every chat-model token chunk of every node (and every
whole message a node returns that was not streamed) with LangGraph's metadata, its
``custom`` mode (what nodes write with ``get_stream_writer()``) and every other chunk the
run asked for (``values``, ``updates``, ``tasks`` …, a subgraph's), all in LangGraph's
order. The segment writes them to ``agent_run_tokens`` in small batches
(:class:`TokenWriter`: one statement a batch, at most ten a second while a model streams)
and wakes the API with a ``NOTIFY`` on :data:`CHANNEL` that carries the batch's rows; the
API's readers of the run's stream wait on one ``LISTEN`` connection per process
(:class:`TokenListener`) and give the carried rows in order (:meth:`Wake.take`), reading the
table (:func:`read_tokens`) only when they start, at each durable item, after a gap and when
a batch was too large to carry. A token never crosses Temporal: it costs a share of one row
write, not a round trip.

Each row carries the segment's ``stream_base``: how many items the run's durable stream
(Temporal's) held when the segment started. The segment's own items come after its tokens,
so a reader gives a token before the durable item at its base, and ``"<base>.t<seq>"`` as its
SSE id sorts it there when a client rejoins with ``Last-Event-ID``.

What a crash does: a retried segment runs the node it died in again, and that node's model
streams again under a new message id. Before it does, the new attempt retracts what the dead
one streamed and the thread will not keep (:func:`retractions`): one ``messages`` item per such
message, a LangChain ``RemoveMessage`` of its id (``{"type": "remove", "id": …}``), as
LangGraph streams a node's ``RemoveMessage``; ``useStream`` drops the message, and a client that
rebuilds messages as LangGraph's ``add_messages`` does gets exactly the thread's. The chunks of
the superstep that ran again (its ``updates``, the ``values`` after it) come twice; nothing is
lost, since rows are committed before the segment reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from contextvars import ContextVar
from typing import Any

import asyncpg

from overseer.fencing import FENCE_OPEN, Fence, StaleAttempt

CHANNEL = "overseer_run_tokens"
"""The ``NOTIFY`` channel; the payload is the workflow run id whose tokens were written."""
STATE_CHANNEL = "overseer_run_state"
"""The ``NOTIFY`` channel of a run's thread state: its workflow paused on an interrupt or
ended and wrote the thread (:func:`overseer.thread_queue.hand_off`); the payload is the workflow
run id. ``runs.wait`` waits on it instead of following the workflow's stream."""
FLUSH_SECONDS = 0.02
"""A segment writes a token within this long of it, when it has written none for
:data:`WRITE_INTERVAL_SECONDS` (a reply's first token goes out at once) …"""
WRITE_INTERVAL_SECONDS = 0.1
"""… and otherwise writes at most once per this long while a model streams: the tokens of a
reply go out in batches of a few (a model streaming every 25 ms costs 10 writes a second,
not 40; a person reads no faster)."""
FLUSH_ITEMS = 64
"""… or as soon as this many are buffered."""
CHUNK_FLUSH_SECONDS = 1.0
"""A segment writes LangGraph's other chunks (``values``, ``updates`` …) at least this often,
or with the next token, whichever comes first."""
DROPPED_METADATA = ("overseer_run_id", "checkpoint_ns", "langgraph_checkpoint_ns",
                    "__pregel_task_id")
"""LangGraph metadata keys that are Overseer's bookkeeping or internal, not a client's."""

logger = logging.getLogger(__name__)


def token_item(message: Any, metadata: dict[str, Any] | None,
               namespace: tuple[str, ...] = ()) -> list[Any]:
    """``[message, metadata]`` as JSON, the shape of a ``messages-tuple`` event's data.

    Args:
        message: a LangChain message or message chunk from LangGraph's ``messages`` mode.
        metadata: LangGraph's metadata for it (node, step, path, triggers, model name …);
            :data:`DROPPED_METADATA` keys are left out.
        namespace: the subgraph that made it, when the run streams subgraphs
            (``stream_subgraphs``): a third item, the namespace's parts.
    """
    from overseer.graph_codec import to_jsonable

    meta = {k: v for k, v in (metadata or {}).items() if k not in DROPPED_METADATA}
    item = [to_jsonable(message), to_jsonable(meta)]
    return [*item, list(namespace)] if namespace else item


def custom_item(chunk: Any, namespace: tuple[str, ...] = ()) -> dict[str, Any]:
    """``{"custom": chunk}`` as JSON: a node's ``get_stream_writer()`` write, live like a token.

    Args:
        chunk: what the node wrote.
        namespace: the subgraph that wrote it, when the run streams subgraphs (``"ns"``).
    """
    from overseer.graph_codec import to_jsonable

    item: dict[str, Any] = {"custom": to_jsonable(chunk)}
    if namespace:
        item["ns"] = list(namespace)
    return item


def chunk_item(mode: str, data: Any) -> dict[str, Any]:
    """``{"item": mode, "data": data}``: one of LangGraph's stream chunks, live like a token.

    ``mode`` is ``values``, ``updates``, ``tasks`` … or ``"<mode>|<namespace>"`` from a
    subgraph; ``data`` is already JSON (claim-checked by the segment).
    """
    return {"item": mode, "data": data}


def own_item(event: dict[str, Any]) -> dict[str, Any]:
    """``{"own": event}``: one event of a pipeline's own stream protocol (``Pipeline.run.stream``), live.

    ``event`` is what the pipeline's :class:`~overseer.pipelines.RunStream` made of a chunk
    (or a node wrote with ``get_stream_writer()``), already JSON; the pipeline's reader
    merges these rows with the events its workflow publishes (:func:`merge_live`).
    """
    return {"own": event}


def ending_item(offset: int, event: str, data: Any) -> dict[str, Any]:
    """``{"durable": {"offset", "event", "data"}}``: a run's ending item, as a row too.

    The segment that ends an Agent Server run writes its thread's hand-off itself
    (:func:`overseer.runtime.segment_ending.write_ending`), and with it this row: the ``end``
    item its workflow publishes next at ``offset`` on the run's durable stream, the same
    ``event`` and ``data``. A reader of the run's stream (:func:`overseer.token_reader.merge_live`
    with ``lazy``) ends on it without asking Temporal for the workflow's stream: a streamed
    chat then costs no workflow update (one workflow task and five history events fewer).
    Written after every token row of the run (the segment's writer is closed first), at
    ``stream_base`` = ``offset``, once (:data:`INSERT_ENDING_ROW`).
    """
    return {"durable": {"offset": offset, "event": event, "data": data}}


INSERT_ENDING_ROW = (
    "INSERT INTO agent_run_tokens (workflow_run_id, stream_base, data) "
    "SELECT $1, $2, $3::json WHERE NOT EXISTS (SELECT 1 FROM agent_run_tokens "
    "WHERE workflow_run_id = $1 AND stream_base = $2 AND (data->'durable') IS NOT NULL)")
"""Writes :func:`ending_item` ``$3`` (JSON text) of run ``$1`` at base ``$2``, unless a
retried hand-off wrote it already; in the hand-off's transaction."""


def event_item(event: dict[str, Any]) -> dict[str, Any]:
    """``{"item": "events", "data": event}``: one of LangChain's callback events, live.

    ``event`` is an ``astream_events(version="v2")`` event (``event``, ``name``, ``run_id``,
    ``parent_ids``, ``tags``, ``metadata``, ``data``), as the Agent Server's ``events`` stream
    mode sends it; Overseer's own metadata keys (``overseer_*``) are left out.
    """
    from overseer.graph_codec import to_jsonable

    metadata = {k: v for k, v in (event.get("metadata") or {}).items()
                if not str(k).startswith("overseer")}
    return chunk_item("events", to_jsonable({**event, "metadata": metadata}))


class TokenWriter:
    """Buffers one segment's live items (tokens, custom writes, chunks) and writes them in order.

    A token or a custom write is written within :data:`FLUSH_SECONDS`, but at most one write
    per :data:`WRITE_INTERVAL_SECONDS`; one of LangGraph's chunks (``values``, ``updates`` …)
    within :data:`CHUNK_FLUSH_SECONDS`, or sooner with the next token (the order is always
    the loop's), so a run nobody watches token by token costs one write per segment or per
    second, not one per chunk. A write is one statement: the rows and their ``NOTIFY``.

    Args:
        pool: Overseer's pool.
        workflow_run_id: the run whose workflow runs the segment (uuid text).
        stream_base: the run's durable stream length when the segment started.
        fence: the segment attempt writing (:mod:`overseer.fencing`): once a newer attempt
            holds the segment, a write inserts nothing and raises
            :class:`~overseer.fencing.StaleAttempt`.
    """

    def __init__(self, pool: asyncpg.Pool, workflow_run_id: str, stream_base: int,
                 fence: Fence | None = None) -> None:
        self.pool, self.run, self.base = pool, uuid.UUID(workflow_run_id), stream_base
        self.fence = fence
        self._buffer: list[list[Any] | dict[str, Any]] = []
        self._lock = asyncio.Lock()
        self._timers: set[asyncio.Task[None]] = set()
        self._due: float | None = None
        self._closing = asyncio.Event()
        self._failed: BaseException | None = None
        self._last_write = -WRITE_INTERVAL_SECONDS
        self._prev = 0  # the seq of this writer's last row (0: none yet)
        self.written = 0

    async def add(self, item: list[Any] | dict[str, Any], *,
                  within: float = FLUSH_SECONDS) -> None:
        """Buffer an item (:func:`token_item`, :func:`custom_item`, :func:`chunk_item`).

        It is written within ``within`` seconds (with every item buffered before it), but
        not sooner than :data:`WRITE_INTERVAL_SECONDS` after the last write, or at once when
        :data:`FLUSH_ITEMS` are buffered.

        Raises:
            asyncpg.PostgresError, OSError: an earlier write failed: what it held never
                reached a reader, so the segment must fail (and run again from its last
                checkpoint) rather than go on with a hole in its stream.
        """
        if self._failed is not None:  # the stream has a hole: the segment stops here
            raise self._failed
        self._buffer.append(item)
        if len(self._buffer) >= FLUSH_ITEMS:
            await self.flush()
            return
        now = time.monotonic()
        due = max(now + within, self._last_write + WRITE_INTERVAL_SECONDS)
        within = due - now
        if self._due is not None and self._due <= due:
            return  # a write is due by then anyway
        self._due = due
        timer = asyncio.create_task(self._later(within))
        self._timers.add(timer)
        timer.add_done_callback(self._timers.discard)

    async def _later(self, delay: float) -> None:
        """Write after ``delay`` (or as the writer closes); never cancelled mid-write."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), timeout=delay)
        try:
            await self.flush()
        except (asyncpg.PostgresError, OSError, StaleAttempt) as err:  # raised again by close()
            self._failed = err

    async def settle(self) -> None:
        """Write what is buffered now and raise a write that failed: before a checkpoint.

        LangGraph's checkpointer calls it (through :data:`current_writers`) before each
        checkpoint and each task's writes, so a checkpoint never holds a message whose
        tokens did not reach the stream: when a write failed (the database went away), the
        checkpoint is not written either, and the segment runs that node again.

        Raises:
            asyncpg.PostgresError, OSError: this write, or an earlier one, failed.
            StaleAttempt: a newer attempt holds the segment.
        """
        if self._failed is not None:
            raise self._failed
        if self._buffer:
            await self.flush()

    async def close(self) -> None:
        """Write what is left; raise a write that failed in the background.

        Raises:
            asyncpg.PostgresError, OSError: a write failed (the segment fails and Temporal
                retries it).
        """
        self._closing.set()  # pending writes go now, none is cut off half-way
        if self._timers:
            await asyncio.gather(*self._timers)
        await self.flush()
        if self._failed is not None:
            raise self._failed

    async def flush(self) -> None:
        """Write what is buffered: one statement (so one transaction), the rows in order, then one ``NOTIFY``.

        Raises:
            asyncpg.PostgresError, OSError: the database is unavailable (the segment fails
                and Temporal retries it).
            StaleAttempt: a newer attempt holds the segment (nothing was written).
        """
        async with self._lock:
            items, self._buffer, self._due = self._buffer, [], None
            if not items:
                return
            self._last_write = time.monotonic()
            header = f"{self.run} {self.base} {self._prev}"
            fence = self.fence.args() if self.fence is not None else (None, None, None)
            last = await self.pool.fetchval(
                WRITE_ROWS, self.run, self.base, [json.dumps(i, default=str) for i in items],
                CHANNEL, header, NOTIFY_MAX_BYTES - len(header) - 1, *fence)
            if last is None:  # the fence was closed: nothing was written
                raise StaleAttempt(f"run {self.run}: a newer attempt streams this segment")
            self._prev = int(last)
            self.written += len(items)


current_writers: ContextVar[tuple[TokenWriter, ...]] = ContextVar("overseer_token_writers",
                                                                   default=())
"""The live stream writers of the segment attempt running in this context (set by the segment
activity; LangGraph's checkpointer settles them before each write: :meth:`TokenWriter.settle`)."""


NOTIFY_MAX_BYTES = 7900
"""Postgres refuses a ``NOTIFY`` payload of 8000 bytes or more; a batch that would not fit is
announced by its run id alone, and its readers read it from the table."""

WRITE_ROWS = (
    "WITH rows AS (INSERT INTO agent_run_tokens (workflow_run_id, stream_base, data) "
    "SELECT $1, $2, item::json FROM unnest($3::text[]) WITH ORDINALITY AS t(item, n) "
    "WHERE " + FENCE_OPEN.format(run="$7", segment="$8", holder="$9") + " ORDER BY n "
    "RETURNING seq, data), "
    "batch AS (SELECT max(seq) AS last, "
    "json_agg(json_build_array(seq, data) ORDER BY seq)::text AS rows FROM rows) "
    "SELECT last, pg_notify($4, CASE WHEN octet_length(rows) <= $6 THEN $5 || ' ' || rows "
    "ELSE $1::text END) FROM batch")
"""One write of :class:`TokenWriter`, one statement (so one transaction): rows ``$3`` (JSON
texts, in order: ``seq`` follows it) of run ``$1`` at base ``$2``, and the ``NOTIFY`` that
wakes their readers, sent when it commits. The payload carries the rows themselves when they
fit (``<run> <base> <prev> [[seq, data], …]``, ``prev`` the seq of the writer's row before
them: :func:`parse_batch`), so a reader that has read up to ``prev`` needs no read of its
own; else the run id alone. Returns the last row's seq, or NULL when the segment attempt
``($7, $8, $9)`` was fenced off (:data:`overseer.fencing.FENCE_OPEN`; NULLs: no fence) and
nothing was written."""


async def segment_rows(pool: asyncpg.Pool, workflow_run_id: str, stream_base: int) -> list[Any]:
    """The ``data`` of the run's rows at ``stream_base`` (one segment's, every attempt's), in order."""
    return [r["data"] for r in await pool.fetch(
        "SELECT data FROM agent_run_tokens WHERE workflow_run_id = $1 AND stream_base = $2 "
        "ORDER BY seq", uuid.UUID(workflow_run_id), stream_base)]


def retractions(rows: list[Any], kept: set[str]) -> list[list[Any]]:
    """What a new attempt of a segment takes back of what its earlier attempts streamed.

    Every root message (``[message, metadata]`` rows: a token chunk or a whole message) whose
    id is not in ``kept`` and not removed already: the attempt that streamed it died before
    the thread kept it, and the node that made it runs again (a new model call, a new id).

    Args:
        rows: the segment's rows so far (:func:`segment_rows`; JSON text or parsed).
        kept: ids of the messages the thread keeps: its state where the new attempt starts
            and the writes LangGraph kept of that superstep's finished tasks.

    Returns:
        ``[RemoveMessage JSON, metadata]`` items (:func:`token_item`), one per message, in
        the order the messages were first streamed; the metadata is the message's first row's.
    """
    from langchain_core.messages import RemoveMessage

    streamed: dict[str, Any] = {}
    for data in rows:
        item = json.loads(data) if isinstance(data, str) else data
        if not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], dict):
            continue  # not a root message: a chunk, a custom write, a subgraph's message
        mid = item[0].get("id")
        if not mid:
            continue
        if item[0].get("type") == "remove":
            streamed.pop(str(mid), None)
        else:
            streamed.setdefault(str(mid), item[1])
    return [token_item(RemoveMessage(id=mid), meta if isinstance(meta, dict) else {})
            for mid, meta in streamed.items() if mid not in kept]


def message_ids(value: Any) -> set[str]:
    """Ids of the LangChain messages anywhere in ``value`` (a state, a node's writes), objects or JSON."""
    from langchain_core.messages import BaseMessage

    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseMessage):
            if item.id:
                found.add(str(item.id))
        elif isinstance(item, dict):
            if isinstance(item.get("type"), str) and item.get("id") and "content" in item:
                found.add(str(item["id"]))
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return found


DELETE_THREAD_TOKENS = ("DELETE FROM agent_run_tokens WHERE workflow_run_id IN "
                        "(SELECT workflow_run_id FROM agent_runs WHERE thread_id = $1)")
"""Deletes the token rows of thread ``$1``'s runs (for the statement that deletes the thread:
:func:`overseer.threads.delete_thread`)."""
