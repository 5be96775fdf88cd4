"""The one media package: sniffing uploads, PDF text layers, rendering and Tesseract OCR (one PDFium lock).

Its modules: :mod:`~overseer.documents.model` (kinds, limits, pages and words),
:mod:`~overseer.documents.sniff` (what an upload is; plain text),
:mod:`~overseer.documents.pdf` (PDFium, under :data:`PDFIUM_LOCK`),
:mod:`~overseer.documents.images` (PNG, JPEG, TIFF frames), :mod:`~overseer.documents.ocr`
(preprocessing, Tesseract, pages in parallel processes); this module holds the entry points
and is the package's public face (import from here).

Three entry points, from cheap to expensive:

* :func:`sniff_kind` decides from the bytes (magic first) whether an upload is a PDF, an
  image (PNG, JPEG, TIFF) or plain text, and refuses anything else.
* :func:`inspect_document` opens the document once at upload time and refuses what could
  never be processed (empty, truncated, encrypted, too many pages, decompression bombs),
  each refusal carrying a stable ``details["reason"]``.
* :func:`extract_pages` returns one :class:`PageText` per page: the PDF text layer when a
  page has one, Tesseract OCR otherwise (pages OCR'd in parallel processes), the decoded
  text for plain-text uploads.

Every refusal is an :class:`~overseer.errors.UnreadableDocumentError` (422, permanent) or an
:class:`~overseer.errors.UnsupportedDocumentError` (415, permanent); bad bytes never surface
as a bare library exception. Missing infrastructure (no ``tesseract`` binary, a crashed
worker process) propagates unchanged so that Temporal retries it.

Reason codes in ``UnreadableDocumentError.details["reason"]`` (wire names, never renamed):
``empty``, ``corrupt``, ``encrypted``, ``no_pages``, ``too_many_pages``, ``image_too_large``,
``image_empty``, ``not_text``, ``ocr_timeout``.
"""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image

from overseer.documents._common import _select_pages, _unreadable
from overseer.documents.images import (
    _extract_image_pages,
    _frame_count,
    _load_frame,
    _load_image_page,
    _open_image,
)
from overseer.documents.model import (
    COVERAGE_FULL,
    MIN_TEXT_LAYER_CHARS,
    DocumentInfo,
    DocumentKind,
    DocumentLimits,
    PageText,
    Word,
)
from overseer.documents.ocr import (
    ocr_binary,
    ocr_image,
    ocr_pages_parallel,
    preprocess_page,
    text_ink_mask,
)
from overseer.documents.pdf import (
    _PDFIUM_LOCK,
    PDFIUM_LOCK,
    _extract_pdf_pages,
    _open_pdf,
    _render_pdf_page,
    _text_layer,
)
from overseer.documents.sniff import _text_pages, sniff_kind

__all__ = [
    "COVERAGE_FULL",
    "MIN_TEXT_LAYER_CHARS",
    "PDFIUM_LOCK",
    "DocumentInfo",
    "DocumentKind",
    "DocumentLimits",
    "PageText",
    "Word",
    "extract_pages",
    "inspect_document",
    "ocr_binary",
    "ocr_image",
    "ocr_pages_parallel",
    "page_image",
    "preprocess_page",
    "sniff_kind",
    "text_ink_mask",
]


def inspect_document(
    data: bytes, kind: DocumentKind, limits: DocumentLimits = DocumentLimits()
) -> DocumentInfo:
    """Opens a document cheaply (no rendering, no OCR) to refuse what can never be processed.

    PDFs are opened with pypdfium2 and every page's text layer is probed until one has
    meaningful text; images are decoded with Pillow frame by frame after their declared
    size is checked; text is decoded.

    Args:
        data: the raw document.
        kind: its kind, normally from :func:`sniff_kind`.
        limits: page and pixel limits.

    Returns:
        Kind, page count and whether exact text exists.

    Raises:
        UnreadableDocumentError: with ``details["reason"]`` one of ``empty``, ``corrupt``,
            ``encrypted``, ``no_pages``, ``too_many_pages``, ``image_too_large``,
            ``image_empty``, ``not_text``. Permanent.
        UnsupportedDocumentError: an image in a format other than PNG, JPEG or TIFF. Permanent.
    """
    if not data:
        _unreadable("The document is empty.", "empty")
    if kind is DocumentKind.PDF:
        with _PDFIUM_LOCK, _open_pdf(data, limits) as pdf:
            has_text = any(_text_layer(pdf, index) is not None for index in range(len(pdf)))
            return DocumentInfo(kind, len(pdf), has_text)
    if kind is DocumentKind.IMAGE:
        with _open_image(data, limits) as image:
            for index in range(_frame_count(image)):
                _load_frame(image, index)
            return DocumentInfo(kind, _frame_count(image), has_text_layer=False)
    return DocumentInfo(kind, len(_text_pages(data, limits)), has_text_layer=True)


