"""A stored document's page texts, read once: the Postgres page cache in front of OCR.

OCR is the expensive step; caching each page's result by ``(sha256, page, dpi, mode)``
means a retried or crash-recovered activity, a batch's children and a review agent never
OCR the same page twice. Shared by every pipeline that reads uploads (through
``overseer.plugin``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from overseer.documents import DocumentKind, DocumentLimits, PageText, extract_pages
from overseer.resources import get_runtime
from overseer.runtime.heartbeat import with_heartbeats
from overseer.store.artifacts import cache_pages, cached_pages, load_artifact


async def load_pages(
    document: dict[str, Any],
    *,
    dpi: int,
    force_ocr: bool = False,
    pages: Sequence[int] | None = None,
    limits: DocumentLimits | None = None,
) -> list[PageText]:
    """Page texts of a stored document, OCR'ing only pages not yet cached.

    Args:
        document: ``{sha256, kind, page_count, …}`` reference.
        dpi: render resolution for OCR (dots per inch).
        force_ocr: OCR even pages with a text layer (higher-dpi retry).
        pages: 1-based page numbers (None = all).
        limits: per-document resource limits.

    Returns:
        PageText per requested page, in page order.

    Raises:
        UnreadableDocumentError: the bytes cannot be read or exceed a limit (permanent).
        NotFoundError: the artifact is missing (permanent).
    """
    pool = get_runtime().pool
    sha = document["sha256"]
    wanted = list(pages) if pages is not None else list(range(1, int(document["page_count"]) + 1))
    variant = f"{dpi}:{'ocr' if force_ocr else 'auto'}"
    found = await cached_pages(pool, sha, variant, wanted)
    missing = [p for p in wanted if p not in found]
    if missing:
        data, kind = await load_artifact(pool, sha)
        fresh = await with_heartbeats(
            asyncio.to_thread(
                extract_pages,
                data,
                DocumentKind(kind),
                pages=missing,
                dpi=dpi,
                force_ocr=force_ocr,
                limits=limits or DocumentLimits(),
            ),
            detail=f"reading {len(missing)} page(s)",
        )
        dicts = [p.to_dict() for p in fresh]
        await cache_pages(pool, sha, variant, dicts)
        found.update({d["page_number"]: d for d in dicts})
    return [PageText.from_dict(found[p]) for p in wanted]
