"""The shared human-approval gate: decisions with validators, claims, an escalation ladder.

:class:`ApprovalGate` holds a run's open approvals (:class:`workflows.run_state.Approval`,
one per question; several may be open at once, each with its own claim, ladder and
decision). The run's workflow exposes it as Updates with validators (``decide``,
``claim``, ``release``, ``reassign``), a signal twin of ``decide`` and the ``get_status``
query, each a thin handler calling the gate. The first valid decision on an approval wins;
invalid ones are refused by the validator before they touch history. What a decision may
be is the run's :class:`DecisionPolicy` (the pipeline's decisions and its own rules).

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
from datetime import datetime, timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from overseer.run_types import ClaimInput, DecisionInput, ReassignInput
from workflows.recorder import RunRecorder
from workflows.run_state import Approval, RunState

with workflow.unsafe.imports_passed_through():
    from overseer.runtime.notify import notify_webhook
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

LADDER_PATCH = "approval-escalation-ladder"
"""Deprecated patch id (every run climbs the escalation ladder): histories recorded with its
marker replay. Remove once none does."""


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
    def from_dict(cls, approval: dict[str, Any]) -> EscalationLadder:
        """The ladder a run's settings give (``RunSettings.approval``), defaults elsewhere.

        Raises:
            ValueError: an unknown ``final_action``.
        """
        raw = dict(approval)
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
    """The ``get_status`` query's answer.

    ``approval`` is the oldest open approval still waiting for a decision (the one a
    decision naming no interrupt answers); ``approvals`` every open one, oldest first.
    """

    run_id: str
    status: str
    approval: dict[str, Any] | None = None
    sla_breached: bool = False
    extras: dict[str, Any] = field(default_factory=dict)
    approvals: list[dict[str, Any]] = field(default_factory=list)


class DecisionPolicy(Protocol):
    """What decisions an approval takes and the run's own rules for them (pure, deterministic)."""

    def decisions(self, approval: Approval) -> tuple[str, ...]:
        """The decision kinds ``approval`` takes."""
        ...

    def check_decision(self, decision: DecisionInput, approval: Approval) -> dict[str, Any]:
        """Validate a decision against its open approval; return the normalised decision dict.

        Runs in the update validator and again in the handler, so it must be pure.

        Raises:
            ApplicationError: the refusal, with a stable ``type`` and details.
        """
        ...


