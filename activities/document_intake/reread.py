"""Re-reading only the doubtful fields of a scanned page, at a higher dpi.

The offline ``retry_extraction`` step reads a scanned page's doubtful fields again at 400 dpi.
Tesseract's time hardly depends on the dpi (it scales each text line to a fixed height
before recognising it) but grows with the amount of text, and an entry form is mostly
essay. So :func:`reread_regions` OCRs at the higher dpi only a band of lines around each
doubtful field — a field that is missing or invalid (to be read again) or that was read
weakly (to be read again and compared) — and gives up (``None``: the caller re-reads the
whole page, as before) whenever it cannot place every field it must read.

Locating a field. The 300 dpi pass keeps no word boxes (``PageText.words`` holds text and
confidence only), so the region is found from the 300 dpi *text* and the page's *ink*:

1. the field's anchor lines in the 300 dpi text: the lines its value's evidence quotes,
   else the form-area lines holding its label (OCR-confused and fuzzy labels included)
   and the line after each; a field with neither cannot be placed;
2. the higher-dpi page is rendered and preprocessed exactly as :func:`overseer.documents.ocr_image`
   does (grayscale, denoise, deskew, Otsu, specks), and its text-ink mask (rules, specks
   and pictures removed) is cut into line bands by its row profile;
3. Tesseract emits one text line per line of a column, so a line's rank among the page's
   text lines is at or after its band's rank (side-by-side fields are two text lines on one
   band). The region is every band the rank can stand for, by the difference between the
   two counts, plus one band either side and a margin;
4. after OCR the region must show the field's label again (a field to read) — otherwise
   the guess was wrong and the page is re-read instead.

The bands of one page are stacked into one image and OCR'd with one Tesseract call.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from activities.document_intake.extract import ExtractionResult, extract_fields
from activities.document_intake.extract_labels import label_table, line_labels
from activities.document_intake.extract_lines import Line, document_lines, essay_start_index
from activities.document_intake.schema import FieldSchema

# The media module's own rendering, preprocessing and Tesseract call, so that a region is
# read exactly as its page would be.
from overseer.documents import (
    DocumentKind,
    DocumentLimits,
    PageText,
    Word,
    ocr_binary,
    page_image,
    preprocess_page,
    text_ink_mask,
)

__all__ = [
    "Region",
    "RegionRead",
    "anchor_lines",
    "line_bands",
    "read_region_fields",
    "reread_regions",
]

MAX_REGION_SHARE = 0.45
"""A region taller than this share of the page's text height saves little over the page:
the page is re-read instead."""


@dataclass(frozen=True)
class Region:
    """One band of a page that was OCR'd again.

    Attributes:
        page_number: 1-based page.
        top_px: first row of the band, in pixels of the deskewed page at ``dpi``.
        bottom_px: row after the band's last, same coordinates.
        dpi: resolution of the re-read (dots per inch).
        fields: the doubtful fields the band was cut for.
    """

    page_number: int
    top_px: int
    bottom_px: int
    dpi: int
    fields: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{page_number, top_px, bottom_px, dpi, fields}``."""
        return {"page_number": self.page_number, "top_px": self.top_px,
                "bottom_px": self.bottom_px, "dpi": self.dpi, "fields": list(self.fields)}


@dataclass(frozen=True)
class RegionRead:
    """What :func:`reread_regions` read.

    Attributes:
        pages: one ``PageText`` per re-read page whose text is only its regions' text
            (stacked top to bottom), ``source="ocr"``, with the regions' words and their
            length-weighted mean confidence; ``coverage`` is None (not measured on a crop).
        regions: the bands read, in page and top order.
        placed: fields whose label (or quoted value line) the regions show again.
    """

    pages: list[PageText]
    regions: list[Region]
    placed: frozenset[str]


