"""The ATS score of a resume against a job: a number in [0, 1] with every component shown.

    score = 0.55 × keyword coverage + 0.15 × standard sections + 0.15 × bullet quality
          + 0.15 × length

- **keyword coverage**: weighted share of the job's keywords (explicit skills weigh 2,
  TF-IDF keyphrases 1) found in the resume, by stems (``developing`` meets ``develop``)
  or fuzzily (``Javascript`` meets ``JavaScript``, rapidfuzz ratio ≥ 90); the words of
  a phrase must meet on one line (one bullet, one skill group), not across the resume.
- **standard sections**: summary, experience, education, skills present.
- **bullet quality**: share of bullets that start with an action verb and run 4–30 words
  (quantified bullets are counted and shown, not required).
- **length**: 1 between 150 and 800 words, falling off outside.

The report also says which job keywords the *base* resume evidences: a keyword it does
not evidence is a gap to report, never something to insert (seed 001 honesty rule), so
``coverage_ceiling`` is the best keyword coverage an honest tailoring can reach.
"""

from __future__ import annotations

from typing import Any

from activities.resume_tailoring.resume import ENTRY_SECTIONS, flatten_text, numbers_in
from activities.resume_tailoring.text import norm, phrase_in, stem, stems, tokens

WEIGHTS = {"keyword_coverage": 0.55, "sections": 0.15, "bullet_quality": 0.15, "length": 0.15}
STANDARD_SECTIONS = ("summary", "work", "education", "skills")
LENGTH_WORDS = (150, 800)
BULLET_WORDS = (4, 30)

ACTION_VERBS = frozenset(stem(v) for v in """
accelerate achieve administer advise analyse analyze architect assess automate award build
built chair coach collaborate coordinate create cut debug deliver deploy design detect develop
direct drive earn enable engineer establish evaluate expand founded generate grow guide help
implement improve increase initiate integrate introduce launch lead led maintain manage mentor
migrate model negotiate operate optimise optimize organise organize own pilot plan present
produce program publish raise redesign reduce refactor research resolve review run save scale
secure ship simplify solve spearhead streamline supervise support teach test train transform
troubleshoot upgrade won write wrote
""".split())


def score_resume(resume: dict[str, Any], job: dict[str, Any],
                 base_text: str | None = None) -> dict[str, Any]:
    """Score ``resume`` against structured ``job`` data.

    Args:
        resume: a JSON Resume object.
        job: :func:`activities.resume_tailoring.jobs.parse_job` output.
        base_text: the base resume's flattened text, for the ``evidenced`` / ``gaps``
            split (default: ``resume`` itself is the base).

    Returns:
        ``{score, components: {name: {score, weight, ...}}, keywords: {matched, missing,
        evidenced, gaps, recoverable}, coverage_ceiling, strategy: "rules"}``; scores are
        rounded to 4 places.
    """
    text = flatten_text(resume)
    base = text if base_text is None else base_text
    hay_stems, hay_norm = set(stems(text)), norm(text)
    base_stems, base_norm = set(stems(base)), norm(base)
    hay_lines = [set(stems(line)) for line in text.splitlines()]
    base_lines = [set(stems(line)) for line in base.splitlines()]
    matched, missing, evidenced, gaps = [], [], [], []
    got = total = ceiling = 0.0
    for kw in job.get("keywords", []):
        weight = float(kw.get("weight", 1.0))
        total += weight
        is_evidenced = phrase_in(kw["phrase"], base_stems, base_norm, base_lines)
        if is_evidenced:
            evidenced.append(kw["phrase"])
            ceiling += weight
        else:
            gaps.append(kw["phrase"])
        if phrase_in(kw["phrase"], hay_stems, hay_norm, hay_lines):
            matched.append(kw["phrase"])
            got += weight
        else:
            missing.append(kw["phrase"])
    coverage = got / total if total else 1.0
    sections = _sections(resume)
    bullets = _bullets(resume)
    length = _length(text)
    components = {
        "keyword_coverage": {"score": round(coverage, 4), "weight": WEIGHTS["keyword_coverage"],
                             "matched": len(matched), "total": len(job.get("keywords", []))},
        "sections": {**sections, "weight": WEIGHTS["sections"]},
        "bullet_quality": {**bullets, "weight": WEIGHTS["bullet_quality"]},
        "length": {**length, "weight": WEIGHTS["length"]},
    }
    score = sum(float(c["score"]) * float(c["weight"]) for c in components.values())
    return {
        "score": round(min(max(score, 0.0), 1.0), 4),
        "components": components,
        "keywords": {"matched": matched, "missing": missing, "evidenced": evidenced,
                     "gaps": gaps, "recoverable": [k for k in missing if k in evidenced]},
        "coverage_ceiling": round(ceiling / total, 4) if total else 1.0,
        "strategy": "rules",
    }


def bullet_is_good(bullet: str) -> bool:
    """Starts with an action verb (or a past-tense verb) and runs 4–30 words."""
    words = tokens(bullet)
    if not (BULLET_WORDS[0] <= len(words) <= BULLET_WORDS[1]):
        return False
    first = words[0].lower()
    return stem(first) in ACTION_VERBS or (first.endswith("ed") and len(first) > 4)


def _sections(resume: dict[str, Any]) -> dict[str, Any]:
    present = []
    if (resume.get("basics") or {}).get("summary"):
        present.append("summary")
    present += [s for s in STANDARD_SECTIONS[1:] if resume.get(s)]
    return {"score": round(len(present) / len(STANDARD_SECTIONS), 4), "present": present,
            "missing": [s for s in STANDARD_SECTIONS if s not in present]}


def _bullets(resume: dict[str, Any]) -> dict[str, Any]:
    bullets = [str(h) for section in ENTRY_SECTIONS for entry in resume.get(section) or []
               for h in entry.get("highlights") or []]
    weak = [b for b in bullets if not bullet_is_good(b)]
    quantified = sum(1 for b in bullets if numbers_in(b))
    score = (len(bullets) - len(weak)) / len(bullets) if bullets else 0.0
    return {"score": round(score, 4), "bullets": len(bullets), "weak": weak,
            "quantified": quantified}


def _length(text: str) -> dict[str, Any]:
    words = len(tokens(text))
    low, high = LENGTH_WORDS
    if words < low:
        score = words / low
    elif words > high:
        score = max(0.0, 1.0 - (words - high) / high)
    else:
        score = 1.0
    return {"score": round(score, 4), "words": words, "range": [low, high]}
