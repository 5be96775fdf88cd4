"""Markdown rendering of a due_diligence run's results (``GET /v1/runs/{id}/report.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.due_diligence.clause_types import CLAUSE_TYPES


def render_report(state: Mapping[str, Any]) -> str:
    """Renders whatever results the run has so far (partial runs render partially).

    Args:
        state: the run's result / graph state: ``document``, ``ingestion``, ``clauses``,
            ``risks``, ``summary``, ``checklist``, ``signoff`` (any may be missing).

    Returns:
        Markdown text.
    """
    doc = state.get("document") or {}
    ingestion = state.get("ingestion") or {}
    lines = [f"# Due diligence report: {doc.get('filename') or 'agreement'}", ""]
    if ingestion:
        lines += [f"- Pages: {ingestion.get('page_count')}; characters: {ingestion.get('char_count')}; "
                  f"text from: {', '.join(ingestion.get('text_sources', []))}", ""]
    clauses = state.get("clauses")
    risks = state.get("risks")
    summary = state.get("summary")
    checklist = state.get("checklist")
    if summary:
        lines += ["## Summary", ""]
        lines += [f"- {_md(s['text'])} {_refs(s.get('source_refs', []))}" for s in summary["sentences"]]
        lines.append("")
    if risks:
        lines += ["## Risks", "", "| level | clause | reason | sources |", "| --- | --- | --- | --- |"]
        for item in risks.get("items", []):
            lines.append(f"| {item['level']} | {_label(item['clause_type'])} | {_cell(item['reason'])} "
                         f"| {', '.join(item['source_refs'])} |")
        lines.append("")
    if clauses:
        lines += ["## Clauses", ""]
        if not clauses.get("is_agreement", True):
            lines += ["The document does not read as an agreement; no clauses were extracted.", ""]
        lines += _provenance(clauses)
        for f in clauses.get("findings", []):
            lines.append(f"### {_label(f['clause_type'])} — {f['status'].replace('_', ' ')}")
            if f["status"] == "found":
                lines.append(f"`{f['id']}` · page {f['page']} · characters {f['start']}–{f['end']} "
                             f"· confidence {f['confidence']} · {f['strategy']}{_method(f)}")
                lines += ["", "> " + _md(f["quote"]).replace("\n", "\n> ")]
                shown = _attributes(f.get("attributes") or {})
                if shown:
                    lines += ["", f"Attributes: {shown}"]
            else:
                lines.append(f"Not found after {f.get('searches', 3)} searches.")
            lines.append("")
    if checklist:
        lines += ["## Checklist", "", "| priority | due | owner | action | sources |",
                  "| --- | --- | --- | --- | --- |"]
        for item in checklist.get("items", []):
            lines.append(f"| {item['priority']} | {item['due'].replace('_', ' ')} | {item['owner_role']} "
                         f"| {_cell(item['action'])} | {', '.join(item['source_refs'])} |")
        lines.append("")
    signoff = state.get("signoff")
    if signoff:
        who = signoff.get("decided_by") or "reviewer"
        note = f": {signoff['note']}" if signoff.get("note") else ""
        lines += ["## Sign-off", "", f"- {signoff.get('decision')} by {who}{note}", ""]
    return "\n".join(lines).rstrip() + "\n"


def _provenance(clauses: Mapping[str, Any]) -> list[str]:
    """Which strategies gave the findings and which model steps fell back to the rules."""
    fallbacks = clauses.get("fallbacks") or []
    if not fallbacks and not clauses.get("strategies"):
        return []
    lines = [f"Findings by: {', '.join(clauses.get('strategies') or ['rules'])}."]
    lines += [f"- Search {f.get('step')}: the model's answer was not used ({f.get('code')}: "
              f"{_md(str(f.get('message') or ''))}); the rules answered." for f in fallbacks]
    return [*lines, ""]


def _method(finding: Mapping[str, Any]) -> str:
    """How a finding was found, for its header line ("" when the classifier did not judge it).

    E.g. ``" · found by the classifier alone (classifier score 0.83)"``.
    """
    method = finding.get("method")
    if not method:
        return ""
    wording = {"classifier": "found by the classifier alone",
               "patterns, doubted": "patterns (the classifier doubts it)"}.get(method, method)
    return f" · {wording} (classifier score {finding.get('classifier_score')})"


def _label(clause_type: str) -> str:
    return str(CLAUSE_TYPES.get(clause_type, {}).get("label", clause_type))


def _refs(refs: list[str]) -> str:
    return f"[{', '.join(refs)}]" if refs else ""


def _md(text: str) -> str:
    return " ".join(text.split()) if "\n" in text else text


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _split(jurisdiction: Mapping[str, Any]) -> str:
    """A split governing law, each condition with its laws as written."""
    parts = []
    for cond in jurisdiction["split"]:
        laws = ", ".join(law["name"] or f"“{law['text']}” (no place named)"
                         for law in cond["laws"])
        parts.append(f"if acquired in {cond['where']}: {laws}")
    return "split by where the licence was acquired — " + "; ".join(parts)


def _attributes(attrs: Mapping[str, Any]) -> str:
    parts = []
    for key, value in attrs.items():
        if value in (None, False, [], {}):
            continue
        if isinstance(value, dict) and value.get("split"):
            value = _split(value)
        elif isinstance(value, dict):
            name = value.get("name") or value.get("text")
            others = [law["name"] for law in value.get("laws", []) if law["name"] != name]
            value = f"{name} (the section also names the law of {', '.join(others)})" if others else name
        parts.append(f"{key.replace('_', ' ')}: {value}")
    return "; ".join(parts)
