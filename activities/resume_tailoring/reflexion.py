"""Reflexion: turning the ATS report, a reviewer's note or honesty violations into directives.

Directives are ``{kind, target, reason}``:

- ``emphasise`` — a job keyword the base evidences but the draft lost; or a term the
  reviewer asked to stress. Bullets and sentences carrying it rank first.
- ``exclude`` — a term the reviewer asked to drop (``remove …``, ``drop …``, ``no …``).
- ``tighten`` / ``expand`` — fewer or more bullets (length, or the reviewer's note).
- ``strengthen_bullets`` — prefer action-verb bullets of a sensible length.
- ``avoid`` — a claim a model invented (honesty violation); the next draft must not make it.
- ``gap`` — a keyword the job wants and the base does not evidence: reported, never inserted.
- ``declined`` — a reviewer request the base resume cannot support (e.g. "add React" when
  React appears nowhere): it is recorded and answered, not acted on.
"""

from __future__ import annotations

import re
from typing import Any

from activities.resume_tailoring.resume import flatten_text
from activities.resume_tailoring.text import STOPWORDS, norm, phrase_in, stems, tokens

_EXCLUDE_RE = re.compile(r"\b(?:remove|drop|delete|omit|without|no longer mention|less about|no)\s+"
                         r"(?:the\s+|any\s+|mentions? of\s+)?([^,.;]+)", re.I)
_EMPHASISE_RE = re.compile(r"\b(?:emphasi[sz]e|highlight|stress|focus on|more about|"
                           r"foreground|lead with|mention|add|include)\s+(?:the\s+|my\s+)?([^,.;]+)",
                           re.I)
_VERBS = frozenset("""emphasise emphasize highlight stress focus mention add include remove drop
delete omit foreground lead please also more less""".split())
_STRUCTURE = frozenset("""bullet bullets line lines point points section sections project projects
entry entries sentence sentences part parts item items skill skills experience work job role
summary resume cv bit stuff thing things""".split())
"""Words that point at the resume's structure, not at content ("the Techcrunch bullet")."""
_SHORTER_RE = re.compile(r"\b(shorter|concise|tighten|trim|too long|shorten|brief)\b", re.I)
_LONGER_RE = re.compile(r"\b(longer|more detail|expand|too short|elaborate)\b", re.I)


def directives_from_ats(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Directives that could raise the ATS score without inventing anything.

    Args:
        report: :func:`activities.resume_tailoring.ats.score_resume` of the current draft.
    """
    out: list[dict[str, Any]] = []
    keywords = report.get("keywords", {})
    for kw in keywords.get("recoverable", []):
        out.append({"kind": "emphasise", "target": kw,
                    "reason": "the job asks for it and the base resume evidences it"})
    for kw in keywords.get("gaps", []):
        out.append({"kind": "gap", "target": kw,
                    "reason": "the job asks for it; the base resume does not evidence it"})
    comps = report.get("components", {})
    length = comps.get("length", {})
    if length.get("words", 0) > (length.get("range") or [0, 10**9])[1]:
        out.append({"kind": "tighten", "target": "length", "reason": "over the length range"})
    elif 0 < length.get("words", 0) < (length.get("range") or [0])[0]:
        out.append({"kind": "expand", "target": "length", "reason": "under the length range"})
    if comps.get("bullet_quality", {}).get("weak"):
        out.append({"kind": "strengthen_bullets", "target": "bullets",
                    "reason": f"{len(comps['bullet_quality']['weak'])} bullets lack an action "
                              "verb or a sensible length"})
    return out


def directives_from_feedback(note: str, base: dict[str, Any]) -> list[dict[str, Any]]:
    """Directives from a reviewer's free-text note.

    Terms the note asks to stress are ``emphasise`` directives only when the base resume
    evidences them; otherwise they are ``declined`` (honesty rule). Length words give
    ``tighten`` / ``expand``; "remove X" gives ``exclude``. The whole note is kept as a
    ``feedback`` directive so a model-backed drafter sees it verbatim.
    """
    base_text = flatten_text(base)
    base_stems, base_norm = set(stems(base_text)), norm(base_text)
    out: list[dict[str, Any]] = [{"kind": "feedback", "target": note.strip(),
                                  "reason": "reviewer note"}]
    if _SHORTER_RE.search(note):
        out.append({"kind": "tighten", "target": "length", "reason": "reviewer asked for shorter"})
    if _LONGER_RE.search(note):
        out.append({"kind": "expand", "target": "length", "reason": "reviewer asked for more"})
    for match in _EXCLUDE_RE.finditer(note):
        for term in _terms(match.group(1)):
            out.append({"kind": "exclude", "target": term, "reason": "reviewer asked to drop it"})
    excluded = {d["target"] for d in out if d["kind"] == "exclude"}
    for match in _EMPHASISE_RE.finditer(note):
        for term in _terms(match.group(1)):
            if term in excluded:
                continue
            parts = [term] if phrase_in(term, base_stems, base_norm) else [
                w for w in term.split() if len(term.split()) > 1 and phrase_in(w, base_stems, base_norm)]
            for part in parts:
                out.append({"kind": "emphasise", "target": part,
                            "reason": "reviewer asked to stress it; the base evidences it"})
            if not parts:
                out.append({"kind": "declined", "target": term,
                            "reason": "the base resume does not evidence it; not added"})
    return out


def directives_from_violations(violations: list[dict[str, str]]) -> list[dict[str, Any]]:
    """``avoid`` directives for each claim a draft could not trace to the base resume."""
    return [{"kind": "avoid", "target": v["value"],
             "reason": f"{v['kind']} not in the base resume ({v['where']})"} for v in violations]


def _terms(span: str) -> list[str]:
    """Terms in a short span: split on ``and``/``&``/``/``, stopwords trimmed from the ends."""
    out = []
    for part in re.split(r"\band\b|&|/|\bor\b", span):
        words = tokens(part)
        while words and (words[0].lower() in STOPWORDS or words[0].lower() in _VERBS):
            words.pop(0)
        while words and (words[-1].lower() in STOPWORDS or words[-1].lower() in _STRUCTURE):
            words.pop()
        words = [w for w in words if w.lower() not in _STRUCTURE] or words
        if words and len(words) <= 4:
            out.append(" ".join(words))
    return out
