"""The graph a run segment runs: compiled once per process on LangGraph's Postgres checkpointer.

:func:`checkpointer` is this process's ``AsyncPostgresSaver`` on Overseer's Postgres
(LangGraph's tables, made by its own ``setup()``); :func:`compiled` is a pipeline's graph
compiled with it and the store, once per process (the worker's segments and the API's view of
a thread both use it); :func:`placed` names the graph's nodes with options. Each checkpoint
names the run and the segment that wrote it (:data:`RUN_ID_KEY`, :data:`SEGMENT_KEY`). In a
segment, a checkpoint or a task's writes go in only while the segment's attempt holds it
(:mod:`overseer.fencing`: a replaced attempt writes nothing over its replacement's).
"""

from __future__ import annotations

import asyncio
from typing import Any

from activities.runtime import get_runtime

RUN_ID_KEY = "overseer_run_id"
"""Checkpoint metadata naming the run that wrote a checkpoint (from the config's ``metadata``)."""
SEGMENT_KEY = "overseer_segment"
"""Checkpoint metadata naming the segment of its run that wrote it (``SegmentCall.segment``:
0 for the start, one more per resume), so a segment run again tells its own checkpoints from
those of the run's earlier segments."""


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
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
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
    checkpoint whose tokens a client could not get) and checks its fence
    (:func:`overseer.fencing.check_current`, one indexed read).

    Raises (from ``aput`` / ``aput_writes``):
        overseer.fencing.StaleAttempt: a newer attempt holds the segment.
        asyncpg.PostgresError, OSError: a live stream write failed (the database is away).
    """
    from overseer.fencing import check_current, current
    from overseer.token_stream import current_writers

    async def ready() -> None:
        fenced = False
        for writer in current_writers.get():  # the stream is whole up to this checkpoint
            fenced = await writer.settle() or fenced
        if not fenced and current.get() is not None:  # a write checked it already
            await check_current(get_runtime().pool)

    class FencedPostgresSaver(saver_class):  # type: ignore[misc]
        async def aput(self, *args: Any, **kwargs: Any) -> Any:
            await ready()
            return await super().aput(*args, **kwargs)

        async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
            await ready()
            return await super().aput_writes(*args, **kwargs)

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
