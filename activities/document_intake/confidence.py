"""Record confidence for document_intake (seed 000 §1.1 "Confidence derivation").

``confidence = 0.6 × OCR part + 0.4 × field completeness``, both in 0..1.

One deliberate change to the seed: the seed scores a typed PDF (no OCR confidence) at 0.5,
which makes a perfectly read text-layer form unable to ever reach the 0.9 "complete"
threshold. Here exact text (a PDF text layer or a plain-text upload) counts its OCR part as
``exact_text_ocr_score`` (1.0 by default, configurable per run); only a genuinely unknown
OCR confidence keeps the seed's 0.5 (``unknown_ocr_score``).

Workflow-safe: stdlib and pydantic only, pure and deterministic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Protocol

from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import can_approve_record

__all__ = [
    "COMPLETENESS_WEIGHT",
    "OCR_WEIGHT",
    "aggregate_ocr_confidence",
    "calculate_confidence",
    "field_completeness",
    "name_ocr_confusions",
]

OCR_WEIGHT = 0.6
"""Weight of the OCR part (seed 000 §1.1)."""
COMPLETENESS_WEIGHT = 0.4
"""Weight of field completeness (seed 000 §1.1)."""


class _OcrPage(Protocol):
    @property
    def text(self) -> str: ...

    @property
    def ocr_confidence(self) -> float | None: ...


def calculate_confidence(
    ocr_confidence: float | None,
    completeness: float,
    *,
    exact_text: bool,
    exact_text_ocr_score: float = 1.0,
    unknown_ocr_score: float = 0.5,
) -> float:
    """Overall confidence of a record (seed 000 §1.1, with the exact-text change above).

    Args:
        ocr_confidence: 0..1 mean OCR confidence of the record's pages, None when unknown
            or when there was no OCR.
        completeness: 0..1 from :func:`field_completeness`.
        exact_text: every page came from a text layer or a plain-text upload; the OCR part
            is then ``exact_text_ocr_score`` whatever ``ocr_confidence`` says.
        exact_text_ocr_score: 0..1 OCR part for exact text.
        unknown_ocr_score: 0..1 OCR part when not exact and ``ocr_confidence`` is None.

    Returns:
        ``0.6 × ocr_part + 0.4 × completeness`` in 0..1, rounded to 6 decimals so that
        thresholds compare on the intended values (``0.6 × 0.75 + 0.4`` is exactly 0.85).

    Raises:
        ValueError: an input is NaN or outside 0..1 (an OCR score on a 0..100 scale, say).
    """
    _check_unit("completeness", completeness)
    _check_unit("exact_text_ocr_score", exact_text_ocr_score)
    _check_unit("unknown_ocr_score", unknown_ocr_score)
    if exact_text:
        ocr_part = exact_text_ocr_score
    elif ocr_confidence is None:
        ocr_part = unknown_ocr_score
    else:
        _check_unit("ocr_confidence", ocr_confidence)
        ocr_part = ocr_confidence
    return round(OCR_WEIGHT * ocr_part + COMPLETENESS_WEIGHT * completeness, 6)


def field_completeness(record: Mapping[str, object], schema: FieldSchema) -> float:
    """Share of required fields that are present and valid (seed 000 §1.1).

    Args:
        record: field name → value.
        schema: the field schema.

    Returns:
        1.0 when every required field is present and valid (or none is required), else
        ``ok / required`` (a present but invalid value counts as missing, as in
        ``can_approve_record``).
    """
    required = schema.required_fields
    if not required:
        return 1.0
    _, problems = can_approve_record(record, schema)
    return (len(required) - len(problems)) / len(required)


def aggregate_ocr_confidence(pages: Iterable[_OcrPage]) -> float | None:
    """Character-weighted mean OCR confidence over the OCR'd pages.

    Args:
        pages: objects with ``text`` and ``ocr_confidence`` (0..1, None for exact text).

    Returns:
        The mean over pages with a confidence, each weighted by its non-space character
        count (a plain mean if those pages hold no characters); None when no page was
        OCR'd.

    Raises:
        ValueError: a page confidence is NaN or outside 0..1.
    """
    scored = [(p.ocr_confidence, _chars(p.text)) for p in pages if p.ocr_confidence is not None]
    if not scored:
        return None
    for confidence, _ in scored:
        _check_unit("ocr_confidence", confidence)
    total = sum(weight for _, weight in scored)
    if total == 0:
        return round(sum(c for c, _ in scored) / len(scored), 6)
    return round(sum(c * weight for c, weight in scored) / total, 6)


def field_ocr_confidences(
    pages: Iterable[object], values: Mapping[str, str | None], evidence: Mapping[str, Mapping[str, object]]
) -> dict[str, float]:
    """Per field, how sure Tesseract was of the words the value was read from.

    A page's mean confidence stays high while one misread word ("gefferson", "exampie")
    makes a field wrong; what matters for auto-completion is the value's own words. For
    each extracted value on an OCR'd page, every token of the value is looked up among
    the page's recognised words (case-insensitive, punctuation trimmed) and the field
    gets the lowest confidence of its tokens. Fields read from exact text, or whose
    tokens were rebuilt by normalisation and not found, get no entry.

    Args:
        pages: objects with ``page_number``, ``source`` and ``words`` (``text``,
            ``confidence`` 0..1), as ``documents.PageText``.
        values: field name → extracted value.
        evidence: field name → ``{"page_number": int, ...}``.

    Returns:
        ``{field: confidence 0..1}``.
    """
    by_page = {getattr(p, "page_number", 0): p for p in pages}
    result: dict[str, float] = {}
    for name, value in values.items():
        page_number = (evidence.get(name) or {}).get("page_number")
        page = by_page.get(page_number) if isinstance(page_number, int) else None
        if value is None or page is None or getattr(page, "source", "") != "ocr":
            continue
        best: dict[str, float] = {}
        for word in getattr(page, "words", ()):
            key = _token(word.text)
            best[key] = max(best.get(key, 0.0), float(word.confidence))
        found = [best[t] for t in map(_token, value.split()) if t and t in best]
        if found:
            result[name] = round(min(found), 4)
    return result


CLEAN_WORD_CONFIDENCE = 0.95
"""Word confidence Tesseract gives a cleanly read word (its ceiling is about 0.96).