def reread_regions(
    data: bytes,
    kind: DocumentKind,
    pages: Sequence[PageText],
    schema: FieldSchema,
    *,
    extract: Collection[str],
    check: Collection[str] = (),
    evidence: dict[str, dict[str, Any]] | None = None,
    dpi: int = 400,
    limits: DocumentLimits | None = None,
) -> RegionRead | None:
    """OCRs at ``dpi`` only the bands of lines around the doubtful fields.

    Args:
        data: the stored document's bytes (a PDF or an image).
        kind: its kind; text documents are never re-read (returns None).
        pages: the entry's pages as read at the first dpi (``source="ocr"`` pages are the
            ones that can be re-read), whole pages (not a batch entry's slice).
        schema: the field schema (labels, header and essay patterns).
        extract: fields to read again (missing or invalid at the first dpi).
        check: fields read weakly at the first dpi, to re-read and compare.
        evidence: field → ``{page_number, snippet, ...}`` of the first reading.
        dpi: resolution of the re-read, dots per inch (50..1200).
        limits: pixel and OCR time limits (default ``DocumentLimits()``).

    Returns:
        The regions' reading, or None when a field of ``extract`` cannot be placed (no
        anchor line, a page that is not OCR'd, a region too large, or a region whose OCR
        does not show the field's label again): the caller then re-reads whole pages.
        Fields of ``check`` that cannot be placed, or that would make a page's regions too
        tall, are left out of the regions.

    Raises:
        UnreadableDocumentError: the bytes cannot be read, or Tesseract timed out
            (permanent, as for the page read).
        ValueError: ``dpi`` out of range.
    """
    if not 50 <= dpi <= 1200:
        raise ValueError(f"dpi must be between 50 and 1200, got {dpi}")
    limits = limits or DocumentLimits()
    if kind is DocumentKind.TEXT or not extract and not check:
        return None
    anchors = anchor_lines(pages, schema, [*extract, *check], evidence or {})
    if any(name not in anchors for name in extract):
        return None
    by_page: dict[int, dict[str, list[int]]] = {}
    for name, (page_number, ranks) in anchors.items():
        by_page.setdefault(page_number, {})[name] = ranks
    texts = {p.page_number: p for p in pages}
    read_pages: list[PageText] = []
    regions: list[Region] = []
    for page_number, fields in sorted(by_page.items()):
        page = texts[page_number]
        if page.source != "ocr":
            if any(name in extract for name in fields):
                return None
            continue
        binary, used_dpi = _preprocessed_page(data, kind, page_number, dpi, limits)
        if binary is None:
            return None
        bands = line_bands(binary, used_dpi)
        text_lines = _text_line_count(page.text)
        spans = _region_spans(bands, text_lines, fields, used_dpi, binary.shape[0])
        needed = {name: ranks for name, ranks in fields.items() if name in extract}
        if spans is None and needed and len(needed) < len(fields):
            # Too tall with the weak fields to compare: read the fields to extract only.
            spans = _region_spans(bands, text_lines, needed, used_dpi, binary.shape[0])
        if spans is None:
            if needed:
                return None
            continue
        read = _ocr_spans(binary, spans, used_dpi, page_number, limits.ocr_timeout_seconds)
        read_pages.append(read)
        regions.extend(Region(page_number, top, bottom, used_dpi, tuple(sorted(names)))
                       for top, bottom, names in spans)
    placed = _placed(read_pages, schema, anchors, evidence or {})
    if any(name not in placed for name in extract):
        return None
    return RegionRead(read_pages, regions, frozenset(placed))


def read_region_fields(
    region: RegionRead,
    schema: FieldSchema,
    record: dict[str, str | None],
    *,
    extract: Collection[str],
    check: Collection[str],
) -> tuple[ExtractionResult, dict[str, dict[str, Any]]]:
    """The placed fields read from the regions, and the checked ones compared with ``record``.

    Args:
        region: what :func:`reread_regions` read.
        schema: the field schema.
        record: the values of the first reading (field → value or None).
        extract: fields to read again (missing or invalid at the first dpi).
        check: fields to read again and compare.

    Returns:
        ``(result, checks)``: the relaxed extraction of the fields of ``extract`` and
        ``check`` the regions placed, and per such field ``{"first": value at the first dpi
        or None, "reread": value or None, "agrees": bool, or None for a field of
        ``extract`` or one the regions give no value for}``.
    """
    asked = sorted((set(extract) | set(check)) & region.placed)
    result = extract_fields(region.pages, schema, relaxed=True, only=asked)
    checks: dict[str, dict[str, Any]] = {}
    for name in asked:
        value, first = result.values.get(name), record.get(name)
        agrees = None if name in extract or value is None else value == first
        checks[name] = {"first": first, "reread": value, "agrees": agrees}
    return result, checks


