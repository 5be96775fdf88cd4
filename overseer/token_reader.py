"""The API's side of the live streams: reading a run's token rows as the segments write them.

A run segment writes its stream's rows and ``NOTIFY`` (:class:`overseer.token_stream.TokenWriter`);
here the API reads them: one ``LISTEN`` connection per process (:class:`TokenListener`), whose
notifications carry the rows (:func:`parse_batch`, given in order by :meth:`Wake.take`), the
table read when a reader starts, at each durable item, after a gap and when a batch was too
large to carry (:func:`read_tokens`), and the rows merged with the run's durable items
(:func:`durable_items`, :func:`merge_live`). See :mod:`overseer.token_stream` for the rows'
order and what a crash does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg

from overseer.token_stream import CHANNEL, STATE_CHANNEL

POLL_SECONDS = 0.5
"""A token reader (:func:`merge_live`) or a ``runs.wait`` looks again after this long
without a notification while this process has no ``LISTEN`` connection (it could not be
had, or it was lost: its ``NOTIFY``s are missed; :attr:`TokenListener.poll_seconds`)."""
LISTENING_POLL_SECONDS = 5.0
"""… and after this long while the process listens: a ``NOTIFY`` wakes the reader (it
carries the rows, or says to read them), and a lost connection wakes every reader at once;
this poll only bounds what a connection that hangs without closing would delay. (A token
reader that polled every half second while a model thought or a tool ran read the table
~8 times in a chat run for nothing.)"""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """One :class:`TokenWriter` write as its ``NOTIFY`` carried it.

    Attributes:
        base: the rows' ``stream_base``.
        prev: the seq of the writer's row before them (0: the writer's first write, so
            what came before it is unknown to the reader).
        rows: ``[(seq, data)]`` in order, ``data`` parsed.
    """

    base: int
    prev: int
    rows: list[tuple[int, Any]]


def parse_batch(payload: str) -> tuple[str, Batch | None]:
    """A :data:`CHANNEL` payload: its run id and the rows it carries (None: the run id alone).

    Raises:
        ValueError: not a payload :data:`WRITE_ROWS` makes.
    """
    run, _, rest = payload.partition(" ")
    if not rest:
        return run, None
    base, prev, rows = rest.split(" ", 2)
    return run, Batch(int(base), int(prev), [(int(seq), data) for seq, data in json.loads(rows)])


async def read_tokens(pool: asyncpg.Pool, workflow_run_id: str, after_seq: int,
                      max_base: int) -> list[asyncpg.Record]:
    """The run's token rows after ``after_seq`` whose ``stream_base`` ≤ ``max_base``, in order.

    Bases do not decrease along ``seq`` within a run (one segment at a time), so the rows
    returned are a prefix of what is left: a reader at durable offset ``max_base`` gets
    every token due before that item and none of a later segment.

    Returns:
        Records ``(seq, stream_base, data)``; ``data`` is ``[message, metadata]`` (a token,
        :func:`token_item`), ``{"custom": chunk}`` (:func:`custom_item`) or
        ``{"item": mode, "data": chunk}`` (:func:`chunk_item`).
    """
    return list(await pool.fetch(
        "SELECT seq, stream_base, data FROM agent_run_tokens WHERE workflow_run_id = $1 "
        "AND seq > $2 AND stream_base <= $3 ORDER BY seq",
        uuid.UUID(workflow_run_id), after_seq, max_base))


async def count_own(pool: asyncpg.Pool, workflow_run_id: str) -> int:
    """How many :func:`own_item` rows the run has (what a pipeline's reader counts in its ids)."""
    return int(await pool.fetchval(
        "SELECT count(*) FROM agent_run_tokens WHERE workflow_run_id = $1 "
        "AND data->'own' IS NOT NULL", uuid.UUID(workflow_run_id)))


async def durable_items(temporal: Any, workflow_id: str, topic: str,
                        ends: Callable[[int, Any], bool], *,
                        poll_cooldown: timedelta = timedelta(milliseconds=50),
                        max_errors: int = 5) -> AsyncIterator[tuple[Any, ...]]:
    """A run's durable stream (the workflow's ``WorkflowStream`` topic) from offset 0.

    Args:
        temporal: the Temporal client.
        workflow_id: the run's workflow (its continue-as-new chain is followed).
        topic: the stream topic.
        ends: ``(offset, data)`` → True for the item after which the stream ends (the
            run's ending).
        poll_cooldown: the subscription's poll interval when caught up.
        max_errors: transient RPC failures in a row before giving up.

    Yields:
        ``("item", offset, data)`` entries; or, last, one ``("fail", offset, code)`` with
        ``code`` ``run_ended`` (the stream ended without an ending item), ``not_found`` (no
        such workflow) or ``dependency_unavailable`` (Temporal did not answer). A transient
        failure resubscribes from the next offset, so nothing repeats.
    """
    from temporalio.contrib.workflow_streams import WorkflowStreamClient
    from temporalio.service import RPCError, RPCStatusCode

    offset, errors = 0, 0
    while True:
        client = WorkflowStreamClient.create(temporal, workflow_id)
        try:
            async for item in client.subscribe([topic], from_offset=offset,
                                               poll_cooldown=poll_cooldown):
                offset, errors = item.offset + 1, 0
                yield "item", item.offset, item.data
                if ends(item.offset, item.data):
                    return
            yield "fail", offset, "run_ended"
            return
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                yield "fail", offset, "not_found"
                return
            errors += 1
            if errors > max_errors:
                yield "fail", offset, "dependency_unavailable"
                return
            await asyncio.sleep(min(0.2 * 2 ** errors, 5))


async def merge_live(pool: asyncpg.Pool, items: AsyncIterator[tuple[Any, ...]],
                     workflow_run_id: str, ends: Callable[[tuple[Any, ...]], bool], *,
                     lazy: bool = False) -> AsyncIterator[tuple[Any, ...]]:
    """``items`` (a run's durable stream) with the run's live rows between them, in one order.

    Args:
        pool: Overseer's pool.
        items: the durable stream from offset 0, as entries whose first two fields are
            ``("item", offset, …)``; any other entry (an error) is passed on and ends it.
        workflow_run_id: the run whose rows are merged.
        ends: True for the entry after which the merged stream ends (the run's ending).
        lazy: follow ``items`` only when the rows do not end the run. The segment that
            ends an Agent Server run writes its ending item as a row
            (:func:`overseer.token_stream.ending_item`: ``("item", offset, event, data)``
            here, as ``items`` would give it), so a run that ends that way is read from
            Postgres alone and its workflow is asked for nothing. ``items`` is opened once
            the run's thread state is written without that row (a pause on an interrupt,
            an error, a cancellation: the ``NOTIFY`` on :data:`STATE_CHANNEL`), when this
            process does not listen, or after :data:`LISTENING_POLL_SECONDS` without a row
            (a workflow ended without a hand-off, e.g. terminated). Meant for a run whose
            durable stream begins with it (``from_offset`` 0) and holds only its pauses
            and its ending: nothing on that stream comes before a row-carried ending.

    Yields:
        The entries of ``items`` and ``("token", seq, stream_base, data)`` for each row
        (:func:`read_tokens`). A row is given as soon as it is written (a ``NOTIFY`` wakes
        the reader, or a poll: :attr:`TokenListener.poll_seconds`) and the items before its
        ``stream_base`` have been given (right after the last of them, when the row was
        written first), and always before the durable item at its ``stream_base``: a
        segment commits its rows before it reports, so when item ``k`` arrives every row
        due before it can be read. Read again, the same rows and items come in the same
        order; an item given from its row is not given again from ``items``.
    """
    queue: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for entry in items:
                await queue.put(entry)
        except Exception as err:  # noqa: BLE001 - raised again by the reader below
            await queue.put(("raise", err))

    feed = listener(pool)
    wake = await feed.watch(workflow_run_id)
    pumping: asyncio.Task[None] | None = None
    getting: asyncio.Task[tuple[Any, ...]] | None = None
    woken: asyncio.Task[bool] | None = None
    last_seq, offset = 0, 0  # offset: the next durable item not yet given
    look_now = True  # rows written before this reader listened: read them first
    quiet_since = time.monotonic()
    try:
        while True:
            if pumping is None and (not lazy or wake.state or not feed.listening
                                    or time.monotonic() - quiet_since >= LISTENING_POLL_SECONDS):
                pumping = asyncio.create_task(pump())
            if getting is None and pumping is not None:
                getting = asyncio.create_task(queue.get())
            notified = False
            if not look_now:
                woken = asyncio.create_task(wake.wait())
                await asyncio.wait({t for t in (getting, woken) if t is not None},
                                   timeout=feed.poll_seconds, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                notified = wake.is_set()
            look_now = False
            wake.clear()  # a NOTIFY from here on wakes the next wait: the read below misses nothing
            entry: tuple[Any, ...] | None = None
            if getting is not None and getting.done():
                entry, getting = getting.result(), None
            bound = entry[1] if entry is not None and entry[0] == "item" else offset
            # Woken by a NOTIFY that carried its rows, they are given as they came; a durable
            # item, a poll, a gap or a lost connection reads the table: every row due before
            # the item is committed by then, its NOTIFY not always delivered yet.
            rows = wake.take(last_seq, bound) if notified and entry is None else None
            if rows is None:
                rows = [(r["seq"], r["stream_base"], r["data"])
                        for r in await read_tokens(pool, workflow_run_id, last_seq, bound)]
            for seq, base, data in rows:
                last_seq, quiet_since = seq, time.monotonic()
                row = json.loads(data) if isinstance(data, str) else data
                item = _ending_of(row)
                if item is None:
                    yield "token", seq, base, row
                    continue
                if item[1] < offset:
                    continue  # given already, from the workflow's stream
                yield item
                if ends(item):
                    return
                offset = item[1] + 1
            if entry is None:
                continue
            if entry[0] == "raise":
                raise entry[1]
            if entry[0] == "item" and entry[1] < offset:
                continue  # given already, from its row
            yield entry
            if entry[0] != "item" or ends(entry):
                return
            offset = entry[1] + 1
            # rows of the next segment may have been written (and their NOTIFY spent) while
            # this item was awaited: read them now, not at the next wake-up or poll
            look_now = True
    finally:
        for task in (pumping, getting, woken):  # a client that left closes us mid-wait
            if task is not None:
                task.cancel()
        await feed.unwatch(workflow_run_id, wake)


def _ending_of(row: Any) -> tuple[Any, ...] | None:
    """A run's ending item written as a row, as ``("item", offset, event, data)``; else None.

    See :func:`overseer.token_stream.ending_item`.
    """
    durable = row.get("durable") if isinstance(row, dict) else None
    if not isinstance(durable, dict):
        return None
    return "item", int(durable["offset"]), durable.get("event"), durable.get("data")


class Wake(asyncio.Event):
    """A reader's wake-up (set by each ``NOTIFY`` of its run) and the rows those carried.

    Attributes:
        batches: what the ``NOTIFY``s carried since the reader last took them, in order.
        stale: a ``NOTIFY`` may have been missed (the connection was lost, or one did not
            carry its rows): the reader must read the table.
        state: the run's thread state was written (a pause or an ending handed off, a
            ``NOTIFY`` on :data:`STATE_CHANNEL`), or the connection was lost since the
            reader began.
    """

    def __init__(self) -> None:
        super().__init__()
        self.batches: deque[Batch] = deque()
        self.stale = False
        self.state = False

    def take(self, last_seq: int, bound: int) -> list[tuple[int, int, Any]] | None:
        """The carried rows after ``last_seq`` with ``stream_base`` ≤ ``bound``, in order.

        Returns:
            ``[(seq, stream_base, data)]``; None when rows may be missing (a gap between
            ``last_seq`` and the next batch, or :attr:`stale`): read the table instead.
            Rows of a later base stay for a later call.
        """
        if self.stale:
            self.stale = False
            self.batches.clear()
            return None
        out: list[tuple[int, int, Any]] = []
        while self.batches:
            batch = self.batches[0]
            if batch.rows[-1][0] <= last_seq:  # read from the table meanwhile
                self.batches.popleft()
                continue
            if batch.prev != last_seq:
                self.batches.clear()
                return None
            if batch.base > bound:
                break
            self.batches.popleft()
            out += [(seq, batch.base, data) for seq, data in batch.rows]
            last_seq = batch.rows[-1][0]
        return out


class TokenListener:
    """One ``LISTEN`` connection per API process; readers wait on it for their run's tokens.

    It listens on :data:`CHANNEL` and :data:`STATE_CHANNEL`: a reader of a run's tokens
    wakes on either and looks again at what it waits for; a ``runs.wait``
    (``watch(..., states_only=True)``) wakes only when the run's state is written, not at
    every batch of its live chunks.

    Taken from the pool by the first reader (:meth:`watch`) and given back by the last
    (:meth:`unwatch`); when it cannot be had, or is lost, readers keep going on
    :data:`POLL_SECONDS` polls (:attr:`poll_seconds`) and the next :meth:`watch` tries again.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._conn: Any = None
        self._waiters: dict[str, set[Wake]] = {}
        self._states_only: set[Wake] = set()
        self._connecting = asyncio.Lock()

    def _notified(self, _conn: Any, _pid: int, channel: str, payload: object) -> None:
        if channel != CHANNEL:  # the state's write may carry a row (the run's ending): read
            for event in self._waiters.get(str(payload), ()):
                event.state = event.stale = True
                event.set()
            return
        run, _, _ = str(payload).partition(" ")
        readers = [w for w in self._waiters.get(run, ()) if w not in self._states_only]
        if not readers:
            return
        try:
            _, batch = parse_batch(str(payload))
        except ValueError:
            batch = None
        for wake in readers:
            if batch is None:
                wake.stale = True
            else:
                wake.batches.append(batch)
            wake.set()

    def _lost(self, _conn: Any) -> None:
        """The connection closed: every reader looks again now, then polls (``NOTIFY``s are missed).

        The pool has taken the connection back itself; the next :meth:`watch` listens anew.
        """
        self._conn = None
        for waiting in self._waiters.values():
            for event in waiting:
                event.stale = event.state = True
                event.set()

    @property
    def listening(self) -> bool:
        """Whether the ``LISTEN`` connection is open (else ``NOTIFY``s are missed)."""
        return self._conn is not None

    @property
    def poll_seconds(self) -> float:
        """How long a ``runs.wait`` waits for a wake-up before it looks again by itself.

        :data:`LISTENING_POLL_SECONDS` while the ``LISTEN`` connection is open,
        :data:`POLL_SECONDS` otherwise.
        """
        return POLL_SECONDS if self._conn is None else LISTENING_POLL_SECONDS

    async def _ensure(self) -> None:
        if self._conn is not None:
            return
        async with self._connecting:
            if self._conn is not None:
                return
            try:
                conn = await self.pool.acquire()
                for channel in (CHANNEL, STATE_CHANNEL):
                    await conn.add_listener(channel, self._notified)
                conn.add_termination_listener(self._lost)
                self._conn = conn
            except (asyncpg.PostgresError, OSError):
                logger.warning("token listener not connected; readers poll", exc_info=True)

    async def watch(self, workflow_run_id: str, *, states_only: bool = False) -> Wake:
        """A :class:`Wake` set whenever the run's tokens or its state are written; clear it on waking.

        With ``states_only``, only when its state is (:data:`STATE_CHANNEL`). Every reader is
        woken (and its wake marked stale) when the connection is lost.
        """
        await self._ensure()
        event = Wake()
        self._waiters.setdefault(workflow_run_id, set()).add(event)
        if states_only:
            self._states_only.add(event)
        return event

    async def unwatch(self, workflow_run_id: str, event: Wake) -> None:
        """Stop setting ``event`` (the reader is done); the last reader gives the connection back.

        So the process holds a ``LISTEN`` connection only while a client reads tokens, and
        closing the pool does not wait for one.
        """
        waiting = self._waiters.get(workflow_run_id, set())
        waiting.discard(event)
        self._states_only.discard(event)
        if not waiting:
            self._waiters.pop(workflow_run_id, None)
        if self._waiters or self._conn is None:
            return
        async with self._connecting:
            if self._waiters or self._conn is None:
                return  # a new reader came meanwhile, or another unwatch gave it back
            conn, self._conn = self._conn, None
            with contextlib.suppress(asyncpg.InterfaceError):  # lost meanwhile: the pool has it
                conn.remove_termination_listener(self._lost)
                with contextlib.suppress(asyncpg.PostgresError, OSError):
                    for channel in (CHANNEL, STATE_CHANNEL):
                        await conn.remove_listener(channel, self._notified)
                await self.pool.release(conn)


_listeners: dict[int, TokenListener] = {}


def listener(pool: asyncpg.Pool) -> TokenListener:
    """This process's :class:`TokenListener` on ``pool`` (made on first use)."""
    found = _listeners.get(id(pool))
    if found is None or found.pool is not pool:
        found = _listeners[id(pool)] = TokenListener(pool)
    return found
