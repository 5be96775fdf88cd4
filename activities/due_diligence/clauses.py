"""Agent 2, clause extraction: retrieval, validation, retries, merging and confidence (seed 004).

The clause-extraction subgraph (:mod:`.graph`) calls these pure functions in order:

1. :func:`search` — attempt 1 ranks chunks with BM25 (``bm25s``) for each clause type's
   query and scans the top ``k`` with the type's trigger patterns; attempt 2 widens to a
   second query, twice as many chunks and every chunk under a matching heading; attempt 3
   scans every chunk and also accepts weak patterns under a matching heading.
2. :func:`validate` — re-checks every candidate against the text (verbatim slice, a
   trigger still matches, no exclusion) and lists the types still missing.
3. :func:`deduplicate` — merges near-duplicate candidates (``rapidfuzz``) and picks the
   best one per type, keeping the others as supporting quotes.
4. :func:`score_findings` — attributes, a confidence per finding and ``not_found``
   findings for types never found.

A text that does not read as an agreement (:func:`agreement_signals`) yields no clauses.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from rapidfuzz import fuzz

from activities.due_diligence import attributes as attrs
from activities.due_diligence.clause_types import CLAUSE_TYPE_NAMES, ClauseSpec, compiled_specs
from activities.due_diligence.ingest import page_of
from activities.due_diligence.text import Chunk, Sentence, chunks, paragraphs, sentences, words

STRATEGY = "rules"
MIN_QUOTE_WORDS = 6
_STOPWORDS = frozenset(
    "a an the of to and or in on for by with as at be is are was were this that these those "
    "any all such its it your you our we shall will may not no from under".split())

_STRONG_MARKERS = {
    "this_agreement": r"\bthis\s+(?:agreement|license|licence|eula|contract)\b",
    "terms_and_conditions": r"\bterms\s+(?:and\s+conditions|of\s+(?:use|service))\b",
    "licensee_licensor": r"\blicens(?:ee|or)s?\b",
    "you_agree": r"\byou\s+(?:hereby\s+)?(?:agree|accept|acknowledge)\b",
    "hereby_grants": r"\bhereby\s+(?:grants?|agrees?)\b",
    "parties_agree": r"\bthe\s+parties\s+(?:hereto\s+)?agree\b|\beach\s+party\b",
    "end_user": r"\bend[\s-]+user\s+licen[sc]e\b",
    "software_licensed": r"\b(?:software|sdk|product|service)s?\b[^.]{0,60}\blicen[sc]ed?\b",
}
_STRONG = {k: re.compile(v, re.IGNORECASE) for k, v in _STRONG_MARKERS.items()}
_GENERIC_MARKERS = frozenset({"this_agreement", "terms_and_conditions", "parties_agree"})


# --- agreement detection --------------------------------------------------------------------


def agreement_signals(text: str) -> dict[str, Any]:
    """How strongly the text reads as an agreement (contract vocabulary, not topic).

    Returns:
        ``{"is_agreement": bool, "score": 0..1, "markers": [names]}``; an agreement needs
        three distinct contract markers (``this agreement``, ``licensee``, ``you agree``,
        ``hereby grants``, …), or two when one of them names a party role or an
        acceptance — a speech that mentions "this agreement" and "terms and conditions"
        of a treaty is not a contract.
    """
    markers = sorted(name for name, rx in _STRONG.items() if rx.search(text))
    score = min(1.0, len(markers) / 4)
    is_agreement = len(markers) >= 3 or (len(markers) == 2 and not set(markers) <= _GENERIC_MARKERS)
    return {"is_agreement": is_agreement, "score": round(score, 2), "markers": markers}


# --- search -----------------------------------------------------------------------------------


class DocumentIndex:
    """Sentences, chunks and a BM25 index over the chunks of one text (rebuilt per node call)."""

    def __init__(self, text: str, chunk_chars: int = 1200) -> None:
        """Segments ``text`` and indexes its chunks."""
        self.text = text
        self.sentences: list[Sentence] = sentences(text)
        self.chunks: list[Chunk] = chunks(text, self.sentences, chunk_chars)
        corpus = [_tokens(f"{c.heading} {text[c.start:c.end]}") or ["_empty_"] for c in self.chunks]
        import bm25s  # ~94 MB with numba and scipy: loaded by the first search, not at worker start

        self._bm25 = bm25s.BM25()
        if corpus:
            self._bm25.index(corpus, show_progress=False)

    def rank(self, query: str) -> list[tuple[int, float]]:
        """Chunk indexes by descending BM25 score for ``query`` (score > 0 only)."""
        if not self.chunks:
            return []
        terms = [t for t in _tokens(query) if t in self._vocab]
        if not terms:
            return []
        scores = np.asarray(self._bm25.get_scores(terms))
        order = np.argsort(-scores)
        return [(int(i), float(scores[i])) for i in order if scores[i] > 0]

    @property
    def _vocab(self) -> Mapping[str, int]:
        vocab: Mapping[str, int] = self._bm25.vocab_dict
        return vocab


def search(index: DocumentIndex, types: Iterable[str], attempt: int,
           *, top_k: int = 8) -> dict[str, list[dict[str, Any]]]:
    """Candidates per clause type for one search attempt (1, 2 or 3).

    Args:
        index: the document's :class:`DocumentIndex`.
        types: clause types still to find.
        attempt: 1 = primary query, top ``top_k`` chunks, triggers only; 2 = both queries,
            ``2 * top_k`` chunks plus every chunk under a matching heading; 3 = every chunk,
            weak patterns accepted under a matching heading.
        top_k: chunks per query on the first attempt.

    Returns:
        ``{clause_type: [candidate]}`` where a candidate is ``{clause_type, start, end,
        quote, pattern, strength, heading_match, bm25, attempt}`` and ``quote ==
        text[start:end]``.
    """
    specs = compiled_specs()
    out: dict[str, list[dict[str, Any]]] = {}
    for name in types:
        spec = specs[name]
        ranked = index.rank(spec.query)
        scores = dict(ranked)
        if attempt == 1:
            chosen = [i for i, _ in ranked[:top_k]]
        elif attempt == 2:
            ranked2 = index.rank(spec.retry_query)
            for i, s in ranked2:
                scores[i] = max(scores.get(i, 0.0), s)
            chosen = [i for i, _ in ranked[:2 * top_k]] + [i for i, _ in ranked2[:2 * top_k]]
            chosen += [i for i, c in enumerate(index.chunks) if spec.heading.search(c.heading)]
        else:
            chosen = list(range(len(index.chunks)))
        best = max(scores.values(), default=0.0) or 1.0
        found: list[dict[str, Any]] = []
        for ci in dict.fromkeys(chosen):
            chunk = index.chunks[ci]
            for si in chunk.sentences:
                cand = _match_sentence(index, spec, index.sentences[si], attempt,
                                       scores.get(ci, 0.0) / best)
                if cand:
                    found.append(cand)
        out[name] = found
    return out


def _match_sentence(index: DocumentIndex, spec: ClauseSpec, sent: Sentence, attempt: int,
                    bm25: float) -> dict[str, Any] | None:
    if sent.is_heading:
        return None
    text = index.text
    quote = text[sent.start:sent.end]
    if len(words(quote)) < MIN_QUOTE_WORDS:
        return None
    heading_match = bool(spec.heading.search(sent.heading)) or bool(
        spec.heading.search(quote.split("\n", 1)[0][:80]) and _inline_heading(quote))
    rank, strength = _first_match(spec.triggers, text, sent.context_start, sent.start, sent.end), 1.0
    if rank is None and attempt >= 3 and heading_match:
        rank, strength = _first_match(spec.weak, text, sent.start, sent.start, sent.end), 0.6
    if rank is None or _excluded(spec, text, sent.context_start, sent.end):
        return None
    return {"clause_type": spec.name, "start": sent.start, "end": sent.end, "quote": quote,
            "context_start": sent.context_start, "pattern_rank": rank, "strength": strength,
            "heading": sent.heading, "heading_match": heading_match, "bm25": round(bm25, 4),
            "attempt": attempt}


def _inline_heading(quote: str) -> bool:
    head = re.match(r"^\s*(?:\d+(?:\.\d+)*\.?\s+)?([A-Z][A-Za-z ,&-]{2,60}?)[.:]\s", quote)
    return bool(head) and len(head.group(1).split()) <= 6 if head else False


def _first_match(patterns: Sequence[re.Pattern[str]], text: str, context_start: int,
                 start: int, end: int) -> int | None:
    """Index of the first pattern matching ``text[context_start:end]`` and ending inside the quote."""
    fragment = text[context_start:end]
    offset = start - context_start
    for rank, rx in enumerate(patterns):
        if any(m.end() > offset for m in rx.finditer(fragment)):
            return rank
    return None


def _excluded(spec: ClauseSpec, text: str, context_start: int, end: int) -> bool:
    fragment = text[context_start:end]
    return any(rx.search(fragment) for rx in spec.exclude)


# --- validate ---------------------------------------------------------------------------------


def validate(text: str, candidates: Mapping[str, Sequence[Mapping[str, Any]]],
             types: Iterable[str] = CLAUSE_TYPE_NAMES) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Keeps the candidates that still hold against the text; lists types without one.

    A candidate holds when its quote is exactly ``text[start:end]``, one of its type's
    trigger (or, for a weak match, weak) patterns matches the quote and no exclusion
    does. Candidates proposed by a model go through the same check.

    Returns:
        ``(valid candidates by type, types with no valid candidate)``.
    """
    specs = compiled_specs()
    valid: dict[str, list[dict[str, Any]]] = {}
    missing: list[str] = []
    for name in types:
        spec = specs[name]
        kept = []
        for cand in candidates.get(name, []):
            start, end = int(cand["start"]), int(cand["end"])
            if not (0 <= start < end <= len(text)) or text[start:end] != cand.get("quote"):
                continue
            context_start = min(start, int(cand.get("context_start", start)))
            weak = cand.get("strength", 1.0) < 1.0
            patterns = spec.weak if weak else spec.triggers
            if _first_match(patterns, text, start if weak else context_start, start, end) is None:
                continue
            if _excluded(spec, text, context_start, end):
                continue
            kept.append(dict(cand))
        valid[name] = kept
        if not kept:
            missing.append(name)
    return valid, missing


