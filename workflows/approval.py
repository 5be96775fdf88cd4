"""The shared human-approval gate (DESIGN §4): an Update with a validator, a signal twin, an SLA timer.

A pipeline workflow subclasses :class:`ApprovalGate`, implements
:meth:`ApprovalGate.check_decision` (pipeline-specific validation, pure) and calls
:meth:`ApprovalGate.request_approval` when its graph interrupts. The first valid
decision wins; invalid ones are refused by the validator before they touch history.
When the SLA timer fires, ``approval.sla_breached`` is recorded and the request stays open.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from workflows.task_queues import PIPELINE_ATTRIBUTE, STATUS_ATTRIBUTE

with workflow.unsafe.imports_passed_through():
    from activities.events import record_events
    from overseer.store.events import (
        APPROVAL_DECIDED,
        APPROVAL_REQUESTED,
        APPROVAL_SLA_BREACHED,
        TERMINAL_STATUSES,
    )

DECISIONS = ("approve", "reject")

EVENT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=0,  # the event log must eventually be written: retry until Postgres is back
)


@dataclass
class DecisionInput:
    """A reviewer's decision, sent as the ``decide`` update or the ``submit_decision`` signal.

    Attributes:
        decision: ``approve`` or ``reject``.
        updates: field edits (applied over the pending proposal when ``apply_proposal``).
        note: free-text reason, kept in the event log.
        decided_by: the reviewer's subject (set by the admin API from the token).
        apply_proposal: on approve, apply the review agent's proposal before the edits.
        budget_usd: on approving a budget stop, the run's new LLM cost budget.
        budget_tokens: on approving a budget stop, the run's new LLM token budget.
    """

    decision: str
    updates: dict[str, Any] | None = None
    note: str | None = None
    decided_by: str = "unknown"
    apply_proposal: bool = True
    budget_usd: float | None = None
    budget_tokens: int | None = None


@dataclass
class DecisionResult:
    """What the ``decide`` update answers once the run has moved on: its new status."""

    run_id: str
    status: str
    outcome: str | None = None


@dataclass
class RunStatusView:
    """The ``get_status`` query's answer."""

    run_id: str
    status: str
    approval: dict[str, Any] | None = None
    sla_breached: bool = False
    extras: dict[str, Any] = field(default_factory=dict)


