"""Content-addressed document storage and the per-page text cache.

Documents are stored once (SHA-256 of the bytes) and passed to workflows by
reference, never inside Temporal payloads (2 MB payload / 50 MB history limits).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from overseer.errors import NotFoundError


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


async def store_artifact(
    conn: asyncpg.Connection | PoolConnectionProxy,
    data: bytes,
    *,
    kind: str,
    page_count: int,
    filename: str | None,
    content_type: str | None,
) -> str:
    """Store ``data`` once; return its SHA-256 (storing the same bytes again is a no-op)."""
    sha = sha256_hex(data)
    await conn.execute(
        """INSERT INTO artifacts (sha256, content, size_bytes, content_type, filename, kind, page_count)
           VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (sha256) DO NOTHING""",
        sha,
        data,
        len(data),
        content_type,
        filename,
        kind,
        page_count,
    )
    return sha


async def load_artifact(conn: asyncpg.Connection | asyncpg.Pool, sha: str) -> tuple[bytes, str]:
    """Return ``(content, kind)`` of a stored document.

    Raises:
        NotFoundError: no artifact with that hash (permanent).
    """
    row = await conn.fetchrow("SELECT content, kind FROM artifacts WHERE sha256 = $1", sha)
    if row is None:
        raise NotFoundError(f"no stored document {sha}", details={"sha256": sha})
    return bytes(row["content"]), row["kind"]


async def cached_pages(
    conn: asyncpg.Connection | asyncpg.Pool, sha: str, variant: str, pages: list[int]
) -> dict[int, dict[str, Any]]:
    """Cached page texts ``{page_number: PageText dict}`` for ``(sha, variant)``."""
    rows = await conn.fetch(
        """SELECT page_number, data FROM page_texts
           WHERE sha256 = $1 AND variant = $2 AND page_number = any($3::int[])""",
        sha,
        variant,
        pages,
    )
    return {r["page_number"]: json.loads(r["data"]) for r in rows}


async def cache_pages(
    conn: asyncpg.Connection | asyncpg.Pool, sha: str, variant: str, pages: list[dict[str, Any]]
) -> None:
    """Cache page texts (each a PageText dict with ``page_number``) for ``(sha, variant)``."""
    await conn.executemany(
        """INSERT INTO page_texts (sha256, page_number, variant, data) VALUES ($1, $2, $3, $4::jsonb)
           ON CONFLICT DO NOTHING""",
        [(sha, p["page_number"], variant, json.dumps(p)) for p in pages],
    )