# --- deduplicate ------------------------------------------------------------------------------


def deduplicate(candidates: Mapping[str, Sequence[Mapping[str, Any]]], *,
                similarity: float = 90.0) -> dict[str, list[dict[str, Any]]]:
    """Merges overlapping or near-identical candidates of each type, best first.

    Two candidates merge when their spans overlap or their quotes are at least
    ``similarity`` (rapidfuzz ``token_set_ratio``, 0..100) alike — a clause repeated on
    another page, or found by two searches. The survivor keeps a ``merged`` count.
    """
    out: dict[str, list[dict[str, Any]]] = {}
    for name, cands in candidates.items():
        ranked = sorted(cands, key=_rank_key, reverse=True)
        kept: list[dict[str, Any]] = []
        for cand in ranked:
            twin = next((k for k in kept if _same(k, cand, similarity)), None)
            if twin is None:
                kept.append({**cand, "merged": 1})
            else:
                twin["merged"] += 1
        out[name] = kept
    return out


def _rank_key(cand: Mapping[str, Any]) -> tuple[float, ...]:
    # A model's verified quote (strategy llm:…) first: with a model configured it is the
    # primary strategy and the rules' candidates are the fallback.
    return (float(str(cand.get("strategy") or STRATEGY) != STRATEGY),
            float(cand.get("strength", 1.0)), float(cand.get("heading_match", False)),
            -float(cand.get("pattern_rank", 0)), float(cand.get("bm25", 0.0)),
            -float(cand.get("attempt", 1)), -float(cand["start"]))


