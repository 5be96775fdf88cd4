"""Candidate values of an entry form's fields, each with its evidence, from every extraction pass.

:func:`find_candidates` runs the passes :class:`CandidateMode` asks for over the form area
(labels on the same line, on the line below, a row of labels over a row of values; relaxed
labels; labels outside the form area; e-mail and phone shapes; lines joined) and returns
unvalidated :class:`Candidate` s, each with its :class:`Evidence` (where it was read, how,
and a score). :func:`activities.document_intake.extract.resolve_candidates` validates them
and picks the values.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from activities.document_intake.extract_labels import LabelHit, LabelTable, label_table, line_labels
from activities.document_intake.extract_lines import (
    Line,
    compiled,
    essay_start_index,
    is_prose_line,
    matches_any,
)
from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import clean_value

__all__ = [
    "Candidate",
    "CandidateMode",
    "Evidence",
    "ExtractionMethod",
    "find_candidates",
]


ExtractionMethod = Literal[
    "label_same_line",
    "label_next_line",
    "relaxed_label",
    "pattern",
    "continuation_line",
    "ocr_repair",
    "llm_quote",
]
"""How a value was found; ``continuation_line``/``ocr_repair`` are the review agent's,
``llm_quote`` a model's answer whose quoted line was checked against the text."""

MAX_SNIPPET_CHARS = 200


class Evidence(BaseModel):
    """Where a value was read, and how much to trust the reading.

    Attributes:
        page_number: 1-based page the value is on.
        snippet: the line(s) it was read from, whitespace collapsed, at most 200 characters.
        label: the label as printed (``"Studen1 Narne"``), or ``pattern:<kind>`` for a
            value recognised by its shape.
        method: see :data:`ExtractionMethod`.
        score: 0..1. The method's base score — same-line label with colon 0.95, without
            0.9; next line 0.85; a label row over a value row 0.8; OCR-confused or fuzzy
            label ≤ 0.85; shape pattern 0.7; joined lines 0.75 — times ``0.5 + 0.5 × page
            OCR confidence`` on OCR'd pages, times 0.9 for a label found outside the form
            area. An OCR-repaired value scores 0.7 × the reading it repairs.
    """

    model_config = ConfigDict(frozen=True)

    page_number: int
    snippet: str = Field(max_length=MAX_SNIPPET_CHARS)
    label: str
    method: ExtractionMethod
    score: float = Field(ge=0.0, le=1.0)


# --- candidates ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CandidateMode:
    """Which passes :func:`find_candidates` runs.

    Attributes:
        ocr_labels: labels with OCR confusions.
        fuzzy_labels: labels by string similarity at the line start.
        patterns: e-mail and phone numbers recognised by their shape in the form area.
        anywhere: also explicit labels (with a colon) outside the form area, on lines
            that are not prose (the review agent).
        join_lines: also read each line joined with the next one, for labels and values
            split across lines (the review agent).
    """

    ocr_labels: bool = False
    fuzzy_labels: bool = False
    patterns: bool = False
    anywhere: bool = False
    join_lines: bool = False

    STRICT: ClassVar[CandidateMode]
    RELAXED: ClassVar[CandidateMode]
    REVIEW: ClassVar[CandidateMode]


CandidateMode.STRICT = CandidateMode()
CandidateMode.RELAXED = CandidateMode(ocr_labels=True, fuzzy_labels=True, patterns=True)
CandidateMode.REVIEW = CandidateMode(
    ocr_labels=True, fuzzy_labels=True, patterns=True, anywhere=True, join_lines=True
)


@dataclass(frozen=True)
class Candidate:
    """A possible value for a field, before validation.

    Attributes:
        field: the field.
        raw: the text read, uncleaned.
        evidence: where and how it was read (the score already includes page and region).
        tier: pass rank, lower is more trusted (0 strict, 1 relaxed label, 2 outside the
            form area, 3 shape pattern, 4 joined lines or repaired value).
        specificity: length of the matched label variant; a longer label wins a conflict.
    """

    field: str
    raw: str
    evidence: Evidence
    tier: int
    specificity: int


