"""A run's LLM budget: what a budget stop's approval must raise it to (pure; runs in validators).

Two gates use it: the graph runtime's own (every chat-model call of any graph is metered,
and the run stops for an approval before its next chat-model call once the spend reaches
the budget: :class:`workflows.run_base.RunWorkflowBase`) and a pipeline's own pre-call gate
(e.g. a ``budget_gate`` node that asks before a call it estimates too costly).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from overseer.pipelines import DecisionRefusedError


def check_budget_decision(decision: Mapping[str, Any], blocked: Mapping[str, Any]) -> None:
    """Approving a budget stop must raise a budget above what the run has spent plus the call.

    Args:
        decision: ``{decision, budget_usd?, budget_tokens?}``.
        blocked: the stop's ``{spent_usd, spent_tokens, estimate_usd?, estimate_tokens?,
            budget_usd, budget_tokens}`` (a budget of None is not limited).

    Raises:
        DecisionRefusedError: ``invalid_budget`` when a limited budget is not raised to at
            least the spend so far plus the next call's estimate.
    """
    need_usd = float(blocked.get("spent_usd") or 0) + float(blocked.get("estimate_usd") or 0)
    need_tokens = int(blocked.get("spent_tokens") or 0) + int(blocked.get("estimate_tokens") or 0)
    budget_usd, budget_tokens = decision.get("budget_usd"), decision.get("budget_tokens")
    if blocked.get("budget_usd") is not None and not (
            budget_usd is not None and budget_usd >= need_usd):
        raise DecisionRefusedError("budget_usd must cover the spend so far and the next call",
                                   code="invalid_budget",
                                   details={"needed_usd": round(need_usd, 6)})
    if blocked.get("budget_tokens") is not None and not (
            budget_tokens is not None and budget_tokens >= need_tokens):
        raise DecisionRefusedError("budget_tokens must cover the spend so far and the next call",
                                   code="invalid_budget", details={"needed_tokens": need_tokens})


def over_budget(spent: Mapping[str, Any], budget: Mapping[str, Any]) -> bool:
    """True when ``spent`` (``{usd, tokens}``) has passed a limited ``budget`` (``{usd, tokens}``)."""
    usd, tokens = budget.get("usd"), budget.get("tokens")
    return (usd is not None and float(spent.get("usd") or 0) > float(usd)) or \
        (tokens is not None and int(spent.get("tokens") or 0) > int(tokens))
