"""Labelled-field extraction from entry-form text (the deterministic ``rules`` strategy).

An entry form is a contest header, labelled fields, then an essay. :func:`extract_fields`
reads the fields from the *form area* only — the lines before the essay begins — because a
wrong auto-filled value is worse than an empty one: essay prose ("my school is great") must
never become a field value. Every candidate value is checked with
:func:`~activities.document_intake.validate.validate_value`; one that fails is reported in
``ExtractionResult.rejected`` and never returned as a value.

Layouts understood: ``Label: value``; ``Label value`` (no colon); a label on one line and
its value on the next; several fields on one line (``Grade: 8      School: Lincoln``); a row
of labels over a row of values; fill lines (``Student Name: ____Maria Lopez____``).

Passes, from most to least trusted (a field takes its value from the first pass that finds
a valid one; two different valid values in the same pass leave it empty as
``conflicting_values`` unless one label is more specific):

* strict — exact label variants (case-insensitive, tolerant to colon, underscores and
  spaces) in the form area;
* relaxed (``relaxed=True``, the retry step) — also labels with OCR confusions
  (``5chool``, ``Narne``) or fuzzy matches (``Studen1 Narne``), and e-mail / phone numbers
  recognised by their shape anywhere in the form area.

The review agent (``review.py``) and the batch splitter (``batch.py``) build on the same
pieces, which is why :class:`Line`, :func:`document_lines`, :func:`essay_start_index`,
:func:`find_candidates`, :func:`resolve_candidates` and :func:`line_labels` are public.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import clean_value, normalise_value, validate_value

__all__ = [
    "Candidate",
    "CandidateMode",
    "Evidence",
    "ExtractionMethod",
    "ExtractionResult",
    "LabelHit",
    "Line",
    "PageLike",
    "document_lines",
    "essay_start_index",
    "extract_fields",
    "find_candidates",
    "is_prose_line",
    "label_table",
    "line_labels",
    "resolve_candidates",
    "word_counts",
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

CONFLICTING_VALUES = "conflicting_values"
"""``ExtractionResult.rejected`` reason: two different valid values, neither preferred."""


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


class ExtractionResult(BaseModel):
    """Outcome of :func:`extract_fields`.

    Attributes:
        values: every requested field → normalised value, None when not found.
        evidence: field → :class:`Evidence`, for the fields that have a value.
        rejected: field → reason code, for fields left empty although a candidate was
            seen (a :func:`validate_value` reason, or ``conflicting_values``).
    """

    model_config = ConfigDict(frozen=True)

    values: dict[str, str | None]
    evidence: dict[str, Evidence]
    rejected: dict[str, str]


def extract_fields(
    pages: Sequence[PageLike],
    schema: FieldSchema,
    *,
    relaxed: bool = False,
    only: Collection[str] | None = None,
) -> ExtractionResult:
    """Reads the labelled fields of one entry form.

    Args:
        pages: the entry's pages in order (one entry: split batch files first).
        schema: the field schema (label variants, kinds, header and essay patterns).
        relaxed: also try OCR-confused and fuzzy labels and e-mail / phone shapes (the
            retry step after a strict pass missed fields).
        only: extract just these fields (the retry step asks for the missing ones).

    Returns:
        Values, evidence and rejections for the requested fields.

    Raises:
        ValueError: ``only`` names a field the schema does not have.
    """
    names = _requested(schema, only)
    lines = document_lines(pages)
    mode = CandidateMode.RELAXED if relaxed else CandidateMode.STRICT
    candidates = find_candidates(lines, schema, names, mode=mode)
    return resolve_candidates(candidates, schema, names)


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
    markers = _compiled(tuple(schema.essay_start_patterns))
    headers = _compiled(tuple(schema.header_patterns))
    table = label_table(schema)
    start = _prose_start(lines, headers, table)
    for line in reversed(lines[:start]):
        if not line.text.strip() or _matches_any(headers, line.text):
            continue
        if _matches_any(markers, line.text):
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


# --- labels -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelHit:
    """A label found on a line.

    Attributes:
        field: the field whose label it is.
        printed: the label as printed on the line.
        variant: the schema label variant it matched (for fuzzy hits, the closest one).
        start: character index of the label in the line.
        value_start: character index just after the label and its separator.
        explicit: a colon, dash or fill line follows the label.
        colon: a colon (or ``;``/``=``, common OCR readings of it) follows the label.
        quality: ``exact``, ``ocr`` (matched only with OCR confusions) or ``fuzzy``.
        similarity: 0..1 label similarity (1 unless fuzzy).
    """

    field: str
    printed: str
    variant: str
    start: int
    value_start: int
    explicit: bool
    colon: bool
    quality: Literal["exact", "ocr", "fuzzy"]
    similarity: float = 1.0


def line_labels(
    text: str, table: _LabelTable, *, ocr: bool = False, fuzzy: bool = False
) -> list[LabelHit]:
    """Finds the field labels on one line, left to right.

    A label counts at the start of the line (after bullets or numbering); further along
    the line only after a wide gap (two spaces, a tab, ``|`` or a fill line), or after a
    single space when a colon follows it and another label came earlier on the line, and
    never for the same field as the label before it ("School: Lincoln Middle School___").
    A label without a colon is dropped when a colon follows within its next words (it was
    the start of an unknown label such as ``Student ID:``).

    Args:
        text: one line.
        table: label patterns from :func:`label_table`.
        ocr: also match labels with OCR confusions (0/O, 1/l/I, 5/S, rn/m).
        fuzzy: also match a label at the line start by string similarity (≥ 0.8).

    Returns:
        The hits (:class:`LabelHit`), in line order, non-overlapping.
    """
    start = _content_start(text)
    hits: list[LabelHit] = []
    first = _label_at(text, start, table, ocr=ocr)
    if first is None or (not first.explicit and _unknown_label_follows(text[first.value_start:])):
        # No listed variant, or one that is only the start of a longer label ("Telephone No.:").
        first = _token_label_at(text, start, table) or first
    if first is None and fuzzy:
        first = _fuzzy_label_at(text, start, table)
    if first is not None:
        hits.append(first)
    for match in _WORD_START.finditer(text, first.value_start if first else start):
        position = match.start()
        if hits and position < hits[-1].value_start:
            continue
        hit = _label_at(text, position, table, ocr=ocr)
        if hit is None or (hits and hit.field == hits[-1].field):
            continue
        gap_before = _GAP_BEFORE.search(text, 0, position) is not None
        if gap_before or (hit.colon and hits):
            hits.append(hit)
    return [h for i, h in enumerate(hits) if h.explicit or not _unknown_label_follows(
        text[h.value_start:hits[i + 1].start if i + 1 < len(hits) else len(text)]
    )]


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
        lines: the entry's lines (:func:`document_lines`).
        schema: the field schema.
        names: fields to look for.
        mode: passes to run beyond the strict one.

    Returns:
        Unvalidated candidates; :func:`resolve_candidates` picks the values.
    """
    wanted = set(names)
    form_end = essay_start_index(lines, schema)
    headers = _compiled(tuple(schema.header_patterns))
    table = label_table(schema)
    out: list[Candidate] = []

    def usable(line: Line) -> bool:
        return bool(line.text.strip()) and not _matches_any(headers, line.text)

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


