"""Offsets-preserving text segmentation: paragraphs, headings, sentences and search chunks.

Every span here is ``(start, end)`` into the one joined text that ingestion produced, so
a quote is always ``text[start:end]`` — never re-typed, never normalised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ABBREVIATIONS = frozenset({
    "e.g", "i.e", "u.s", "inc", "ltd", "co", "corp", "no", "nos", "sec", "art", "vs", "v",
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "u.k", "e.u", "cf", "approx", "incl", "etc",
    "para", "pp", "p", "fig", "s.a", "b.v", "n.v", "l.l.c", "llc", "plc", "gmbh", "ag", "pty",
})
# ``etc.`` usually ends a list inside a sentence in agreements; treating it as an
# abbreviation keeps restriction lists whole.

_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s+[\"'“‘(\[]?[A-Z0-9])")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_LIST_ITEM = re.compile(r"\n(?=[ \t]*(?:\(?[a-zA-Z0-9ivx]{1,4}[.)]\s|[•●▪\-*–]\s))")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
_HEADING_NUMBER = re.compile(
    r"^\s*(?:(?:section|article|clause)\s+)?(?:\d+(?:\.\d+)*|[IVXLC]+|[A-Z])[.)]?\s+", re.I)


@dataclass(frozen=True)
class Span:
    """A ``[start, end)`` slice of the joined text (whitespace trimmed)."""

    start: int
    end: int


@dataclass(frozen=True)
class Sentence:
    """One sentence (or list item) with the heading of the section it sits in.

    Attributes:
        start, end: offsets into the joined text.
        paragraph: index of the paragraph holding it.
        heading: text of the nearest heading above it ("" when none).
        is_heading: the sentence itself looks like a heading.
        context_start: where the whole sentence starts when a long one was split into
            parts (its lead-in, "You may not: …", belongs to every part); else ``start``.
    """

    start: int
    end: int
    paragraph: int
    heading: str
    is_heading: bool
    context_start: int


@dataclass(frozen=True)
class Chunk:
    """A retrieval unit: consecutive sentences up to a size, with their heading."""

    start: int
    end: int
    heading: str
    sentences: tuple[int, ...]


def trim(text: str, start: int, end: int) -> Span:
    """The span without leading/trailing whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Span(start, end)


def paragraphs(text: str) -> list[Span]:
    """Blank-line separated paragraphs (non-empty, trimmed)."""
    spans: list[Span] = []
    pos = 0
    for match in _PARAGRAPH_BREAK.finditer(text):
        spans.append(trim(text, pos, match.start()))
        pos = match.end()
    spans.append(trim(text, pos, len(text)))
    return [s for s in spans if s.end > s.start]


def looks_like_heading(fragment: str) -> bool:
    """A short line in capitals, or a numbered title without a verb-ending full stop."""
    stripped = fragment.strip()
    if not stripped or len(stripped) > 90 or "\n" in stripped.strip("\n"):
        return False
    words = _WORD.findall(stripped)
    if not words or len(words) > 10:
        return False
    letters = [c for c in stripped if c.isalpha()]
    if letters and sum(c.isupper() for c in letters) / len(letters) > 0.8:
        return True
    if _HEADING_NUMBER.match(stripped):
        body = _HEADING_NUMBER.sub("", stripped).rstrip(".:")
        body_words = _WORD.findall(body)
        capitalised = sum(w[0].isupper() for w in body_words)
        return bool(body_words) and len(body_words) <= 8 and capitalised >= len(body_words) * 0.6
    return False


def sentences(text: str) -> list[Sentence]:
    """Sentences and list items of every paragraph, with section headings attached.

    Long sentences (over ~700 characters) are split further at semicolons and list
    items so that a quote points at the operative words, not a whole page.
    """
    out: list[Sentence] = []
    heading = ""
    for index, para in enumerate(paragraphs(text)):
        for span, context_start in _split_paragraph(text, para):
            fragment = text[span.start:span.end]
            is_heading = looks_like_heading(fragment)
            if is_heading:
                heading = fragment.strip()
            elif "\n" in fragment:
                first_line, rest = fragment.split("\n", 1)
                if looks_like_heading(first_line) and _starts_new_text(first_line, rest):
                    heading = first_line.strip()
            out.append(Sentence(span.start, span.end, index, heading, is_heading, context_start))
    return out


