"""The graph a run segment runs: compiled once per process on LangGraph's Postgres checkpointer.

:func:`checkpointer` is this process's ``AsyncPostgresSaver`` on Overseer's Postgres
(LangGraph's tables, made by its own ``setup()``); :func:`compiled` is a pipeline's graph
compiled with it and the store, once per process (the worker's segments and the API's view of
a thread both use it); :func:`placed` names the graph's nodes with options. Each checkpoint
names the run and the segment that wrote it (:data:`overseer.run_types.RUN_ID_KEY`,
:data:`~overseer.run_types.SEGMENT_KEY`). In a segment, a checkpoint or a task's writes go
in only while the segment's attempt holds it (:mod:`overseer.fencing`: a replaced attempt
writes nothing over its replacement's).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from overseer.resources import get_runtime

IDLE_TX_MS = 10_000
"""A checkpointer connection idle this long inside a transaction is closed by Postgres (ms)."""
_saver: Any = None
_saver_lock = asyncio.Lock()
_compiled: dict[str, Any] = {}


async def checkpointer(database_url: str | None = None) -> Any:
    """This process's ``AsyncPostgresSaver`` on Overseer's Postgres (tables made once by ``setup()``).

    Args:
        database_url: where (default: the activity runtime's settings; the API passes its own).
    """
    global _saver
    async with _saver_lock:
        if _saver is None:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            from overseer.graph_store import serialised_setup

            settings = get_runtime().settings if database_url is None else None
            url = database_url or str(settings.database_url if settings else "")
            size = settings.worker_max_concurrent_activities if settings else 4
            pool = AsyncConnectionPool(
                url, min_size=1, max_size=max(4, size), open=False,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
                        # a worker paused inside a checkpoint write holds its fence row's
                        # share lock: the server ends that transaction, and a newer
                        # attempt's claim goes on
                        "options": f"-c idle_in_transaction_session_timeout={IDLE_TX_MS}"})
            await pool.open(wait=True)
            saver = _fenced(AsyncPostgresSaver)(pool)  # dict rows, as it expects
            await serialised_setup(pool, saver.setup)  # a worker starting beside another
            _saver = saver
    return _saver


def _fenced(saver_class: type) -> type:
    """``AsyncPostgresSaver`` writing for a segment attempt only while it holds its segment.

    And only after what its live stream holds is written.

    Outside a segment (the API's reads and edits of a thread) it is LangGraph's saver as is.
    Before each checkpoint and each task's writes a segment's attempt writes its buffered
    live items (:meth:`overseer.token_stream.TokenWriter.settle`: a message is never in a
    checkpoint whose tokens a client could not get); the write itself runs in one
    transaction that first takes a share lock on the attempt's fence row
    (:data:`overseer.fencing.FENCE_HELD`) and goes on only while the attempt holds it.
    On a connection pool (the worker's and the API's) no lock serialises the process's
    checkpoint reads and writes: each cursor takes a pooled connection of its own.

    Raises (from ``aput`` / ``aput_writes``):
        overseer.fencing.StaleAttempt: a newer attempt holds the segment.
        asyncpg.PostgresError, OSError: a live stream write failed (the database is away).
    """
    from langgraph.checkpoint.postgres import _ainternal
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from overseer.fencing import FENCE_HELD, StaleAttempt, current
    from overseer.token_stream import current_writers

    async def ready() -> None:
        for writer in current_writers.get():  # the stream is whole up to this checkpoint
            await writer.settle()

    class FencedPostgresSaver(saver_class):  # type: ignore[misc]
        async def aput(self, *args: Any, **kwargs: Any) -> Any:
            await ready()
            return await super().aput(*args, **kwargs)

        async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
            await ready()
            return await super().aput_writes(*args, **kwargs)

        @contextlib.asynccontextmanager
        async def _cursor(self, *, pipeline: bool = False) -> AsyncIterator[Any]:
            # LangGraph's saver serialises every read and write on one lock, which a single
            # connection needs; on a pool each cursor has a connection of its own, so the
            # process's segments read and write their checkpoints side by side
            pooled = isinstance(self.conn, AsyncConnectionPool)
            fence = current.get()
            if not pooled and (fence is None or not pipeline):
                async with super()._cursor(pipeline=pipeline) as cur:
                    yield cur
                return
            if fence is None or not pipeline:  # reads, and writes outside a segment
                async with _ainternal.get_connection(self.conn) as conn:
                    if pipeline:  # LangGraph's writes: pipeline mode, or one transaction
                        async with (conn.pipeline() if self.supports_pipeline
                                    else conn.transaction()), \
                                conn.cursor(binary=True, row_factory=dict_row) as cur:
                            yield cur
                    else:
                        async with conn.cursor(binary=True, row_factory=dict_row) as cur:
                            yield cur
                return
            # a segment's write: in one transaction with a share lock on its fence row, so
            # it commits before a newer attempt's claim (which waits for it) or not at all.
            # In pipeline mode: BEGIN and the lock go in one round trip, LangGraph's writes
            # and the COMMIT in another (not five: a chat run makes ~7 such writes)
            async with (contextlib.nullcontext() if pooled else self.lock), \
                    _ainternal.get_connection(self.conn) as conn, \
                    (conn.pipeline() if self.supports_pipeline else contextlib.nullcontext()), \
                    conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                await cur.execute(FENCE_HELD, (fence.run_id, fence.segment))
                row = await cur.fetchone()
                if row is not None and row["holder"] != fence.holder:
                    raise StaleAttempt(f"segment {fence.segment} of run {fence.run_id} runs "
                                       "in a newer attempt; its checkpoint is not written")
                yield cur

    return FencedPostgresSaver


async def compiled(pipeline: str, database_url: str | None = None) -> Any:
    """The pipeline's graph compiled with :func:`checkpointer` and the store (once per process).

    The store is :func:`overseer.graph_store.graph_store`: nodes get it as LangGraph's
    ``BaseStore`` (``store`` argument, ``get_store()``).
    """
    if pipeline not in _compiled:
        from overseer.graph_store import graph_store
        from overseer.registry import get_registry

        registry = get_registry()
        saver = await checkpointer(database_url)
        store = await graph_store(None if database_url else get_runtime().settings)
        _compiled[pipeline] = (  # an entrypoint is compiled already: it gets both, as LangGraph's server does
            registry.app(pipeline).copy(update={"checkpointer": saver, "store": store})
            if registry.functional(pipeline)
            else registry.builder(pipeline).compile(checkpointer=saver, store=store))
    return _compiled[pipeline]


_placed_by_pipeline: dict[str, list[str]] = {}


def placed(pipeline: str) -> list[str]:
    """The pipeline's nodes with options (each runs as its own activity), once per process.

    Args:
        pipeline: the registry name of the graph.

    Returns:
        The node names (:func:`overseer.node_options.placed_nodes`).
    """
    if pipeline not in _placed_by_pipeline:
        from overseer.node_options import placed_nodes
        from overseer.registry import get_registry

        _placed_by_pipeline[pipeline] = placed_nodes(get_registry().node_metadata(pipeline))
    return _placed_by_pipeline[pipeline]