def extract_pages(
    data: bytes,
    kind: DocumentKind,
    *,
    pages: Sequence[int] | None = None,
    dpi: int = 300,
    force_ocr: bool = False,
    limits: DocumentLimits = DocumentLimits(),
) -> list[PageText]:
    r"""Returns the text of a document's pages, OCR'ing those that have no exact text.

    * PDF: a page whose text layer has at least :data:`MIN_TEXT_LAYER_CHARS` non-space
      characters is returned as ``source="text_layer"``; any other page (or every page
      with ``force_ocr``) is rendered in grayscale at ``dpi`` (lowered for a page that would
      exceed ``limits.max_pixels_per_page``) and OCR'd.
    * IMAGE: every frame (one per TIFF page) is OCR'd. Images are never downsampled;
      when their embedded resolution is below ``dpi`` they are upsampled to ``dpi``, and
      without one they are assumed to be at ``dpi``.
    * TEXT: decoded and split on form feed (``\f``) into pages, ``source="plain_text"``;
      a trailing form feed does not start an empty page.

    More than one page to OCR runs on :func:`ocr_pages_parallel`; a single page runs
    in-process. PDF pages are rendered lazily, so at most a few page bitmaps are alive.

    Args:
        data: the raw document.
        kind: its kind, normally from :func:`sniff_kind`.
        pages: 1-based page numbers to load; ``None`` loads every page. Duplicates are
            ignored and pages are returned in ascending order.
        dpi: rendering resolution for PDF pages, in dots per inch (50..1200).
        force_ocr: OCR PDF pages even when they have a text layer (a higher-dpi retry).
        limits: page, pixel and OCR time limits.

    Returns:
        One :class:`PageText` per requested page, in ascending page order.

    Raises:
        UnreadableDocumentError: unreadable input (the reasons of :func:`inspect_document`)
            or Tesseract exceeding ``limits.ocr_timeout_seconds`` on a page (reason
            ``ocr_timeout``). Permanent.
        UnsupportedDocumentError: an image in a format other than PNG, JPEG or TIFF. Permanent.
        ValueError: ``dpi`` out of range or a page number outside the document (caller bug).
    """
    if not 50 <= dpi <= 1200:
        raise ValueError(f"dpi must be between 50 and 1200, got {dpi}")
    if not data:
        _unreadable("The document is empty.", "empty")
    if kind is DocumentKind.TEXT:
        texts = _text_pages(data, limits)
        return [
            PageText(number, texts[number - 1], "plain_text", None, None, [], None)
            for number in _select_pages(pages, len(texts))
        ]
    if kind is DocumentKind.IMAGE:
        return _extract_image_pages(data, pages, dpi, limits)
    return _extract_pdf_pages(data, pages, dpi, force_ocr, limits)


def page_image(data: bytes, kind: DocumentKind, page_number: int, dpi: int,
               limits: DocumentLimits) -> tuple[Image.Image, int]:
    """One page of a stored document as the image :func:`extract_pages` would OCR.

    Args:
        data: the document's bytes.
        kind: :attr:`DocumentKind.PDF` (the page rendered at ``dpi``) or an image kind (its
            frame, at its own resolution when it records one).
        page_number: 1-based.
        dpi: the resolution to render a PDF page at.
        limits: page and pixel limits.

    Returns:
        ``(image, dpi)``: the page and the resolution it has.

    Raises:
        UnreadableDocumentError: the bytes cannot be read, or the page is over a limit.
    """
    if kind is DocumentKind.PDF:
        with _open_pdf(data, limits) as pdf:
            return _render_pdf_page(pdf, page_number - 1, dpi, limits)
    return _load_image_page(data, page_number - 1, dpi, limits)