def chunks(text: str, sents: list[Sentence], max_chars: int = 1200) -> list[Chunk]:
    """Groups consecutive sentences of a section into retrieval chunks of at most ``max_chars``."""
    out: list[Chunk] = []
    current: list[int] = []
    for i, sent in enumerate(sents):
        if current:
            first = sents[current[0]]
            too_long = sent.end - first.start > max_chars
            new_section = sent.is_heading or sent.heading != first.heading
            if too_long or new_section:
                out.append(_chunk(sents, current))
                current = []
        current.append(i)
    if current:
        out.append(_chunk(sents, current))
    return out


def words(fragment: str) -> list[str]:
    """Lower-case word tokens."""
    return [w.lower() for w in _WORD.findall(fragment)]


def _chunk(sents: list[Sentence], members: list[int]) -> Chunk:
    first, last = sents[members[0]], sents[members[-1]]
    heading = first.heading if not first.is_heading else ""
    if first.is_heading:
        heading = ""
    return Chunk(first.start, last.end, heading, tuple(members))


def _split_paragraph(text: str, para: Span) -> list[tuple[Span, int]]:
    pieces: list[Span] = []
    start = para.start
    segment = text[para.start:para.end]
    for match in _SENTENCE_END.finditer(segment):
        cut = para.start + match.end()
        if is_abbreviation(text, para.start + match.start()):
            continue
        pieces.append(trim(text, start, cut))
        start = cut
    pieces.append(trim(text, start, para.end))
    out: list[tuple[Span, int]] = []
    for piece in _merge_heading_prefix(text, [p for p in pieces if p.end > p.start]):
        if piece.end - piece.start > 700:
            out.extend((part, piece.start) for part in _split_long(text, piece))
        else:
            out.append((piece, piece.start))
    return out


def _split_long(text: str, span: Span) -> list[Span]:
    fragment = text[span.start:span.end]
    cuts = sorted({m.end() for m in re.finditer(r";\s+", fragment)}
                  | {m.start() + 1 for m in _LIST_ITEM.finditer(fragment)})
    out: list[Span] = []
    start = 0
    for cut in cuts:
        if cut - start >= 40:
            out.append(trim(text, span.start + start, span.start + cut))
            start = cut
    out.append(trim(text, span.start + start, span.end))
    return [s for s in out if s.end > s.start]


def _merge_heading_prefix(text: str, spans: list[Span]) -> list[Span]:
    """Keeps a bare section number ("12.") attached to what follows it."""
    out: list[Span] = []
    for span in spans:
        if out and re.fullmatch(r"\(?[0-9ivxIVX]{1,4}(?:\.\d+)*[.)]?", text[out[-1].start:out[-1].end]):
            out[-1] = Span(out[-1].start, span.end)
        else:
            out.append(span)
    return out


_CONNECTORS = frozenset({"and", "or", "of", "the", "to", "a", "an", "in", "for", "by", "with", "not"})


def _starts_new_text(first_line: str, rest: str) -> bool:
    """Whether a heading-like first line is a title rather than a wrapped capitals line."""
    rest = rest.strip()
    tokens = words(first_line)
    short = len(tokens) <= 6 or first_line.rstrip().endswith((".", ":"))
    opens = bool(rest) and (rest[0].isupper() or rest[0].isdigit() or rest[0] == "(")
    return opens and short and (tokens or [""])[-1] not in _CONNECTORS


def is_abbreviation(text: str, dot: int) -> bool:
    """Whether the full stop at ``dot`` ends an abbreviation or an initial, not a sentence.

    ``U.S.``, ``e.g.``, ``Inc.``, ``Ltd.`` … (the list above) and single capital initials.
    A PDF's text layer may put a space before the full stop ("the U.S . Export
    Administration Regulations"): the word before that one space counts.
    """
    if text[dot] != ".":
        return False
    begin = dot
    if begin > 1 and text[begin - 1] in " \t" and (text[begin - 2].isalpha() or text[begin - 2] == "."):
        begin -= 1
        dot -= 1
    while begin > 0 and (text[begin - 1].isalpha() or text[begin - 1] == "."):
        begin -= 1
    token = text[begin:dot].lower()
    if not token:
        return False
    return token in _ABBREVIATIONS or (len(token) == 1 and text[begin].isupper())
