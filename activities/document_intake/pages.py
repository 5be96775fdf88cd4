"""document_intake's reading of a stored document: its resource limits, and doubtful regions re-read.

Whole pages are read through the shared page cache (``load_pages`` of the plug-in API).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from activities.document_intake.reread import RegionRead, reread_regions
from activities.document_intake.schema import FieldSchema
from overseer.documents import (
    DocumentKind,
    DocumentLimits,
    PageText,
)
from overseer.plugin import get_runtime, load_artifact, with_heartbeats


def limits_from_options(options: dict[str, Any]) -> DocumentLimits:
    """Resource limits from a run's options snapshot."""
    return DocumentLimits(
        max_pages=int(options.get("max_pages", 200)),
        max_pixels_per_page=int(options.get("max_pixels_per_page", 50_000_000)),
        ocr_timeout_seconds=float(options.get("ocr_timeout_seconds", 120.0)),
    )


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
        pages: the document's whole pages as read at the first dpi (from ``load_pages``).
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
