"""Document pages for the review console: a run's stored document rendered to PNG, or its text.

Documents are read from the content-addressed ``artifacts`` table. PDFs are rendered with
pypdfium2, images with Pillow (EXIF orientation applied, one frame per page), both scaled so
the longest side is at most ``Settings.console_page_max_px`` and refused above
``Settings.max_pixels_per_page`` source pixels. Text documents are never rasterised: the
console shows them as escaped ``<pre>`` text. Rendering runs in a thread (PDFium calls are
serialised by a lock: it is not thread-safe) and recent pages are kept in a small LRU cache.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import asyncpg
import pypdfium2 as pdfium
from PIL import Image, ImageOps

from overseer.documents import PDFIUM_LOCK
from overseer.errors import NotFoundError, UnreadableDocumentError, UnsupportedDocumentError

MAX_TEXT_CHARS = 200_000
"""Text shown for a text document, at most (the rest is cut with a note)."""
_CACHE_ENTRIES = 32
_PDFIUM_LOCK = PDFIUM_LOCK  # one lock per process: PDFium is not thread-safe across documents
_cache: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class DocumentRef:
    """The document a run reads, and which of its pages are the run's.

    Attributes:
        sha256: the artifact's key.
        kind: ``pdf`` | ``image`` | ``text``.
        filename: the uploaded name, if any.
        page_count: pages in the whole document.
        first_page: first page of the run's entry (batch children read a span), 1-based.
        last_page: last page of the run's entry.
    """

    sha256: str
    kind: str
    filename: str | None
    page_count: int
    first_page: int
    last_page: int


async def document_of_run(conn: asyncpg.Connection | asyncpg.Pool, run_id: uuid.UUID) -> DocumentRef | None:
    """The document of ``run_id`` from its ``runs.input``; None when the run has none."""
    raw = await conn.fetchval("SELECT input FROM runs WHERE run_id = $1", run_id)
    data = json.loads(raw) if isinstance(raw, str) else (raw or {})
    document = data.get("document") if isinstance(data, dict) else None
    if not isinstance(document, dict) or not document.get("sha256"):
        return None
    row = await conn.fetchrow("SELECT kind, filename, page_count FROM artifacts WHERE sha256 = $1",
                              document["sha256"])
    if row is None:
        return None
    span = data.get("span") or {}
    pages = int(row["page_count"])
    first = min(max(int(span.get("start_page", 1)), 1), pages)
    last = min(max(int(span.get("end_page", pages)), first), pages)
    return DocumentRef(sha256=document["sha256"], kind=row["kind"], filename=row["filename"],
                       page_count=pages, first_page=first, last_page=last)


async def render_page_png(conn: asyncpg.Connection | asyncpg.Pool, doc: DocumentRef, page: int, *,
                          max_px: int, max_pixels: int) -> bytes:
    """Page ``page`` (1-based) of a PDF or image document as PNG bytes.

    Args:
        conn: the database (the artifact's bytes are read only on a cache miss).
        doc: the document.
        page: 1-based page number, within ``doc.page_count``.
        max_px: the longest side of the result, in pixels.
        max_pixels: source images with more pixels per frame are refused.

    Raises:
        NotFoundError: no such page, or the artifact is gone (404).
        UnsupportedDocumentError: a text document (shown as text instead) (415).
        UnreadableDocumentError: bytes that cannot be rendered or are too large (422).
    """
    if doc.kind not in ("pdf", "image"):
        raise UnsupportedDocumentError("text documents are shown as text, not rendered",
                                       details={"kind": doc.kind})
    if not 1 <= page <= doc.page_count:
        raise NotFoundError(f"no page {page}", details={"page_count": doc.page_count})
    key = (doc.sha256, page, max_px)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    content = await conn.fetchval("SELECT content FROM artifacts WHERE sha256 = $1", doc.sha256)
    if content is None:
        raise NotFoundError("the document is no longer stored")
    render = _render_pdf if doc.kind == "pdf" else _render_image
    png = await asyncio.to_thread(render, bytes(content), page - 1, max_px, max_pixels)
    with _cache_lock:
        _cache[key] = png
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return png


async def document_text(conn: asyncpg.Connection | asyncpg.Pool, doc: DocumentRef) -> list[dict[str, Any]]:
    """The pages of a text document: ``[{"page_number": n, "text": str}]`` for the run's span.

    At most :data:`MAX_TEXT_CHARS` characters in all; a cut page ends with a note.

    Raises:
        UnsupportedDocumentError: not a text document (415).
    """
    if doc.kind != "text":
        raise UnsupportedDocumentError("not a text document", details={"kind": doc.kind})
    content = await conn.fetchval("SELECT content FROM artifacts WHERE sha256 = $1", doc.sha256)
    if content is None:
        raise NotFoundError("the document is no longer stored")
    text = _decode(bytes(content)).replace("\r\n", "\n").replace("\r", "\n")
    out, budget = [], MAX_TEXT_CHARS
    for number, page in enumerate(text.split("\f"), start=1):
        if not doc.first_page <= number <= doc.last_page or budget <= 0:
            continue
        if len(page) > budget:
            page = page[:budget] + "\n[… cut: the console shows at most 200,000 characters]"
        budget -= len(page)
        out.append({"page_number": number, "text": page})
    return out


def _render_pdf(data: bytes, index: int, max_px: int, max_pixels: int) -> bytes:
    with _PDFIUM_LOCK:
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            raise UnreadableDocumentError("the PDF cannot be opened",
                                          details={"reason": "corrupt"}) from exc
        try:
            if index >= len(pdf):
                raise NotFoundError(f"no page {index + 1}")
            page = pdf[index]
            try:
                width, height = page.get_size()  # points (1/72 inch)
                scale = min(max_px / max(width, height, 1.0), 4.0)
                scale = min(scale, (max_pixels / max(width * height, 1.0)) ** 0.5)
                bitmap = page.render(scale=scale)
                image = bitmap.to_pil()
                bitmap.close()
            finally:
                page.close()
        finally:
            pdf.close()
    return _png(image)


def _render_image(data: bytes, index: int, max_px: int, max_pixels: int) -> bytes:
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.seek(index)
            width, height = image.size
            if width * height > max_pixels:
                raise UnreadableDocumentError("the image has too many pixels",
                                              details={"reason": "image_too_large"})
            image.draft("RGB", (max_px, max_px))  # JPEG: decode at a reduced size when possible
            frame = ImageOps.exif_transpose(image.copy())
    except (OSError, EOFError, Image.DecompressionBombError) as exc:
        raise UnreadableDocumentError("the image cannot be decoded",
                                      details={"reason": "corrupt"}) from exc
    frame.thumbnail((max_px, max_px))
    return _png(frame)


def _png(image: Image.Image) -> bytes:
    if image.mode not in ("RGB", "L", "RGBA", "LA", "1"):
        image = image.convert("RGB")
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)
    return out.getvalue()


def _decode(data: bytes) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")
