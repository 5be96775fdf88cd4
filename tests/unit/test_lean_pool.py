"""Pooled connections come back without asyncpg's reset query, and nothing leaks between users."""

from __future__ import annotations

import asyncpg
import pytest

from overseer.store.db import create_pool


async def test_a_released_connection_keeps_no_transaction_and_no_listener(pg_url: str):
    pool = await create_pool(pg_url, max_size=1, migrate=False)
    try:
        conn = await pool.acquire()
        first = id(conn._con)  # type: ignore[attr-defined]  # the same connection comes back
        await conn.execute("BEGIN")
        await conn.execute("CREATE TEMP TABLE lean_probe (x int) ON COMMIT DROP")
        await conn.add_listener("lean_probe", lambda *_: None)
        await pool.release(conn)  # in a transaction, with a listener: both must go

        again = await pool.acquire()
        assert id(again._con) == first  # type: ignore[attr-defined]
        assert not again.is_in_transaction()
        with pytest.raises(asyncpg.UndefinedTableError):  # the transaction was rolled back
            await again.fetchval("SELECT count(*) FROM lean_probe")
        assert not again._con._listeners  # type: ignore[attr-defined]
        await pool.release(again)
    finally:
        await pool.close()
