"""Request and response models of the HTTP API."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ApprovalView(BaseModel):
    """An approval request and, once decided, its decision.

    A run has one approval per question it asked: each pending interrupt of its graph (so
    parallel interrupts are parallel approvals) and each LLM budget stop.
    """

    run_id: str
    interrupt_id: str | None = Field(
        default=None, description="the LangGraph interrupt this approval answers; name it to "
        "decide, claim, release or reassign this approval of the run")
    approval_key: str = Field(default="", description="the approval's key within its run "
                              "(<round>:<interrupt id>, budget:<n>)")
    pipeline: str
    status: str
    reason_codes: list[str]
    payload: dict[str, Any]
    requested_at: str
    sla_deadline: str | None
    sla_breached: bool
    decision: str | None = None
    decided_by: str | None = None
    decided_at: str | None = None
    note: str | None = None
    assigned_to: str | None = None
    assigned_group: str | None = None
    claimed_at: str | None = None
    reminded_at: str | None = None
    escalation_level: int = Field(
        default=0, description="0 none, 1 reminded, 2 reassigned by the ladder, 3 final action")
    auto_action: str | None = None
    age_seconds: float = 0.0


class RunView(BaseModel):
    """A run as the read model knows it."""

    run_id: str
    pipeline: str
    workflow_id: str
    status: str
    parent_run_id: str | None
    submitted_by: str | None
    created_at: str
    updated_at: str
    trace_id: str | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    pending_approval: ApprovalView | None = Field(
        default=None, description="the oldest of pending_approvals (the one a decision naming "
        "no interrupt answers)")
    pending_approvals: list[ApprovalView] = Field(
        default_factory=list, description="every approval of the run waiting for a decision, "
        "oldest first: one per pending interrupt")
    children: list[dict[str, Any]] = Field(default_factory=list)
    llm_usage: dict[str, Any] | None = Field(
        default=None, description="LLM calls, tokens and cost: total, by_node, by_model")
    links: dict[str, str] = Field(default_factory=dict)


class RunList(BaseModel):
    """A page of runs, newest first."""

    items: list[RunView]


class EventView(BaseModel):
    """One audit event."""

    seq: int
    event_id: str
    type: str
    data: dict[str, Any]
    actor: str
    occurred_at: str
    trace_id: str | None


class EventList(BaseModel):
    """A run's audit events in append order."""

    run_id: str
    items: list[EventView]


class DecisionRequest(BaseModel):
    """A reviewer's decision on an escalated run."""

    decision: str = Field(
        min_length=1, max_length=40, pattern=r"^[a-z][a-z_]*$",
        description="approve or reject; a pipeline may take more kinds (e.g. revise)")
    updates: dict[str, Any] | None = Field(
        default=None, description="Edits; on approve they must validate (the pipeline's rules)."
    )
    resume: Any = Field(default=None, description="Any JSON value: the graph's interrupt() "
                                                  "returns it exactly as sent (without one, "
                                                  "interrupt() gets {decision, note, updates, "
                                                  "resume, decided_by}).")
    note: str | None = Field(default=None, max_length=2000)
    apply_proposal: bool = Field(
        default=True, description="On approve, apply the review agent's proposal first."
    )
    budget_usd: float | None = Field(default=None, ge=0,
                                     description="Approving a budget stop: the new LLM cost budget.")
    budget_tokens: int | None = Field(default=None, ge=0,
                                      description="Approving a budget stop: the new token budget.")
    interrupt_id: str | None = Field(
        default=None, max_length=200,
        description="The approval of the run to decide (its interrupt_id); the oldest "
                    "pending one when absent. 409 not_awaiting_approval when that interrupt "
                    "is not waiting (answered already, or not this run's).")


class ReassignRequest(BaseModel):
    """Hand an approval to a reviewer and/or a group."""

    assignee: str | None = Field(default=None, max_length=200)
    group: str | None = Field(default=None, max_length=200)
    interrupt_id: str | None = Field(
        default=None, max_length=200,
        description="the approval of the run to reassign (its interrupt); the oldest pending "
        "one when absent")


class ClaimRequest(BaseModel):
    """Which of a run's approvals to claim or release (optional body)."""

    interrupt_id: str | None = Field(
        default=None, max_length=200,
        description="the approval of the run (its interrupt); the oldest pending one when "
        "absent")


class DecisionResponse(BaseModel):
    """The run's status after the decision took effect."""

    run_id: str
    status: str
    outcome: str | None


class PipelineView(BaseModel):
    """A catalogue entry."""

    name: str
    workflow_type: str
    seed: str
    description: str
    accepts: list[str]
    human_gate: str
    links: dict[str, str]


class Health(BaseModel):
    """Liveness / readiness answer."""

    status: str
    checks: dict[str, str] = Field(default_factory=dict)