def resolve_candidates(
    candidates: Sequence[Candidate], schema: FieldSchema, names: Collection[str]
) -> ExtractionResult:
    """Validates candidates and picks at most one value per field.

    For each field, tiers are tried from the most trusted; the first tier with a valid
    candidate decides. Within it, one distinct normalised value wins outright; several are
    settled by the most specific label, and otherwise the field stays empty with
    ``conflicting_values`` (accuracy over automation).

    Args:
        candidates: from :func:`find_candidates` (and the review agent's extra ones).
        schema: the field schema.
        names: the fields to resolve, in output order.

    Returns:
        The extraction result for ``names``.
    """
    values: dict[str, str | None] = {}
    evidence: dict[str, Evidence] = {}
    rejected: dict[str, str] = {}
    for name in names:
        spec = schema.field(name)
        values[name] = None
        mine = [c for c in candidates if c.field == name]
        for tier in sorted({c.tier for c in mine}):
            valid: list[tuple[Candidate, str]] = []
            for candidate in (c for c in mine if c.tier == tier):
                reason = validate_value(spec, candidate.raw)
                if reason is None:
                    valid.append((candidate, normalise_value(spec, candidate.raw)))
                else:
                    rejected.setdefault(name, reason)
            if not valid:
                continue
            top = max(c.specificity for c, _ in valid)
            if len({v for _, v in valid}) > 1:
                valid = [(c, v) for c, v in valid if c.specificity == top]
            if len({v for _, v in valid}) > 1:
                rejected[name] = CONFLICTING_VALUES
                break
            best, value = max(valid, key=lambda cv: cv[0].evidence.score)
            values[name] = value
            evidence[name] = best.evidence
            rejected.pop(name, None)
            break
    return ExtractionResult(values=values, evidence=evidence, rejected=rejected)