A person-name reading that carries a known OCR confusion (:func:`name_ocr_confusions`) is
trusted only at this level. Measured on office scans of names with "ñ": the misreadings
"Mufioz", "Pefia", "Nifio", "Montafio", "Saldafia", "Carrefio" scored 0.42–0.92, while the
real "fi" names "Sofia", "Sofie", "Safiya" and "Schofield" mostly scored 0.96."""

_VOWELS = "aeiouyáàâäãåéèêëíìîïóòôöõúùûüý"
_NAME_CONFUSIONS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # Tesseract's ``eng`` model has no "ñ"; it reads one as "fi" (or "ifi") between the
    # vowels a Spanish "ñ" always stands between: Muñoz → "Mufioz", Peña → "Pefia".
    ("fi_for_enye", re.compile(rf"(?<=[{_VOWELS}])i?fi(?=[{_VOWELS}])")),
    # A typographic ligature code point is never written in a name: a glyph misread.
    ("ligature", re.compile("[\ufb00-\ufb06]")),
    # Accented letters are where ``eng`` guesses: "Zoë" read "Zoé", "ñ" read "n".
    ("accented_letter", re.compile(rf"[{_VOWELS[6:]}ñç]")),
    # Classic glyph-shape confusions: m ↔ rn, d ↔ cl, w ↔ vv, ü ↔ ii.
    ("rn_for_m", re.compile("rn")),
    ("cl_for_d", re.compile("cl")),
    ("vv_for_w", re.compile("vv")),
    ("ii_for_u", re.compile("ii")),
    # A digit among letters: 0/O, 1/l/I, 5/S, 8/B.
    ("digit_in_word", re.compile(r"(?<=[^\W\d_])\d|\d(?=[^\W\d_])")),
)


def name_ocr_confusions(value: str) -> list[str]:
    """Known OCR confusions a person-name reading may hold, by code.

    Each pattern is a way Tesseract's ``eng`` model turns a real name into another
    plausible-looking string: a letter it lacks read as a letter pair ("ñ" → "fi"), an
    accented letter swapped for another, or glyph pairs it confuses (rn/m, cl/d, vv/w,
    ii/ü, digits among letters). A match does not mean the reading is wrong ("Sofia",
    "Hernandez"); it means its word confidence must be high before it is trusted (see
    :data:`CLEAN_WORD_CONFIDENCE` and ``assess.assess_record``).

    Args:
        value: a person-name value as read (any case).

    Returns:
        Codes in table order (``fi_for_enye``, ``ligature``, ``accented_letter``,
        ``rn_for_m``, ``cl_for_d``, ``vv_for_w``, ``ii_for_u``, ``digit_in_word``); empty
        when none applies.
    """
    folded = value.casefold()
    return [code for code, pattern in _NAME_CONFUSIONS
            if pattern.search(value if code == "ligature" else folded)]


def _token(text: str) -> str:
    return text.strip(".,;:!?\"'()[]{}_|").casefold()


def _chars(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


def _check_unit(name: str, value: float) -> None:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within 0..1, got {value!r}")
