"""Splitting a batch upload into entry forms (seed 000 "each chunk = one submission").

A school often sends one PDF with many entry forms (one or several pages each) or one text
file with the forms one after another. :func:`split_entries` finds where each entry starts;
:func:`slice_pages` returns the text of one entry so each runs as its own child pipeline.

An entry starts at a line matching ``entry_start_patterns`` (the contest header), or at a
student-name label (``entry_label_fields``) that follows an essay. A start is kept only when
its entry holds a label of a required field, so a header repeated at the top of every page
of a two-page form does not split it; a start near the top of a page snaps to the page
boundary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from activities.document_intake.extract_labels import LabelHit, label_table, line_labels
from activities.document_intake.extract_lines import (
    Line,
    PageLike,
    document_lines,
    is_prose_line,
    word_counts,
)
from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import validate_value

__all__ = ["EntrySpan", "PageSlice", "slice_pages", "split_entries"]

ESSAY_MIN_WORDS = 40
"""Unlabelled words (at least a quarter of a hundred function words) that make an essay."""
ESSAY_MIN_FUNCTION_WORDS = 10
SNAP_MAX_WORDS = 40
"""A start with fewer words than this above it on its page snaps to the page start."""


class EntrySpan(BaseModel):
    """Where one entry lies in a document.

    It runs from ``(start_page, start_offset)`` inclusive to ``(end_page, end_offset)``
    exclusive.

    Attributes:
        index: 0-based position of the entry in the document.
        start_page: 1-based page number where the entry starts.
        start_offset: character offset in that page's text.
        end_page: 1-based page number of the entry's last page.
        end_offset: character offset in ``end_page``'s text where the entry ends
            (exclusive; the page's length when it ends with the page).
    """

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    start_page: int = Field(ge=1)
    start_offset: int = Field(ge=0)
    end_page: int = Field(ge=1)
    end_offset: int = Field(ge=0)


class PageSlice(BaseModel):
    """The part of one page that belongs to an entry (satisfies ``extract_lines.PageLike``).

    Attributes:
        page_number: the original page number.
        text: the entry's part of the page text.
        ocr_confidence: the page's OCR confidence, None for exact text.
        source: the page's text source.
        coverage: the page's OCR coverage when the page had one.
    """

    model_config = ConfigDict(frozen=True)

    page_number: int
    text: str
    ocr_confidence: float | None
    source: str
    coverage: float | None = None


def split_entries(pages: Sequence[PageLike], schema: FieldSchema) -> list[EntrySpan]:
    """Finds the entry forms in a document.

    Args:
        pages: the document's pages in order (unique page numbers).
        schema: supplies ``entry_start_patterns``, header patterns and labels.

    Returns:
        The spans in order, covering the whole document without gaps: one span for a
        single form (or for text with no recognisable form); none for no pages.

    Raises:
        ValueError: two pages share a page number.
    """
    if not pages:
        return []
    numbers = [p.page_number for p in pages]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"duplicate page numbers: {numbers}")
    lines = document_lines(pages)
    starts = _confirmed(_candidate_starts(lines, schema), lines, schema)
    positions = [(pages[0].page_number, 0)]
    positions += [_snap(lines[i], lines, previous, schema) for previous, i in zip(
        starts, starts[1:], strict=False
    )]

    order = {number: i for i, number in enumerate(numbers)}
    spans: list[EntrySpan] = []
    for k, (page, offset) in enumerate(positions):
        if k + 1 < len(positions):
            next_page, next_offset = positions[k + 1]
            if next_offset == 0:
                previous = pages[order[next_page] - 1]
                end_page, end_offset = previous.page_number, len(previous.text)
            else:
                end_page, end_offset = next_page, next_offset
        else:
            end_page, end_offset = pages[-1].page_number, len(pages[-1].text)
        spans.append(EntrySpan(index=k, start_page=page, start_offset=offset,
                               end_page=end_page, end_offset=end_offset))
    return spans


def slice_pages(pages: Sequence[PageLike], span: EntrySpan) -> list[PageSlice]:
    """The pages of one entry, cut to the span.

    Args:
        pages: the whole document's pages.
        span: one span from :func:`split_entries`.

    Returns:
        One :class:`PageSlice` per page from ``span.start_page`` to ``span.end_page``,
        keeping original page numbers, OCR confidence and source.
    """
    out: list[PageSlice] = []
    for page in pages:
        if not span.start_page <= page.page_number <= span.end_page:
            continue
        low = span.start_offset if page.page_number == span.start_page else 0
        high = span.end_offset if page.page_number == span.end_page else len(page.text)
        out.append(
            PageSlice(
                page_number=page.page_number,
                text=page.text[low:high],
                ocr_confidence=page.ocr_confidence,
                source=page.source,
                coverage=getattr(page, "coverage", None),
            )
        )
    return out


def _candidate_starts(lines: Sequence[Line], schema: FieldSchema) -> list[int]:
    """Line indexes that may start an entry: headers, and name labels after an essay."""
    starts_re = [re.compile(p) for p in schema.entry_start_patterns]
    table = label_table(schema)
    entry_fields = set(schema.entry_label_fields)
    out = [0]
    words = function_words = 0
    for line in lines:
        text = line.text
        if not text.strip():
            continue
        if any(p.search(text) for p in starts_re):
            out.append(line.index)
            words = function_words = 0
            continue
        hits = line_labels(text, table, ocr=True)
        if hits:
            first = hits[0]
            essay_before = words >= ESSAY_MIN_WORDS and function_words >= ESSAY_MIN_FUNCTION_WORDS
            if essay_before and first.field in entry_fields and _names_a_value(
                first, text, schema
            ):
                out.append(_back_up(line.index, lines, out[-1], schema))
                words = function_words = 0
            continue
        counted, function = word_counts(text)
        words += counted
        function_words += function
    return sorted(set(out))


def _names_a_value(hit: LabelHit, text: str, schema: FieldSchema) -> bool:
    """A label line that really is a field: explicit, or its value validates; never prose.

    A label without a colon, dash or fill line must be printed capitalised: a line of an
    essay that begins with the label's word in lower case ("student loans from doubling
    in July.", a sentence carried over from the line above) is prose, not a new form.
    """
    if is_prose_line(text):
        return False
    if hit.explicit:
        return True
    if not hit.printed[:1].isupper():
        return False
    return validate_value(schema.field(hit.field), text[hit.value_start:]) is None


def _back_up(index: int, lines: Sequence[Line], floor: int, schema: FieldSchema) -> int:
    """Moves a label-based start up over the entry's own labels, blanks and header lines."""
    table = label_table(schema)
    headers = [re.compile(p) for p in schema.header_patterns]
    start = index
    for line in reversed(lines[floor + 1:index]):
        text = line.text
        if text.strip() and not any(p.search(text) for p in headers):
            if not line_labels(text, table, ocr=True) or is_prose_line(text):
                break
        start = line.index
    while start < index and not lines[start].text.strip():
        start += 1
    return start


def _confirmed(candidates: list[int], lines: Sequence[Line], schema: FieldSchema) -> list[int]:
    """Keeps the starts whose entry holds a required-field label; merges the rest backwards.

    The first entry always starts at line 0; when it holds no label (a cover letter), the
    next start is dropped instead, so the cover text joins the first real entry.
    """
    table = label_table(schema)
    required = set(schema.required_fields)
    labelled = [
        any(h.field in required for h in line_labels(line.text, table, ocr=True)[:1])
        and not is_prose_line(line.text)
        for line in lines
    ]
    starts = list(candidates)
    changed = True
    while changed and len(starts) > 1:
        changed = False
        for k in range(len(starts)):
            end = starts[k + 1] if k + 1 < len(starts) else len(lines)
            if any(labelled[starts[k]:end]):
                continue
            del starts[k + 1 if k == 0 else k]
            changed = True
            break
    return starts


def _snap(line: Line, lines: Sequence[Line], previous: int, schema: FieldSchema) -> tuple[int, int]:
    """``(page, offset)`` where an entry starts: the page start when little precedes it there.

    ``previous`` is the line index of the previous entry's start; an entry never snaps
    back over it.
    """
    if line.offset == 0:
        return line.page_number, 0
    above = [other for other in lines[: line.index] if other.page_number == line.page_number]
    if lines[previous].page_number == line.page_number:
        return line.page_number, line.offset
    table = label_table(schema)
    words = sum(word_counts(other.text)[0] for other in above)
    if words < SNAP_MAX_WORDS and not any(line_labels(other.text, table) for other in above):
        return line.page_number, 0
    return line.page_number, line.offset