def _same(a: Mapping[str, Any], b: Mapping[str, Any], similarity: float) -> bool:
    if a["start"] < b["end"] and b["start"] < a["end"]:
        return True
    return fuzz.token_set_ratio(a["quote"], b["quote"]) >= similarity


# --- score ------------------------------------------------------------------------------------


def score_findings(ingestion: Mapping[str, Any], merged: Mapping[str, Sequence[Mapping[str, Any]]],
                   *, attempts_by_type: Mapping[str, int] | None = None,
                   max_supporting: int = 2) -> list[dict[str, Any]]:
    """One finding per clause type: the best candidate with attributes and a confidence.

    Confidence (0..1) = 0.55 for a trigger match (0.35 for a weak one; − 0.15 when the
    classifier doubts it; 0.35 + 0.4 × the classifier's score for a sentence only the
    classifier proposed, :mod:`.classifier`) + 0.15 when the section heading names the
    type + 0.15 × the chunk's relative BM25 score + 0.05 per merged duplicate (up to 0.1)
    − 0.05 per search attempt after the first; scaled by ``0.5 + 0.5 × OCR confidence``
    on an OCR'd page. A finding the classifier judged carries ``method`` and
    ``classifier_score``.

    Returns:
        Findings in :data:`CLAUSE_TYPE_NAMES` order, ``not_found`` ones included.

    Raises:
        AssertionError: a quote that is not a verbatim slice (a bug, never emitted).
    """
    text = ingestion["text"]
    pages = ingestion["pages"]
    attempts_by_type = attempts_by_type or {}
    findings: list[dict[str, Any]] = []
    for name in CLAUSE_TYPE_NAMES:
        cands = list(merged.get(name, []))
        if not cands:
            findings.append(_not_found(name, attempts_by_type.get(name, 3)))
            continue
        best = cands[0]
        start, end = int(best["start"]), int(best["end"])
        quote = text[start:end]
        assert quote == best["quote"], "quote must be a verbatim slice of the text"
        if name == "governing_law":
            start, end = law_section(text, start, end)
            quote = text[start:end]
            best = {**best, "start": start, "end": end, "quote": quote}
            cands = [best, *(c for c in cands[1:] if not (c["start"] < end and start < c["end"]))]
        page = page_of(pages, start)
        method = best.get("method")
        if method == "classifier":
            confidence = 0.35 + 0.4 * float(best.get("classifier_score", 0.0))
        else:
            confidence = (0.55 if best.get("strength", 1.0) >= 1.0 else 0.35)
            confidence -= 0.15 if method == "patterns, doubted" else 0.0
        confidence += 0.15 if best.get("heading_match") else 0.0
        confidence += 0.15 * float(best.get("bm25", 0.0))
        confidence += min(0.1, 0.05 * (int(best.get("merged", 1)) - 1 + len(cands) - 1))
        confidence -= 0.05 * (int(best.get("attempt", 1)) - 1)
        ocr = _page_ocr_confidence(pages, page)
        if ocr is not None:
            confidence *= 0.5 + 0.5 * ocr
        supporting = []
        for other in cands[1:1 + max_supporting]:
            s, e = int(other["start"]), int(other["end"])
            assert text[s:e] == other["quote"], "quote must be a verbatim slice of the text"
            supporting.append({"quote": other["quote"], "start": s, "end": e,
                               "page": page_of(pages, s)})
        findings.append({
            "id": finding_id(name, start, end),
            "clause_type": name,
            "status": "found",
            "quote": quote,
            "page": page,
            "start": start,
            "end": end,
            "confidence": round(max(0.05, min(0.99, confidence)), 3),
            "attributes": clause_attributes(name, text, cands),
            "heading": best.get("heading") or None,
            "supporting": supporting,
            "search_attempt": int(best.get("attempt", 1)),
            "strategy": str(best.get("strategy") or STRATEGY),
            **({"method": method, "classifier_score": best.get("classifier_score")} if method else {}),
        })
    return findings


