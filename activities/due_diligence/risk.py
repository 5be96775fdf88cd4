"""Agent 3, risk scoring: findings → risks through the rule table in ``risk_rules.yaml``.

The rules are data (seed 004: "risk rules as data"); this module only evaluates them.
A protective clause that was not found is itself a risk (its ``not_found`` rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

RULES_PATH = Path(__file__).with_name("risk_rules.yaml")
LEVELS = ("high", "medium", "low")
_LEVEL_RANK = {level: i for i, level in enumerate(LEVELS)}


@lru_cache(maxsize=1)
def load_rules(path: str = str(RULES_PATH)) -> tuple[dict[str, Any], ...]:
    """The ordered rule list from the YAML file (cached)."""
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    return tuple(data["rules"])


def score_risks(clauses: Mapping[str, Any],
                rules: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Applies the first matching rule to each finding.

    Args:
        clauses: the ``clauses`` result (``findings`` list).
        rules: override the rule table (tests, playbooks).

    Returns:
        ``{items: [{id, clause_type, level, rule, reason, source_refs}], overall,
        counts: {high, medium, low}, strategy}``; items sorted high → low. A document that
        is not an agreement gets no items and ``overall: "none"``.
    """
    rules = list(rules if rules is not None else load_rules())
    items: list[dict[str, Any]] = []
    for finding in clauses.get("findings", []):
        rule = next((r for r in rules if r["clause_type"] == finding["clause_type"]
                     and _matches(r.get("when", {}), finding)), None)
        if rule is None:
            continue
        items.append({
            "id": f"risk:{rule['id']}",
            "clause_type": finding["clause_type"],
            "level": rule["level"],
            "rule": rule["id"],
            "reason": rule["reason"],
            "status": finding["status"],
            "source_refs": [finding["id"]],
        })
    items.sort(key=lambda i: (_LEVEL_RANK[i["level"]], i["clause_type"]))
    counts = {level: sum(1 for i in items if i["level"] == level) for level in LEVELS}
    overall = next((level for level in LEVELS if counts[level]), "none")
    return {"items": items, "overall": overall, "counts": counts, "strategy": "rules"}


def rule_by_id(rule_id: str) -> Mapping[str, Any] | None:
    """A rule of the default table by id."""
    return next((r for r in load_rules() if r["id"] == rule_id), None)


def _matches(when: Mapping[str, Any], finding: Mapping[str, Any]) -> bool:
    attrs = finding.get("attributes") or {}
    if "status" in when and finding["status"] != when["status"]:
        return False
    if any(attrs.get(name) is not True for name in when.get("attribute_true", [])):
        return False
    if any(attrs.get(name) is not False for name in when.get("attribute_false", [])):
        return False
    if any(attrs.get(name) is not None for name in when.get("attribute_missing", [])):
        return False
    if any(attrs.get(name) is None for name in when.get("attribute_present", [])):
        return False
    return all(attrs.get(name) in values for name, values in when.get("attribute_in", {}).items())
