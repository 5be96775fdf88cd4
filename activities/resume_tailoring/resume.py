"""JSON Resume documents: normalising the input, the evidence they hold, validation, Markdown, diffs.

The schema is the JSON Resume ``resume-schema`` 1.0.0 (MIT, vendored under
``data/resume_schema/`` with its licence). Plain-text resumes are turned into a minimal
JSON Resume by headings and bullets; nothing is guessed beyond what the text says.
"""

from __future__ import annotations

import copy
import difflib
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

from activities.resume_tailoring.text import stems

SECTION_ORDER = ("basics", "work", "projects", "volunteer", "education", "skills", "awards",
                 "certificates", "publications", "languages", "interests", "references")
"""Default order of sections in the rendered resume."""

ENTRY_SECTIONS = ("work", "volunteer", "projects")
"""Sections whose entries carry ``highlights`` bullets."""

DATE_KEYS = ("startDate", "endDate", "date", "releaseDate")

_TEXT_HEADINGS = {
    "summary": "summary", "profile": "summary", "about": "summary", "objective": "summary",
    "experience": "work", "work experience": "work", "employment": "work",
    "professional experience": "work", "work history": "work",
    "education": "education", "skills": "skills", "technical skills": "skills",
    "projects": "projects", "volunteering": "volunteer", "volunteer": "volunteer",
    "awards": "awards", "certifications": "certificates", "certificates": "certificates",
    "publications": "publications", "languages": "languages", "interests": "interests",
}
_BULLET_RE = re.compile(r"^\s*(?:[-*•·▪◦]|\d+[.)])\s+")
_DATE_RE = re.compile(r"\b((?:19|20)\d{2})(?:[-/.](0[1-9]|1[0-2]))?\b")


@lru_cache(maxsize=1)
def resume_schema() -> dict[str, Any]:
    """The vendored JSON Resume schema (draft-04)."""
    path = resources.files("activities.resume_tailoring").joinpath(
        "data", "resume_schema", "schema.json")
    return dict(json.loads(path.read_text(encoding="utf-8")))


def sample_resume() -> dict[str, Any]:
    """resume-schema's sample resume (Richard Hendriks)."""
    return _vendored("sample.resume.json")


def sample_job() -> dict[str, Any]:
    """resume-schema's sample job (Web Developer)."""
    return _vendored("sample.job.json")


def schema_errors(resume: dict[str, Any]) -> list[str]:
    """Every schema violation of ``resume`` as ``"<path>: <message>"`` (empty = valid).

    Structure only: ``format`` keywords are annotations in draft 4 (resume-schema's own
    sample has an empty profile URL and a URL without a scheme), so they are not enforced.
    """
    import jsonschema  # ~33 MB: only where resumes are validated (keeps the worker's idle RSS low)

    validator = jsonschema.Draft4Validator(resume_schema())
    return sorted(f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
                  for e in validator.iter_errors(resume))


def normalise_resume(base: dict[str, Any] | str) -> dict[str, Any]:
    """The base resume as a JSON Resume object (a deep copy; ``$schema`` dropped).

    Args:
        base: a JSON Resume object, or plain text with headings (``Experience``,
            ``Education``, ``Skills`` …) and ``-`` bullets.

    Returns:
        A JSON Resume dict. Text input keeps every line it read, verbatim.
    """
    if isinstance(base, dict):
        resume = copy.deepcopy(base)
        resume.pop("$schema", None)
        return resume
    return _from_text(base)


def flatten_text(resume: dict[str, Any]) -> str:
    """All human-readable text of a resume, one value a line (for matching and scoring)."""
    out: list[str] = []

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                if k not in ("url", "image", "email", "phone", "$schema", "meta"):
                    walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and value.strip():
            out.append(value.strip())

    walk(resume)
    return "\n".join(out)


