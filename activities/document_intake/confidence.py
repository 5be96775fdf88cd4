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
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import can_approve_record

__all__ = [
    "COMPLETENESS_WEIGHT",
    "OCR_WEIGHT",
    "aggregate_ocr_confidence",
    "calculate_confidence",
    "case_ocr_confusion",
    "email_ocr_confusions",
    "field_completeness",
    "name_ocr_confusions",
    "possible_lost_tilde",
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
    each extracted value on an OCR'd page, the field gets the lowest confidence of the
    consecutive recognised words whose letters and digits spell the value (case-folded, so
    a phone "(312) 555-0134" stored as "312-555-0134" or an e-mail address read as two
    words and joined are found too); if the value is spelt at several places on the page,
    the lowest of those on the field's own line (the words of its evidence ``snippet``),
    else the lowest of them all. So a father's "Munoz" read at 0.35 does not take the
    student's "Munoz" read at 0.92, nor the student's name the confidence of the e-mail
    address that repeats it ("elijah. coleman. 2018@…", three words read at 0.0), and
    phone and e-mail values read as several words get one. When no run of
    words spells the value, every token of the value is looked up among the page's words
    (case-insensitive, punctuation trimmed, best occurrence) and the field gets the lowest
    confidence of the tokens found. Fields read from exact text, or whose words are found
    neither way, get no entry.

    Args:
        pages: objects with ``page_number``, ``source`` and ``words`` (``text``,
            ``confidence`` 0..1), as ``documents.PageText``.
        values: field name → extracted value.
        evidence: field name → ``{"page_number": int, "snippet": str, ...}`` (the snippet is
            optional: without it every run counts).

    Returns:
        ``{field: confidence 0..1}``.
    """
    by_page = {getattr(p, "page_number", 0): p for p in pages}
    result: dict[str, float] = {}
    for name, value in values.items():
        found_at = evidence.get(name) or {}
        page_number = found_at.get("page_number")
        page = by_page.get(page_number) if isinstance(page_number, int) else None
        if value is None or page is None or getattr(page, "source", "") != "ocr":
            continue
        words = list(getattr(page, "words", ()))
        snippet = found_at.get("snippet")
        spelt = _run_confidence(words, value, snippet if isinstance(snippet, str) else None)
        if spelt is not None:
            result[name] = round(spelt, 4)
            continue
        best: dict[str, float] = {}
        for word in words:
            key = _token(word.text)
            best[key] = max(best.get(key, 0.0), float(word.confidence))
        found = [best[t] for t in map(_token, value.split()) if t and t in best]
        if found:
            result[name] = round(min(found), 4)
    return result


_MAX_RUN_WORDS = 8


def _run_confidence(words: list[Any], value: str, line: str | None = None) -> float | None:
    """Lowest word confidence of the consecutive words whose letters and digits spell ``value``.

    Compares letters and digits only, case-folded. With several such runs, the lowest of
    the confidences of those whose every word stands in ``line`` (the value's own line),
    else of all; None when no run of up to :data:`_MAX_RUN_WORDS` words spells it.
    """
    target = _skeleton(value)
    if not target:
        return None
    keys = [_skeleton(str(w.text)) for w in words]
    runs: list[tuple[float, bool]] = []
    for start, key in enumerate(keys):
        if not key or not target.startswith(key):
            continue
        spelt, lowest = "", 1.0
        for offset in range(start, min(start + _MAX_RUN_WORDS, len(words))):
            spelt += keys[offset]
            lowest = min(lowest, float(words[offset].confidence))
            if spelt == target:
                on_line = line is not None and all(
                    str(w.text) in line for w in words[start:offset + 1])
                runs.append((lowest, on_line))
                break
            if not target.startswith(spelt):
                break
    own = [lowest for lowest, on_line in runs if on_line]
    return min(own or [lowest for lowest, _ in runs], default=None)


def _skeleton(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


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


_LOST_TILDE = re.compile(rf"(?<=[{_VOWELS}])n(?=[{_VOWELS}])")
_EMAIL_DIGIT_CONFUSION = re.compile(r"(?<=\d)[lIioOsSzZ]|[lIioOsSzZ](?=\d)")
_TLD_CONFUSION = re.compile(r"rn|cl|vv|ii|\d", re.IGNORECASE)


def possible_lost_tilde(value: str) -> bool:
    """Whether a person-name reading may have lost the tilde of an "ñ".

    Tesseract's ``eng`` model has no "ñ": besides reading it "fi" (see
    :func:`name_ocr_confusions`) it often drops the tilde silently, at 0.71–0.94 on the
    labelled scans ("Muñoz" → "Munoz", 0.92). The only trace left is an "n" between
    vowels, where a Spanish "ñ" stands; names such as "Daniel" match too, so a match only
    means the reading must be clean (``CLEAN_WORD_CONFIDENCE``) to be trusted.

    Args:
        value: a person-name value as read.

    Returns:
        True when an "n" stands between two vowels (case-insensitive).
    """
    return _LOST_TILDE.search(value.casefold()) is not None


def email_ocr_confusions(value: str, names: Iterable[str] = ()) -> bool:
    """Whether an e-mail reading holds a character Tesseract is known to misread there.

    Two confusions, both seen on clean 300 dpi scans and neither caught by validation:

    * *a letter for a digit*: in the digits people add to an address, "1" and "l"/"I"/"i",
      "0" and "o"/"O", "5" and "s"/"S", "2" and "z"/"Z" look alike ("jamalrobinson16" read
      "jamalrobinson1l6", "meibaker21" "meibaker2l", "tyronerivera14" "tyroneriveral4").
      A confusable letter after a digit always counts. One before a digit, at the end of a
      run of letters, does not when the form's own names spell that run (``names``:
      "aishareyes77" on the form of Aisha Reyes, "nkowalski8" on Nadia Kowalski's): the
      letter is then the end of a name, not a digit;
    * *a plus sign read as "t"*: Tesseract reads the "+" of a sub-address as "t" (or "t+"),
      at the confidence of the letters around it ("josiahgarcia+ifi" read
      "josiahgarciatifi" at 0.89). A "t" straight after a run of the form's names that the
      names do not go on to spell ("ellis" + "tessay", "hill" + "t") counts.

    In the domain, a confusable letter next to a digit always counts ("naperville2o3"), and
    so does a top-level domain holding a glyph pair Tesseract reads for one letter (rn/m,
    cl/d, vv/w, ii/u: ".corn" for ".com", ".eclu" for ".edu"), or a digit.

    A match only means the reading must be clean (``CLEAN_WORD_CONFIDENCE``) to be trusted.

    Args:
        value: an e-mail value as read.
        names: the form's person names as read (any case; accents, hyphens and
            apostrophes are ignored); none gives the letter-for-digit rule alone, strict.

    Returns:
        True when either confusion may be present.
    """
    local, _, domain = value.partition("@")
    if _EMAIL_DIGIT_CONFUSION.search(domain) or _TLD_CONFUSION.search(domain.rpartition(".")[2]):
        return True
    words = _name_words(names)
    for match in _EMAIL_DIGIT_CONFUSION.finditer(local):
        at = match.start()
        if at > 0 and local[at - 1].isdigit():
            return True
        run = re.search(r"[^\W\d_]+$", local[:at + 1])
        if run is None or not _spelt_by_names(run.group(0).casefold(), words, initial=True):
            return True
    return bool(words) and any(
        _plus_read_as_t(run.group(0).casefold(), words)
        for run in re.finditer(r"[^\W\d_]+", local))


def _name_words(names: Iterable[str]) -> frozenset[str]:
    """Lower-case ASCII words of two or more letters in ``names`` (hyphens split, "'" dropped)."""
    out: set[str] = set()
    for name in names:
        folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
        out.update(w for w in re.split(r"[^a-z]+", folded.casefold().replace("'", ""))
                   if len(w) >= 2)
    return frozenset(out)


def _spelt_by_names(run: str, words: frozenset[str], *, initial: bool) -> bool:
    """Whether ``run`` is one or more of ``words`` end to end (after one initial, if allowed)."""
    if not run:
        return False
    reach = [False] * (len(run) + 1)
    reach[0] = True
    if initial and any(w[0] == run[0] for w in words):
        reach[1] = True
    for start in range(len(run)):
        if reach[start]:
            for word in words:
                if run.startswith(word, start):
                    reach[start + len(word)] = True
    return reach[len(run)] and run not in {w[0] for w in words}


def _plus_read_as_t(run: str, words: frozenset[str]) -> bool:
    """Whether ``run`` is the form's names, then a "t" the names do not account for."""
    if _spelt_by_names(run, words, initial=True):
        return False
    return any(run[cut] == "t" and _spelt_by_names(run[:cut], words, initial=True)
               for cut in range(2, len(run)))


def case_ocr_confusion(value: str) -> bool:
    """Whether a capitalised value's first letter was read in the wrong case.

    Tesseract confuses letters that look alike in both cases ("w"/"W", "o"/"O", "s"/"S"):
    on the labelled scans it read "Washington Community High School" as "washington
    Community High School" at 0.94 and "Oak Grove" as "oak Grove" at 0.90. Nobody writes a
    school, city or person name with a lower-case first word and capitals after it, and
    normalisation title-cases all-lower-case values, so such a reading is a misread.

    Args:
        value: a name, school or city value as read.

    Returns:
        True when the first letter is lower case and a later word starts upper case.
    """
    words = value.split()
    letters = [ch for ch in value if ch.isalpha()]
    return (bool(letters) and letters[0].islower()
            and any(w[:1].isupper() for w in words[1:]))


def _token(text: str) -> str:
    return text.strip(".,;:!?\"'()[]{}_|").casefold()


def _chars(text: str) -> int:
    return sum(1 for ch in text if not ch.isspace())


def _check_unit(name: str, value: float) -> None:
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be within 0..1, got {value!r}")
