"""Drafting a tailored resume from the base resume, the job and the directives (seed 001 drafting).

The rules strategy (offline default) only **selects, reorders and emphasises**: bullets are
kept verbatim and ranked by how much of the job they speak to; every employer, title, date
and degree is copied from the base; skills the job lists and the base resume evidences are
surfaced in a "Relevant to this role" group, in the base's own words; keywords the job wants
and the base does not evidence are never inserted (they are gaps in the ATS report). The
summary is the base summary's most relevant sentences after one generated line that names
only evidenced skills.

Drafting runs in two passes — ``experience`` (work, volunteering, projects) then
``profile`` (summary, skills, education and the rest, which depend on what the first pass
kept) — one pass per visit of ``resume_drafting_agent``, so the supervisor's "repeat until
draft_complete" loop is real.
"""

from __future__ import annotations

import copy
from typing import Any

import pysbd

from activities.resume_tailoring.ats import bullet_is_good
from activities.resume_tailoring.resume import ENTRY_SECTIONS, SECTION_ORDER, flatten_text
from activities.resume_tailoring.text import norm, phrase_in, same_term, stems

PASSES = ("experience", "profile")
"""Drafting passes, in order."""

RELEVANT_GROUP = "Relevant to this role"
"""Name of the surfaced-skills group (a generic heading: the honesty check reads it as no claim)."""

DEFAULT_GUIDELINES: dict[str, Any] = {
    "section_order": ["basics", "work", "projects", "education", "skills", "volunteer",
                      "awards", "certificates", "publications", "languages"],
    "drop_sections": ["interests", "references"],
    "bullets_per_entry": 4,
    "max_projects": 3,
    "summary_sentences": 3,
    "length_words": [150, 800],
}

_SEGMENTER = pysbd.Segmenter(language="en", clean=False)


def start_draft(base: dict[str, Any]) -> dict[str, Any]:
    """An empty draft with the base's ``basics`` (contact details are never tailored)."""
    draft: dict[str, Any] = {"basics": copy.deepcopy(base.get("basics") or {})}
    return draft


