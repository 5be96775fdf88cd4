"""Agent 1, ingestion: an uploaded agreement's bytes become one text with page offsets.

Reading is :mod:`overseer.documents` (PDF text layer, Tesseract OCR
for scans and images, decoded plain text); this module only joins the pages into one
string whose offsets every later finding refers to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from overseer.documents import (
    DocumentKind,
    DocumentLimits,
    PageText,
    extract_pages,
    sniff_kind,
)

PAGE_SEPARATOR = "\n\n"
"""Between two pages' texts in the joined text (never part of a page)."""


def ingest_bytes(
    data: bytes,
    kind: str | None = None,
    *,
    filename: str | None = None,
    dpi: int = 300,
    limits: DocumentLimits | None = None,
) -> dict[str, Any]:
    """Reads a document's pages (text layer, OCR or plain text) into an ingestion result.

    Args:
        data: the raw upload.
        kind: ``pdf`` | ``image`` | ``text``; sniffed from the bytes when None.
        filename: the client's file name (only used to sniff).
        dpi: OCR resolution for scanned pages and images, dots per inch.
        limits: page, pixel and OCR-time limits.

    Returns:
        See :func:`ingest_pages`.

    Raises:
        UnreadableDocumentError / UnsupportedDocumentError: permanent, from the reader.
    """
    doc_kind = DocumentKind(kind) if kind else sniff_kind(data, filename)
    pages = extract_pages(data, doc_kind, dpi=dpi, limits=limits or DocumentLimits())
    return ingest_pages(pages)


def ingest_text(text: str) -> dict[str, Any]:
    r"""An ingestion result for plain text (form feeds ``\f`` separate pages)."""
    parts = text.split("\f")
    if len(parts) > 1 and not parts[-1].strip():
        parts = parts[:-1]
    return ingest_pages([PageText(i, part, "plain_text", None, None)
                         for i, part in enumerate(parts, start=1)])


def ingest_pages(pages: Sequence[PageText]) -> dict[str, Any]:
    """Joins page texts into one text, remembering where each page starts.

    Returns:
        ``{text, pages: [{page, text, start_offset, source, ocr_confidence}], page_count,
        char_count, text_sources, ocr_confidence_avg}``; ``text[p.start_offset:
        p.start_offset + len(p.text)] == p.text`` for every page.
    """
    chunks: list[str] = []
    out_pages: list[dict[str, Any]] = []
    offset = 0
    for page in pages:
        if chunks:
            chunks.append(PAGE_SEPARATOR)
            offset += len(PAGE_SEPARATOR)
        text = page.text.replace("\r\n", "\n").replace("\r", "\n")
        out_pages.append({"page": page.page_number, "text": text, "start_offset": offset,
                          "source": page.source, "ocr_confidence": page.ocr_confidence})
        chunks.append(text)
        offset += len(text)
    confidences = [p.ocr_confidence for p in pages if p.ocr_confidence is not None]
    full = "".join(chunks)
    return {
        "text": full,
        "pages": out_pages,
        "page_count": len(out_pages),
        "char_count": len(full),
        "text_sources": sorted({p.source for p in pages}),
        "ocr_confidence_avg": (round(sum(confidences) / len(confidences), 4)
                               if confidences else None),
    }


def page_of(pages: Sequence[dict[str, Any]], offset: int) -> int:
    """The 1-based page holding character ``offset`` of the joined text."""
    number = 1
    for page in pages:
        if page["start_offset"] <= offset:
            number = int(page["page"])
        else:
            break
    return number