def evidence_inventory(resume: dict[str, Any]) -> dict[str, Any]:
    """What a resume can be held to: the facts a tailored version may only repeat.

    Returns:
        ``{organisations, titles, dates, degrees, skills, numbers, stems}``: sorted lists
        of the employers and institutions, positions, dates, degrees and areas, skill names
        and keywords, and numbers that appear anywhere in ``resume``; ``stems`` are the
        content stems of all its text.
    """
    orgs: set[str] = set()
    titles: set[str] = set()
    dates: set[str] = set()
    degrees: set[str] = set()
    skills: set[str] = set()
    for entry in resume.get("work") or []:
        _add(orgs, entry.get("name"))
        _add(titles, entry.get("position"))
    for entry in resume.get("volunteer") or []:
        _add(orgs, entry.get("organization"))
        _add(titles, entry.get("position"))
    for entry in resume.get("education") or []:
        _add(orgs, entry.get("institution"))
        _add(degrees, entry.get("studyType"))
        _add(degrees, entry.get("area"))
    for key, org_key in (("awards", "awarder"), ("certificates", "issuer"),
                         ("publications", "publisher")):
        for entry in resume.get(key) or []:
            _add(orgs, entry.get(org_key))
    for entry in resume.get("skills") or []:
        _add(skills, entry.get("name"))
        for kw in entry.get("keywords") or []:
            _add(skills, kw)
    for entry in resume.get("projects") or []:
        for kw in entry.get("keywords") or []:
            _add(skills, kw)
    _add(titles, (resume.get("basics") or {}).get("label"))
    for value in _walk_dates(resume):
        dates.add(value)
    text = flatten_text(resume)
    return {"organisations": sorted(orgs), "titles": sorted(titles), "dates": sorted(dates),
            "degrees": sorted(degrees), "skills": sorted(skills),
            "numbers": sorted(set(numbers_in(text))), "stems": sorted(set(stems(text)))}


def numbers_in(text: str) -> list[str]:
    """Numbers written in ``text`` (``40%``, ``3``, ``1,200`` → ``1200``), normalised."""
    return [n.replace(",", "") for n in re.findall(r"\d[\d,]*(?:\.\d+)?", text or "")]


def render_markdown(resume: dict[str, Any], order: list[str] | None = None) -> str:
    """The resume as Markdown, sections in ``order`` (default :data:`SECTION_ORDER`)."""
    lines: list[str] = []
    basics = resume.get("basics") or {}
    if basics.get("name"):
        lines.append(f"# {basics['name']}")
    if basics.get("label"):
        lines.append(f"**{basics['label']}**")
    contact = [str(basics[k]) for k in ("email", "phone", "url") if basics.get(k)]
    location = basics.get("location") or {}
    place = ", ".join(str(location[k]) for k in ("city", "region", "countryCode") if location.get(k))
    if place:
        contact.append(place)
    if contact:
        lines.append(" · ".join(contact))
    if basics.get("summary"):
        lines += ["", "## Summary", "", str(basics["summary"])]
    for section in order or list(SECTION_ORDER):
        if section == "basics" or not resume.get(section):
            continue
        lines += ["", f"## {_title(section)}", ""]
        for entry in resume[section]:
            lines += _render_entry(section, entry)
    return "\n".join(lines).strip() + "\n"


def diff_markdown(before: str, after: str) -> str:
    """Unified diff of two renderings (``base`` → ``draft``), for the reviewer."""
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile="base", tofile="draft", n=1))


# --- helpers ----------------------------------------------------------------------------------


def _vendored(name: str) -> dict[str, Any]:
    path = resources.files("activities.resume_tailoring").joinpath("data", "resume_schema", name)
    return dict(json.loads(path.read_text(encoding="utf-8")))


def _add(pool: set[str], value: Any) -> None:
    if isinstance(value, str) and value.strip():
        pool.add(value.strip())


def _walk_dates(value: Any) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for k, v in value.items():
            if k in DATE_KEYS and isinstance(v, str) and v.strip():
                found.append(v.strip())
            else:
                found += _walk_dates(v)
    elif isinstance(value, list):
        for v in value:
            found += _walk_dates(v)
    return found


def _title(section: str) -> str:
    return {"work": "Experience", "volunteer": "Volunteering"}.get(section, section.capitalize())


