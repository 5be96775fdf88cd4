"""The run's one LLM budget stop: the spend counted per segment, an approval when it passes the budget.

The segments meter every chat-model call and report it (:meth:`BudgetGate.count_usage`).
Once a run's spend passes its budget (``RunSettings.llm_budget_usd`` / ``llm_budget_tokens``),
or a node's own pre-call estimate says its next call would
(:class:`overseer.budget.BudgetStop`), the run stops for an approval (payload ``kind:
llm_budget``): approve with a higher ``budget_usd`` / ``budget_tokens`` to go on, or reject
to end it ``rejected`` / ``budget_denied`` with the state so far
(:meth:`BudgetGate.within_budget`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow

from workflows.approval import ApprovalGate, EscalationLadder
from workflows.run_state import RunState

with workflow.unsafe.imports_passed_through():
    from overseer.budget import over_budget

BUDGET_KEYS = ("budget_usd", "budget_tokens")
"""Decision fields a budget stop's approval carries to the graph (new LLM budgets)."""
LLM_BUDGET_KIND = "llm_budget"
"""``kind`` of the approval payload of the run's LLM budget stop (the only one)."""
BLOCKED_KEYS = ("spent_usd", "spent_tokens", "estimate_usd", "estimate_tokens", "model")
"""What a node's pre-call stop reports (:class:`overseer.budget.BudgetStop`) and its payload shows."""


class BudgetDeniedError(Exception):
    """A reviewer rejected a stop at the run's LLM budget (the run ends ``budget_denied``)."""

    def __init__(self, node: str) -> None:
        super().__init__(f"LLM budget stop before {node} was rejected")
        self.node = node


class BudgetGate:
    """The run's LLM spend against its budget (see the module docstring)."""

    def __init__(self, state: RunState, gate: ApprovalGate, approval: dict[str, Any]) -> None:
        """``approval``: the run's escalation ladder (``RunSettings.approval``), read at each stop."""
        self._state, self._gate, self._approval = state, gate, approval
        self._lock = asyncio.Lock()

    def count_usage(self, usage: dict[str, Any]) -> None:
        """Add a segment's chat-model calls (``cost_usd``, ``input_tokens``, ``output_tokens``, ``calls``)."""
        if usage:
            spent = self._state.spent
            self._state.spent = {
                "usd": spent["usd"] + float(usage.get("cost_usd") or 0),
                "tokens": spent["tokens"] + int(usage.get("input_tokens") or 0)
                + int(usage.get("output_tokens") or 0),
                "calls": spent["calls"] + int(usage.get("calls") or 0)}

    async def within_budget(self, path: str, blocked: dict[str, Any] | None = None) -> None:
        """Before a node runs: stop for an approval once the LLM spend has passed its budget.

        Or before the spend has passed it, when the node stopped on its own pre-call
        estimate (``blocked``: the spend and the call's estimate, as the LLM layer measured
        them, :class:`overseer.budget.BudgetStop`): one stop, then the node runs again
        under the raised budget. Approve with a higher ``budget_usd`` / ``budget_tokens``
        (enough for the spend and, with ``blocked``, the call's estimate) to go on.

        Raises:
            BudgetDeniedError: the reviewer rejected the stop.
        """
        state = self._state
        if blocked is None and not over_budget(state.spent, state.budget):
            return
        async with self._lock:  # parallel branches share one stop
            while blocked is not None or over_budget(state.spent, state.budget):
                state.budget_stops += 1
                budget: dict[str, Any] = {"spent_usd": round(state.spent["usd"], 8),
                                          "spent_tokens": state.spent["tokens"],
                                          "calls": state.spent["calls"]}
                if blocked is not None:  # the LLM layer's own count and the call's estimate;
                    # the budget it checked against is the run's from now on
                    budget.update({k: blocked[k] for k in BLOCKED_KEYS if k in blocked})
                    state.budget = {k: state.budget.get(k) if state.budget.get(k) is not None
                                    else blocked.get(f"budget_{k}") for k in ("usd", "tokens")}
                budget.update(budget_usd=state.budget.get("usd"),
                              budget_tokens=state.budget.get("tokens"))
                payload = {"kind": LLM_BUDGET_KIND, "node": path,
                           "review_reason_codes": ["llm_budget_exceeded"], "budget": budget}
                blocked = None
                ladder = EscalationLadder.from_dict(self._approval)
                decision = await self._gate.request_approval(
                    payload, sla=timedelta(seconds=ladder.sla_seconds or 72 * 3600),
                    key=f"budget:{state.budget_stops}", ladder=ladder)
                if decision["decision"] != "approve":
                    raise BudgetDeniedError(path)
                state.budget = {
                    "usd": decision.get("budget_usd", state.budget.get("usd")),
                    "tokens": decision.get("budget_tokens", state.budget.get("tokens"))}
