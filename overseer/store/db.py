"""Connection pools: one per process, JSON codecs, migrations on first use."""

from __future__ import annotations

import asyncpg

from overseer.store.migrations import apply_migrations


class LeanConnection(asyncpg.Connection):
    """A pooled connection given back without asyncpg's reset query.

    asyncpg resets a connection on every release with one more round trip (``CLOSE ALL;
    UNLISTEN *; RESET ALL; SELECT pg_advisory_unlock_all()``). Overseer's pooled
    connections keep no session state to undo: settings are ``SET LOCAL`` inside a
    transaction, advisory locks are taken on a connection of their own (migrations), and
    the one ``LISTEN`` (:class:`overseer.token_stream.TokenListener`) removes its listeners
    before it gives its connection back. An open transaction is still rolled back and
    listener callbacks dropped (asyncpg does that without the query).
    """

    def get_reset_query(self) -> str:
        """No reset query (see the class docstring)."""
        return ""


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
    pool = await asyncpg.create_pool(url, min_size=1, max_size=max_size,
                                     connection_class=LeanConnection)
    assert pool is not None
    return pool