def _render_entry(section: str, entry: Any) -> list[str]:
    if not isinstance(entry, dict):
        return [f"- {entry}"]
    if section == "skills":
        keywords = ", ".join(str(k) for k in entry.get("keywords") or [])
        level = f" ({entry['level']})" if entry.get("level") else ""
        return [f"- **{entry.get('name', '')}**{level}" + (f": {keywords}" if keywords else "")]
    if section == "languages":
        return [f"- {entry.get('language', '')}" + (f" — {entry['fluency']}" if entry.get("fluency") else "")]
    if section == "interests":
        return [f"- {entry.get('name', '')}: {', '.join(entry.get('keywords') or [])}"]
    if section == "references":
        return [f"- {entry.get('name', '')}: {entry.get('reference', '')}"]
    head = {
        "work": (entry.get("position"), entry.get("name")),
        "volunteer": (entry.get("position"), entry.get("organization")),
        "projects": (entry.get("name"), entry.get("description")),
        "education": (" ".join(x for x in (entry.get("studyType"), entry.get("area")) if x),
                      entry.get("institution")),
        "awards": (entry.get("title"), entry.get("awarder")),
        "certificates": (entry.get("name"), entry.get("issuer")),
        "publications": (entry.get("name"), entry.get("publisher")),
    }.get(section, (entry.get("name"), None))
    title = " — ".join(str(x) for x in head if x)
    start = entry.get("startDate") or entry.get("date") or entry.get("releaseDate") or ""
    end = entry.get("endDate") or ("present" if entry.get("startDate") else "")
    when = f" ({start} – {end})" if start and end else (f" ({start})" if start else "")
    out = [f"### {title}{when}"]
    if entry.get("summary"):
        out.append(str(entry["summary"]))
    out += [f"- {h}" for h in entry.get("highlights") or []]
    out += [f"- {c}" for c in entry.get("courses") or []]
    if entry.get("keywords"):
        out.append(f"*{', '.join(str(k) for k in entry['keywords'])}*")
    out.append("")
    return out


def _from_text(text: str) -> dict[str, Any]:
    lines = [ln.rstrip() for ln in (text or "").splitlines()]
    basics: dict[str, Any] = {}
    resume: dict[str, Any] = {"basics": basics}
    section = "header"
    header: list[str] = []
    summary: list[str] = []
    entry: dict[str, Any] | None = None
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        key = _TEXT_HEADINGS.get(line.rstrip(":").strip().lower())
        if key:
            section, entry = key, None
            continue
        bullet = _BULLET_RE.match(line) is not None
        content = _BULLET_RE.sub("", line)
        if section == "header":
            header.append(content)
        elif section == "summary":
            summary.append(content)
        elif section == "skills":
            name, _, rest = content.partition(":")
            words = [w.strip() for w in re.split(r"[,;|]", rest if rest else content) if w.strip()]
            resume.setdefault("skills", []).append(
                {"name": name.strip() if rest else "Skills", "keywords": words})
        elif section in ("work", "volunteer", "projects", "education", "awards",
                         "certificates", "publications"):
            if bullet and entry is not None:
                entry.setdefault("highlights", []).append(content)
            else:
                entry = _text_entry(section, content)
                resume.setdefault(section, []).append(entry)
        elif section in ("languages", "interests"):
            field = "language" if section == "languages" else "name"
            resume.setdefault(section, []).append({field: content})
    if header:
        basics["name"] = header[0]
        if len(header) > 1 and "@" not in header[1]:
            basics["label"] = header[1]
        for extra in header[1:]:
            if "@" in extra and "email" not in basics:
                basics["email"] = re.findall(r"\S+@\S+", extra)[0].strip(",;")
    if summary:
        basics["summary"] = " ".join(summary)
    return resume


def _text_entry(section: str, line: str) -> dict[str, Any]:
    """One entry line of a text resume: its dates become ISO dates, the rest stays verbatim."""
    dates = [f"{y}-{m}" if m else y for y, m in _DATE_RE.findall(line)]
    label = _DATE_RE.sub("", line)
    label = re.sub(r"[()\[\]]|\s[-–—]\s*$|\bpresent\b|\bcurrent\b", " ", label, flags=re.I)
    label = re.sub(r"\s+", " ", label).strip(" ,|–—-")
    entry: dict[str, Any] = {}
    if section == "work":
        position, sep, org = _split_label(label)
        entry = {"position": position, "name": org} if sep else {"name": label}
    elif section == "volunteer":
        position, sep, org = _split_label(label)
        entry = {"position": position, "organization": org} if sep else {"organization": label}
    elif section == "education":
        entry = {"institution": label}
    elif section == "awards":
        entry = {"title": label}
    else:
        entry = {"name": label}
    key_start, key_end = ("date", None) if section in ("awards", "certificates") else ("startDate", "endDate")
    if section == "publications":
        key_start = "releaseDate"
    if dates:
        entry[key_start] = dates[0]
        if key_end and len(dates) > 1:
            entry[key_end] = dates[1]
    return entry


def _split_label(label: str) -> tuple[str, str, str]:
    """``"Engineer at Acme"`` / ``"Engineer, Acme"`` / ``"Engineer — Acme"`` → (position, sep, org)."""
    match = re.search(r"\s+(?:at|@)\s+|,\s+|\s+[–—|]\s+", label)
    if not match:
        return label, "", ""
    return label[: match.start()].strip(), match.group(0), label[match.end():].strip()
