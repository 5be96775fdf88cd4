"""A run's LLM budget and its one stop: what stops a node, and what an approval must raise it to.

A run has one budget stop, the graph runtime's (:class:`workflows.budget.BudgetGate`,
approval payload ``kind: llm_budget``). A node raises :class:`BudgetStop` before a chat-model
call the run cannot afford: the runtime's guard does once the metered spend has passed the
budget, and a pipeline may do it earlier, when its own pre-call estimate says the call
would pass it (document intake does). The segment stops there, a reviewer raises the
budget or ends the run, and the stopped node runs again from its start under the new
budget (:func:`run_budget`). The checks here are pure (they run in update validators).
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from typing import Any

from overseer.pipelines import DecisionRefusedError


class BudgetStop(RuntimeError):  # noqa: N818 - a stop, not a failure
    """Raised in a node instead of a chat-model call the run's LLM budget cannot pay for.

    A ``RuntimeError``, so LangGraph's default retry policy does not retry it; the segment
    ends with status ``budget`` and the run waits for a reviewer.

    Args:
        node: the node (or subgraph path) whose call was not made.
        blocked: for a stop before the spend has passed the budget (a pipeline's pre-call
            estimate), ``{spent_usd, spent_tokens, estimate_usd, estimate_tokens, model?}``
            as :func:`overseer.runtime.llm.call_json` measured them; None for the runtime's guard.
    """

    def __init__(self, node: str | None, blocked: Mapping[str, Any] | None = None) -> None:
        self.node = node
        self.blocked = dict(blocked) if blocked is not None else None
        super().__init__(f"LLM budget reached before a chat-model call in {node or 'a node'}")


_run_budget: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "overseer_run_budget", default=None)


def run_budget() -> dict[str, Any] | None:
    """The run's LLM budget ``{"usd", "tokens"}`` as its workflow keeps it, or None.

    Inside a segment of a run that has a budget: the options' ``llm_budget_usd`` /
    ``llm_budget_tokens``, raised by every approved budget stop since (a None entry is not
    limited). None outside a segment, or for a run without a budget.
    """
    return _run_budget.get()


def set_run_budget(budget: Mapping[str, Any] | None) -> contextvars.Token[dict[str, Any] | None]:
    """Make ``budget`` the :func:`run_budget` of the current context (a segment sets it)."""
    return _run_budget.set(dict(budget) if budget is not None else None)


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
