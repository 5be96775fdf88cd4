"""What a run's approvals take: its pipeline's decisions and rules, and what ``interrupt()`` returns.

:class:`PipelineDecisions` is the run's :class:`workflows.approval.DecisionPolicy`: an
interrupt's approval takes the pipeline's decision kinds and passes its
``check_decision`` (pure; it runs in the update validator); the run's LLM budget stop takes
``approve`` (with a budget high enough) or ``reject``. :func:`question` turns an interrupt
into its approval's payload and :func:`answer` a decision into what ``interrupt()``
returns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from overseer.run_types import DecisionInput
from workflows.budget import BUDGET_KEYS, LLM_BUDGET_KIND
from workflows.run_state import Approval

with workflow.unsafe.imports_passed_through():
    from overseer.budget import check_budget_decision
    from overseer.graph_codec import to_jsonable
    from overseer.pipelines import DecisionRefusedError, Pipeline


class PipelineDecisions:
    """The pipeline's decisions and its own refusal rules, and the budget stop's (pure)."""

    def __init__(self, spec: Pipeline, values: Callable[[], Any]) -> None:
        """``values()`` is the graph's state at the pause (what ``check_decision`` may read)."""
        self._spec, self._values = spec, values

    def decisions(self, approval: Approval) -> tuple[str, ...]:
        """Decision kinds ``approval`` accepts (the pipeline's; a budget stop's approve/reject)."""
        if approval.payload.get("kind") == LLM_BUDGET_KIND:
            return ("approve", "reject")
        return self._spec.gate.decisions

    def check_decision(self, decision: DecisionInput, approval: Approval) -> dict[str, Any]:
        """The decision as the run takes it, after the pipeline's own rules (pure; runs in the validator).

        Raises:
            ApplicationError: a budget approval below the spend (``budget_too_low`` …); the
                pipeline's own code (``DecisionRefusedError``) otherwise.
        """
        payload = approval.payload
        if payload.get("kind") == LLM_BUDGET_KIND:
            if decision.decision == "approve":  # the runtime's own budget stop: raise it
                try:
                    check_budget_decision({"budget_usd": decision.budget_usd,
                                           "budget_tokens": decision.budget_tokens},
                                          payload["budget"])
                except DecisionRefusedError as err:
                    raise ApplicationError(err.message, err.details, type=err.code) from err
            return {"updates": {}, **{k: getattr(decision, k) for k in BUDGET_KEYS
                                      if getattr(decision, k) is not None}}
        checked = {"decision": decision.decision, "note": decision.note,
                   "updates": dict(decision.updates or {}), "resume": decision.resume,
                   "decided_by": decision.decided_by, "apply_proposal": decision.apply_proposal,
                   "budget_usd": decision.budget_usd, "budget_tokens": decision.budget_tokens}
        try:
            checked = self._spec.checked_decision(payload, checked, self._values() or {})
        except DecisionRefusedError as err:
            raise ApplicationError(err.message, err.details, type=err.code) from err
        return {"updates": checked["updates"], "resume": checked["resume"],
                **{k: checked[k] for k in BUDGET_KEYS if checked.get(k) is not None},
                **({"raw": True} if decision.raw_resume else {}),
                **({"more_resumes": dict(decision.more_resumes)}
                   if decision.more_resumes else {})}


def question(interrupt: Any, ids: list[str]) -> dict[str, Any]:
    """An interrupt's approval payload: its value (a dict as is) plus the runtime's keys.

    Args:
        interrupt: ``.id`` and ``.value`` of a pending interrupt.
        ids: the ids of every interrupt pending with it.
    """
    value = to_jsonable(interrupt.value)
    payload = dict(value) if isinstance(value, dict) else {"value": value}
    payload.update({"interrupt_id": interrupt.id, "pending_interrupts": list(ids)})
    return payload


def answer(decision: dict[str, Any]) -> Any:
    """What ``interrupt()`` returns for a decision: its ``resume`` as sent, else the wrapper.

    The wrapper is ``{"decision", "note", "updates", "resume": None, "decided_by"}`` plus a
    budget stop's new budgets.
    """
    if decision.get("raw") or decision.get("resume") is not None:
        return decision.get("resume")
    out = {"decision": decision["decision"], "note": decision.get("note"),
           "updates": decision.get("updates") or {}, "resume": decision.get("resume"),
           "decided_by": decision.get("decided_by")}
    out.update({k: decision[k] for k in BUDGET_KEYS if decision.get(k) is not None})
    return out
