"""Agent 5, checklist: one action per risk, from the rule that raised it.

Items are ``{id, action, priority, owner_role, due, source_refs}`` with ``due`` one of
``before_signing`` | ``before_closing``; ordered by priority, then due date.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.due_diligence.risk import rule_by_id

_PRIORITY = {"high": 0, "medium": 1, "low": 2}
_DUE = {"before_signing": 0, "before_closing": 1}


def build_checklist(clauses: Mapping[str, Any], risks: Mapping[str, Any],
                    summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Turns risks into actions; a non-agreement gets one action (check the upload).

    Returns:
        ``{items: [item], counts: {high, medium, low}, strategy}``.
    """
    items: list[dict[str, Any]] = []
    if not clauses.get("is_agreement", True):
        items.append({"id": "check:not_an_agreement",
                      "action": ("Confirm that the right document was uploaded: "
                                 "it does not read as an agreement."),
                      "priority": "high", "owner_role": "paralegal", "due": "before_signing",
                      "source_refs": []})
    for risk in risks.get("items", []):
        rule = rule_by_id(risk["rule"]) or {}
        items.append({
            "id": f"check:{risk['rule']}",
            "action": rule.get("action", f"Review {risk['clause_type']}"),
            "priority": rule.get("priority", risk["level"]),
            "owner_role": rule.get("owner_role", "legal_counsel"),
            "due": rule.get("due", "before_closing"),
            "source_refs": [risk["id"], *risk["source_refs"]],
        })
    items.sort(key=lambda i: (_PRIORITY.get(i["priority"], 3), _DUE.get(i["due"], 2)))
    counts = {p: sum(1 for i in items if i["priority"] == p) for p in _PRIORITY}
    return {"items": items, "counts": counts, "strategy": "rules"}
