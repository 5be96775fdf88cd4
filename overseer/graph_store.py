"""The store: LangGraph's ``AsyncPostgresStore`` on Overseer's Postgres, for graphs and the API.

One store per process (per event loop): graphs get it as LangGraph's ``BaseStore`` — a node's
``store`` argument, ``get_store()``, ``runtime.store`` — on both paths (segments compile the
graph with it; a node run as its own activity gets it in its runtime), and the Agent Server's
``/store`` routes (:mod:`services.api.routes.store`) read and write the same items. The
tables are LangGraph's own (``store``, ``store_vectors``, made by its ``setup()``).

Semantic search: with ``OVERSEER_STORE_EMBEDDINGS=wordllama`` (the default) and the
``pgvector`` extension in the Postgres (the embedded one ships it), items are indexed with
:mod:`overseer.embeddings` (256-d, offline) on every text field (``"$"``); without either,
a search with ``query`` is refused (:class:`SemanticSearchUnavailableError`) instead of
silently ignoring it. Items may carry a ``ttl`` (minutes); the API sweeps expired ones.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from overseer.embeddings import DIMENSIONS, embed
from overseer.errors import InvalidRequestError
from overseer.settings import Settings, get_settings

logger = logging.getLogger(__name__)

_stores: dict[int, Any] = {}
_lock = asyncio.Lock()


class SemanticSearchUnavailableError(InvalidRequestError):
    """A search with ``query`` on a store without an embedding index (422)."""

    code = "semantic_search_unavailable"


def _embed(texts: list[str]) -> list[list[float]]:
    vectors: list[list[float]] = embed(texts).tolist()
    return vectors


async def graph_store(settings: Settings | None = None) -> Any:
    """This event loop's ``AsyncPostgresStore`` (tables made once by LangGraph's ``setup()``).

    Args:
        settings: where the database is and whether to index (default: the process's).

    Returns:
        ``langgraph.store.postgres.aio.AsyncPostgresStore``; ``index_config`` is set when
        semantic search is on (see the module docstring).
    """
    loop = asyncio.get_running_loop()
    async with _lock:
        store = _stores.get(id(loop))
        if store is not None and store.loop is loop:
            return store
        from langgraph.store.postgres.aio import AsyncPostgresStore
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        settings = settings or get_settings()
        pool = AsyncConnectionPool(
            str(settings.database_url), min_size=1, max_size=4, open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
        await pool.open(wait=True)
        index: dict[str, Any] | None = None
        if settings.store_embeddings == "wordllama":
            async with pool.connection() as conn:
                found = await (await conn.execute(
                    "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).fetchone()
            if found:
                index = {"dims": DIMENSIONS, "embed": _embed, "fields": ["$"]}
            else:
                logger.warning("the store has no semantic search: this Postgres has no "
                               "pgvector extension (install it, or use the pgvector image)")
        store = AsyncPostgresStore(
            pool, index=index,  # type: ignore[arg-type]  # dict rows, as it expects
            ttl={"refresh_on_read": True,
                 "sweep_interval_minutes": max(1, int(settings.store_ttl_sweep_minutes))})
        await serialised_setup(pool, store.setup)
        _stores[id(loop)] = store
        return store


SETUP_LOCK = 727275
"""The advisory lock LangGraph's table set-ups take turns on (:func:`serialised_setup`)."""


async def serialised_setup(pool: Any, setup: Any) -> None:
    """Run a LangGraph ``setup()`` (its store's, its checkpointer's) one process at a time.

    Two workers (or a worker and the API) starting together on a new database would both
    create LangGraph's tables and types and one would fail (a unique violation on
    ``pg_type``, or on its migrations table): they take turns on an advisory lock held on a
    connection of ``pool`` (a psycopg pool in autocommit), and the second finds the tables
    made. A process paused while it holds the lock (SIGSTOP, a frozen VM) keeps it: after
    :data:`SETUP_WAIT_SECONDS` the others set up without it (at worst one of them fails
    once, as without the lock, and its caller retries).

    Raises:
        psycopg.Error: the database is unavailable, or the set-up failed for another reason.
    """
    async with pool.connection() as conn:
        deadline = asyncio.get_running_loop().time() + SETUP_WAIT_SECONDS
        while True:
            got = await (await conn.execute("SELECT pg_try_advisory_lock(%s)",
                                            (SETUP_LOCK,))).fetchone()
            held = bool(got and next(iter(got.values()) if isinstance(got, dict) else got[0]))
            if held or asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.1)
        try:
            await setup()
        finally:
            if held:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))


SETUP_WAIT_SECONDS = 30.0
"""How long :func:`serialised_setup` waits for another process's set-up to end."""


def searchable(store: Any) -> bool:
    """Whether ``store`` answers ``query`` (it has an embedding index)."""
    return bool(getattr(store, "index_config", None))
