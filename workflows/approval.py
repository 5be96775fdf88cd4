"""The shared human-approval gate: Updates with validators, a signal twin, an escalation ladder.

A pipeline workflow subclasses :class:`ApprovalGate`, implements
:meth:`ApprovalGate.check_decision` (pipeline-specific validation, pure) and calls
:meth:`ApprovalGate.request_approval` when its graph interrupts. The first valid
decision wins; invalid ones are refused by the validator before they touch history.

Reviewers ``claim`` an approval (so two people don't work the same item), ``release``
it, or ``reassign`` it; while it is claimed only the claimant (or an admin) may decide.

Nothing waits unseen: an :class:`EscalationLadder` of durable timers records
``approval.reminded`` (and calls a webhook), ``approval.reassigned`` to an escalation
group, ``approval.sla_breached``, and finally applies a configured default
(``keep_waiting``, ``auto_reject``, or ``auto_approve`` only when the proposal
validates) as ``approval.auto_decided``. Every rung is an event with its reason.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from overseer.run_types import (  # the gate's update arguments, wire types of the core
    PIPELINE_ATTRIBUTE,
    STATUS_ATTRIBUTE,
    ClaimInput,
    DecisionInput,
    ReassignInput,
)

with workflow.unsafe.imports_passed_through():
    from activities.events import record_events
    from activities.notify import notify_webhook
    from overseer.store.events import (
        APPROVAL_AUTO_DECIDED,
        APPROVAL_CLAIMED,
        APPROVAL_DECIDED,
        APPROVAL_REASSIGNED,
        APPROVAL_RELEASED,
        APPROVAL_REMINDED,
        APPROVAL_REQUESTED,
        APPROVAL_SLA_BREACHED,
        TERMINAL_STATUSES,
    )

DECISIONS = ("approve", "reject")
LADDER_PATCH = "approval-escalation-ladder"
"""Deprecated patch id (every run climbs the escalation ladder): histories recorded with its
marker replay. Remove once none does."""

EVENT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=0,  # the event log must eventually be written: retry until Postgres is back
)


@dataclass(frozen=True)
class EscalationLadder:
    """When each rung fires, in seconds after the request (None = rung off).

    Attributes:
        remind_after_seconds: T1: ``approval.reminded`` (+ webhook when ``webhook_url``).
        reassign_after_seconds: T2: ``approval.reassigned`` to ``reassign_to_group``.
        sla_seconds: ``approval.sla_breached``; the request stays open.
        final_after_seconds: T3: apply ``final_action``.
        final_action: ``keep_waiting`` | ``auto_reject`` | ``auto_approve`` (only when the
            pending proposal validates; otherwise it keeps waiting, recorded).
        reassign_to_group: the escalation group.
        webhook_url: POSTed ``{run_id, pipeline, rung, …}`` on each rung, when set.
        final_resume: the ``resume`` an ``auto_approve``/``auto_reject`` hands the graph
            (``interrupt()`` returns it as given, as from a reviewer); None for none.
    """

    remind_after_seconds: float | None = 24 * 3600
    reassign_after_seconds: float | None = 48 * 3600
    sla_seconds: float | None = 72 * 3600
    final_after_seconds: float | None = 7 * 24 * 3600
    final_action: str = "keep_waiting"
    reassign_to_group: str = "escalations"
    webhook_url: str | None = None
    final_resume: Any = None

    FINAL_ACTIONS = ("keep_waiting", "auto_reject", "auto_approve")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> EscalationLadder:
        """The ladder in a run's options (``options["approval"]``), defaults elsewhere."""
        raw = dict(options.get("approval") or {})
        if "approval_sla_seconds" in options and "sla_seconds" not in raw:
            raw["sla_seconds"] = options["approval_sla_seconds"]
        known = {k: raw[k] for k in raw if k in cls.__dataclass_fields__}
        ladder = cls(**known)
        if ladder.final_action not in cls.FINAL_ACTIONS:
            raise ValueError(f"final_action must be one of {cls.FINAL_ACTIONS}")
        return ladder

    def rungs(self) -> list[tuple[float, str]]:
        """``(seconds after the request, rung)`` in firing order."""
        rungs = [(self.remind_after_seconds, "remind"), (self.reassign_after_seconds, "reassign"),
                 (self.sla_seconds, "sla_breach"), (self.final_after_seconds, "final")]
        return sorted((float(at), name) for at, name in rungs if at is not None)


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
        self._claim: dict[str, Any] | None = None
        self._group: str | None = None
        self._approval_key = ""
        self._handing_over = False
        """The run continues as new: a ``decide`` waiting for the next state answers now."""

    # -- to implement ------------------------------------------------------------------------

    def decisions(self) -> tuple[str, ...]:
        """The decision kinds this workflow's approvals take (``approve``/``reject`` by default)."""
        return DECISIONS

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
        """Apply a decision; answers once the run has reached its next state.

        Or with ``running``, when the run continues as new before it got there (the new
        run reaches it).
        """
        async with self._lock:
            self._accept(decision)
            seq = self._approval_seq
        await workflow.wait_condition(
            lambda: self._status in TERMINAL_STATUSES or self._handing_over
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
        """Current status and the open approval (with its claim), if any."""
        approval = None if self._approval is None else {
            **self._approval, "claimed_by": (self._claim or {}).get("by"), "group": self._group}
        return RunStatusView(
            run_id=self._run_id, status=self._status, approval=approval,
            sla_breached=self._sla_breached,
        )

    @workflow.update
    async def claim(self, request: ClaimInput) -> RunStatusView:
        """Claim the open approval for ``request.reviewer`` (idempotent for the claimant)."""
        async with self._lock:
            self._validate_claim(request)
            if (self._claim or {}).get("by") != request.reviewer:
                self._claim = {"by": request.reviewer, "at": workflow.now().isoformat()}
                await self._record_claim(APPROVAL_CLAIMED, {"reviewer": request.reviewer})
        return self.get_status()

    @claim.validator
    def validate_claim(self, request: ClaimInput) -> None:
        """Refuse: nothing open, or claimed by someone else (admins may take it over)."""
        self._validate_claim(request)

    @workflow.update
    async def release(self, request: ClaimInput) -> RunStatusView:
        """Give the claim back to the queue."""
        async with self._lock:
            self._validate_release(request)
            if self._claim is not None:
                self._claim = None
                await self._record_claim(APPROVAL_RELEASED, {"reviewer": request.reviewer})
        return self.get_status()

    @release.validator
    def validate_release(self, request: ClaimInput) -> None:
        """Only the claimant or an admin may release."""
        self._validate_release(request)

    @workflow.update
    async def reassign(self, request: ReassignInput) -> RunStatusView:
        """Hand the approval to another reviewer and/or group."""
        async with self._lock:
            self._validate_reassign(request)
            self._claim = ({"by": request.assignee, "at": workflow.now().isoformat()}
                           if request.assignee else None)
            self._group = request.group or self._group
            await self._record_claim(APPROVAL_REASSIGNED, {
                "by": request.by, "assignee": request.assignee, "group": self._group,
                "reason": "manual"})
        return self.get_status()

    @reassign.validator
    def validate_reassign(self, request: ReassignInput) -> None:
        """Only the claimant (or anyone when unclaimed, or an admin) may reassign."""
        self._validate_reassign(request)

    def _validate_claim(self, request: ClaimInput) -> None:
        self._require_open()
        self._check_claim(request.reviewer, request.is_admin)

    def _validate_release(self, request: ClaimInput) -> None:
        self._require_open()
        self._check_claim(request.reviewer, request.is_admin)

    def _validate_reassign(self, request: ReassignInput) -> None:
        self._require_open()
        self._check_claim(request.by, request.is_admin)
        if not request.assignee and not request.group:
            raise ApplicationError("name an assignee or a group", {}, type="invalid_request")

    async def _record_claim(self, event_type: str, data: dict[str, Any]) -> None:
        self._claim_events = getattr(self, "_claim_events", 0) + 1
        await self.record(event_type, key=f"{event_type}:{self._approval_key}:{self._claim_events}",
                          data=data, actor=f"reviewer:{data.get('reviewer') or data.get('by')}")

    # -- used by the pipeline workflow ----------------------------------------------------------

    async def request_approval(
        self, payload: dict[str, Any], *, sla: timedelta, key: str,
        ladder: EscalationLadder | None = None,
    ) -> dict[str, Any]:
        """Open an approval, wait (durably, days if need be) for the first valid decision.

        Args:
            payload: what the reviewer sees (record, gaps, reasons, proposal).
            sla: time until ``approval.sla_breached`` is recorded; the request stays open after.
            key: logical step key making the events' ids deterministic.
            ladder: the escalation ladder (default: the default ladder with ``sla``).

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
        self._approval_key, self._claim, self._group, self._claim_events = key, None, None, 0
        workflow.deprecate_patch(LADDER_PATCH)  # every run climbs; older markers replay
        await self._climb(ladder or EscalationLadder(sla_seconds=sla.total_seconds()), key)
        decision = self._decision
        assert decision is not None
        await self.record(APPROVAL_DECIDED, key=f"approval.decided:{key}", data=decision,
                          actor=f"reviewer:{decision.get('decided_by')}")
        self._approval, self._claim = None, None
        await self.set_status("running")
        return decision

    async def _climb(self, ladder: EscalationLadder, key: str) -> None:
        """Wait for a decision, firing each rung of the ladder that comes due first."""
        opened = workflow.now()
        for at_seconds, rung in ladder.rungs():
            remaining = (opened + timedelta(seconds=at_seconds) - workflow.now()).total_seconds()
            if remaining > 0:
                try:
                    await workflow.wait_condition(lambda: self._decision is not None,
                                                  timeout=timedelta(seconds=remaining))
                    return
                except TimeoutError:
                    pass
            if self._decision is not None:
                return
            await self._fire(rung, ladder, key, at_seconds)
        await workflow.wait_condition(lambda: self._decision is not None)

    async def _fire(self, rung: str, ladder: EscalationLadder, key: str, at_seconds: float) -> None:
        waited = {"waited_seconds": at_seconds, "claimed_by": (self._claim or {}).get("by")}
        if rung == "remind":
            await self.record(APPROVAL_REMINDED, key=f"approval.reminded:{key}",
                              data={**waited, "reason": "no_decision_after_t1"})
        elif rung == "reassign":
            self._claim, self._group = None, ladder.reassign_to_group
            await self.record(APPROVAL_REASSIGNED, key=f"approval.reassigned:{key}:ladder",
                              data={**waited, "group": self._group, "assignee": None,
                                    "by": "escalation_policy", "reason": "no_decision_after_t2"})
        elif rung == "sla_breach":
            self._sla_breached = True
            await self.record(APPROVAL_SLA_BREACHED, key=f"approval.sla_breached:{key}",
                              data={**waited, "sla_seconds": at_seconds})
        elif rung == "final":
            await self._final_action(ladder, key, waited)
        if ladder.webhook_url:
            await self._notify(ladder.webhook_url, rung, waited)

    async def _final_action(self, ladder: EscalationLadder, key: str,
                            waited: dict[str, Any]) -> None:
        action, result, reason = ladder.final_action, "kept_waiting", "policy_keep_waiting"
        decision: dict[str, Any] | None = None
        if action in ("auto_reject", "auto_approve"):
            candidate = DecisionInput(decision="approve" if action == "auto_approve" else "reject",
                                      decided_by="escalation_policy", is_admin=True,
                                      resume=ladder.final_resume,
                                      note=f"escalation policy {action} after "
                                           f"{waited['waited_seconds']:.0f} s")
            try:
                checked = self._validated(candidate)
                decision = {**checked, "decision": candidate.decision,
                            "decided_by": candidate.decided_by, "note": candidate.note,
                            "decided_at": workflow.now().isoformat()}
                result, reason = candidate.decision, f"policy_{action}"
            except ApplicationError as err:
                reason = f"{action}_refused:{err.type}"
        await self.record(APPROVAL_AUTO_DECIDED, key=f"approval.auto_decided:{key}",
                          data={**waited, "action": action, "result": result, "reason": reason})
        if decision is not None:
            self._decision = decision

    async def _notify(self, url: str, rung: str, waited: dict[str, Any]) -> None:
        try:
            await workflow.execute_activity(
                notify_webhook, args=[url, {"run_id": self._run_id, "pipeline": self._pipeline,
                                            "rung": rung, **waited}],
                start_to_close_timeout=timedelta(seconds=15),
                retry_policy=RetryPolicy(maximum_attempts=3), summary=f"notify {rung}")
        except ActivityError:
            workflow.logger.warning("webhook failed", extra={"rung": rung, "run_id": self._run_id})

    async def record(
        self, event_type: str, *, key: str, data: dict[str, Any], actor: str = "workflow"
    ) -> None:
        """Append one event through the ``record_events`` activity (idempotent by ``key``)."""
        await self.record_batch([{"run_id": self._run_id, "key": key, "type": event_type,
                                  "data": data, "actor": actor,
                                  "occurred_at": workflow.now().isoformat()}], event_type)

    async def record_batch(self, events: list[dict[str, Any]], summary: str,
                           hand_off: dict[str, Any] | None = None) -> Any:
        """Append events (dicts as ``record_events`` takes them) in one call, idempotent by key.

        A local activity (no task-queue round trip). ``hand_off`` (a local activity's
        arguments are not in the history, so adding it replays) hands an Agent Server run's
        thread on with the run's ending or pause.

        Returns:
            ``record_events``' result.
        """
        return await workflow.execute_local_activity(
            record_events, args=[events, hand_off] if hand_off is not None else [events],
            start_to_close_timeout=timedelta(seconds=30), retry_policy=EVENT_RETRY,
            summary=summary)

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
        self._require_open()
        allowed = self.decisions()
        if decision.decision not in allowed:
            raise ApplicationError(
                f"decision must be one of {', '.join(allowed)}",
                {"decision": decision.decision}, type="invalid_decision",
            )
        self._check_claim(decision.decided_by, decision.is_admin)
        return self.check_decision(decision)

    def _require_open(self) -> None:
        if self._approval is None or self._decision is not None:
            raise ApplicationError(
                f"run {self._run_id} is not awaiting approval (status {self._status})",
                {"status": self._status}, type="not_awaiting_approval",
            )

    def _check_claim(self, reviewer: str, is_admin: bool) -> None:
        """While claimed, only the claimant (or an admin) may act on the approval."""
        holder = (self._claim or {}).get("by")
        if holder and holder != reviewer and not is_admin:
            raise ApplicationError(f"the approval is claimed by {holder}",
                                   {"claimed_by": holder}, type="claimed_by_other")

    def _accept(self, decision: DecisionInput) -> None:
        checked = self._validated(decision)
        self._decision = {
            **checked, "decision": decision.decision, "decided_by": decision.decided_by,
            "note": decision.note, "decided_at": workflow.now().isoformat(),
        }