_SECTION_MAX_CHARS = 3000
_BRIDGE = 2


def law_section(text: str, start: int, end: int,
                sents: Sequence[Sentence] | None = None) -> tuple[int, int]:
    """The governing-law section's run of sentences around ``text[start:end]``.

    A governing-law section often takes several sentences ("If you acquired the software
    in the United States, Washington state law governs … . The laws of the state where you
    live govern all other claims … . If you acquired the software in any other country,
    the laws of that country apply."), and the one that matched a trigger is not always
    the one that names the place. From the sentences overlapping the span, the run grows
    both ways over every neighbouring sentence that says which law governs or applies
    (:func:`.attributes.states_governing_law` or a governing-law trigger), over the other
    parts of a long sentence already in the run that name a place ("… in force in: (a) the
    State of California, if …; or (b) Japan, if …"), and over up to two short fragments
    (fewer than :data:`MIN_QUOTE_WORDS` words: a sub-heading "Outside the United States
    .", a list letter) when a law sentence follows them, and over the rest of a sentence
    a page break cut (:func:`_continues`); it stops at any other sentence and at about
    3,000 characters. Works on offsets into ``text``, so a PDF's text layer
    ("United States , Washington") is read as it is.

    Returns:
        ``(start, end)`` of the run (at least the given span), offsets into ``text``.
    """
    sents = list(sents) if sents is not None else sentences(text)
    inside = [i for i, s in enumerate(sents) if s.start < end and start < s.end]
    if not inside:
        return start, end
    lo, hi = inside[0], inside[-1]
    lo = _grow(text, sents, lo, -1, sents[hi].end)
    hi = _grow(text, sents, hi, 1, sents[lo].start)
    return min(start, sents[lo].start), max(end, sents[hi].end)


