"""What produced a due_diligence result: strategies and model fallbacks.

A finding's ``strategy`` is that of its quote: ``llm:<model>`` for a quote the clause agent
proposed and verification accepted, ``rules`` for the offline search's. The labels here are
derived from the findings, never from the model that was configured, so a model that
contributed nothing (every call failed, every reply was prose, every quote was rejected)
leaves ``rules`` everywhere. Pure functions: :func:`run_result` runs in the workflow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

RULES = "rules"


def strategies_of(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The strategies whose quotes became found findings.

    Returns:
        ``["rules"]`` (also when nothing was found), ``["rules", "llm:<model>"]`` when
        mixed, ``["llm:<model>"]`` when every found finding is the model's.
    """
    used = {str(f.get("strategy") or RULES) for f in findings if f.get("status") == "found"}
    if not used:
        return [RULES]
    return [*([RULES] if RULES in used else []), *sorted(used - {RULES})]


def run_result(state: Mapping[str, Any]) -> dict[str, Any]:
    """The run's result (``Pipeline.run.result``): the final state plus how it was produced.

    Returns:
        ``{output: state, strategies, fallbacks}``: ``strategies`` is ``rules`` (risks,
        summary and checklist are always the rules', and so is every finding the model did
        not give) followed by each model that gave a verified finding; ``fallbacks`` lists
        the search steps whose model agent ended early ``{step, node, clause_types, code,
        message}`` (the rules answered for them). Both are also in the run's final event.
    """
    clauses = state.get("clauses") or {}
    found = [f for f in clauses.get("findings") or [] if f.get("status") == "found"]
    models = [name for name in strategies_of(found) if name != RULES]
    return {"output": dict(state), "strategies": [RULES, *models],
            "fallbacks": list(clauses.get("fallbacks") or [])}