def anchor_lines(
    pages: Sequence[PageText],
    schema: FieldSchema,
    names: Collection[str],
    evidence: dict[str, dict[str, Any]],
) -> dict[str, tuple[int, list[int]]]:
    """Where each field sits in the first reading's text, as ranks of non-empty lines.

    A field with evidence is anchored on the lines its snippet quotes. Otherwise on the
    form-area lines (before the essay) holding its label — exact, OCR-confused or fuzzy
    — and the next non-empty line after each (a value under its label). Only one page
    per field: the first where it is found.

    Args:
        pages: the entry's pages as first read.
        schema: labels and form-area patterns.
        names: the fields to place.
        evidence: field → ``{page_number, snippet, ...}``.

    Returns:
        Field → (page number, sorted 0-based ranks among that page's non-empty lines);
        fields that cannot be placed are absent.
    """
    lines = document_lines(pages)
    form_end = essay_start_index(lines, schema)
    rank = _ranks(lines)
    table = label_table(schema)
    out: dict[str, tuple[int, list[int]]] = {}
    for name in names:
        quoted = _quoted_lines(lines, evidence.get(name))
        if quoted:
            out[name] = (quoted[0].page_number, sorted({rank[line.index] for line in quoted}))
            continue
        hits = [line for line in lines[:form_end] if line.text.strip() and any(
            hit.field == name for hit in line_labels(line.text, table, ocr=True, fuzzy=True))]
        if not hits:
            continue
        page_number = hits[0].page_number
        ranks: set[int] = set()
        for line in (h for h in hits if h.page_number == page_number):
            ranks.add(rank[line.index])
            after = next((other for other in lines[line.index + 1:]
                          if other.page_number == page_number and other.text.strip()), None)
            if after is not None:
                ranks.add(rank[after.index])
        out[name] = (page_number, sorted(ranks))
    return out


def line_bands(binary: np.ndarray[Any, Any], dpi: int) -> list[tuple[int, int]]:
    """Text-line bands of a binarised page, top to bottom.

    The page's text ink (``documents.text_ink_mask``: rules, specks and pictures removed)
    is projected on the vertical axis; rows with ink separated by less than 0.02 in are
    one band (ascenders, descenders, accents), and bands shorter than 0.04 in are dropped
    (dust, the ink of a rule's ragged edge).

    Args:
        binary: uint8 (H, W), 0 ink and 255 paper, deskewed.
        dpi: its resolution in dots per inch.

    Returns:
        ``(top, bottom)`` row ranges in pixels, bottom exclusive.
    """
    rows: np.ndarray[Any, Any] = np.asarray(text_ink_mask(binary, dpi).any(axis=1))
    join = max(1, round(dpi * 0.02))
    bands: list[tuple[int, int]] = []
    for top, bottom in _runs(rows):
        if bands and top - bands[-1][1] < join:
            bands[-1] = (bands[-1][0], bottom)
        else:
            bands.append((top, bottom))
    return [(t, b) for t, b in bands if b - t >= dpi * 0.04]


# --- private ------------------------------------------------------------------------------------


def _preprocessed_page(
    data: bytes, kind: DocumentKind, page_number: int, dpi: int, limits: DocumentLimits
) -> tuple[np.ndarray[Any, Any] | None, int]:
    """The page binarised and deskewed as ``documents.ocr_image`` does, with its dpi."""
    image, used = page_image(data, kind, page_number, dpi, limits)
    return preprocess_page(image, used), used