def draft_pass(name: str, draft: dict[str, Any], base: dict[str, Any], job: dict[str, Any],
               guidelines: dict[str, Any], directives: list[dict[str, Any]],
               revision: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run one drafting pass.

    Args:
        name: ``experience`` or ``profile``.
        draft: the draft so far (not modified).
        base: the normalised base resume.
        job: structured job data (:func:`~activities.resume_tailoring.jobs.parse_job`).
        guidelines: ``section_formatting_guidelines`` from format strategy.
        directives: reflexion's directives for this draft (``emphasise``, ``exclude``,
            ``tighten``, ``expand``, ``strengthen_bullets`` …).
        revision: the revision number, for the change log.

    Returns:
        ``(new draft, change log entries)``.
    """
    ctx = _Context(base, job, guidelines, directives, revision)
    new = copy.deepcopy(draft)
    if name == "experience":
        for section in ENTRY_SECTIONS:
            if base.get(section):
                new[section] = ctx.entries(section)
    else:
        ctx.profile(new)
    return new, ctx.log


class _Context:
    def __init__(self, base: dict[str, Any], job: dict[str, Any], guidelines: dict[str, Any],
                 directives: list[dict[str, Any]], revision: int) -> None:
        self.base = base
        self.job = job
        self.g = {**DEFAULT_GUIDELINES, **(guidelines or {})}
        self.revision = revision
        self.log: list[dict[str, Any]] = []
        self.job_stems = set(stems(" ".join([job.get("title", ""), *job.get("sentences", [])])))
        self.keywords = list(job.get("keywords", []))
        self.emphasise = [d["target"] for d in directives if d.get("kind") == "emphasise"]
        self.exclude = [d["target"] for d in directives if d.get("kind") == "exclude"]
        self.strengthen = any(d.get("kind") == "strengthen_bullets" for d in directives)
        delta = sum(1 for d in directives if d.get("kind") == "expand") - \
            sum(1 for d in directives if d.get("kind") == "tighten")
        self.bullets = max(1, int(self.g["bullets_per_entry"]) + delta)
        self.sentences = max(1, int(self.g["summary_sentences"]) + min(delta, 0))
        self.max_projects = max(1, int(self.g["max_projects"]) + delta)

    # -- scoring -----------------------------------------------------------------------------

    def relevance(self, text: str) -> float:
        """How much of the job ``text`` speaks to (keywords weighted, then shared stems)."""
        s = set(stems(text))
        n = norm(text)
        score = sum(float(k.get("weight", 1.0)) for k in self.keywords
                    if phrase_in(k["phrase"], s, n))
        score += 0.5 * (len(s & self.job_stems) / len(s) if s else 0.0)
        score += 2.0 * sum(1 for t in self.emphasise if phrase_in(t, s, n))
        if self.strengthen and bullet_is_good(text):
            score += 0.75
        return score

    def excluded(self, text: str) -> bool:
        s, n = set(stems(text)), norm(text)
        return any(phrase_in(t, s, n) for t in self.exclude)

    def note(self, section: str, action: str, detail: str) -> None:
        self.log.append({"revision": self.revision, "section": section, "action": action,
                         "detail": detail})

    # -- experience pass ---------------------------------------------------------------------

    def entries(self, section: str) -> list[dict[str, Any]]:
        out = []
        for index, entry in enumerate(self.base.get(section) or []):
            if not isinstance(entry, dict):
                continue
            new = copy.deepcopy(entry)
            highlights = [str(h) for h in entry.get("highlights") or []]
            if highlights:
                new["highlights"] = self.select(highlights, section, index)
            out.append((index, new))
        if section == "projects" and len(out) > self.max_projects:
            ranked = sorted(out, key=lambda p: (-self.relevance(flatten_text(p[1])), p[0]))
            keep = {i for i, _ in ranked[: self.max_projects]}
            for i, entry in out:
                if i not in keep:
                    self.note(section, "dropped", f"project {entry.get('name', i)!r}: less relevant")
            out = [p for p in ranked if p[0] in keep]
            self.note(section, "reordered", "projects ordered by relevance to the job")
        return [entry for _, entry in out]

    def select(self, bullets: list[str], section: str, index: int) -> list[str]:
        """Keep the most relevant bullets, and any bullet that alone carries a job keyword."""
        kept = [(i, b) for i, b in enumerate(bullets) if not self.excluded(b)]
        for i, b in enumerate(bullets):
            if (i, b) not in kept:
                self.note(section, "dropped", f"{section}[{index}] bullet {i + 1}: excluded by feedback")
        ranked = sorted(kept, key=lambda p: (-self.relevance(p[1]), p[0]))
        chosen = ranked[: self.bullets]
        covered = self._covered([b for _, b in chosen])
        for i, b in ranked[self.bullets:]:
            extra = self._covered([b]) - covered
            if extra:
                chosen.append((i, b))
                covered |= extra
        dropped = len(kept) - len(chosen)
        if dropped:
            self.note(section, "selected", f"{section}[{index}]: kept {len(chosen)} of {len(kept)} bullets")
        order = [i for i, _ in chosen]
        if order != sorted(order):
            self.note(section, "reordered", f"{section}[{index}]: bullets ordered by relevance")
        return [b for _, b in chosen]

    def _covered(self, texts: list[str]) -> set[str]:
        joined = " \n".join(texts)
        s, n = set(stems(joined)), norm(joined)
        return {k["key"] for k in self.keywords if phrase_in(k["phrase"], s, n)}

    # -- profile pass ------------------------------------------------------------------------

    def profile(self, draft: dict[str, Any]) -> None:
        base = self.base
        surfaced = self.surfaced_skills(draft)
        self.summary(draft, surfaced)
        for section in SECTION_ORDER:
            if section in ("basics", *ENTRY_SECTIONS) or not base.get(section):
                continue
            if section in self.g["drop_sections"]:
                self.note(section, "section_dropped", f"{section}: not used by screening")
                continue
            if section == "skills":
                draft["skills"] = self.skills(surfaced)
            elif section == "education":
                draft["education"] = [self.education(e) for e in base["education"]]
            else:
                draft[section] = copy.deepcopy(base[section])
        if surfaced and "skills" not in draft:
            draft["skills"] = self.skills(surfaced)

    def surfaced_skills(self, draft: dict[str, Any]) -> list[str]:
        """Skills the job lists and the base evidences verbatim, in the base's own words."""
        base_text = flatten_text(self.base)
        listed = [k["phrase"] for k in self.keywords if k.get("source") == "listed"]
        listed += [t for t in self.emphasise if t not in listed]
        have = [str(k) for g in self.base.get("skills") or [] for k in g.get("keywords") or []]
        out: list[str] = []
        for skill in listed:
            written = _written_in(skill, base_text)
            if written and not any(same_term(written, h) for h in have + out):
                out.append(written)
        return out

    def skills(self, surfaced: list[str]) -> list[dict[str, Any]]:
        groups = copy.deepcopy(self.base.get("skills") or [])
        for group in groups:
            kws = [str(k) for k in group.get("keywords") or []]
            ranked = sorted(range(len(kws)), key=lambda i: (-self.relevance(kws[i]), i))
            group["keywords"] = [kws[i] for i in ranked]
        order = sorted(range(len(groups)),
                       key=lambda i: (-self.relevance(flatten_text(groups[i])), i))
        groups = [groups[i] for i in order]
        if order != sorted(order):
            self.note("skills", "reordered", "skill groups ordered by relevance to the job")
        if surfaced:
            groups.insert(0, {"name": RELEVANT_GROUP, "keywords": surfaced})
            self.note("skills", "surfaced_skill",
                      "evidenced elsewhere in the resume: " + ", ".join(surfaced))
        return groups

    def education(self, entry: dict[str, Any]) -> dict[str, Any]:
        new = copy.deepcopy(entry)
        courses = [str(c) for c in entry.get("courses") or []]
        if courses:
            new["courses"] = sorted(courses, key=lambda c: (-self.relevance(c), courses.index(c)))
        return new

    def summary(self, draft: dict[str, Any], surfaced: list[str]) -> None:
        basics = draft.setdefault("basics", {})
        base_summary = str((self.base.get("basics") or {}).get("summary") or "")
        sentences = [s.strip() for s in _SEGMENTER.segment(base_summary) if s.strip()]
        sentences = [s for s in sentences if not self.excluded(s)]
        ranked = sorted(range(len(sentences)), key=lambda i: (-self.relevance(sentences[i]), i))
        keep = sorted(ranked[: self.sentences])
        matched = self._matched_skills(surfaced)
        lead = f"Relevant skills: {', '.join(matched[:6])}." if matched else ""
        text = " ".join([lead] + [sentences[i] for i in keep]).strip()
        if text and text != base_summary:
            basics["summary"] = text
            self.note("basics", "summary_rewritten",
                      f"kept {len(keep)} of {len(sentences)} summary sentences"
                      + (f"; led with evidenced skills: {', '.join(matched[:6])}" if matched else ""))
        elif not text:
            basics.pop("summary", None)

    def _matched_skills(self, surfaced: list[str]) -> list[str]:
        """Evidenced skills (base skills and surfaced ones) that the job asks for."""
        pool = [str(k) for g in self.base.get("skills") or [] for k in g.get("keywords") or []]
        pool += [str(g.get("name")) for g in self.base.get("skills") or [] if g.get("name")]
        pool += surfaced
        out: list[str] = []
        for skill in pool:
            s, n = set(stems(skill)), norm(skill)
            hits = any(phrase_in(k["phrase"], s, n) or phrase_in(skill, set(stems(k["phrase"])),
                                                                  norm(k["phrase"]))
                       for k in self.keywords)
            if hits and not any(same_term(skill, o) for o in out):
                out.append(skill)
        return out


def _written_in(skill: str, base_text: str) -> str | None:
    """How the base writes ``skill`` (``Javascript`` for the job's ``JavaScript``), or None."""
    from activities.resume_tailoring.text import fuzzy_contains

    n = norm(skill)
    if not n:
        return None
    for line in base_text.splitlines():
        for part in [line, *[p.strip() for p in line.replace(" - ", ",").split(",")]]:
            if same_term(part, skill):
                return part.strip()
    words = base_text.split()
    size = len(skill.split())
    for i in range(len(words) - size + 1):
        window = " ".join(words[i : i + size]).strip(".,;:()")
        if same_term(window, skill):
            return window
    return skill if fuzzy_contains(n, norm(base_text)) and len(n) > 3 else None
