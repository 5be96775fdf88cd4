"""Connection pools: one per process, JSON codecs, migrations on first use."""

from __future__ import annotations

import asyncpg

from overseer.store.migrations import apply_migrations


async def create_pool(url: str, *, max_size: int = 10, migrate: bool = True) -> asyncpg.Pool:
    """Open a pool to ``url`` and (by default) apply pending migrations.

    Args:
        url: ``postgresql://…``; a unix-socket URL (``?host=/path``) works too.
        max_size: most connections held.
        migrate: apply pending migrations first.

    Raises:
        OSError, asyncpg.PostgresError: the server cannot be reached (transient).
    """
    if migrate:
        conn = await asyncpg.connect(url)
        try:
            await apply_migrations(conn)
        finally:
            await conn.close()
    pool = await asyncpg.create_pool(url, min_size=1, max_size=max_size)
    assert pool is not None
    return pool