# --- private: passes ----------------------------------------------------------------------------


def _label_candidates(
    scope: Sequence[Line],
    lines: Sequence[Line],
    limit: int,
    table: _LabelTable,
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
    form: Sequence[Line], table: _LabelTable, wanted: set[str], *, ocr: bool
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
    table: _LabelTable,
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
    if _matches_any(headers, text) or is_prose_line(text):
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


# --- private: label matching --------------------------------------------------------------------


@dataclass(frozen=True)
class _LabelEntry:
    field: str
    variant: str
    exact: re.Pattern[str]
    ocr: re.Pattern[str]
    folded: str  # For fuzzy comparison.


_LabelTable = tuple[_LabelEntry, ...]


def label_table(schema: FieldSchema) -> _LabelTable:
    """Compiled label patterns of a schema, for :func:`line_labels` (cached per schema)."""
    return _build_table(tuple((f.name, tuple(f.label_variants)) for f in schema.fields))


@functools.lru_cache(maxsize=32)
def _build_table(fields: tuple[tuple[str, tuple[str, ...]], ...]) -> _LabelTable:
    entries = []
    for name, variants in fields:
        for variant in variants:
            entries.append(
                _LabelEntry(
                    field=name,
                    variant=variant,
                    exact=re.compile(_label_regex(variant, ocr=False), re.IGNORECASE),
                    ocr=re.compile(_label_regex(variant, ocr=True), re.IGNORECASE),
                    folded=_fold(variant),
                )
            )
    return tuple(entries)


def _label_regex(variant: str, *, ocr: bool) -> str:
    tokens = [_token_regex(token, ocr=ocr) for token in variant.split()]
    return r"[ \t_]*".join(tokens) + r"(?![^\W\d_])"


def _token_regex(token: str, *, ocr: bool) -> str:
    out = []
    for ch in token:
        if ch in "'’`":
            out.append(r"['’`]?")
        elif ch == "/":
            out.append(r"[ \t]*/[ \t]*")
        elif ch == "-":
            out.append(r"[ \t]*-?[ \t]*")
        elif ch == "#":
            out.append(r"[ \t]*(?:#|no\.?|number)")
        elif ocr and ch.casefold() in _OCR_CONFUSIONS:
            out.append(_OCR_CONFUSIONS[ch.casefold()])
        else:
            out.append(re.escape(ch))
    return "".join(out)


def _label_at(text: str, position: int, table: _LabelTable, *, ocr: bool) -> LabelHit | None:
    best: tuple[int, _LabelEntry, Literal["exact", "ocr"]] | None = None
    qualities: tuple[Literal["exact", "ocr"], ...] = ("exact", "ocr") if ocr else ("exact",)
    for quality in qualities:
        for entry in table:
            pattern = entry.exact if quality == "exact" else entry.ocr
            match = pattern.match(text, position)
            if match and (best is None or match.end() > best[0]):
                best = (match.end(), entry, quality)
        if best is not None:
            break
    if best is None:
        return None
    end, entry, quality = best
    return _hit(text, position, end, entry, quality, 1.0)


def _token_label_at(text: str, position: int, table: _LabelTable) -> LabelHit | None:
    """A colon-ended label at ``position`` whose words are all words of one field's labels.

    Catches variants the schema does not list ("Father or Father Figure:", "Telephone No.:")
    without guessing: every content word of the printed label must occur in that field's
    label variants, at least one of them in no other field's variants ("name" alone
    identifies nothing), one must be the first word of one of its variants ("Figure:" is
    the tail of a split label), exactly one field may qualify, and no word may belong
    to another kind of label (``parent``, ``id``, …) or to prose (``my``, ``he``). Only with
    a colon (or ``;``/``=``) after it, so a sentence never becomes a label.
    """
    match = re.match(r"([^:;=\n]{2,60}?)[ \t]*[:;=]", text[position:])
    if match is None:
        return None
    words = _label_words(match.group(1))
    content = [w for w in words if w not in _LABEL_STOP_WORDS]
    if not content or len(content) > 6 or len(words) > 8:
        return None
    if any(w in _FOREIGN_LABEL_WORDS or w in _PROSE_WORDS for w in words):
        return None
    vocab, owners = _label_vocabulary(table)
    fields = [f for f, words_of in vocab.items() if set(content) <= words_of
              and any(owners[w] == {f} for w in content)
              and any(w in _label_heads(table, f) for w in content)]
    if len(fields) != 1:
        return None
    entry = next(e for e in table if e.field == fields[0])
    return _hit(text, position, position + len(match.group(1)), entry, "fuzzy", 0.95)


def _label_words(text: str) -> list[str]:
    text = re.sub(r"['’`]s\b", "", text.casefold())  # possessive: "Figure's" is "Figure"
    return re.findall(r"[a-z0-9#]+", re.sub(r"['’`]", "", text))


def _label_heads(table: _LabelTable, field: str) -> set[str]:
    """First content words of ``field``'s variants: a label must name its head.

    "Figure:" alone is the tail of a label split across two lines, not a label.
    """
    return {words[0] for e in table if e.field == field
            for words in [[w for w in _label_words(e.variant) if w not in _LABEL_STOP_WORDS]]
            if words}


def _label_vocabulary(table: _LabelTable) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Field → words of its label variants, and word → fields using it (cached per table)."""
    return _vocabulary_of(table)


@functools.lru_cache(maxsize=32)
def _vocabulary_of(table: _LabelTable) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    vocab: dict[str, set[str]] = {}
    owners: dict[str, set[str]] = {}
    for entry in table:
        for word in _label_words(entry.variant):
            vocab.setdefault(entry.field, set()).add(word)
            owners.setdefault(word, set()).add(entry.field)
    return vocab, owners


def _fuzzy_label_at(text: str, position: int, table: _LabelTable) -> LabelHit | None:
    """A label at ``position`` recognised by the similarity of its OCR-folded form.

    At least 0.8 with a colon after it, 0.86 without; same first letter; clearly closer to
    one field than to any other; never a line starting with another label's word.
    """
    rest = text[position:]
    spans: list[tuple[int, bool]] = []
    colon = re.match(r"([^:;]{3,40}?)[ \t]*[:;]", rest)
    if colon and len(colon.group(1).split()) <= 6:
        spans.append((position + len(colon.group(1)), True))
    else:
        for word in list(re.finditer(r"\S+", rest))[:6]:
            spans.append((position + word.end(), False))
    best: tuple[float, int, _LabelEntry] | None = None
    runner_up: dict[str, float] = {}
    for end, explicit in spans:
        printed = _fold(text[position:end])
        if len(printed) < 4 or any(w in _FOREIGN_LABEL_WORDS for w in printed.split()):
            continue
        for entry in table:
            if not explicit and len(entry.folded.split()) != len(printed.split()):
                continue
            if printed[0] != entry.folded[0]:
                continue  # OCR noise rarely hits the first letter; "Parent Name" is not ours.
            ratio = difflib.SequenceMatcher(None, printed, entry.folded).ratio()
            if ratio < (0.8 if explicit else 0.86) or len(entry.folded) < 4:
                continue
            runner_up[entry.field] = max(runner_up.get(entry.field, 0.0), ratio)
            if best is None or ratio > best[0]:
                best = (ratio, end, entry)
    if best is None:
        return None
    ratio, end, entry = best
    others = [r for f, r in runner_up.items() if f != entry.field]
    if others and max(others) > ratio - 0.08:
        return None  # Ambiguous between two fields: leave it to a person.
    hit = _hit(text, position, end, entry, "fuzzy", ratio)
    if not hit.explicit and not clean_value(text[hit.value_start:]):
        return None
    return hit


def _hit(
    text: str,
    start: int,
    end: int,
    entry: _LabelEntry,
    quality: Literal["exact", "ocr", "fuzzy"],
    similarity: float,
) -> LabelHit:
    separator = _SEPARATOR.match(text, end)
    assert separator is not None  # The pattern can match the empty string.
    explicit = any(separator.group(g) for g in ("colon", "dash", "fill"))
    return LabelHit(
        colon=bool(separator.group("colon")),
        field=entry.field,
        printed=text[start:end].strip(),
        variant=entry.variant,
        start=start,
        value_start=separator.end(),
        explicit=explicit,
        quality=quality,
        similarity=round(similarity, 4),
    )


def _content_start(text: str) -> int:
    match = _LEADING.match(text)
    return match.end() if match else 0


def _unknown_label_follows(value: str) -> bool:
    """A colon within the first three words: the label was part of a longer unknown one."""
    return re.match(r"[ \t]*(?:[^\s:]+[ \t]+){0,2}[^\s:]*[ \t]*:", value) is not None


def _fold(text: str) -> str:
    text = text.casefold()
    for wrong, right in (("rn", "m"), ("vv", "w"), ("0", "o"), ("1", "l"), ("|", "l"),
                         ("!", "l"), ("5", "s"), ("$", "s"), ("i", "l")):
        text = text.replace(wrong, right)
    text = re.sub(r"['’`]", "", text)
    return " ".join(re.sub(r"[^\w#/]+", " ", text).split())


# --- private: prose -----------------------------------------------------------------------------


def _is_prose_paragraph(paragraph: Sequence[Line], table: _LabelTable) -> bool:
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
    lines: Sequence[Line], headers: tuple[re.Pattern[str], ...], table: _LabelTable
) -> int:
    paragraph: list[Line] = []
    for line in [*lines, None]:
        if line is not None and line.text.strip():
            if _matches_any(headers, line.text):
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


def _matches_any(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
    return any(p.search(text) for p in patterns)


@functools.lru_cache(maxsize=64)
def _compiled(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


def _requested(schema: FieldSchema, only: Collection[str] | None) -> list[str]:
    if only is None:
        return schema.field_names
    unknown = sorted(set(only) - set(schema.field_names))
    if unknown:
        raise ValueError(f"unknown field(s) requested: {', '.join(unknown)}")
    return [name for name in schema.field_names if name in set(only)]


_SPACES = {0xA0: " ", 0x2007: " ", 0x202F: " ", 0x0C: " ", 0x0B: " "}
_LEADING = re.compile(r"(?:[^\w]|_)*(?:\(?\d{1,2}[.)][ \t]+(?:[^\w]|_)*)?")
_WORD_START = re.compile(r"(?<=[\s_|])(?=[^\W_])")
_GAP_BEFORE = re.compile(r"(?:[ \t]{2,}|\t|[|_][ \t]*)\Z")
_SEPARATOR = re.compile(
    r"[ \t]*(?:(?P<colon>[:;=])|(?P<dash>[-–—])(?=[ \t])|(?P<fill>_{2,}|\.{3,}))?[ \t]*"
)
_UNKNOWN_LABEL_AFTER_GAP = re.compile(r"(?:[ \t]{2,}|\t)[^\W\d_][\w'’ /#.-]{0,30}:")
_CELL_SPLIT = re.compile(r"[ \t]{2,}|\t|\|")
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?")
_OCR_CONFUSIONS = {
    "o": "[o0]",
    "l": "[l1|i]",
    "i": "[i1l|!]",
    "s": "[s5$]",
    "m": "(?:m|rn|nn)",
}
_SHAPES = {
    "email": re.compile(r"(?<![\w.@])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[A-Za-z]{2,}(?![\w@])"),
    "phone": re.compile(
        r"(?<![\w-])(?:\+?1[ .-]?)?\(?\d{3}\)?[ .-]?\d{3}[ .-]?\d{4}(?![\w-])"
    ),
}
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
_FOREIGN_LABEL_WORDS = frozenset(
    """parent parents guardian mother mom signature signed date address zip state county age
    birth birthday id district principal sponsor gender race""".split()
)
"""Correctly spelled words of other labels: a line starting with them is not fuzzily ours."""

_LABEL_STOP_WORDS = frozenset("of or and the a an s no nr # number".split())
"""Words a label may add without changing what it names ("Name *of* Father *or* Father Figure")."""

_PROSE_WORDS = frozenset("""i me my mine we our us you your he him his she her they them their it
    its is was are were be been am this that who what when why how because""".split())
"""Words of sentences, not of labels: a "label" holding one is a sentence with a colon."""