def _grow(text: str, sents: Sequence[Sentence], edge: int, step: int, anchor: int) -> int:
    """The farthest sentence index the run reaches from ``edge`` going ``step`` (±1).

    ``anchor`` is the run's fixed other end (its end going back, its start going forward).
    """
    i = edge + step
    while 0 <= i < len(sents):
        sent = sents[i]
        if (anchor - sent.start if step < 0 else sent.end - anchor) > _SECTION_MAX_CHARS:
            break
        earlier, later = (sent, sents[edge]) if step < 0 else (sents[edge], sent)
        same_sentence = (sent.context_start == sents[edge].context_start
                         and attrs.names_place(text, sent.start, sent.end))
        if same_sentence or _continues(text, earlier, later) or _states_law(text, sents, i):
            edge = i
            i += step
            continue
        bridge = i
        while (0 <= bridge < len(sents) and abs(bridge - i) < _BRIDGE
               and len(words(text[sents[bridge].start:sents[bridge].end])) < MIN_QUOTE_WORDS):
            bridge += step
        if bridge == i or not 0 <= bridge < len(sents) or not _states_law(text, sents, bridge):
            break
        edge = bridge
        i = bridge + step
    return edge


_TERMINATED = re.compile(r"[.!?;:][\"'”’)\]]*\s*$")


def _continues(text: str, sent: Sentence, after: Sentence) -> bool:
    """Whether ``after``, the next sentence, is the rest of ``sent`` cut by a page break.

    True when ``after`` starts a new paragraph (pages are joined by a blank line) and
    ``sent`` has at least :data:`MIN_QUOTE_WORDS` words, is not a heading and does not end
    in sentence punctuation: on a PDF the page break (and the next page's running header)
    falls anywhere. Unterminated lines inside one paragraph (list items, a source-code
    comment's lines) are not continuations.
    """
    fragment = text[sent.start:sent.end]
    return (after.paragraph != sent.paragraph and not sent.is_heading
            and len(words(fragment)) >= MIN_QUOTE_WORDS and not _TERMINATED.search(fragment))


def _states_law(text: str, sents: Sequence[Sentence], i: int) -> bool:
    """Whether sentence ``i`` says which law governs (a governing-law trigger or a named law).

    A sentence cut by a page break is read with its other half.
    """
    sent = sents[i]
    if sent.is_heading:
        return False
    start, end = sent.start, sent.end
    if i > 0 and _continues(text, sents[i - 1], sent):
        start = sents[i - 1].start
    if i + 1 < len(sents) and _continues(text, sent, sents[i + 1]):
        end = sents[i + 1].end
    spec = compiled_specs()["governing_law"]
    if _excluded(spec, text, start, end):
        return False
    return (_first_match(spec.triggers, text, start, start, end) is not None
            or attrs.states_governing_law(text, start, end))


