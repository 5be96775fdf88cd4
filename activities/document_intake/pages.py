"""Load a stored document's page texts, through the Postgres page cache.

OCR is the expensive step; caching each page's result by ``(sha256, page, dpi, mode)``
means a retried or crash-recovered activity, a batch's children and the review
agent never OCR the same page twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from activities.document_intake.reread import RegionRead, reread_regions
from activities.document_intake.schema import FieldSchema
from activities.heartbeat import with_heartbeats
from activities.runtime import get_runtime
from overseer.documents import (
    DocumentKind,
    DocumentLimits,
    PageText,
    extract_pages,
)
from overseer.plugin import cache_pages, cached_pages, load_artifact


def limits_from_options(options: dict[str, Any]) -> DocumentLimits:
    """Resource limits from a run's options snapshot."""
    return DocumentLimits(
        max_pages=int(options.get("max_pages", 200)),
        max_pixels_per_page=int(options.get("max_pixels_per_page", 50_000_000)),
        ocr_timeout_seconds=float(options.get("ocr_timeout_seconds", 120.0)),
    )


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


async def load_region_reread(
    document: dict[str, Any],
    pages: Sequence[PageText],
    schema: FieldSchema,
    *,
    extract: Sequence[str],
    check: Sequence[str],
    evidence: dict[str, dict[str, Any]],
    dpi: int,
    limits: DocumentLimits | None = None,
) -> RegionRead | None:
    """The doubtful fields' regions of a stored document re-read at ``dpi`` (not cached).

    Loads the document's bytes and runs :func:`~activities.document_intake.reread.reread_regions`
    in a thread, heartbeating. Not cached: it runs once per retry, on crops no other step reads.

    Args:
        document: ``{sha256, kind, page_count, …}`` reference.
        pages: the document's whole pages as read at the first dpi (from :func:`load_pages`).
        schema: the run's field schema.
        extract: fields to read again (missing or invalid).
        check: fields read weakly, to read again and compare.
        evidence: field → evidence dict of the first reading.
        dpi: resolution of the re-read (dots per inch).
        limits: per-document resource limits.

    Returns:
        The regions' reading, or None when the whole pages must be re-read instead.

    Raises:
        UnreadableDocumentError: the bytes cannot be read, or OCR timed out (permanent).
        NotFoundError: the artifact is missing (permanent).
    """
    data, kind = await load_artifact(get_runtime().pool, document["sha256"])
    return await with_heartbeats(
        asyncio.to_thread(
            reread_regions, data, DocumentKind(kind), pages, schema,
            extract=extract, check=check, evidence=evidence, dpi=dpi,
            limits=limits or DocumentLimits(),
        ),
        detail=f"re-reading {len(extract) + len(check)} field(s)",
    )