def find_candidates(
    lines: Sequence[Line],
    schema: FieldSchema,
    names: Collection[str],
    *,
    mode: CandidateMode,
) -> list[Candidate]:
    """Collects every possible value of the requested fields, in document order per pass.

    Args:
        lines: the entry's lines (:func:`~activities.document_intake.extract_lines.document_lines`).
        schema: the field schema.
        names: fields to look for.
        mode: passes to run beyond the strict one.

    Returns:
        Unvalidated candidates; :func:`~activities.document_intake.extract.resolve_candidates`
        picks the values.
    """
    wanted = set(names)
    form_end = essay_start_index(lines, schema)
    headers = compiled(tuple(schema.header_patterns))
    table = label_table(schema)
    out: list[Candidate] = []

    def usable(line: Line) -> bool:
        return bool(line.text.strip()) and not matches_any(headers, line.text)

    form = [line for line in lines[:form_end] if usable(line)]
    out += _label_candidates(form, lines, form_end, table, wanted, headers, tier=0)
    if mode.ocr_labels or mode.fuzzy_labels:
        out += _label_candidates(
            form, lines, form_end, table, wanted, headers, tier=1,
            ocr=mode.ocr_labels, fuzzy=mode.fuzzy_labels,
        )
    if mode.anywhere:
        rest = [line for line in lines[form_end:] if usable(line) and not is_prose_line(line.text)]
        out += _label_candidates(
            rest, lines, len(lines), table, wanted, headers, tier=2,
            ocr=mode.ocr_labels, explicit_only=True,
        )
    if mode.patterns:
        out += _pattern_candidates(form, schema, wanted)
    if mode.join_lines:
        out += _joined_candidates(form, table, wanted, ocr=mode.ocr_labels)
    return out


# --- private: passes ----------------------------------------------------------------------------


def _label_candidates(
    scope: Sequence[Line],
    lines: Sequence[Line],
    limit: int,
    table: LabelTable,
    wanted: set[str],
    headers: tuple[re.Pattern[str], ...],
    *,
    tier: int,
    ocr: bool = False,
    fuzzy: bool = False,
    explicit_only: bool = False,
) -> list[Candidate]:
    """Same-line, next-line and label-row candidates over ``scope`` (values before ``limit``).

    The relaxed pass (tier 1) skips lines whose labels all matched exactly: the strict pass
    (tier 0) read those already.
    """
    relaxed = ocr or fuzzy
    out: list[Candidate] = []
    for line in scope:
        hits = line_labels(line.text, table, ocr=ocr, fuzzy=fuzzy)
        if explicit_only:
            hits = [h for h in hits if h.explicit]
        if tier == 1 and all(h.quality == "exact" for h in hits):
            continue
        if is_prose_line(line.text):
            hits = [h for h in hits if h.explicit]
        if not hits:
            continue
        segments = _segments(line.text, hits)
        empty = [not clean_value(s) for s in segments]
        below = _value_line_after(line, lines, limit, table, headers)
        if len(hits) > 1 and all(empty) and below is not None:
            cells = [c for c in _CELL_SPLIT.split(below.text.strip()) if c.strip()]
            if len(cells) == len(hits):
                for hit, cell in zip(hits, cells, strict=True):
                    if hit.field in wanted:
                        out.append(_candidate(hit, cell, [line, below], "label_next_line",
                                              0.8, tier, relaxed))
                continue
        for i, (hit, segment) in enumerate(zip(hits, segments, strict=True)):
            if hit.field not in wanted:
                continue
            if not empty[i]:
                base = 0.95 if hit.explicit else 0.9
                out.append(_candidate(hit, segment, [line], "label_same_line", base, tier,
                                      relaxed))
            elif len(hits) == 1 and below is not None:
                out.append(_candidate(hit, below.text, [line, below], "label_next_line", 0.85,
                                      tier, relaxed))
    return out


def _pattern_candidates(
    form: Sequence[Line], schema: FieldSchema, wanted: set[str]
) -> list[Candidate]:
    out: list[Candidate] = []
    for name in sorted(wanted):
        spec = schema.field(name)
        shape = _SHAPES.get(spec.kind)
        if shape is None:
            continue
        for line in form:
            for match in shape.finditer(line.text):
                evidence = _evidence(
                    [line], f"pattern:{spec.kind}", "pattern", 0.7, outside_form=False
                )
                out.append(Candidate(name, match.group(0), evidence, tier=3, specificity=0))
    return out


