"""The honesty rule, checked mechanically (seed 001: "never invents experience").

Tailoring may reorder, select, rephrase and emphasise. It may not add an employer or
institution, a job title, a date, a degree, a skill or a number that the base resume does
not evidence. :func:`find_violations` checks a draft against its base and lists every
claim it cannot trace; a model's draft with any violation goes back to reflexion with
the list as feedback, and the rules strategy is checked the same way (tests run it over
many resume × job pairs).
"""

from __future__ import annotations

from typing import Any

from activities.resume_tailoring.resume import (
    DATE_KEYS,
    ENTRY_SECTIONS,
    evidence_inventory,
    flatten_text,
    numbers_in,
)
from activities.resume_tailoring.text import any_same, fuzzy_contains, norm, stems

ORG_KEYS = {"work": "name", "volunteer": "organization", "education": "institution",
            "awards": "awarder", "certificates": "issuer", "publications": "publisher"}
GENERIC_GROUP_NAMES = frozenset({"skills", "relevant to this role", "technical skills", "other",
                                 "tools", "technologies"})
"""Skill-group headings that name a group and claim nothing."""
TITLE_KEYS = {"work": "position", "volunteer": "position"}


def find_violations(draft: dict[str, Any], base: dict[str, Any]) -> list[dict[str, str]]:
    """Claims in ``draft`` that ``base`` does not support.

    Args:
        draft: the tailored JSON Resume.
        base: the base JSON Resume (normalised input).

    Returns:
        ``[{kind, value, where}]`` with ``kind`` in ``organisation``, ``title``, ``date``,
        ``degree``, ``skill``, ``number``; empty when the draft is honest.
    """
    inv = evidence_inventory(base)
    base_text = flatten_text(base)
    base_norm = norm(base_text)
    base_stems = set(stems(base_text))
    numbers = set(inv["numbers"])
    found: list[dict[str, str]] = []

    def flag(kind: str, value: str, where: str) -> None:
        found.append({"kind": kind, "value": value, "where": where})

    for section, key in ORG_KEYS.items():
        for i, entry in enumerate(draft.get(section) or []):
            value = entry.get(key) if isinstance(entry, dict) else None
            if value and not any_same(value, inv["organisations"]):
                flag("organisation", str(value), f"{section}[{i}].{key}")
    for section, key in TITLE_KEYS.items():
        for i, entry in enumerate(draft.get(section) or []):
            value = entry.get(key) if isinstance(entry, dict) else None
            if value and not any_same(value, inv["titles"]):
                flag("title", str(value), f"{section}[{i}].{key}")
    label = (draft.get("basics") or {}).get("label")
    if label and not any_same(label, inv["titles"]):
        flag("title", str(label), "basics.label")
    for i, entry in enumerate(draft.get("education") or []):
        for key in ("studyType", "area"):
            value = entry.get(key) if isinstance(entry, dict) else None
            if value and not any_same(value, inv["degrees"]):
                flag("degree", str(value), f"education[{i}].{key}")
    for where, value in _dates(draft):
        if value not in inv["dates"]:
            flag("date", value, where)
    for i, group in enumerate(draft.get("skills") or []):
        for j, skill in enumerate([group.get("name")] + list(group.get("keywords") or [])):
            if skill and not _skill_evidenced(str(skill), inv["skills"], base_norm, base_stems,
                                              is_group_name=(j == 0)):
                where = f"skills[{i}].name" if j == 0 else f"skills[{i}].keywords[{j - 1}]"
                flag("skill", str(skill), where)
    for section in ENTRY_SECTIONS:
        for i, entry in enumerate(draft.get(section) or []):
            for j, kw in enumerate(entry.get("keywords") or [] if isinstance(entry, dict) else []):
                if not _skill_evidenced(str(kw), inv["skills"], base_norm, base_stems):
                    flag("skill", str(kw), f"{section}[{i}].keywords[{j}]")
    for where, text in _prose(draft):
        for number in numbers_in(text):
            if number not in numbers:
                flag("number", number, where)
    return found


def _skill_evidenced(skill: str, skills: list[str], base_norm: str, base_stems: set[str],
                     *, is_group_name: bool = False) -> bool:
    """A skill is evidenced when the base lists it, or writes it verbatim (up to case/typos)."""
    if is_group_name and norm(skill) in GENERIC_GROUP_NAMES:
        return True
    if any_same(skill, skills):
        return True
    n = norm(skill)
    if n and fuzzy_contains(n, base_norm):
        return True
    # A group heading ("Web Development", "Relevant to this role") only names a group; it
    # must not claim a skill the base lacks, so its content words must all be in the base.
    if is_group_name:
        return all(s in base_stems for s in stems(skill))
    return False


def _dates(value: Any, path: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            where = f"{path}.{k}" if path else k
            if k in DATE_KEYS and isinstance(v, str) and v.strip():
                out.append((where, v.strip()))
            elif k != "meta":
                out += _dates(v, where)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _dates(v, f"{path}[{i}]")
    return out


def _prose(draft: dict[str, Any]) -> list[tuple[str, str]]:
    """Free-text fields where a metric could be invented: summaries and highlights."""
    out: list[tuple[str, str]] = []
    basics = draft.get("basics") or {}
    if basics.get("summary"):
        out.append(("basics.summary", str(basics["summary"])))
    for section in (*ENTRY_SECTIONS, "education", "awards", "publications"):
        for i, entry in enumerate(draft.get(section) or []):
            if not isinstance(entry, dict):
                continue
            for key in ("summary", "description"):
                if entry.get(key):
                    out.append((f"{section}[{i}].{key}", str(entry[key])))
            for j, h in enumerate(entry.get("highlights") or []):
                out.append((f"{section}[{i}].highlights[{j}]", str(h)))
    return out