class ApprovalGate:
    """A run's open approvals: decisions, claims, ladders (see the module docstring).

    A decision, claim, release or reassignment names its approval by ``interrupt_id``;
    without one it acts on the oldest open approval still waiting for a decision.

    Attributes:
        last_note: the latest decision's note (an Agent Server resume waits for its own).
        moving: a decision was taken since the run last paused: it goes on (or is about to).
        handing_over: the run continues as new: a ``decide`` waiting for the next state
            answers now.
        sla_breached: an approval's SLA rung has fired.
    """

    def __init__(self, state: RunState, recorder: RunRecorder, policy: DecisionPolicy) -> None:
        self._state, self._recorder, self._policy = state, recorder, policy
        self.last_note: str | None = None
        self.moving = False
        self.handing_over = False
        self.sla_breached = False
        self._lock = asyncio.Lock()

    # -- what the workflow's handlers call -------------------------------------------------------

    async def decide(self, decision: DecisionInput) -> DecisionResult:
        """Apply a decision; answers once the run has taken it and reached its next state.

        Or with ``running``, when the run continues as new before it got there (the new
        run reaches it).

        Raises:
            ApplicationError: the decision is refused (:meth:`validate_decide`).
        """
        async with self._lock:
            approval = self._accept(decision)
        recorder = self._recorder
        await workflow.wait_condition(
            lambda: recorder.status in TERMINAL_STATUSES or self.handing_over
            or (approval.taken_at is not None and self._state.moves > approval.taken_at)
        )
        return DecisionResult(run_id=recorder.run_id, status=recorder.status,
                              outcome=recorder.outcome)

    def validate_decide(self, decision: DecisionInput) -> None:
        """Refuse before history: no open approval, unknown decision, invalid field edits.

        Raises:
            ApplicationError: ``not_awaiting_approval``, ``invalid_decision``,
                ``claimed_by_other`` or the policy's own code.
        """
        self._validated(decision)

    def submit_decision(self, decision: DecisionInput) -> None:
        """The signal twin of :meth:`decide`: an invalid decision is logged and dropped."""
        try:
            self._accept(decision)
        except ApplicationError as err:
            workflow.logger.warning(
                "decision signal refused", extra={"code": err.type, "run_id": self._recorder.run_id}
            )

    def status_view(self) -> RunStatusView:
        """Current status, the oldest approval waiting for a decision and every open one."""
        waiting = self._waiting()
        return RunStatusView(
            run_id=self._recorder.run_id, status=self._recorder.status,
            approval=waiting[0].view() if waiting else None,
            sla_breached=self.sla_breached, approvals=[a.view() for a in self._state.open],
        )

    async def claim(self, request: ClaimInput) -> RunStatusView:
        """Claim an open approval for ``request.reviewer`` (idempotent for the claimant)."""
        async with self._lock:
            approval = self.validate_claim(request)
            if (approval.claim or {}).get("by") != request.reviewer:
                approval.claim = {"by": request.reviewer, "at": workflow.now().isoformat()}
                await self._record_claim(APPROVAL_CLAIMED, {"reviewer": request.reviewer},
                                         approval)
        return self.status_view()

    async def release(self, request: ClaimInput) -> RunStatusView:
        """Give the claim back to the queue."""
        async with self._lock:
            approval = self.validate_claim(request)
            if approval.claim is not None:
                approval.claim = None
                await self._record_claim(APPROVAL_RELEASED, {"reviewer": request.reviewer},
                                         approval)
        return self.status_view()

    async def reassign(self, request: ReassignInput) -> RunStatusView:
        """Hand the approval to another reviewer and/or group."""
        async with self._lock:
            approval = self.validate_reassign(request)
            approval.claim = ({"by": request.assignee, "at": workflow.now().isoformat()}
                              if request.assignee else None)
            approval.group = request.group or approval.group
            await self._record_claim(APPROVAL_REASSIGNED, {
                "by": request.by, "assignee": request.assignee, "group": approval.group,
                "reason": "manual"}, approval)
        return self.status_view()

    def validate_claim(self, request: ClaimInput) -> Approval:
        """The approval a claim or release names; refused when claimed by someone else.

        Raises:
            ApplicationError: ``not_awaiting_approval`` or ``claimed_by_other``.
        """
        approval = self.target(request.interrupt_id)
        self.check_claim(approval, request.reviewer, request.is_admin)
        return approval

    def validate_reassign(self, request: ReassignInput) -> Approval:
        """The approval a reassignment names: only its claimant (or anyone when unclaimed, or an admin).

        Raises:
            ApplicationError: ``not_awaiting_approval``, ``claimed_by_other`` or
                ``invalid_request`` (neither an assignee nor a group).
        """
        approval = self.target(request.interrupt_id)
        self.check_claim(approval, request.by, request.is_admin)
        if not request.assignee and not request.group:
            raise ApplicationError("name an assignee or a group", {}, type="invalid_request")
        return approval

    async def _record_claim(self, event_type: str, data: dict[str, Any],
                            approval: Approval) -> None:
        approval.claim_events += 1
        await self._recorder.record(
            event_type, key=f"{event_type}:{approval.key}:{approval.claim_events}",
            data={**data, **approval.tags()},
            actor=f"reviewer:{data.get('reviewer') or data.get('by')}")

    # -- what the run calls -------------------------------------------------------------------

    async def open_approvals(self, approvals: list[Approval]) -> None:
        """Record ``approval.requested`` for each (one call) and wait for reviewers.

        Their ladders are climbed by :meth:`climb`; the run takes their decisions with
        :meth:`take_decisions`.
        """
        self._state.moves += 1
        events = [{"run_id": self._recorder.run_id, "key": f"approval.requested:{a.key}",
                   "type": APPROVAL_REQUESTED, "actor": "workflow",
                   "occurred_at": workflow.now().isoformat(),
                   "data": {"pipeline": self._recorder.pipeline, "payload": a.payload,
                            "reason_codes": a.payload.get("review_reason_codes", []),
                            "sla_deadline": a.sla_deadline, **a.tags()}}
                  for a in approvals]
        await self._recorder.record_batch(events, APPROVAL_REQUESTED)
        self._state.open.extend(approvals)
        await self._recorder.set_status("awaiting_approval")
        workflow.deprecate_patch(LADDER_PATCH)  # every run climbs; older markers replay

    def new_approval(self, payload: dict[str, Any], *, sla: timedelta, key: str,
                     interrupt_id: str | None = None) -> Approval:
        """An approval opening now (not yet recorded: :meth:`open_approvals` does)."""
        now = workflow.now()
        return Approval(key=key, payload=payload, requested_at=now.isoformat(),
                        sla_deadline=(now + sla).isoformat(), interrupt_id=interrupt_id)

    async def take_decisions(self, approvals: list[Approval]) -> list[dict[str, Any]]:
        """The run takes the decisions of ``approvals`` (all decided): ``approval.decided`` each.

        They close; the run's status is ``running`` again once no approval is open.

        Returns:
            Their decisions, in the order given.
        """
        events = [{"run_id": self._recorder.run_id, "key": f"approval.decided:{a.key}",
                   "type": APPROVAL_DECIDED, "occurred_at": workflow.now().isoformat(),
                   "data": {**(a.decision or {}), **a.tags()},
                   "actor": f"reviewer:{(a.decision or {}).get('decided_by')}"}
                  for a in approvals]
        await self._recorder.record_batch(events, APPROVAL_DECIDED)
        for approval in approvals:
            approval.taken_at = self._state.moves
        self._state.open = [a for a in self._state.open if all(a is not t for t in approvals)]
        if not self._state.open:
            await self._recorder.set_status("running")
        return [dict(a.decision or {}) for a in approvals]

    async def request_approval(
        self, payload: dict[str, Any], *, sla: timedelta, key: str,
        ladder: EscalationLadder | None = None,
    ) -> dict[str, Any]:
        """Open one approval, wait (durably, days if need be) for the first valid decision.

        Args:
            payload: what the reviewer sees (record, gaps, reasons, proposal).
            sla: time until ``approval.sla_breached`` is recorded; the request stays open after.
            key: logical step key making the events' ids deterministic.
            ladder: the escalation ladder (default: the default ladder with ``sla``).

        Returns:
            The normalised decision dict from the policy plus ``decided_by``/``note``.
        """
        approval = self.new_approval(payload, sla=sla, key=key)
        await self.open_approvals([approval])
        await self.climb(ladder or EscalationLadder(sla_seconds=sla.total_seconds()), approval)
        return (await self.take_decisions([approval]))[0]

    async def climb(self, ladder: EscalationLadder, approval: Approval) -> None:
        """Wait for ``approval``'s decision, firing each rung of the ladder that comes due first.

        Rungs count from the approval's ``requested_at``; a rung already fired (before the
        run continued as new) does not fire again.
        """
        opened = datetime.fromisoformat(approval.requested_at)
        for at_seconds, rung in ladder.rungs():
            if rung in approval.fired:
                continue
            remaining = (opened + timedelta(seconds=at_seconds) - workflow.now()).total_seconds()
            if remaining > 0:
                try:
                    await workflow.wait_condition(lambda: approval.decision is not None,
                                                  timeout=timedelta(seconds=remaining))
                    return
                except TimeoutError:
                    pass
            if approval.decision is not None:
                return
            approval.fired.append(rung)
            await self._fire(rung, ladder, approval, at_seconds)
        await workflow.wait_condition(lambda: approval.decision is not None)

    async def _fire(self, rung: str, ladder: EscalationLadder, approval: Approval,
                    at_seconds: float) -> None:
        key, record = approval.key, self._recorder.record
        waited = {"waited_seconds": at_seconds, "claimed_by": (approval.claim or {}).get("by"),
                  **approval.tags()}
        if rung == "remind":
            await record(APPROVAL_REMINDED, key=f"approval.reminded:{key}",
                         data={**waited, "reason": "no_decision_after_t1"})
        elif rung == "reassign":
            approval.claim, approval.group = None, ladder.reassign_to_group
            await record(APPROVAL_REASSIGNED, key=f"approval.reassigned:{key}:ladder",
                         data={**waited, "group": approval.group, "assignee": None,
                               "by": "escalation_policy", "reason": "no_decision_after_t2"})
        elif rung == "sla_breach":
            approval.sla_breached = self.sla_breached = True
            await record(APPROVAL_SLA_BREACHED, key=f"approval.sla_breached:{key}",
                         data={**waited, "sla_seconds": at_seconds})
        elif rung == "final":
            await self._final_action(ladder, approval, waited)
        if ladder.webhook_url:
            await self._notify(ladder.webhook_url, rung, waited)

    async def _final_action(self, ladder: EscalationLadder, approval: Approval,
                            waited: dict[str, Any]) -> None:
        action, result, reason = ladder.final_action, "kept_waiting", "policy_keep_waiting"
        decision: dict[str, Any] | None = None
        if action in ("auto_reject", "auto_approve"):
            candidate = DecisionInput(decision="approve" if action == "auto_approve" else "reject",
                                      decided_by="escalation_policy", is_admin=True,
                                      resume=ladder.final_resume,
                                      interrupt_id=approval.interrupt_id,
                                      note=f"escalation policy {action} after "
                                           f"{waited['waited_seconds']:.0f} s")
            try:
                _, checked = self._validated(candidate, approval)
                decision = {**checked, "decision": candidate.decision,
                            "decided_by": candidate.decided_by, "note": candidate.note,
                            "decided_at": workflow.now().isoformat()}
                result, reason = candidate.decision, f"policy_{action}"
            except ApplicationError as err:
                reason = f"{action}_refused:{err.type}"
        await self._recorder.record(
            APPROVAL_AUTO_DECIDED, key=f"approval.auto_decided:{approval.key}",
            data={**waited, "action": action, "result": result, "reason": reason})
        if decision is not None:
            approval.decision = decision

    async def _notify(self, url: str, rung: str, waited: dict[str, Any]) -> None:
        run_id = self._recorder.run_id
        try:
            await workflow.execute_activity(
                notify_webhook, args=[url, {"run_id": run_id,
                                            "pipeline": self._recorder.pipeline,
                                            "rung": rung, **waited}],
                start_to_close_timeout=timedelta(seconds=15),
                retry_policy=RetryPolicy(maximum_attempts=3), summary=f"notify {rung}")
        except ActivityError:
            workflow.logger.warning("webhook failed", extra={"rung": rung, "run_id": run_id})

    # -- internals ----------------------------------------------------------------------------

    def _waiting(self) -> list[Approval]:
        """Open approvals still waiting for a decision, oldest first."""
        return [a for a in self._state.open if a.decision is None]

    def target(self, interrupt_id: str | None) -> Approval:
        """The open approval a request names (by interrupt id), or the oldest one waiting.

        Raises:
            ApplicationError: ``not_awaiting_approval``: nothing waits for a decision, or
                the named interrupt is not waiting (answered already, or never this run's).
        """
        waiting = self._waiting()
        run_id = self._recorder.run_id
        if interrupt_id:
            for approval in waiting:
                if approval.interrupt_id == interrupt_id:
                    return approval
            raise ApplicationError(
                f"interrupt {interrupt_id} was already answered or is not pending on run "
                f"{run_id}",
                {"interrupt_id": interrupt_id,
                 "pending": [a.interrupt_id for a in waiting if a.interrupt_id]},
                type="not_awaiting_approval")
        if not waiting:
            raise ApplicationError(
                f"run {run_id} is not awaiting approval (status {self._recorder.status})",
                {"status": self._recorder.status}, type="not_awaiting_approval",
            )
        return waiting[0]

    def _validated(self, decision: DecisionInput,
                   approval: Approval | None = None) -> tuple[Approval, dict[str, Any]]:
        """The approval a decision answers and the decision as the policy normalises it.

        A resume map naming several interrupts (``more_resumes``) needs each of them
        waiting, and not claimed by someone else.

        Raises:
            ApplicationError: the refusal (see :meth:`validate_decide`).
        """
        approval = approval or self.target(decision.interrupt_id)
        allowed = self._policy.decisions(approval)
        if decision.decision not in allowed:
            raise ApplicationError(
                f"decision must be one of {', '.join(allowed)}",
                {"decision": decision.decision}, type="invalid_decision",
            )
        self.check_claim(approval, decision.decided_by, decision.is_admin)
        if approval.interrupt_id is not None:  # a budget stop is never named in a resume map
            for interrupt_id in decision.more_resumes or {}:
                other = self.target(interrupt_id)
                if other is approval:
                    raise ApplicationError(f"interrupt {interrupt_id} is named twice",
                                           {"interrupt_id": interrupt_id},
                                           type="not_awaiting_approval")
                self.check_claim(other, decision.decided_by, decision.is_admin)
        return approval, self._policy.check_decision(decision, approval)

    @staticmethod
    def check_claim(approval: Approval, reviewer: str, is_admin: bool) -> None:
        """While claimed, only the claimant (or an admin) may act on the approval.

        Raises:
            ApplicationError: ``claimed_by_other``.
        """
        holder = (approval.claim or {}).get("by")
        if holder and holder != reviewer and not is_admin:
            raise ApplicationError(f"the approval is claimed by {holder}",
                                   {"claimed_by": holder}, type="claimed_by_other")

    def _accept(self, decision: DecisionInput) -> Approval:
        """Take ``decision`` for its approval, and each ``more_resumes`` answer for theirs."""
        approval, checked = self._validated(decision)
        at = workflow.now().isoformat()
        approval.decision = {**checked, "decision": decision.decision,
                             "decided_by": decision.decided_by, "note": decision.note,
                             "decided_at": at}
        for interrupt_id, value in (decision.more_resumes or {}).items():
            self.target(interrupt_id).decision = {
                "decision": decision.decision, "updates": {}, "resume": value, "raw": True,
                "decided_by": decision.decided_by, "note": decision.note, "decided_at": at}
        self.last_note, self.moving = decision.note, True
        return approval