def _joined_candidates(
    form: Sequence[Line], table: LabelTable, wanted: set[str], *, ocr: bool
) -> list[Candidate]:
    """Each line joined with the next: ``Name of Father or`` + ``Father Figure: Roberto``."""
    out: list[Candidate] = []
    for first, second in zip(form, form[1:], strict=False):
        if second.index != first.index + 1 or is_prose_line(second.text):
            continue
        joined = f"{first.text.rstrip()} {second.text.strip()}"
        alone = {h.field for h in line_labels(first.text, table, ocr=ocr)}
        alone |= {h.field for h in line_labels(second.text, table, ocr=ocr)}
        hits = [h for h in line_labels(joined, table, ocr=ocr) if h.explicit]
        for hit, segment in zip(hits, _segments(joined, hits), strict=True):
            if hit.field in wanted and clean_value(segment) and hit.field not in alone:
                evidence = _evidence([first, second], hit.printed, "continuation_line", 0.75,
                                     outside_form=False)
                out.append(Candidate(hit.field, segment, evidence, 4, len(hit.variant)))
    return out


def _segments(text: str, hits: Sequence[LabelHit]) -> list[str]:
    """The value text after each hit, up to the next hit or an unknown ``Label:``."""
    out: list[str] = []
    for i, hit in enumerate(hits):
        end = hits[i + 1].start if i + 1 < len(hits) else len(text)
        segment = text[hit.value_start:end]
        cut = _UNKNOWN_LABEL_AFTER_GAP.search(segment)
        out.append(segment[: cut.start()] if cut else segment)
    return out


def _value_line_after(
    line: Line,
    lines: Sequence[Line],
    limit: int,
    table: LabelTable,
    headers: tuple[re.Pattern[str], ...],
) -> Line | None:
    """The line holding the value of a bare label line, or None.

    That is the next non-blank line (one blank line may sit between) on the same page, if
    it is not a label, header or prose line and lies before ``limit``.
    """
    index = line.index + 1
    if index < limit and index < len(lines) and not lines[index].text.strip():
        index += 1
    if index >= limit or index >= len(lines):
        return None
    below = lines[index]
    text = below.text
    if below.page_number != line.page_number or not clean_value(text):
        return None
    if matches_any(headers, text) or is_prose_line(text):
        return None
    if line_labels(text, table, ocr=True):
        return None
    return below


def _candidate(
    hit: LabelHit,
    raw: str,
    lines: Sequence[Line],
    method: ExtractionMethod,
    base: float,
    tier: int,
    relaxed: bool,
) -> Candidate:
    if relaxed and hit.quality != "exact":
        method = "relaxed_label"
        base = min(base, 0.85) * hit.similarity
    evidence = _evidence(lines, hit.printed, method, base, outside_form=tier == 2)
    return Candidate(hit.field, raw, evidence, tier, len(hit.variant))


def _evidence(
    lines: Sequence[Line],
    label: str,
    method: ExtractionMethod,
    base: float,
    *,
    outside_form: bool,
) -> Evidence:
    confidence = min(
        (line.ocr_confidence for line in lines if line.ocr_confidence is not None), default=None
    )
    score = base * (1.0 if confidence is None else 0.5 + 0.5 * max(0.0, min(1.0, confidence)))
    if outside_form:
        score *= 0.9
    snippet = " / ".join(" ".join(line.text.split()) for line in lines)
    if len(snippet) > MAX_SNIPPET_CHARS:
        snippet = snippet[: MAX_SNIPPET_CHARS - 1] + "…"
    return Evidence(
        page_number=lines[0].page_number,
        snippet=snippet,
        label=" ".join(label.split()),
        method=method,
        score=round(max(0.0, min(1.0, score)), 4),
    )


_UNKNOWN_LABEL_AFTER_GAP = re.compile(r"(?:[ \t]{2,}|\t)[^\W\d_][\w'’ /#.-]{0,30}:")
_CELL_SPLIT = re.compile(r"[ \t]{2,}|\t|\|")
_SHAPES = {
    "email": re.compile(r"(?<![\w.@])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w@])"),
    "phone": re.compile(
        r"(?<![\w-])(?:\+?1[ .-]?)?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}(?![\w-])"
    ),
}