def clause_attributes(name: str, text: str, cands: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Type-specific attributes read from the best candidate first, then the others.

    Returns (by type): governing_law ``{jurisdiction}``; limitation_of_liability ``{cap,
    cap_stated}``; indemnification ``{indemnitor, indemnitee, mutual}``; termination
    ``{for_convenience, for_cause, automatic, notice_period_days, notice}``; assignment
    ``{consent_required, change_of_control, restricted}``; auto_renewal
    ``{renewal_period_days}``; others ``{}``.
    """
    windows = [(int(c["start"]), int(c["end"])) for c in cands]
    if name == "limitation_of_liability":
        # A cap often sits in its own sentence ("… shall not exceed $100") next to the
        # exclusions; read the candidates first, then the paragraphs around them.
        paras = [p for p in paragraphs(text) if any(p.start <= s < p.end for s, _ in windows)]
        windows = windows + [(p.start, p.end) for p in paras]
    if name == "governing_law":
        read = [j for s, e in windows if (j := attrs.jurisdiction(text, s, e))]
        # a window naming a place wins over one whose law names none ("its laws apply")
        return {"jurisdiction": next((j for j in read if j.get("name")),
                                     read[0] if read else None)}
    if name == "limitation_of_liability":
        cap = next((c for s, e in windows if (c := attrs.liability_cap(text, s, e))), None)
        return {"cap": cap, "cap_stated": cap is not None}
    if name == "indemnification":
        merged: dict[str, Any] = {"indemnitor": None, "indemnitee": None, "mutual": False}
        for s, e in windows:
            part = attrs.indemnity_parties(text, s, e)
            for key in ("indemnitor", "indemnitee"):
                merged[key] = merged[key] or part[key]
            merged["mutual"] = merged["mutual"] or part["mutual"]
        return merged
    if name == "termination":
        out: dict[str, Any] = {"for_convenience": False, "for_cause": False, "automatic": False,
                               "notice_period_days": None, "notice": None}
        for s, e in windows:
            part = attrs.termination_terms(text, s, e)
            for key in ("for_convenience", "for_cause", "automatic"):
                out[key] = out[key] or part[key]
            if out["notice"] is None and part["notice"] is not None:
                out["notice"], out["notice_period_days"] = part["notice"], part["notice_period_days"]
        return out
    if name == "assignment":
        out = {"consent_required": False, "change_of_control": False, "restricted": False}
        for s, e in windows:
            part = attrs.assignment_terms(text, s, e)
            out = {k: out[k] or part[k] for k in out}
        return out
    if name == "auto_renewal":
        found_periods = [p for s, e in windows for p in attrs.periods(text, s, e)]
        return {"renewal_period_days": found_periods[0]["days"] if found_periods else None}
    return {}


def finding_id(clause_type: str, start: int, end: int) -> str:
    """A stable id for a finding (``clause:<type>:<hash of the span>``)."""
    digest = hashlib.sha1(f"{clause_type}:{start}:{end}".encode()).hexdigest()[:8]
    return f"clause:{clause_type}:{digest}"


def _not_found(name: str, searches: int) -> dict[str, Any]:
    return {"id": f"clause:{name}:not_found", "clause_type": name, "status": "not_found",
            "quote": None, "page": None, "start": None, "end": None, "confidence": None,
            "attributes": {}, "searches": searches, "strategy": STRATEGY}


def _page_ocr_confidence(pages: Sequence[Mapping[str, Any]], number: int) -> float | None:
    for page in pages:
        if int(page["page"]) == number and page.get("source") == "ocr":
            value = page.get("ocr_confidence")
            return float(value) if value is not None else 0.5
    return None


# --- whole-document convenience ---------------------------------------------------------------


def extract_clauses(ingestion: Mapping[str, Any], *, max_attempts: int = 3,
                    top_k: int = 8, chunk_chars: int = 1200,
                    use_classifier: bool = True) -> dict[str, Any]:
    """Runs search → validate → retry → deduplicate (+ classifier) → score without a graph.

    Mirrors the clause-extraction subgraph exactly (evaluation, tests); see :mod:`.graph`.
    ``use_classifier=False`` gives the patterns alone (the option of the same name).
    """
    text = ingestion["text"]
    signals = agreement_signals(text)
    if not signals["is_agreement"]:
        return clauses_result([], attempts=0, signals=signals)
    index = DocumentIndex(text, chunk_chars)
    pending = list(CLAUSE_TYPE_NAMES)
    valid: dict[str, list[dict[str, Any]]] = {}
    attempts = 0
    tried: dict[str, int] = {}
    while pending and attempts < max_attempts:
        attempts += 1
        found = search(index, pending, attempts, top_k=top_k)
        for name in pending:
            tried[name] = attempts
        checked, pending = validate(text, found, pending)
        for name, cands in checked.items():
            if cands:
                valid[name] = cands
    merged = deduplicate(valid)
    if use_classifier:
        from activities.due_diligence.classifier import select

        merged = select(text, merged)
    findings = score_findings(ingestion, merged, attempts_by_type=tried)
    return clauses_result(findings, attempts=attempts, signals=signals)


def clauses_result(findings: list[dict[str, Any]], *, attempts: int,
                   signals: Mapping[str, Any]) -> dict[str, Any]:
    """The ``clauses`` result key: findings plus how the search went."""
    return {
        "findings": findings,
        "found_types": [f["clause_type"] for f in findings if f["status"] == "found"],
        "not_found_types": [f["clause_type"] for f in findings if f["status"] == "not_found"],
        "attempts": attempts,
        "is_agreement": bool(signals.get("is_agreement")),
        "agreement_markers": list(signals.get("markers", [])),
        "strategy": STRATEGY,
    }


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    return word[:6] if len(word) > 6 else word


def _tokens(fragment: str) -> list[str]:
    return [_stem(w) for w in words(fragment) if w not in _STOPWORDS and len(w) > 1]