def _region_spans(
    bands: Sequence[tuple[int, int]],
    text_lines: int,
    fields: dict[str, list[int]],
    dpi: int,
    height: int,
) -> list[tuple[int, int, set[str]]] | None:
    """Row ranges to OCR for ``fields`` (ranks of text lines), merged; None if too tall."""
    if not bands or text_lines == 0:
        return None
    extra_text = max(0, text_lines - len(bands))  # lines sharing a band (side-by-side)
    extra_bands = max(0, len(bands) - text_lines)  # bands with no text line (marks, dust)
    margin = round(dpi * 0.06)
    wanted: list[tuple[int, int, str]] = []
    for name, ranks in fields.items():
        for rank in ranks:
            first = max(0, min(rank - extra_text - 1, len(bands) - 1))
            last = min(len(bands) - 1, rank + extra_bands + 1)
            wanted.append((max(0, bands[first][0] - margin),
                           min(height, bands[last][1] + margin), name))
    wanted.sort()
    spans: list[tuple[int, int, set[str]]] = []
    for top, bottom, name in wanted:
        if spans and top <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], bottom), spans[-1][2] | {name})
        else:
            spans.append((top, bottom, {name}))
    text_height = bands[-1][1] - bands[0][0]
    if sum(b - t for t, b, _ in spans) > MAX_REGION_SHARE * max(text_height, 1):
        return None
    return spans


def _ocr_spans(
    binary: np.ndarray[Any, Any],
    spans: Sequence[tuple[int, int, set[str]]],
    dpi: int,
    page_number: int,
    timeout_seconds: float,
) -> PageText:
    """OCRs the spans stacked into one image (0.15 in of paper between them)."""
    gap = np.full((round(dpi * 0.15), binary.shape[1]), 255, dtype=np.uint8)
    parts: list[np.ndarray[Any, Any]] = []
    for top, bottom, _ in spans:
        if parts:
            parts.append(gap)
        parts.append(binary[top:bottom])
    stacked = np.vstack(parts)
    words, text = ocr_binary(stacked, dpi, timeout_seconds)
    return PageText(page_number, text, "ocr", _mean_confidence(words), None, words, dpi)


def _placed(
    pages: Sequence[PageText],
    schema: FieldSchema,
    anchors: dict[str, tuple[int, list[int]]],
    evidence: dict[str, dict[str, Any]],
) -> set[str]:
    """Fields whose label the re-read shows (or, for a quoted value, its label or words)."""
    table = label_table(schema)
    placed: set[str] = set()
    by_page = {p.page_number: p for p in pages}
    for name, (page_number, _) in anchors.items():
        page = by_page.get(page_number)
        if page is None:
            continue
        lines = [line for line in page.text.split("\n") if line.strip()]
        if any(hit.field == name for line in lines
               for hit in line_labels(line, table, ocr=True, fuzzy=True)):
            placed.add(name)
            continue
        label = str((evidence.get(name) or {}).get("label", ""))
        if label and not label.startswith("pattern:") and _folded(label) in _folded(page.text):
            placed.add(name)
    return placed


def _quoted_lines(lines: Sequence[Line], evidence: dict[str, Any] | None) -> list[Line]:
    if not evidence or not evidence.get("snippet"):
        return []
    parts = {" ".join(part.split()) for part in str(evidence["snippet"]).rstrip("…").split(" / ")}
    page_number = evidence.get("page_number")
    return [line for line in lines if line.page_number == page_number and line.text.strip()
            and " ".join(line.text.split()) in parts]


def _ranks(lines: Sequence[Line]) -> dict[int, int]:
    """Line index → rank among the non-empty lines of its page."""
    out: dict[int, int] = {}
    counts: dict[int, int] = {}
    for line in lines:
        if line.text.strip():
            out[line.index] = counts.get(line.page_number, 0)
            counts[line.page_number] = out[line.index] + 1
    return out


def _text_line_count(text: str) -> int:
    return sum(1 for line in text.split("\n") if line.strip())


def _runs(mask: np.ndarray[Any, Any]) -> list[tuple[int, int]]:
    """``(start, end)`` of the runs of True in a 1-D boolean array, end exclusive."""
    padded = np.concatenate(([False], mask.astype(bool), [False]))
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    return [(int(edges[i]), int(edges[i + 1])) for i in range(0, len(edges), 2)]


def _mean_confidence(words: Sequence[Word]) -> float:
    weights = [len(w.text) for w in words]
    if not words:
        return 0.0
    total = sum(w.confidence * n for w, n in zip(words, weights, strict=True)) / sum(weights)
    return round(total, 4)


def _folded(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.casefold())

