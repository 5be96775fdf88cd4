"""The one media module: sniffing uploads, PDF text layers, rendering and Tesseract OCR (one PDFium lock).

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

import importlib.util
import io
import itertools
import math
import multiprocessing
import os
import re
import struct
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Any, Literal, NoReturn

import numpy as np
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from PIL import Image, ImageOps

from overseer.errors import UnreadableDocumentError, UnsupportedDocumentError


def _lazy_module(name: str) -> Any:
    """``name`` imported on first attribute access (``importlib.util.LazyLoader``).

    OpenCV and pytesseract (which imports pandas) add ~95 MB to a process; a worker that
    never OCRs (text-layer PDFs, plain text, other pipelines) should not pay it at start
    (issue 16: the worker's idle RSS).
    """
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


cv2 = _lazy_module("cv2")
pytesseract = _lazy_module("pytesseract")

# Tesseract's LSTM engine spreads one page over every core with OpenMP, and on a busy
# worker that oversubscription makes it several times slower (docs/performance.md). We run it
# single-threaded and parallelise pages across processes instead. ``setdefault`` so an
# operator can still override it; the ``tesseract`` subprocesses inherit the environment.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

__all__ = [
    "COVERAGE_FULL",
    "MIN_TEXT_LAYER_CHARS",
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

MIN_TEXT_LAYER_CHARS = 20
"""A PDF page's text layer is used when it has at least this many non-space characters."""

COVERAGE_FULL = 0.8
"""Coverage at or above which OCR confidence is not penalised (see :func:`ocr_image`)."""

TESSERACT_LANG = "eng"
_TESSERACT_MAX_SIDE_PX = 32_000  # Tesseract refuses images with a side of 32767 px or more.


class DocumentKind(StrEnum):
    """What an upload is, as decided by :func:`sniff_kind`."""

    PDF = "pdf"
    IMAGE = "image"
    TEXT = "text"


@dataclass(frozen=True)
class Word:
    """One word recognised by Tesseract.

    Attributes:
        text: the word as recognised.
        confidence: Tesseract's word confidence scaled to 0..1 (its 0..100 divided by 100).
    """

    text: str
    confidence: float


@dataclass
class PageText:
    r"""The text of one page and how much to trust it.

    Attributes:
        page_number: 1-based page (or TIFF frame, or form-feed separated text page) number.
        text: the page's text; lines separated by ``\n``, OCR blocks by a blank line.
        source: ``"text_layer"`` (PDF text layer), ``"ocr"`` (Tesseract) or ``"plain_text"``.
        ocr_confidence: 0..1, the length-weighted mean word confidence times the coverage
            penalty (see :func:`ocr_image`); ``None`` means exact text (text layer or plain text).
        coverage: 0..1, the fraction of the page's text ink lying inside recognised word
            boxes; ``None`` for exact text.
        words: recognised words with confidences; empty for exact text.
        dpi: resolution the page was OCR'd at; ``None`` for exact text.
    """

    page_number: int
    text: str
    source: Literal["text_layer", "ocr", "plain_text"]
    ocr_confidence: float | None
    coverage: float | None
    words: list[Word] = field(default_factory=list)
    dpi: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Returns a JSON-serialisable dict (for Temporal payloads and Postgres ``jsonb``)."""
        return {
            "page_number": self.page_number,
            "text": self.text,
            "source": self.source,
            "ocr_confidence": self.ocr_confidence,
            "coverage": self.coverage,
            "words": [{"text": w.text, "confidence": w.confidence} for w in self.words],
            "dpi": self.dpi,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PageText:
        """Rebuilds a page from :meth:`to_dict` output; ``words`` and ``dpi`` may be absent."""
        return cls(
            page_number=int(d["page_number"]),
            text=d["text"],
            source=d["source"],
            ocr_confidence=d.get("ocr_confidence"),
            coverage=d.get("coverage"),
            words=[Word(w["text"], float(w["confidence"])) for w in d.get("words", [])],
            dpi=d.get("dpi"),
        )


@dataclass(frozen=True)
class DocumentLimits:
    """Resource limits that make a document unreadable rather than a worker crash.

    Attributes:
        max_pages: documents with more pages (PDF pages, TIFF frames, text pages) are refused.
        max_pixels_per_page: images with more pixels per frame are refused; PDF pages are
            rendered at a lower dpi so that they fit. Pillow's own ``Image.MAX_IMAGE_PIXELS``
            check still applies as an outer ceiling.
        ocr_timeout_seconds: wall-clock limit for Tesseract on one page.
    """

    max_pages: int = 200
    max_pixels_per_page: int = 50_000_000
    ocr_timeout_seconds: float = 120.0


@dataclass(frozen=True)
class DocumentInfo:
    """What :func:`inspect_document` learned.

    Attributes:
        kind: the kind the document was opened as.
        page_count: PDF pages, image frames or form-feed separated text pages (>= 1).
        has_text_layer: whether exact text exists: some PDF page has a meaningful text
            layer, or the document is plain text. Always ``False`` for images.
    """

    kind: DocumentKind
    page_count: int
    has_text_layer: bool


# --------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------


def sniff_kind(data: bytes, filename: str | None = None, content_type: str | None = None) -> DocumentKind:
    """Decides what an upload is from its bytes; the declared type only ever refuses.

    Magic bytes are checked first (``%PDF-``, PNG, JPEG, TIFF ``II*``/``MM*``) and win over
    any declared type. Otherwise the bytes are text if they decode as UTF-8 (BOM optional)
    or as UTF-16 with a BOM and look like text (no NULs, at most 5 % control characters);
    failing that, Windows-1252 or Latin-1 under the same test.

    Args:
        data: the raw upload.
        filename: the client's file name, if any; an extension naming a binary format
            (``.pdf``, ``.png``, ``.jpg``, ``.tif``, ...) whose magic bytes are missing is refused.
        content_type: the declared media type, if any; ``image/*`` or ``application/pdf``
            whose magic bytes are missing is refused.

    Returns:
        The document kind.

    Raises:
        UnreadableDocumentError: zero-byte input (reason ``empty``). Permanent.
        UnsupportedDocumentError: any other binary (ZIP, GIF, ...), or bytes that do not
            match the declared binary type. Permanent.
    """
    if not data:
        _unreadable("The document is empty.", "empty")
    magic_kind = _kind_from_magic(data)
    if magic_kind is not None:
        return magic_kind
    declared = _declared_binary_type(filename, content_type)
    if declared is not None:
        raise UnsupportedDocumentError(
            f"The upload is declared as {declared} but its bytes are not one.",
            details={"declared": declared},
        )
    if _decode_text(data) is not None:
        return DocumentKind.TEXT
    raise UnsupportedDocumentError(
        "The upload is not a PDF, a PNG/JPEG/TIFF image or UTF-8/Latin-1 text.",
        details={"detected": _name_binary(data)},
    )


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


def ocr_image(
    image: Image.Image,
    *,
    page_number: int = 1,
    dpi: int = 300,
    timeout_seconds: float = 120.0,
) -> PageText:
    """OCRs one page image with Tesseract and measures how much of the page it really read.

    Preprocessing: flatten to grayscale (transparency over white); median blur 3x3 when
    the page is measurably noisy (grain, salt-and-pepper; at >= 200 dpi only); deskew by
    the angle in [-12, 12] degrees that makes the horizontal ink projection sharpest (text
    lines and form rules line up), rotating back on an enlarged white canvas; Otsu
    binarisation; removal of specks smaller than 0.01 x 0.01 in. Tesseract (``--psm 3``,
    LSTM, ``eng``) then runs on the binarised page and words with confidence -1 or empty
    text are dropped.

    Coverage: Tesseract may report high confidence while silently dropping most of a page,
    so the page's text ink is measured independently: long horizontal and vertical rules
    (form lines, >= 0.4 in) are removed from the ink, the rest is smeared horizontally
    into text-line blobs, and blobs with almost no ink (specks) or taller than 0.75 in
    (photos, logos) are ignored. ``coverage`` is the fraction of the ink in the remaining
    blobs that falls inside the (slightly padded) boxes of recognised words. Gibberish
    words Tesseract does emit count as covering their ink; their low confidence lowers
    the mean instead. A page whose ink is all rules or pictures but where Tesseract found
    words gets coverage 1.0 (nothing to check against).

    Confidence::

        ocr_confidence = mean word confidence, weighted by word length (0..1)
                         * min(1, coverage / COVERAGE_FULL)        # COVERAGE_FULL = 0.8

    A blank page (no ink with real contrast after Otsu) returns text ``""``, coverage 0.0
    and confidence 0.0 without running Tesseract. Word confidences and both ratios are
    rounded to 4 decimals.

    Args:
        image: the page, any Pillow mode; upright up to about +-12 degrees of skew.
        page_number: 1-based page number to record.
        dpi: the image's resolution in dots per inch; scales the preprocessing kernels and
            is passed to Tesseract.
        timeout_seconds: Tesseract wall-clock limit for this page, in seconds.

    Returns:
        The page with ``source="ocr"``, words, coverage and confidence.

    Raises:
        UnreadableDocumentError: Tesseract exceeded ``timeout_seconds`` (reason
            ``ocr_timeout``). Permanent.
        pytesseract.TesseractNotFoundError: no ``tesseract`` binary (retryable setup problem).
    """
    binary = preprocess_page(image, dpi)
    if binary is None:
        return _blank_page(page_number, dpi)
    text_ink = text_ink_mask(binary, dpi)

    data = _run_tesseract(binary, dpi, timeout_seconds)
    words, boxes, text = _collect_words(data)
    coverage = _coverage(text_ink, boxes, dpi, has_words=bool(words))
    weights = [len(w.text) for w in words]
    mean_confidence = (
        sum(w.confidence * n for w, n in zip(words, weights, strict=True)) / sum(weights) if words else 0.0
    )
    confidence = mean_confidence * min(1.0, coverage / COVERAGE_FULL)
    return PageText(page_number, text, "ocr", round(confidence, 4), round(coverage, 4), words, dpi)


def preprocess_page(image: Image.Image, dpi: int) -> np.ndarray[Any, Any] | None:
    """:func:`ocr_image`'s preprocessing of one page: what Tesseract reads.

    Grayscale, median blur when the page is measurably noisy, Otsu binarisation, deskew
    (see :func:`ocr_image`), specks removed.

    Args:
        image: the page, any Pillow mode.
        dpi: its resolution in dots per inch (scales the kernels).

    Returns:
        uint8 (H, W), 0 ink and 255 paper, deskewed; None for a blank page (no ink with real
        contrast).
    """
    gray = _to_grayscale(image)
    if gray.size == 0:
        return None
    gray = _denoise(gray, dpi)
    binary = _binarise(gray, dpi)
    if binary is None:
        return None
    angle = _estimate_skew_degrees(binary == 0)
    if abs(angle) >= 0.2:
        binary = _binarise(_rotate(gray, angle), dpi)
    return binary


def ocr_binary(binary: np.ndarray[Any, Any], dpi: int,
               timeout_seconds: float = 120.0) -> tuple[list[Word], str]:
    """Tesseract on an already preprocessed image (:func:`preprocess_page`, or a crop of one).

    As :func:`ocr_image` runs it (``--psm 3``, LSTM, ``eng``; words with confidence -1 or
    empty text dropped), without the coverage check.

    Args:
        binary: uint8 (H, W), 0 ink and 255 paper.
        dpi: its resolution in dots per inch (passed to Tesseract).
        timeout_seconds: Tesseract wall-clock limit, in seconds.

    Returns:
        ``(words, text)``: the words with their confidences (0..1), and the text by lines.

    Raises:
        UnreadableDocumentError: Tesseract exceeded ``timeout_seconds`` (``ocr_timeout``).
    """
    words, _, text = _collect_words(_run_tesseract(binary, dpi, timeout_seconds))
    return words, text


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


def ocr_pages_parallel(
    images: Sequence[Image.Image],
    *,
    dpi: int,
    max_workers: int | None = None,
    page_numbers: Sequence[int] | None = None,
    timeout_seconds: float = 120.0,
) -> list[PageText]:
    """OCRs pages with :func:`ocr_image`, one page per process at a time.

    Worker processes are spawned (not forked: the caller may be a threaded Temporal
    worker) with ``OMP_THREAD_LIMIT=1`` and one OpenCV thread, so N workers use N cores.
    One image runs in-process without a pool. At most ``2 * max_workers`` pages are in
    flight; on the first failure the remaining pages are cancelled.

    Args:
        images: page images, any Pillow mode (flattened to grayscale before pickling).
        dpi: their resolution in dots per inch.
        max_workers: processes to use; default the number of usable CPUs, never more than
            there are pages.
        page_numbers: 1-based page numbers to record, same length as ``images``; default
            ``1..len(images)``.
        timeout_seconds: Tesseract wall-clock limit per page, in seconds.

    Returns:
        One :class:`PageText` per image, in input order.

    Raises:
        UnreadableDocumentError: a page hit the OCR time-out (reason ``ocr_timeout``). Permanent.
        ValueError: ``page_numbers`` of the wrong length.
        concurrent.futures.process.BrokenProcessPool: a worker died (e.g. out of memory);
            transient.
    """
    numbers = list(page_numbers) if page_numbers is not None else list(range(1, len(images) + 1))
    if len(numbers) != len(images):
        raise ValueError("page_numbers must have one entry per image")
    jobs: list[_Job] = [
        (number, partial(_given, image, dpi)) for number, image in zip(numbers, images, strict=True)
    ]
    return _ocr_jobs(jobs, max_workers, timeout_seconds)


# --------------------------------------------------------------------------------------
# Sniffing and text decoding
# --------------------------------------------------------------------------------------

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_IMAGE_MAGICS = (_PNG_MAGIC, b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")
_IMAGE_FORMATS = frozenset({"PNG", "JPEG", "MPO", "TIFF"})
_BINARY_EXTENSIONS = {
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
}
# C0/C1 control characters other than tab, line breaks and form feed, plus U+FFFD.
_NON_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")
_MIN_PRINTABLE_FRACTION = 0.95
# Common binaries refused by sniff_kind, named in the error details (never their bytes).
_KNOWN_BINARIES = (
    (b"GIF87a", "gif"),
    (b"GIF89a", "gif"),
    (b"PK\x03\x04", "zip"),
    (b"\xd0\xcf\x11\xe0", "ole"),
    (b"BM", "bmp"),
    (b"RIFF", "riff"),
    (b"\x1f\x8b", "gzip"),
)


def _kind_from_magic(data: bytes) -> DocumentKind | None:
    if data.startswith(_IMAGE_MAGICS):
        return DocumentKind.IMAGE
    # PDF readers accept junk before the header; so do we, unless that junk is text.
    position = data.find(b"%PDF-", 0, 1024)
    if position == 0 or (position > 0 and _decode_text(data[:position]) is None):
        return DocumentKind.PDF
    return None


def _declared_binary_type(filename: str | None, content_type: str | None) -> str | None:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media.startswith("image/") or media == "application/pdf":
        return media
    extension = os.path.splitext(filename or "")[1].lower()
    return _BINARY_EXTENSIONS.get(extension)


def _decode_text(data: bytes) -> str | None:
    """Decodes bytes that look like text; ``None`` when they do not."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None
        return text if _looks_like_text(text) else None
    if b"\x00" in data:
        return None
    utf8: str | None
    try:
        utf8 = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by truncation at the very end is still text.
        truncated = exc.reason == "unexpected end of data" and exc.start >= len(data) - 3
        utf8 = data[: exc.start].decode("utf-8-sig") if truncated else None
    if utf8 is not None:
        return utf8 if _looks_like_text(utf8) else None
    # Legacy 8-bit text: Windows-1252 (a superset of Latin-1's printable range) when its
    # undefined bytes are absent, ISO-8859-1 otherwise.
    for encoding in ("cp1252", "latin-1"):
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        return text if _looks_like_text(text) else None
    return None


def _looks_like_text(text: str) -> bool:
    if "\x00" in text:
        return False
    if not text.strip():
        return True  # empty (e.g. a lone BOM) is text; inspect_document calls it "empty"
    non_text = len(text) - len(_NON_TEXT.sub("", text))
    return non_text <= (1 - _MIN_PRINTABLE_FRACTION) * len(text)


def _name_binary(data: bytes) -> str:
    if data[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1"):
        return "heic"
    return next((name for magic, name in _KNOWN_BINARIES if data.startswith(magic)), "unknown")


def _text_pages(data: bytes, limits: DocumentLimits) -> list[str]:
    text = _decode_text(data)
    if text is None:
        _unreadable("The document is not decodable text.", "not_text")
    if not text.strip():
        _unreadable("The document has no text.", "empty")
    pages = text.replace("\r\n", "\n").replace("\r", "\n").split("\f")
    if len(pages) > 1 and not pages[-1].strip():
        pages.pop()
    _check_page_count(len(pages), limits)
    return pages


# --------------------------------------------------------------------------------------
# PDF
# --------------------------------------------------------------------------------------

# PDFium is not thread-safe, not even across documents, and Temporal runs sync activities
# in a thread pool: every PDFium call in this module holds this lock (re-entrant, so
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


# --------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------


@contextmanager
def _open_image(data: bytes, limits: DocumentLimits) -> Iterator[Image.Image]:
    """Opens an image with Pillow, checking its format, frame count and every frame's size.

    Only headers are read here; pixels are decoded by :func:`_load_frame`.
    """
    width, height = _declared_png_size(data)
    if width * height == 0:
        _unreadable("The image has no pixels.", "image_empty")
    try:
        image = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        _unreadable("The image has too many pixels.", "image_too_large")
    except Exception as exc:
        _reraise_resource_errors(exc)
        _unreadable("The image is truncated or corrupt.", "corrupt")
    try:
        if image.format not in _IMAGE_FORMATS:
            raise UnsupportedDocumentError(
                "Only PNG, JPEG and TIFF images are supported.",
                details={"format": str(image.format)},
            )
        _check_page_count(_frame_count(image), limits)
        for index in range(_frame_count(image)):
            _seek(image, index)
            width, height = image.size
            if width * height == 0:
                _unreadable("The image has no pixels.", "image_empty")
            if width * height > limits.max_pixels_per_page:
                _unreadable(
                    "The image has too many pixels.",
                    "image_too_large",
                    pixels=width * height,
                    max_pixels=limits.max_pixels_per_page,
                )
        yield image
    finally:
        image.close()


def _declared_png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR (Pillow refuses to identify a 0x0 PNG at all)."""
    if not data.startswith(_PNG_MAGIC) or len(data) < 24 or data[12:16] != b"IHDR":
        return (1, 1)
    width, height = struct.unpack(">II", data[16:24])
    return (int(width), int(height))


def _frame_count(image: Image.Image) -> int:
    return int(getattr(image, "n_frames", 1))


def _seek(image: Image.Image, index: int) -> None:
    try:
        image.seek(index)
    except Exception as exc:
        _reraise_resource_errors(exc)
        _unreadable("An image frame is truncated or corrupt.", "corrupt")


def _load_frame(image: Image.Image, index: int) -> Image.Image:
    """Decodes frame ``index`` into a standalone image, turned upright per its EXIF."""
    _seek(image, index)
    try:
        image.load()
        frame = image.copy()
    except Exception as exc:
        _reraise_resource_errors(exc)
        _unreadable("The image is truncated or corrupt.", "corrupt")
    try:
        return ImageOps.exif_transpose(frame)
    except Exception:  # a broken orientation tag is no reason to refuse the pixels
        return frame


def _extract_image_pages(
    data: bytes, pages: Sequence[int] | None, dpi: int, limits: DocumentLimits
) -> list[PageText]:
    with _open_image(data, limits) as image:
        numbers = _select_pages(pages, _frame_count(image))
        # Decode every wanted frame once up front so bad bytes fail before any OCR starts;
        # the OCR loaders decode again, one frame at a time, to bound memory.
        for number in numbers:
            _load_frame(image, number - 1)
    jobs: list[_Job] = [
        (number, partial(_load_image_page, data, number - 1, dpi, limits)) for number in numbers
    ]
    return _ocr_jobs(jobs, None, limits.ocr_timeout_seconds)


def _load_image_page(data: bytes, index: int, dpi: int, limits: DocumentLimits) -> tuple[Image.Image, int]:
    """Frame ``index`` ready for OCR, with its resolution in dpi.

    Never downsampled. A frame whose embedded resolution is below ``dpi`` is upsampled to
    ``dpi`` (Tesseract reads small glyphs badly), within the pixel limit, and a fax-style
    frame with unequal x/y resolution is made square. A frame without a plausible
    resolution is OCR'd as it is and assumed to be at ``dpi``.
    """
    with _open_image(data, limits) as image:
        frame = _load_frame(image, index)
    resolution = _embedded_dpi(frame)
    if resolution is None:
        return frame, dpi
    x_dpi, y_dpi = resolution
    target = max(dpi, x_dpi, y_dpi)
    fx, fy = target / x_dpi, target / y_dpi
    width, height = frame.size
    budget = limits.max_pixels_per_page / (width * fx * height * fy)
    if budget < 1.0:
        fx, fy = fx * math.sqrt(budget), fy * math.sqrt(budget)
    if max(abs(fx - 1.0), abs(fy - 1.0)) < 0.05 or min(fx, fy) < 1.0:
        return frame, x_dpi
    resized = cv2.resize(_to_grayscale(frame), None, fx=fx, fy=fy, interpolation=cv2.INTER_CUBIC)
    return Image.fromarray(resized), round(x_dpi * fx)


def _embedded_dpi(image: Image.Image) -> tuple[int, int] | None:
    """The (x, y) resolution an image declares, when plausible for a scanned page.

    Cameras and screenshots often declare 72 or 96 dpi whatever they show; a resolution is
    trusted only if it makes the image at most 17 in (tabloid) on its longer side.
    """
    value = image.info.get("dpi")
    try:
        x_dpi, y_dpi = (round(float(value[0])), round(float(value[1]))) if value else (0, 0)
    except (TypeError, ValueError, IndexError):
        return None
    if not (50 <= x_dpi <= 2400 and 50 <= y_dpi <= 2400):
        return None
    width, height = image.size
    if max(width / x_dpi, height / y_dpi) > 17:
        return None
    return x_dpi, y_dpi


# --------------------------------------------------------------------------------------
# Running OCR jobs (in-process or in a pool)
# --------------------------------------------------------------------------------------

# (page number, loader returning the page image and its dpi). Loaders run in the parent
# as workers free up, so a 200-page PDF never has more than a few bitmaps alive.
_Job = tuple[int, Callable[[], tuple[Image.Image, int]]]


def _ocr_jobs(jobs: Sequence[_Job], max_workers: int | None, timeout_seconds: float) -> list[PageText]:
    if not jobs:
        return []
    if len(jobs) == 1:
        number, load = jobs[0]
        image, dpi = load()
        return [ocr_image(image, page_number=number, dpi=dpi, timeout_seconds=timeout_seconds)]
    workers = max(1, min(max_workers or _usable_cpus(), len(jobs)))
    results: list[PageText | None] = [None] * len(jobs)
    queue = iter(enumerate(jobs))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_ocr_worker) as pool:
        pending: dict[Future[PageText], int] = {}
        try:
            for position, job in itertools.islice(queue, 2 * workers):
                pending[_submit(pool, job, timeout_seconds)] = position
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    results[pending.pop(future)] = future.result()
                for position, job in itertools.islice(queue, len(done)):
                    pending[_submit(pool, job, timeout_seconds)] = position
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return [page for page in results if page is not None]


def _submit(pool: ProcessPoolExecutor, job: _Job, timeout_seconds: float) -> Future[PageText]:
    number, load = job
    image, dpi = load()
    # Grayscale before pickling: a 300 dpi letter page is 8 MB instead of 25 MB.
    gray = Image.fromarray(_to_grayscale(image))
    return pool.submit(_ocr_in_worker, gray, number, dpi, timeout_seconds)


def _ocr_in_worker(image: Image.Image, number: int, dpi: int, timeout_seconds: float) -> PageText:
    return ocr_image(image, page_number=number, dpi=dpi, timeout_seconds=timeout_seconds)


def _init_ocr_worker() -> None:
    # Each worker owns one core: no OpenMP threads in Tesseract, no OpenCV thread pool.
    os.environ["OMP_THREAD_LIMIT"] = "1"
    cv2.setNumThreads(1)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# --------------------------------------------------------------------------------------
# OCR internals: preprocessing, Tesseract, coverage
# --------------------------------------------------------------------------------------

_NOISE_LEVEL = 4.0  # gray levels; see _denoise
_MIN_INK_CONTRAST = 64  # gray levels between Otsu's two class means; below it, no real ink
_SKEW_SEARCH_DEGREES = 12.0


def _blank_page(page_number: int, dpi: int) -> PageText:
    return PageText(page_number, "", "ocr", 0.0, 0.0, [], dpi)


def _to_grayscale(image: Image.Image) -> np.ndarray[Any, Any]:
    """Flattens any Pillow mode to uint8 grayscale (H, W); transparency becomes white."""
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        array = np.asarray(image, dtype=np.float32)
        peak = float(array.max()) if array.size else 0.0
        return (array * (255.0 / peak) if peak > 0 else array).clip(0, 255).astype(np.uint8)
    if image.mode == "L":
        return np.asarray(image, dtype=np.uint8)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    elif image.mode not in ("1", "P", "RGB"):  # CMYK, YCbCr, LAB, ...: via RGB
        image = image.convert("RGB")
    return np.asarray(image.convert("L"), dtype=np.uint8)


def _denoise(gray: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any]:
    """Median blur 3x3, but only on a noisy page at >= 200 dpi.

    On a clean scan the blur costs accuracy (it erodes i-dots and thin serifs); below
    200 dpi strokes are too thin for it. "Noisy" means the mean absolute change the blur
    makes exceeds :data:`_NOISE_LEVEL` gray levels (clean scans measure 1-2, grainy or
    salt-and-pepper ones 10+).
    """
    if dpi < 200:
        return gray
    smoothed = cv2.medianBlur(gray, 3)
    change = float(cv2.absdiff(gray, smoothed).mean())
    return smoothed if change > _NOISE_LEVEL else gray


def _binarise(gray: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any] | None:
    """Otsu threshold to 0 (ink) / 255 (paper), specks removed; ``None`` for a blank page."""
    threshold, binary = cv2.threshold(gray, 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    ink = gray <= threshold
    if not ink.any() or ink.all():
        return None
    if float(gray[~ink].mean()) - float(gray[ink].mean()) < _MIN_INK_CONTRAST:
        return None
    binary = _remove_specks(binary, dpi)
    return binary if (binary == 0).any() else None


def _estimate_skew_degrees(ink: np.ndarray[Any, Any]) -> float:
    """Angle (degrees, counter-clockwise) that makes text lines horizontal.

    Projection-profile search on a downscaled ink mask: the rotation at which the row sums
    change most sharply is the one where text lines and rules are level. Coarse 0.5 degree
    steps over +-12 degrees, then 0.05 degree steps around the best.
    """
    mask: np.ndarray[Any, Any] = np.where(ink, np.uint8(255), np.uint8(0))
    height, width = mask.shape
    factor = min(1.0, 1000.0 / max(height, width))
    if factor < 1.0:
        mask = cv2.resize(mask, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA)
    height, width = mask.shape
    if int(np.count_nonzero(mask)) < 50:
        return 0.0
    center = (width / 2.0, height / 2.0)

    def sharpness(angle: float) -> float:
        matrix = cv2.getRotationMatrix2D(center, angle, 1.0)
        rotated = cv2.warpAffine(mask, matrix, (width, height), flags=cv2.INTER_LINEAR)
        rows = rotated.sum(axis=1, dtype=np.float64)
        return float(np.square(np.diff(rows)).sum())

    coarse = np.arange(-_SKEW_SEARCH_DEGREES, _SKEW_SEARCH_DEGREES + 0.01, 0.5)
    best = max(coarse, key=sharpness)
    fine = np.arange(best - 0.5, best + 0.51, 0.05)
    return round(float(max(fine, key=sharpness)), 2)


def _rotate(gray: np.ndarray[Any, Any], angle: float) -> np.ndarray[Any, Any]:
    """Rotates counter-clockwise by ``angle`` degrees on a canvas enlarged to keep corners."""
    height, width = gray.shape
    matrix = cv2.getRotationMatrix2D((width / 2.0, height / 2.0), angle, 1.0)
    cos, sin = abs(matrix[0, 0]), abs(matrix[0, 1])
    new_width = int(math.ceil(height * sin + width * cos))
    new_height = int(math.ceil(height * cos + width * sin))
    matrix[0, 2] += (new_width - width) / 2.0
    matrix[1, 2] += (new_height - height) / 2.0
    rotated: np.ndarray[Any, Any] = cv2.warpAffine(
        gray,
        matrix,
        (new_width, new_height),
        flags=cv2.INTER_CUBIC,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=255,
    )
    return rotated


def _remove_specks(binary: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any]:
    """Whitens ink components smaller than 0.01 x 0.01 in (3x3 px at 300 dpi).

    Larger thresholds start eating i-dots of 9 pt type ("is" becomes "1s").
    """
    min_area = max(2, int((dpi * 0.01) ** 2))
    count, labels, stats, _ = cv2.connectedComponentsWithStats((binary == 0).astype(np.uint8), connectivity=8)
    small = stats[:, cv2.CC_STAT_AREA] < min_area
    small[0] = False  # background label
    if not small[1:count].any():
        return binary
    cleaned = binary.copy()
    cleaned[small[labels]] = 255
    return cleaned


def text_ink_mask(binary: np.ndarray[Any, Any], dpi: int) -> np.ndarray[Any, Any]:
    """Boolean mask (H, W) of ink that belongs to text lines: no rules, specks or pictures.

    Args:
        binary: uint8 (H, W), 0 ink and 255 paper (:func:`preprocess_page`).
        dpi: its resolution in dots per inch (rules are ink runs of 0.4 in or more).
    """
    ink = (binary == 0).astype(np.uint8) * 255
    rule_px = max(15, int(dpi * 0.4))
    horizontal = cv2.morphologyEx(
        ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (rule_px, 1))
    )
    vertical = cv2.morphologyEx(ink, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_RECT, (1, rule_px)))
    # Grow the rules a little: after deskewing they are a pixel or two off level, and the
    # opening misses their ragged edges.
    grow = max(1, int(dpi * 0.01))
    rules = cv2.dilate(
        cv2.bitwise_or(horizontal, vertical),
        cv2.getStructuringElement(cv2.MORPH_RECT, (2 * grow + 1, 2 * grow + 1)),
    )
    text = cv2.subtract(ink, rules)
    smear = cv2.dilate(text, cv2.getStructuringElement(cv2.MORPH_RECT, (max(3, int(dpi * 0.08)), 1)))
    count, labels, stats, _ = cv2.connectedComponentsWithStats(smear, connectivity=8)
    ink_per_blob = np.bincount(labels[text > 0], minlength=count)
    keep = (ink_per_blob >= max(4, int((dpi * 0.02) ** 2))) & (stats[:, cv2.CC_STAT_HEIGHT] <= dpi * 0.75)
    keep[0] = False
    mask: np.ndarray[Any, Any] = keep[labels] & (text > 0)
    return mask


def _run_tesseract(binary: np.ndarray[Any, Any], dpi: int, timeout_seconds: float) -> dict[str, list[Any]]:
    try:
        result: dict[str, list[Any]] = pytesseract.image_to_data(
            Image.fromarray(binary),
            lang=TESSERACT_LANG,
            config=f"--psm 3 --dpi {dpi}",
            output_type=pytesseract.Output.DICT,
            timeout=timeout_seconds,
        )
    except RuntimeError as exc:
        if "timeout" not in str(exc).lower():
            raise
        _unreadable("OCR timed out on a page.", "ocr_timeout", timeout_seconds=timeout_seconds)
    return result


def _collect_words(
    data: dict[str, list[Any]],
) -> tuple[list[Word], list[tuple[int, int, int, int]], str]:
    """Words, their boxes (left, top, width, height; px) and the page text from TSV rows."""
    words: list[Word] = []
    boxes: list[tuple[int, int, int, int]] = []
    blocks: dict[int, dict[tuple[int, int], list[str]]] = {}
    for i, raw in enumerate(data["text"]):
        text = str(raw).strip()
        confidence = float(data["conf"][i])
        if not text or confidence < 0:
            continue
        words.append(Word(text, round(confidence / 100.0, 4)))
        boxes.append(
            (
                int(data["left"][i]),
                int(data["top"][i]),
                int(data["width"][i]),
                int(data["height"][i]),
            )
        )
        lines = blocks.setdefault(int(data["block_num"][i]), {})
        lines.setdefault((int(data["par_num"][i]), int(data["line_num"][i])), []).append(text)
    text = "\n\n".join("\n".join(" ".join(line) for line in lines.values()) for lines in blocks.values())
    return words, boxes, text


def _coverage(
    text_ink: np.ndarray[Any, Any], boxes: Sequence[tuple[int, int, int, int]], dpi: int, *, has_words: bool
) -> float:
    """Fraction of text ink inside word boxes padded by about 0.01 in."""
    total = int(np.count_nonzero(text_ink))
    if total == 0:
        # Nothing we recognise as text lines (e.g. one huge headline): trust Tesseract.
        return 1.0 if has_words else 0.0
    pad = max(1, int(dpi * 0.01))
    covered = np.zeros(text_ink.shape, dtype=bool)
    height, width = text_ink.shape
    for left, top, box_width, box_height in boxes:
        covered[
            max(0, top - pad) : min(height, top + box_height + pad),
            max(0, left - pad) : min(width, left + box_width + pad),
        ] = True
    return float(np.count_nonzero(text_ink & covered)) / total


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------


def _given(image: Image.Image, dpi: int) -> tuple[Image.Image, int]:
    return image, dpi


def _select_pages(pages: Sequence[int] | None, page_count: int) -> list[int]:
    if pages is None:
        return list(range(1, page_count + 1))
    selected = sorted(set(pages))
    outside = [number for number in selected if not 1 <= number <= page_count]
    if outside:
        raise ValueError(f"pages {outside} outside 1..{page_count}")
    return selected


def _check_page_count(page_count: int, limits: DocumentLimits) -> None:
    if page_count > limits.max_pages:
        _unreadable(
            "The document has too many pages.",
            "too_many_pages",
            page_count=page_count,
            max_pages=limits.max_pages,
        )


def _reraise_resource_errors(exc: Exception) -> None:
    """Memory exhaustion is the worker's problem, not the document's: let it propagate."""
    if isinstance(exc, MemoryError):
        raise exc


def _unreadable(message: str, reason: str, **details: Any) -> NoReturn:
    raise UnreadableDocumentError(message, details={"reason": reason, **details})