class ApprovalGate:
    """Mixin state and handlers for one open approval at a time (decide/submit_decision/get_status)."""

    def __init__(self) -> None:
        self._run_id = ""
        self._pipeline = ""
        self._status = "running"
        self._outcome: str | None = None
        self._approval: dict[str, Any] | None = None
        self._approval_seq = 0
        self._decision: dict[str, Any] | None = None
        self._sla_breached = False
        self._use_search_attributes = True
        self._lock = asyncio.Lock()

    # -- to implement ------------------------------------------------------------------------

    def check_decision(self, decision: DecisionInput) -> dict[str, Any]:
        """Validate a decision against the open approval; return the normalised decision dict.

        Must be pure and deterministic (it runs in the update validator and the handler).

        Raises:
            ApplicationError: ``type="invalid_field_edits"`` (or another stable code) with
                details, refusing the decision.
        """
        raise NotImplementedError

    # -- handlers ------------------------------------------------------------------------------

    @workflow.update
    async def decide(self, decision: DecisionInput) -> DecisionResult:
        """Apply a decision; answers once the run has reached its next state."""
        async with self._lock:
            self._accept(decision)
            seq = self._approval_seq
        await workflow.wait_condition(
            lambda: self._status in TERMINAL_STATUSES
            or (self._approval is not None and self._approval_seq != seq)
        )
        return DecisionResult(run_id=self._run_id, status=self._status, outcome=self._outcome)

    @decide.validator
    def validate_decide(self, decision: DecisionInput) -> None:
        """Refuse before history: no open approval, unknown decision, invalid field edits."""
        self._validated(decision)

    @workflow.signal
    def submit_decision(self, decision: DecisionInput) -> None:
        """Signal twin of ``decide`` for the Temporal UI/CLI; an invalid decision is logged and dropped."""
        try:
            self._accept(decision)
        except ApplicationError as err:
            workflow.logger.warning(
                "decision signal refused", extra={"code": err.type, "run_id": self._run_id}
            )

    @workflow.query
    def get_status(self) -> RunStatusView:
        """Current status and the open approval, if any."""
        return RunStatusView(
            run_id=self._run_id, status=self._status, approval=self._approval,
            sla_breached=self._sla_breached,
        )

    # -- used by the pipeline workflow ----------------------------------------------------------

    async def request_approval(
        self, payload: dict[str, Any], *, sla: timedelta, key: str
    ) -> dict[str, Any]:
        """Open an approval, wait (durably, days if need be) for the first valid decision.

        Args:
            payload: what the reviewer sees (record, gaps, reasons, proposal).
            sla: time until ``approval.sla_breached`` is recorded; the request stays open after.
            key: logical step key making the events' ids deterministic.

        Returns:
            The normalised decision dict from :meth:`check_decision` plus ``decided_by``/``note``.
        """
        now = workflow.now()
        self._approval_seq += 1
        self._decision = None
        self._approval = {"payload": payload, "requested_at": now.isoformat(),
                          "sla_deadline": (now + sla).isoformat()}
        await self.record(
            APPROVAL_REQUESTED, key=f"approval.requested:{key}",
            data={"pipeline": self._pipeline, "payload": payload,
                  "reason_codes": payload.get("review_reason_codes", []),
                  "sla_deadline": self._approval["sla_deadline"]},
        )
        await self.set_status("awaiting_approval")
        try:
            await workflow.wait_condition(lambda: self._decision is not None, timeout=sla)
        except TimeoutError:
            self._sla_breached = True
            await self.record(APPROVAL_SLA_BREACHED, key=f"approval.sla_breached:{key}",
                              data={"sla_seconds": sla.total_seconds()})
            await workflow.wait_condition(lambda: self._decision is not None)
        decision = self._decision
        assert decision is not None
        await self.record(APPROVAL_DECIDED, key=f"approval.decided:{key}", data=decision,
                          actor=f"reviewer:{decision.get('decided_by')}")
        self._approval = None
        await self.set_status("running")
        return decision

    async def record(
        self, event_type: str, *, key: str, data: dict[str, Any], actor: str = "workflow"
    ) -> None:
        """Append one event through the ``record_events`` activity (idempotent by ``key``)."""
        await workflow.execute_activity(
            record_events,
            [{"run_id": self._run_id, "key": key, "type": event_type, "data": data,
              "actor": actor, "occurred_at": workflow.now().isoformat()}],
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=EVENT_RETRY,
            summary=event_type,
        )

    async def set_status(self, status: str) -> None:
        """Set the in-memory status and the ``OverseerStatus`` search attribute."""
        self._status = status
        if self._use_search_attributes:
            workflow.upsert_search_attributes([
                PIPELINE_ATTRIBUTE.value_set(self._pipeline),
                STATUS_ATTRIBUTE.value_set(status),
            ])

    # -- internals ----------------------------------------------------------------------------

    def _validated(self, decision: DecisionInput) -> dict[str, Any]:
        if self._approval is None or self._decision is not None:
            raise ApplicationError(
                f"run {self._run_id} is not awaiting approval (status {self._status})",
                {"status": self._status}, type="not_awaiting_approval",
            )
        if decision.decision not in DECISIONS:
            raise ApplicationError(
                f"decision must be one of {', '.join(DECISIONS)}",
                {"decision": decision.decision}, type="invalid_decision",
            )
        return self.check_decision(decision)

    def _accept(self, decision: DecisionInput) -> None:
        checked = self._validated(decision)
        self._decision = {
            **checked, "decision": decision.decision, "decided_by": decision.decided_by,
            "note": decision.note, "decided_at": workflow.now().isoformat(),
        }
