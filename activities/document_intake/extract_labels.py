"""Labels on a line of an entry form: a schema's label patterns, and the labels a line holds.

:func:`label_table` compiles a schema's label variants (exact and with OCR confusions, cached
per schema); :func:`line_labels` finds the field labels on one line, left to right, with
where each one's value starts (:class:`LabelHit`): listed variants, colon-ended labels made
of one field's label words, and (relaxed) OCR-confused or fuzzy labels at the line start.
Part of the ``rules`` extraction (:mod:`activities.document_intake.extract`).
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from typing import Literal

from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import clean_value

__all__ = [
    "LabelHit",
    "LabelTable",
    "label_table",
    "line_labels",
]


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
    text: str, table: LabelTable, *, ocr: bool = False, fuzzy: bool = False
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


# --- private: label matching --------------------------------------------------------------------


@dataclass(frozen=True)
class _LabelEntry:
    field: str
    variant: str
    exact: re.Pattern[str]
    ocr: re.Pattern[str]
    folded: str  # For fuzzy comparison.


LabelTable = tuple[_LabelEntry, ...]
"""A schema's compiled label patterns (:func:`label_table`): one entry per field and label variant."""


def label_table(schema: FieldSchema) -> LabelTable:
    """Compiled label patterns of a schema, for :func:`line_labels` (cached per schema)."""
    return _build_table(tuple((f.name, tuple(f.label_variants)) for f in schema.fields))


@functools.lru_cache(maxsize=32)
def _build_table(fields: tuple[tuple[str, tuple[str, ...]], ...]) -> LabelTable:
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


def _label_at(text: str, position: int, table: LabelTable, *, ocr: bool) -> LabelHit | None:
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


def _token_label_at(text: str, position: int, table: LabelTable) -> LabelHit | None:
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


def _label_heads(table: LabelTable, field: str) -> set[str]:
    """First content words of ``field``'s variants: a label must name its head.

    "Figure:" alone is the tail of a label split across two lines, not a label.
    """
    return {words[0] for e in table if e.field == field
            for words in [[w for w in _label_words(e.variant) if w not in _LABEL_STOP_WORDS]]
            if words}


def _label_vocabulary(table: LabelTable) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Field → words of its label variants, and word → fields using it (cached per table)."""
    return _vocabulary_of(table)


@functools.lru_cache(maxsize=32)
def _vocabulary_of(table: LabelTable) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    vocab: dict[str, set[str]] = {}
    owners: dict[str, set[str]] = {}
    for entry in table:
        for word in _label_words(entry.variant):
            vocab.setdefault(entry.field, set()).add(word)
            owners.setdefault(word, set()).add(entry.field)
    return vocab, owners


def _fuzzy_label_at(text: str, position: int, table: LabelTable) -> LabelHit | None:
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


_LEADING = re.compile(r"(?:[^\w]|_)*(?:\(?\d{1,2}[.)][ \t]+(?:[^\w]|_)*)?")
_WORD_START = re.compile(r"(?<=[\s_|])(?=[^\W_])")
_GAP_BEFORE = re.compile(r"(?:[ \t]{2,}|\t|[|_][ \t]*)\Z")
_SEPARATOR = re.compile(
    r"[ \t]*(?:(?P<colon>[:;=])|(?P<dash>[-–—])(?=[ \t])|(?P<fill>_{2,}|\.{3,}))?[ \t]*"
)
_OCR_CONFUSIONS = {
    "o": "[o0]",
    "l": "[l1|i]",
    "i": "[i1l|!]",
    "s": "[s5$]",
    "m": "(?:m|rn|nn)",
}
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
