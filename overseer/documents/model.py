"""What reading a document gives: its kind, limits, facts, and each page's text and words."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

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
