"""``PricingWorkflow``: the pricing runs started before the graph runtime (legacy).

New pricing runs start :class:`workflows.graph_run.GraphRunWorkflow` (the pipeline's hooks
in :mod:`activities.pricing.run`). This workflow type stays registered only so that runs
started before that cut-over finish on the code they started with; remove it once
``temporal workflow count --query 'WorkflowType="PricingWorkflow" AND ExecutionStatus="Running"'``
is 0. Its pure parts (stream events, sign-off checks, the result) are the pipeline's.

One run is one composite ask (thread id = run id). The workflow compiles the ``pricing``
graph registered with the LangGraph plugin, drives it with ``astream`` and publishes the
chat stream (seed 003 AC2) on its :class:`WorkflowStream`: a ``tool_call`` when a worker
starts, a meta event when it ends (the policy checker's carries the violations), the
reporter's tokens (published by the reporter activity itself), the pending approval, and
one final event. When the graph interrupts at ``approval_gate`` the shared gate opens an
approval (Update ``decide`` + validator, signal twin, escalation timers) and waits, durably,
for a decision; the graph resumes with ``Command(resume=decision)``.

Delivery: the stream is an offset-addressed log rebuilt on replay (workflow-published events
are deterministic, activity-published ones are signals in history), so a subscriber that
reconnects from offset *n* gets exactly the events after *n*, across worker restarts.
Cancelling the workflow (``POST /api/v1/chat/cancel``) ends the run ``cancelled`` with a
final event.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from workflows.approval import ApprovalGate, DecisionInput, EscalationLadder

with workflow.unsafe.imports_passed_through():
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command
    from temporalio.contrib.workflow_streams import WorkflowStream
    from temporalio.langgraph import graph as registered_graph

    from activities.pricing import stream as events
    from activities.pricing.graph import GRAPH_NAME, NODE_TOOLS
    from activities.pricing.run import (
        WORKER_STEPS,
        approval_card,
        decision_tail,
        worker_event,
    )
    from activities.pricing.run import check_decision as check_pricing_decision
    from activities.pricing.run import result as pricing_result
    from overseer.pipelines import DecisionRefusedError
    from overseer.store.events import RUN_CANCELLED, RUN_COMPLETED, RUN_FAILED

PIPELINE = "pricing"
PRICING_LADDER_PATCH = "pricing-escalation-ladder"


@dataclass
class PricingInput:
    """Input of one pricing orchestrator run.

    Attributes:
        run_id: UUID string; the workflow id is ``pricing-<run_id>`` and the thread id is run_id.
        message: the ask.
        plan: orchestrator steps from the router (``router.build_plan``).
        scope: ``{item_ids, segment, region, tier, matched}`` (``router.resolve_scope``).
        catalog: ``{sha256, items, source}`` — the stored catalog snapshot.
        options: ``pricing_options`` snapshot (policy, optimizer, sensitivity, limits, SLA).
        messages: the session's earlier turns plus this ask, ``{role, content}``.
        route: the router's decision (``RouteDecision.to_dict()``).
        session_id: the chat session, if any.
        model: the model the backend chose (``rules`` offline); model_reason: why.
        model_hint: the ``model`` query parameter, if any.
        submitted_by: the caller's subject.
        search_attributes: upsert OverseerPipeline/OverseerStatus.
    """

    run_id: str
    message: str
    plan: list[str]
    scope: dict[str, Any]
    catalog: dict[str, Any]
    options: dict[str, Any]
    messages: list[dict[str, str]] = field(default_factory=list)
    route: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    model: str = "rules"
    model_reason: str = "no_llm_endpoint"
    model_hint: str | None = None
    submitted_by: str = "unknown"
    search_attributes: bool = True


@dataclass
class PricingResult:
    """Result of a run: status, outcome, the stream's final event and the run's record."""

    run_id: str
    status: str
    outcome: str | None
    final_event: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)


@workflow.defn(name="PricingWorkflow")
class PricingWorkflow(ApprovalGate):
    """Runs one composite pricing ask through the orchestrator graph and its sign-off."""

    @workflow.init
    def __init__(self, inp: PricingInput) -> None:
        super().__init__()
        self.stream = WorkflowStream()
        self._topic = self.stream.topic(events.STREAM_TOPIC)
        self._inp = inp
        self._final: dict[str, Any] | None = None
        self._tools: list[str] = []

    @workflow.run
    async def run(self, inp: PricingInput) -> PricingResult:
        """Drive the run to a terminal status; every ending publishes one final stream event."""
        self._run_id, self._pipeline = inp.run_id, PIPELINE
        self._use_search_attributes = inp.search_attributes
        await self.set_status("running")
        self._publish(events.meta("router", thread_id=inp.run_id, plan=inp.plan,
                                  intents=inp.route.get("intents")))
        try:
            result = await self._run_graph(inp)
        except (asyncio.CancelledError, ActivityError) as err:
            if isinstance(err, ActivityError) and not is_cancelled_exception(err):
                await self._fail(inp, err)
            # Cancelled while waiting, or while an activity ran (it then fails as cancelled).
            await self._end("cancelled", "cancelled", RUN_CANCELLED,
                            "Cancelled: the plan was stopped and no prices changed.", {})
            self.stream.detach_pollers()
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        return result

    async def _fail(self, inp: PricingInput, err: ActivityError) -> NoReturn:
        """Record the failure, publish one error event, and fail the workflow (non-retryable)."""
        cause = err.cause if isinstance(err.cause, ApplicationError) else None
        error = {"code": cause.type if cause and cause.type else "activity_failed",
                 "message": cause.message if cause else str(err)}
        await self.record(RUN_FAILED, key="run.finished",
                          data={"status": "failed", "outcome": None, "error": error,
                                "snapshot": {"outcome": None}})
        await self.set_status("failed")
        self._final = events.error(error["message"], error["code"], retryable=False,
                                   thread_id=inp.run_id)
        self._publish(self._final)
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        raise ApplicationError(error["message"], error, type=error["code"],
                               non_retryable=True) from err

    @workflow.query
    def get_final_event(self) -> dict[str, Any] | None:
        """The stream's final event once the run has ended (None before)."""
        return self._final

    def check_decision(self, decision: DecisionInput) -> dict[str, Any]:
        """Price edits must keep the policy (:func:`activities.pricing.run.check_decision`)."""
        assert self._approval is not None
        try:
            return check_pricing_decision(
                self._approval["payload"],
                {"decision": decision.decision, "updates": decision.updates},
                {"options": self._inp.options})
        except DecisionRefusedError as err:
            raise ApplicationError(err.message, err.details, type=err.code) from err

    # -- internals ---------------------------------------------------------------------------

    async def _run_graph(self, inp: PricingInput) -> PricingResult:
        app = registered_graph(GRAPH_NAME).compile(checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": inp.run_id},
                                  "recursion_limit": 4 * int(inp.options.get("max_iterations", 8))
                                  + 10}
        state: dict[str, Any] = {
            "run_id": inp.run_id, "messages": inp.messages or [{"role": "user",
                                                                "content": inp.message}],
            "request": {"message": inp.message, "session_id": inp.session_id,
                        "model": inp.model, "model_reason": inp.model_reason,
                        "model_hint": inp.model_hint},
            "options": inp.options, "catalog": inp.catalog, "scope": inp.scope,
            "plan": inp.plan, "max_iterations": int(inp.options.get("max_iterations", 8)),
            "iterations": 0, "completed_steps": [], "outputs": {}, "tools_used": [],
            "strategy": "rules",
        }
        interrupt = await self._drive(app, state, config)
        rounds = 0
        while interrupt is not None:
            rounds += 1
            self._publish(events.meta("approval_gate", thread_id=inp.run_id,
                                      awaiting_approval=True,
                                      approval=approval_card(self._run_id, interrupt)))
            # The escalation ladder configured for every pipeline (reminders, reassignment,
            # final action); runs recorded before it replay with the single SLA timer.
            ladder = (EscalationLadder.from_options(inp.options)
                      if workflow.patched(PRICING_LADDER_PATCH) else None)
            decision = await self.request_approval(
                interrupt, sla=timedelta(seconds=float(inp.options["approval_sla_seconds"])),
                key=str(rounds), ladder=ladder)
            self._publish(events.meta("approval_gate", decision=decision["decision"],
                                      decided_by=decision.get("decided_by")))
            interrupt = await self._drive(app, Command(resume=decision), config)
        final_state = (await app.aget_state(config)).values
        return await self._complete(inp, final_state)

    async def _drive(self, app: Any, graph_input: Any, config: dict[str, Any]
                     ) -> dict[str, Any] | None:
        """Run the graph until it ends or interrupts, publishing worker events; the interrupt payload."""
        interrupt: dict[str, Any] | None = None
        async for mode, chunk in app.astream(graph_input, config, stream_mode=["tasks", "updates"]):
            if mode == "tasks" and "input" in chunk:
                name = chunk["name"]
                if name in WORKER_STEPS and name != "approval_gate":
                    self._publish(events.tool_call(NODE_TOOLS[name], node=name))
                elif name == "approval_gate" and "request_approval" not in self._tools:
                    self._tools.append("request_approval")
                    self._publish(events.tool_call("request_approval", node=name))
            elif mode == "updates":
                for node, update in chunk.items():
                    if node == "__interrupt__":
                        interrupt = update[0].value
                    elif node == "router" and update:
                        self._publish(events.meta("router", route=update.get("route"),
                                                  reason=update.get("route_reason")))
                    elif node in WORKER_STEPS and node != "approval_gate" and update:
                        self._publish(worker_event(node, update))
        return interrupt

    async def _complete(self, inp: PricingInput, state: dict[str, Any]) -> PricingResult:
        outcome = state.get("outcome") or "answered"
        status = state.get("status") or "completed"
        for text in events.chunks(decision_tail(state)):
            self._publish(events.token(text))
        snapshot = pricing_result(state)
        await self._end(status, outcome, RUN_COMPLETED, snapshot["report"], snapshot)
        assert self._final is not None
        return PricingResult(run_id=inp.run_id, status=status, outcome=outcome,
                             final_event=self._final, result=snapshot)

    async def _end(self, status: str, outcome: str, event_type: str, message: str,
                   snapshot: dict[str, Any]) -> None:
        self._outcome = outcome
        await self.record(event_type, key="run.finished",
                          data={"status": status, "outcome": outcome,
                                "snapshot": {**snapshot, "outcome": outcome}})
        await self.set_status(status)
        self._final = events.final(
            message, tools_used=snapshot.get("tools_used", self._tools), model=self._inp.model,
            thread_id=self._run_id, strategy=snapshot.get("strategy", "rules"), outcome=outcome)
        self._publish(self._final)

    def _publish(self, event: dict[str, Any]) -> None:
        self._topic.publish(event)
