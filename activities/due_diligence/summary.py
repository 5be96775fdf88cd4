"""Agent 4, summary: an extractive summary whose every sentence cites its sources.

Offline the summary is built from the findings themselves: one overview line (counts,
citing the risk items) and then, most serious risk first, the verbatim quote of each
clause behind a high or medium risk, citing that finding. Nothing is paraphrased, so
nothing can be invented.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.due_diligence.clause_types import CLAUSE_TYPES

MAX_QUOTE_CHARS = 400


def summarise(clauses: Mapping[str, Any], risks: Mapping[str, Any], *,
              max_sentences: int = 8) -> dict[str, Any]:
    """Builds the summary.

    Returns:
        ``{text, sentences: [{text, kind: overview|quote|gap, source_refs}], strategy}``;
        ``quote`` sentences are verbatim slices of the agreement (``source_refs`` name the
        finding, whose offsets locate it).
    """
    findings = {f["id"]: f for f in clauses.get("findings", [])}
    if not clauses.get("is_agreement", True) or not findings:
        line = "The document does not read as an agreement; no clauses were extracted."
        return {"text": line, "sentences": [{"text": line, "kind": "overview", "source_refs": []}],
                "strategy": "rules"}
    items = list(risks.get("items", []))
    counts = risks.get("counts", {})
    found = [f for f in findings.values() if f["status"] == "found"]
    overview = (f"{len(found)} of {len(findings)} clause types found; risks: "
                f"{counts.get('high', 0)} high, {counts.get('medium', 0)} medium, "
                f"{counts.get('low', 0)} low (overall {risks.get('overall', 'none')}).")
    sentences: list[dict[str, Any]] = [
        {"text": overview, "kind": "overview", "source_refs": [i["id"] for i in items]}]
    for item in items:
        if len(sentences) > max_sentences or item["level"] == "low":
            continue
        finding = findings.get(item["source_refs"][0]) if item["source_refs"] else None
        label = CLAUSE_TYPES[item["clause_type"]]["label"]
        if finding and finding["status"] == "found":
            quote = finding["quote"]
            if len(quote) > MAX_QUOTE_CHARS:
                continue_at = quote.rfind(" ", 0, MAX_QUOTE_CHARS)
                quote = quote[:continue_at if continue_at > 0 else MAX_QUOTE_CHARS] + " …"
            sentences.append({"text": f"{label} (p. {finding['page']}): “{quote}”", "kind": "quote",
                              "source_refs": [finding["id"], item["id"]]})
        else:
            sentences.append({"text": f"{label}: not found — {item['reason']}", "kind": "gap",
                              "source_refs": [item["id"]] + list(item["source_refs"])})
    return {"text": "\n".join(s["text"] for s in sentences), "sentences": sentences,
            "strategy": "rules"}
