"""An entry form's text as lines, and its form area: the lines before the essay begins.

:func:`document_lines` splits the pages into :class:`Line` s (page, offset, OCR confidence);
:func:`essay_start_index` finds where the essay begins, so extraction reads the form area
only; :func:`is_prose_line` and :func:`word_counts` tell an essay's sentences from form
fields. Part of the ``rules`` extraction (:mod:`activities.document_intake.extract`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from activities.document_intake.extract_labels import LabelTable, label_table, line_labels
from activities.document_intake.schema import FieldSchema

__all__ = [
    "Line",
    "PageLike",
    "compiled",
    "document_lines",
    "essay_start_index",
    "is_prose_line",
    "matches_any",
    "word_counts",
]


class PageLike(Protocol):
    """What extraction needs from a page (``documents.PageText`` satisfies it).

    Attributes:
        page_number: 1-based page number.
        text: the page's text, one line per newline.
        ocr_confidence: 0..1, None for exact text (a PDF text layer or plain text).
        source: where the text came from (``"text_layer"``, ``"ocr"``, ``"plain_text"``).
    """

    @property
    def page_number(self) -> int:
        """1-based page number."""
        ...

    @property
    def text(self) -> str:
        """The page's text."""
        ...

    @property
    def ocr_confidence(self) -> float | None:
        """0..1, None for exact text."""
        ...

    @property
    def source(self) -> str:
        """Where the text came from."""
        ...


# --- lines and the form area --------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One line of a document.

    Attributes:
        index: position in the whole document's line list (0-based).
        page_number: page it is on.
        offset: character offset of the line's start in that page's text.
        text: the line, without its newline (non-breaking spaces made plain spaces).
        ocr_confidence: the page's OCR confidence, None for exact text.
    """

    index: int
    page_number: int
    offset: int
    text: str
    ocr_confidence: float | None


def document_lines(pages: Sequence[PageLike]) -> list[Line]:
    """Splits pages into lines, keeping each line's page and character offset.

    Args:
        pages: pages in document order.

    Returns:
        All lines of all pages, in order.
    """
    out: list[Line] = []
    for page in pages:
        offset = 0
        for raw in page.text.split("\n"):
            text = raw.rstrip("\r").translate(_SPACES)
            out.append(Line(len(out), page.page_number, offset, text, page.ocr_confidence))
            offset += len(raw) + 1
    return out


def essay_start_index(lines: Sequence[Line], schema: FieldSchema) -> int:
    """Index of the line where the essay begins: the form area is ``lines[:index]``.

    The essay begins with its first prose: a prose line (see :func:`is_prose_line`, plus the
    sentence-like lines just above it in the same paragraph) or a prose paragraph
    (blank-line separated lines with at least 15 words, 4 of them function words, no
    labelled field and no contest instructions). When an ``essay_start_patterns`` line
    (``Essay:``, ``Title: ...``) comes before that prose with no labelled field in between,
    the essay begins at that line instead. Header lines are ignored throughout.

    Args:
        lines: the entry's lines.
        schema: supplies the header, essay and label patterns.

    Returns:
        The index, or ``len(lines)`` when there is no essay (the whole text is form).
    """
    markers = compiled(tuple(schema.essay_start_patterns))
    headers = compiled(tuple(schema.header_patterns))
    table = label_table(schema)
    start = _prose_start(lines, headers, table)
    for line in reversed(lines[:start]):
        if not line.text.strip() or matches_any(headers, line.text):
            continue
        if matches_any(markers, line.text):
            return line.index
        hits = line_labels(line.text, table)
        if hits and hits[0].explicit:
            break  # A labelled field: the form runs at least to here.
    return start


def word_counts(text: str) -> tuple[int, int]:
    """Counts words and function words ("the", "my", "is"...) of a text.

    Args:
        text: any text.

    Returns:
        ``(words, function_words)``.
    """
    words = _WORD.findall(text.casefold())
    return len(words), sum(1 for w in words if w in _FUNCTION_WORDS)


def is_prose_line(text: str) -> bool:
    """Whether a line reads like a sentence of an essay rather than a form field.

    Args:
        text: one line.

    Returns:
        True for at least 10 words of which at least 3 are function words ("the", "my",
        "is"...), unless it reads like contest instructions ("Please print clearly...").
    """
    words = _WORD.findall(text.casefold())
    if len(words) < 10:
        return False
    if sum(1 for w in words if w in _FUNCTION_WORDS) < 3:
        return False
    return not _is_instruction(words)


def matches_any(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
    """Whether any of ``patterns`` occurs in ``text`` (``re.search``).

    Args:
        patterns: compiled patterns (:func:`compiled`), e.g. the schema's header patterns.
        text: one line.

    Returns:
        True when one of them matches somewhere in the line.
    """
    return any(p.search(text) for p in patterns)


@functools.lru_cache(maxsize=64)
def compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """The schema's regular expressions compiled, in order (cached per tuple of patterns).

    Args:
        patterns: regular expressions (``header_patterns``, ``essay_start_patterns``).

    Returns:
        The compiled patterns.

    Raises:
        re.error: a pattern is not a valid regular expression.
    """
    return tuple(re.compile(p) for p in patterns)


# --- private: prose -----------------------------------------------------------------------------


def _is_prose_paragraph(paragraph: Sequence[Line], table: LabelTable) -> bool:
    words = _WORD.findall(" ".join(line.text for line in paragraph).casefold())
    if len(words) < 15 or sum(1 for w in words if w in _FUNCTION_WORDS) < 4:
        return False
    if _is_instruction(words):
        return False
    return not any(
        hits and hits[0].explicit
        for hits in (line_labels(line.text, table) for line in paragraph)
    )


def _prose_start(
    lines: Sequence[Line], headers: tuple[re.Pattern[str], ...], table: LabelTable
) -> int:
    paragraph: list[Line] = []
    for line in [*lines, None]:
        if line is not None and line.text.strip():
            if matches_any(headers, line.text):
                continue
            hits = line_labels(line.text, table)
            if not (hits and hits[0].explicit) and is_prose_line(line.text):
                start = line.index
                for previous in reversed(paragraph):
                    if line_labels(previous.text, table) or not _is_sentence_like(previous.text):
                        break
                    start = previous.index
                return start
            paragraph.append(line)
            continue
        if paragraph and _is_prose_paragraph(paragraph, table):
            return paragraph[0].index
        paragraph = []
    return len(lines)


def _is_sentence_like(text: str) -> bool:
    words = _WORD.findall(text.casefold())
    return len(words) >= 5 and any(w in _FUNCTION_WORDS for w in words)


def _is_instruction(words: Sequence[str]) -> bool:
    if words and words[0] in _INSTRUCTION_OPENERS:
        return True
    return len({w for w in words if w in _INSTRUCTION_WORDS}) >= 2


_SPACES = {0xA0: " ", 0x2007: " ", 0x202F: " ", 0x0C: " ", 0x0B: " "}
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_FUNCTION_WORDS = frozenset(
    """the a an and or but to of in on at for with from by as is was are were be been being
    i my me we our us you your he him his she her it its they them their this that these
    those when because so not have has had do does did will would can could always never
    who what how very""".split()
)
_INSTRUCTION_WORDS = frozenset(
    """please must entries entry submit submitted submission deadline postmarked print attach
    attached rules eligible eligibility judges judged typed maximum minimum limit required
    complete completed form""".split()
)
_INSTRUCTION_OPENERS = frozenset("please note instructions rules entries essays".split())
