"""PDFs through PDFium: opening, text layers and rendering, all under the one process-wide lock."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image

from overseer.documents._common import _check_page_count, _select_pages, _unreadable
from overseer.documents.model import _TESSERACT_MAX_SIDE_PX, MIN_TEXT_LAYER_CHARS, DocumentLimits, PageText
from overseer.documents.ocr import _Job, _ocr_jobs

# PDFium is not thread-safe, not even across documents, and Temporal runs sync activities
# in a thread pool: every PDFium call in this package holds this lock (re-entrant, so
# helpers can take it again). Documents and pages are closed explicitly under the lock
# rather than left to garbage collection, which may run in any thread.
PDFIUM_LOCK = threading.RLock()
"""The process's one PDFium lock: every PDFium call anywhere in Overseer holds it (the review
console's page renderer included)."""
_PDFIUM_LOCK = PDFIUM_LOCK
_PDFIUM_MISSING_FILE = b"/nonexistent/overseer-pdfium-error-reset.pdf"


@contextmanager
def _open_pdf(data: bytes, limits: DocumentLimits) -> Iterator[pdfium.PdfDocument]:
    """Opens a PDF, mapping PDFium failures and page limits to reason codes."""
    with _PDFIUM_LOCK:
        # PDFium's last error is global and only set by parse failures; a document refused
        # for its structure (no or empty page tree) leaves the previous value. Set it to
        # "file access error" first, which a load from memory can never produce.
        pdfium_c.FPDF_LoadDocument(_PDFIUM_MISSING_FILE, None)
        try:
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as exc:
            if exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
                _unreadable("The PDF is encrypted or password-protected.", "encrypted")
            if exc.err_code == pdfium_c.FPDF_ERR_FILE:
                _unreadable("The PDF has no pages.", "no_pages")
            _unreadable("The PDF is truncated or corrupt.", "corrupt")
        # Filled-in AcroForm fields are only drawn with a form environment, which must
        # exist before any page is loaded. Without one the page still renders.
        with suppress(pdfium.PdfiumError):
            pdf.init_forms()
    try:
        with _PDFIUM_LOCK:
            page_count = len(pdf)
        if page_count == 0:
            _unreadable("The PDF has no pages.", "no_pages")
        _check_page_count(page_count, limits)
        yield pdf
    finally:
        with _PDFIUM_LOCK:
            pdf.close()


def _text_layer(pdf: pdfium.PdfDocument, index: int) -> str | None:
    """A page's text layer when it has meaningful text, else ``None``."""
    with _PDFIUM_LOCK, _pdf_page(pdf, index) as page:
        try:
            textpage = page.get_textpage()
            try:
                raw = textpage.get_text_range()
            finally:
                textpage.close()
        except pdfium.PdfiumError:
            _unreadable("A PDF page is corrupt.", "corrupt")
    text = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\ufffd", "")
    text = "".join(char for char in text if char.isprintable() or char in "\n\t")
    meaningful = sum(1 for char in text if not char.isspace())
    return text if meaningful >= MIN_TEXT_LAYER_CHARS else None


@contextmanager
def _pdf_page(pdf: pdfium.PdfDocument, index: int) -> Iterator[pdfium.PdfPage]:
    with _PDFIUM_LOCK:
        try:
            page = pdf[index]
        except pdfium.PdfiumError:
            _unreadable("A PDF page is corrupt.", "corrupt")
        try:
            yield page
        finally:
            page.close()


def _render_pdf_page(
    pdf: pdfium.PdfDocument, index: int, dpi: int, limits: DocumentLimits
) -> tuple[Image.Image, int]:
    """Renders one page in grayscale; returns it with the dpi actually used.

    The dpi is lowered for a page that would exceed ``limits.max_pixels_per_page`` or
    Tesseract's maximum side (a poster-sized page is OCR'd coarser rather than refused).
    """
    with _PDFIUM_LOCK, _pdf_page(pdf, index) as page:
        try:
            width_pt, height_pt = page.get_size()
            if width_pt <= 0 or height_pt <= 0:
                _unreadable("A PDF page has an empty media box.", "corrupt")
            scale = _fit_scale(dpi / 72, width_pt, height_pt, limits.max_pixels_per_page)
            bitmap = page.render(scale=scale, grayscale=True)
            try:
                image = bitmap.to_pil().convert("L")
            finally:
                bitmap.close()
        except pdfium.PdfiumError:
            _unreadable("A PDF page could not be rendered.", "corrupt")
    return image, max(1, round(scale * 72))


def _fit_scale(scale: float, width: float, height: float, max_pixels: int) -> float:
    """Largest scale <= ``scale`` keeping ``width x height`` within the pixel limits."""
    if width * height * scale * scale > max_pixels:
        scale = math.sqrt(max_pixels / (width * height))
    return min(scale, _TESSERACT_MAX_SIDE_PX / max(width, height))


def _extract_pdf_pages(
    data: bytes,
    pages: Sequence[int] | None,
    dpi: int,
    force_ocr: bool,
    limits: DocumentLimits,
) -> list[PageText]:
    results: dict[int, PageText] = {}
    with _open_pdf(data, limits) as pdf:
        jobs: list[_Job] = []
        with _PDFIUM_LOCK:
            for number in _select_pages(pages, len(pdf)):
                text = None if force_ocr else _text_layer(pdf, number - 1)
                if text is None:
                    jobs.append((number, partial(_render_pdf_page, pdf, number - 1, dpi, limits)))
                else:
                    results[number] = PageText(number, text, "text_layer", None, None, [], None)
        for page in _ocr_jobs(jobs, None, limits.ocr_timeout_seconds):
            results[page.page_number] = page
    return [results[number] for number in sorted(results)]
