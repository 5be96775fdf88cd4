"""What every run shares between its segments: the gate, the events, the stream, the endings.

:class:`RunWorkflowBase` is the part of :class:`workflows.segment_run.SegmentRunWorkflow`
that Temporal owns around LangGraph's loop (issue 25) and that runs no LangGraph code:

- **the approval gate** (:class:`workflows.approval.ApprovalGate`): every pending interrupt
  is its own approval (own payload, claim, ladder and decision); the run goes on with the
  ones decided, and an interrupt still waiting keeps its approval. ``interrupt()`` gets
  the decision's ``resume`` exactly as sent whenever the decision carries one, whoever
  gives it (the SDK's ``Command(resume=...)``, the admin API, the console, the escalation
  ladder's ``final_resume``): LangGraph's meaning, issue 26. A decision without a
  ``resume`` gives ``{"decision", "note", "updates", "resume": None, "decided_by"}``. A
  pipeline's ``check_decision`` refuses what it does not take, in the update's validator;
- **the LLM budget gate**, the run's one budget stop: the segments meter every chat-model
  call; once a run's spend passes its budget (options ``llm_budget_usd`` /
  ``llm_budget_tokens``), or a node's own pre-call estimate says its next call would
  (:class:`overseer.budget.BudgetStop`), the run stops for an approval (payload ``kind:
  llm_budget``): approve with a higher ``budget_usd`` / ``budget_tokens``, or reject to end
  it ``rejected`` / ``budget_denied`` with the state so far;
- **the run's events** (``node.completed`` buffered, then written with the next event in
  one local activity) and its hand-offs to an Agent Server thread at a pause or the end;
- **the durable stream** (``WorkflowStream``, topic :data:`STREAM_TOPIC`) and a pipeline's
  own stream protocol (``Pipeline.stream``);
- **splits** into child runs, **continue-as-new** (counters and stream carried),
  **cancellation**, **failure** and **webhooks**.

Pipelines with more than a graph extend the run through hooks
(:class:`overseer.pipelines.Pipeline`: ``make_input``, ``split``, ``check_decision``,
``result``, ``node_snapshot``, ``stream``), never with a workflow of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from overseer.run_types import STREAM_TOPIC, DecisionInput, GraphRunInput, GraphRunResult
from workflows.approval import Approval, ApprovalGate, EscalationLadder

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream

    from activities.graph_nodes import NODE_ERROR
    from activities.notify import notify_webhook
    from overseer.budget import check_budget_decision, over_budget
    from overseer.graph_codec import encode, to_jsonable
    from overseer.pipelines import DecisionRefusedError, Pipeline, RunStream
    from overseer.store.events import (
        APPROVAL_REQUESTED,
        RUN_CANCELLED,
        RUN_COMPLETED,
        RUN_FAILED,
        RUN_SPLIT,
        RUN_SUBMITTED,
    )

WEBHOOK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                            maximum_interval=timedelta(minutes=5), maximum_attempts=8)
"""A run's webhook: retried by Temporal for about a quarter of an hour, then given up (logged)."""
DEFAULT_RECURSION_LIMIT = 100
"""Pregel's step limit, unless the run's options set ``recursion_limit``."""
CARRIED_STREAM_ITEMS = 100
"""Stream items a run hands to its next run when it continues as new (the newest)."""
SPLIT_HEARTBEAT_SECONDS = 4
"""Heartbeat time-out of a pipeline's split activity: a dead worker is noticed within it
(``activities.heartbeat.with_heartbeats`` sends one every 2 s while pages are OCR'd)."""
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


class RunWorkflowBase(ApprovalGate):
    """The gate, events, stream and endings of a run (see the module docstring).

    Not a workflow by itself: :class:`workflows.segment_run.SegmentRunWorkflow` is.
    """

    @workflow.init
    def __init__(self, inp: GraphRunInput) -> None:
        super().__init__()
        self.stream = WorkflowStream(prior_state=inp.stream_state)
        self._topic = self.stream.topic(STREAM_TOPIC)
        self._inp: GraphRunInput | None = None
        self._spec: Pipeline | None = None
        self._pending_events: list[dict[str, Any]] = []
        self._published = 0
        self._marks: list[dict[str, Any]] = []
        self._snapshot: dict[str, Any] | None = None
        self._run_stream: RunStream | None = None
        self._own_topic: Any = None
        self._final: dict[str, Any] | None = None
        self._spent: dict[str, Any] = {"usd": 0.0, "tokens": 0, "calls": 0}
        self._budget: dict[str, Any] = {}
        self._budget_lock = asyncio.Lock()
        self._budget_stops = 0
        self._denied = False
        self._webhooks: list[Any] = []
        self._ladders: dict[str, asyncio.Task[None]] = {}

    async def _split_parts(self, graph_input: Any) -> list[dict[str, Any]]:
        """The pipeline's split activity on the run's input: one dict per part."""
        assert self._spec is not None
        assert self._spec.split is not None
        arg = to_jsonable(graph_input)
        retry = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=5,
                            non_retryable_error_types=[NODE_ERROR])
        try:
            if self._spec.split_locally is not None and self._spec.split_locally(arg):
                parts: list[dict[str, Any]] = await workflow.execute_local_activity(
                    self._spec.split, arg, start_to_close_timeout=timedelta(minutes=2),
                    retry_policy=retry, summary="split the submission into parts")
            else:
                parts = await workflow.execute_activity(
                    self._spec.split, arg, start_to_close_timeout=timedelta(minutes=30),
                    heartbeat_timeout=timedelta(seconds=SPLIT_HEARTBEAT_SECONDS),
                    retry_policy=retry, summary="split the submission into parts")
        except (ActivityError, ApplicationError) as err:
            cause = failure_cause(err)
            await self._fail({"code": cause.type if cause and cause.type else "activity_failed",
                              "message": cause.message if cause else str(err),
                              "node": self._spec.split})
        return parts

    async def _start_children(self, graph_input: dict[str, Any],
                              parts: list[dict[str, Any]]) -> GraphRunResult:
        """One child run per part (``run.submitted`` first, so none is lost); outcome ``split``."""
        assert self._inp is not None
        inp, children = self._inp, []
        for index, part in enumerate(parts):
            child_id = str(uuid.uuid5(uuid.UUID(inp.run_id), f"entry:{index}"))
            child_input = {**graph_input, **part}
            if "run_id" in graph_input:
                child_input["run_id"] = child_id
            workflow_id = f"{inp.pipeline}-{child_id}"
            await self.record_batch(
                [{"run_id": child_id, "key": "run.submitted", "type": RUN_SUBMITTED,
                  "actor": "workflow", "occurred_at": workflow.now().isoformat(),
                  "data": {"pipeline": inp.pipeline, "workflow_id": workflow_id,
                           "parent_run_id": inp.run_id, "submitted_by": inp.submitted_by,
                           "input": {"part": to_jsonable(part)}}}],
                f"submit part {index + 1}")
            await workflow.start_child_workflow(
                workflow.info().workflow_type,  # the child runs on this run's workflow
                dataclasses.replace(inp, run_id=child_id, input=encode(child_input),
                                    parent_run_id=inp.run_id),
                id=workflow_id, parent_close_policy=workflow.ParentClosePolicy.ABANDON)
            children.append(child_id)
        await self.record(RUN_SPLIT, key="run.split",
                          data={"snapshot": {"children": children, "entries": len(children)}})
        await self._finish("completed", "split", {"children": children})
        self._publish("end", {"status": "completed", "outcome": "split", "children": children})
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        return GraphRunResult(run_id=inp.run_id, status="completed", outcome="split",
                              children=children)

    def _publish(self, event: str, data: Any) -> None:
        if self._run_stream is not None:
            return  # the pipeline's own stream is the run's stream (dense offsets)
        if event in ("interrupt", "end", "error"):
            mark = {"offset": self._published, "event": event}
            if event == "end" and isinstance(data, dict) and data.get("status") == "cancelled":
                mark["cancelled"] = True  # the run's readers see it interrupted, not a success
            self._marks.append(mark)
        self._topic.publish({"event": event, "data": to_jsonable(data)})
        self._published += 1

    @workflow.query
    def get_thread_state(self) -> dict[str, Any]:
        """The graph's state at its last pause or end, for the Agent Server API.

        ``{values, encoded, next, tasks, interrupts, checkpoint_id, parent_checkpoint_id,
        metadata, created_at}`` (empty before the first pause) plus ``status``, ``published``
        (stream items so far), ``marks``: ``[{offset, event, cancelled?}]`` of every ``interrupt``,
        ``end`` and ``error`` stream item, ``decided`` (a decision was taken since the run
        last paused: it goes on) and ``decision_note`` (the latest decision's note).
        """
        return {**(self._snapshot or {}), "status": self._status,
                "published": self._published, "marks": list(self._marks),
                "decided": self._moving,
                "decision_note": self._last_note}

    def _emit(self, events: list[dict[str, Any]]) -> None:
        """Publish a pipeline stream's events on its topic; a ``done`` event is the final one.

        They are the run's durable stream (:meth:`_publish` publishes nothing then), so
        they count in ``_published``: a segment's live rows come before the item at its
        ``stream_base`` (:mod:`overseer.token_stream`).
        """
        for event in events:
            self._own_topic.publish(event)
            self._published += 1
            if event.get("done"):
                self._final = event

    @workflow.query
    def get_final_event(self) -> dict[str, Any] | None:
        """The pipeline stream's final event once the run has ended (None before, or without one)."""
        return self._final

    # -- the gate ----------------------------------------------------------------------------

    _last_decision: str | None = None

    async def _ask(self, pending: list[Any], rounds: int) -> dict[str, Any]:
        """Every pending interrupt is its own approval; wait until one has its decision.

        An interrupt whose approval is open already (the run went on with another one's
        answer and paused again on it) keeps it: its claim, its ladder and any decision
        taken meanwhile. Each approval climbs its own ladder in its own task.

        Returns:
            ``{interrupt id: what interrupt() returns}`` for every pending interrupt decided
            (at least one): the resume map of the next segment.
        """
        assert self._inp is not None
        ladder = EscalationLadder.from_options(self._inp.options)
        sla = timedelta(seconds=ladder.sla_seconds or 72 * 3600)
        ids = [i.id for i in pending]
        await self._flush()
        self._moves += 1  # the run reached its next state
        known = {a.interrupt_id for a in self._open}
        fresh = [self.new_approval(self._question(i, ids), sla=sla, key=f"{rounds}:{i.id}",
                                   interrupt_id=i.id) for i in pending if i.id not in known]
        self._pause = self._paused_hand_off(f"{rounds}:{ids[0]}")  # with approval.requested
        if self._run_stream is not None:
            for approval in fresh:
                self._emit(self._run_stream.interrupt(approval.payload))
        if fresh:
            await self.open_approvals(fresh)
        else:  # paused again on approvals open already
            if self._status != "awaiting_approval":  # a continued run's
                await self.set_status("awaiting_approval")
            if self._pause is not None:  # the thread's pause goes on without a new request
                hand_off, self._pause = self._pause, None
                await self.record_batch([], "paused again", hand_off)
        asking = [a for a in self._open if a.interrupt_id in ids]
        self._moving = any(a.decision is not None for a in asking)  # decided meanwhile
        for approval in asking:
            if approval.key not in self._ladders:
                self._ladders[approval.key] = asyncio.create_task(self.climb(ladder, approval))
        decided: list[Approval] = []
        while not decided:  # a ladder ends when its approval is decided
            done, _ = await asyncio.wait([self._ladders[a.key] for a in asking],
                                         return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # a ladder's own failure fails the run
            decided = [a for a in asking if a.decision is not None]
        for approval in decided:
            self._ladders.pop(approval.key, None)
        answers: dict[str, Any] = {}
        for approval, decision in zip(decided, await self.take_decisions(decided), strict=True):
            self._last_decision = decision["decision"]
            if self._run_stream is not None:
                self._emit(self._run_stream.decision(decision))
            answers[str(approval.interrupt_id)] = self._answer(decision)
        return answers

    @staticmethod
    def _question(interrupt: Any, ids: list[str]) -> dict[str, Any]:
        """An interrupt's approval payload: its value (a dict as is) plus the runtime's keys."""
        value = to_jsonable(interrupt.value)
        payload = dict(value) if isinstance(value, dict) else {"value": value}
        payload.update({"interrupt_id": interrupt.id, "pending_interrupts": list(ids)})
        return payload

    @staticmethod
    def _answer(decision: dict[str, Any]) -> Any:
        """What ``interrupt()`` returns for a decision: its ``resume`` as sent, else the wrapper."""
        if decision.get("raw") or decision.get("resume") is not None:
            return decision.get("resume")
        answer = {"decision": decision["decision"], "note": decision.get("note"),
                  "updates": decision.get("updates") or {}, "resume": decision.get("resume"),
                  "decided_by": decision.get("decided_by")}
        answer.update({k: decision[k] for k in BUDGET_KEYS if decision.get(k) is not None})
        return answer

    def _stop_ladders(self) -> None:
        """Cancel the ladders of approvals still open when the run ends."""
        for task in self._ladders.values():
            task.cancel()
        self._ladders = {}

    def check_decision(self, decision: DecisionInput, approval: Approval) -> dict[str, Any]:
        """The pipeline's decision kinds and its own refusal rules (pure; runs in the validator).

        Raises:
            ApplicationError: ``invalid_decision`` for a decision the pipeline does not take;
                ``not_awaiting_approval`` for a resume map naming an interrupt that is not
                waiting; ``claimed_by_other`` when one it names is claimed by someone else;
                the pipeline's own code (``DecisionRefusedError``) otherwise.
        """
        assert self._spec is not None
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
        if decision.decision not in self._spec.decisions:
            raise ApplicationError(
                f"decision must be one of {', '.join(self._spec.decisions)}",
                {"decision": decision.decision, "allowed": list(self._spec.decisions)},
                type="invalid_decision")
        for interrupt_id in decision.more_resumes or {}:  # a resume map naming several
            other = self._target(interrupt_id)
            if other is approval:
                raise ApplicationError(f"interrupt {interrupt_id} is named twice",
                                       {"interrupt_id": interrupt_id},
                                       type="not_awaiting_approval")
            self._check_claim(other, decision.decided_by, decision.is_admin)
        checked = {"decision": decision.decision, "note": decision.note,
                   "updates": dict(decision.updates or {}), "resume": decision.resume,
                   "decided_by": decision.decided_by, "apply_proposal": decision.apply_proposal,
                   "budget_usd": decision.budget_usd, "budget_tokens": decision.budget_tokens}
        try:
            checked = self._spec.checked_decision(payload, checked,
                                                  (self._snapshot or {}).get("values") or {})
        except DecisionRefusedError as err:
            raise ApplicationError(err.message, err.details, type=err.code) from err
        return {"updates": checked["updates"], "resume": checked["resume"],
                **{k: checked[k] for k in BUDGET_KEYS if checked.get(k) is not None},
                **({"raw": True} if decision.raw_resume else {}),
                **({"more_resumes": dict(decision.more_resumes)}
                   if decision.more_resumes else {})}

    def decisions(self, approval: Approval) -> tuple[str, ...]:
        """Decision kinds ``approval`` accepts (the pipeline's; a budget stop's approve/reject)."""
        if approval.payload.get("kind") == LLM_BUDGET_KIND:
            return ("approve", "reject")
        return self._spec.decisions if self._spec else ("approve", "reject")

    # -- continue-as-new ------------------------------------------------------------------------

    def _counters(self) -> dict[str, Any]:
        """The run's counters a continued run goes on with (spend, budget, stream, gate).

        The gate's open approvals go along whole (claims, rungs fired, decisions taken
        meanwhile), so an approval stays one approval across continue-as-new.
        """
        return {"published": self._published, "marks": self._marks,
                "spent": self._spent, "budget": self._budget,
                "budget_stops": self._budget_stops,
                "last_decision": self._last_decision,
                "moves": self._moves, "open": [dataclasses.asdict(a) for a in self._open]}

    async def _hand_over(self, carry: dict[str, Any]) -> NoReturn:
        """Continue as new with ``carry`` and the newest items of the run's event stream.

        Waits for the handlers in flight and the webhooks first.
        """
        assert self._inp is not None
        self.stream.detach_pollers()
        self._handing_over = True  # a decide waiting for the next state answers "running"
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        # The stream goes along, its newest items only (values chunks hold whole states; the
        # hand-over must stay small): a reader further behind is refused and reads from 0,
        # which starts at the retained base.
        end = self.stream._on_offset()
        self.stream.truncate(max(0, end - CARRIED_STREAM_ITEMS))
        workflow.continue_as_new(dataclasses.replace(
            self._inp, carry=carry, stream_state=self.stream.get_state(),
            resume_from=None))

    def _restore_counters(self, counters: dict[str, Any]) -> None:
        """Go on with a continued run's counters (:meth:`_counters`)."""
        self._published, self._marks = int(counters["published"]), list(counters["marks"])
        self._spent, self._budget = dict(counters["spent"]), dict(counters["budget"])
        self._budget_stops = int(counters["budget_stops"])
        self._last_decision = counters.get("last_decision")
        self._moves = int(counters.get("moves") or counters.get("approval_seq") or 0)
        self._open = [Approval(**a) for a in counters.get("open") or []]

    # -- the LLM budget gate --------------------------------------------------------------------

    def _count_usage(self, usage: dict[str, Any]) -> None:
        """Add a node's chat-model calls (:class:`activities.graph_nodes.UsageMeter`) to the run's spend."""
        if usage:
            self._spent = {"usd": self._spent["usd"] + float(usage.get("cost_usd") or 0),
                           "tokens": self._spent["tokens"] + int(usage.get("input_tokens") or 0)
                           + int(usage.get("output_tokens") or 0),
                           "calls": self._spent["calls"] + int(usage.get("calls") or 0)}

    async def _within_budget(self, path: str, blocked: dict[str, Any] | None = None) -> None:
        """Before a node runs: stop for an approval once the LLM spend has passed its budget.

        Or before the spend has passed it, when the node stopped on its own pre-call
        estimate (``blocked``: the spend and the call's estimate, as the LLM layer measured
        them, :class:`overseer.budget.BudgetStop`): one stop, then the node runs again
        under the raised budget. The budget is the options ``llm_budget_usd`` /
        ``llm_budget_tokens``; the approval's payload is ``kind: llm_budget`` (the run's one
        budget stop). Approve with a higher ``budget_usd`` / ``budget_tokens`` (enough for the
        spend and, with ``blocked``, the call's estimate) to go on; reject to end the run
        ``rejected`` / ``budget_denied``.

        Raises:
            BudgetDeniedError: the reviewer rejected the stop.
        """
        assert self._inp is not None
        if blocked is None and not over_budget(self._spent, self._budget):
            return
        async with self._budget_lock:  # parallel branches share one stop
            while blocked is not None or over_budget(self._spent, self._budget):
                self._budget_stops += 1
                budget: dict[str, Any] = {"spent_usd": round(self._spent["usd"], 8),
                                          "spent_tokens": self._spent["tokens"],
                                          "calls": self._spent["calls"]}
                if blocked is not None:  # the LLM layer's own count and the call's estimate;
                    # the budget it checked against is the run's from now on
                    budget.update({k: blocked[k] for k in BLOCKED_KEYS if k in blocked})
                    self._budget = {k: self._budget.get(k) if self._budget.get(k) is not None
                                    else blocked.get(f"budget_{k}") for k in ("usd", "tokens")}
                budget.update(budget_usd=self._budget.get("usd"),
                              budget_tokens=self._budget.get("tokens"))
                payload = {"kind": LLM_BUDGET_KIND, "node": path,
                           "review_reason_codes": ["llm_budget_exceeded"], "budget": budget}
                blocked = None
                ladder = EscalationLadder.from_options(self._inp.options)
                await self._flush()
                decision = await self.request_approval(
                    payload, sla=timedelta(seconds=ladder.sla_seconds or 72 * 3600),
                    key=f"budget:{self._budget_stops}", ladder=ladder)
                if decision["decision"] != "approve":
                    raise BudgetDeniedError(path)
                self._budget = {
                    "usd": decision.get("budget_usd", self._budget.get("usd")),
                    "tokens": decision.get("budget_tokens", self._budget.get("tokens"))}

    # -- endings ------------------------------------------------------------------------------

    async def _flush(self) -> None:
        if self._pending_events:
            events, self._pending_events = self._pending_events, []
            await self.record_batch(events, "node.completed")

    async def _record_end(self, event_type: str, data: dict[str, Any]) -> None:
        """``run.finished``, written with any buffered events in one call (and the hand-off)."""
        assert self._inp is not None
        self._stop_ladders()
        events, self._pending_events = [*self._pending_events, {
            "run_id": self._inp.run_id, "key": "run.finished", "type": event_type, "data": data,
            "actor": "workflow", "occurred_at": workflow.now().isoformat()}], []
        await self.record_batch(events, event_type, self._hand_off(event_type))

    _pause: dict[str, Any] | None = None

    async def record_batch(self, events: list[dict[str, Any]], summary: str,
                           hand_off: dict[str, Any] | None = None) -> Any:
        """As the gate's, and the approval request of an interrupt hands the pause over.

        The thread's state at the interrupt goes to Postgres with ``approval.requested``
        (:meth:`_ask` prepares it), so ``runs.wait`` answers from there. The webhooks a
        hand-off claimed (runs that ended, ``webhook`` set) are each POSTed by a
        ``notify_webhook`` activity, retried by Temporal (:data:`WEBHOOK_RETRY`).
        """
        if hand_off is None and self._pause is not None and \
                any(e.get("type") == APPROVAL_REQUESTED for e in events):
            hand_off, self._pause = self._pause, None
        result = await super().record_batch(events, summary, hand_off)
        for hook in (result.get("webhooks") or []) if isinstance(result, dict) else []:
            self._webhooks.append(workflow.start_activity(  # POSTed while the run goes on
                notify_webhook, args=[hook["url"], hook["payload"], hook["delivery"]],
                start_to_close_timeout=timedelta(seconds=15), retry_policy=WEBHOOK_RETRY,
                summary=f"webhook: run {hook['delivery']} {hook['payload'].get('status')}"))
        return result

    async def _webhooks_sent(self) -> None:
        """Wait for the runs' webhooks still being POSTed (a closed workflow drops them).

        One that failed every attempt is logged; the run's own ending stands.
        """
        for handle in self._webhooks:
            try:
                await handle
            except ActivityError:
                workflow.logger.warning("run webhook not delivered", extra={
                    "run_id": self._run_id})
        self._webhooks = []

    def _paused_hand_off(self, key: str) -> dict[str, Any] | None:
        """What a thread's run hands the thread when it pauses on an interrupt (published).

        ``key`` (the approval's) claims the webhooks of the runs that ended there.
        """
        assert self._inp is not None
        if self._inp.thread_id is None or self._run_stream is not None:
            return None
        return {"thread_id": self._inp.thread_id, "run_id": self._inp.run_id, "pause": True,
                "key": f"pause:{key}",
                "snapshot": to_jsonable({**self.get_thread_state(), "decided": False,
                                         "closed": False, "cancelled": False})}

    def _hand_off(self, event_type: str) -> dict[str, Any] | None:
        """What an Agent Server run's ending hands its thread (:func:`overseer.thread_queue.hand_off`).

        The thread's state as :meth:`get_thread_state` answers once the ending's ``end`` or
        ``error`` item is published (right after the events are written). None for a run
        without a thread or with its own stream protocol, and for a cancelled run: whoever
        cancelled it through the API owns the thread's state then (an ``interrupt`` keeps
        the run's last state, a ``rollback`` the state before it) and starts the next run.
        """
        assert self._inp is not None
        if (self._inp.thread_id is None or self._run_stream is not None
                or event_type == RUN_CANCELLED):
            return None
        mark = {"offset": self._published, "event": "error" if event_type == RUN_FAILED else "end"}
        return {"thread_id": self._inp.thread_id, "run_id": self._inp.run_id, "key": "end",
                "snapshot": to_jsonable({**self.get_thread_state(),
                                         "marks": [*self._marks, mark],
                                         "published": self._published + 1, "closed": True,
                                         "cancelled": False})}

    async def _finish(self, status: str, outcome: str | None, snapshot: dict[str, Any]) -> None:
        self._outcome = outcome
        await self._record_end(RUN_COMPLETED, {"status": status, "outcome": outcome,
                                               "snapshot": {**snapshot, "outcome": outcome}})
        await self.set_status(status)

    async def _cancelled(self) -> None:
        """Record and announce a cancelled run (the caller re-raises the cancellation)."""
        self._outcome = "cancelled"
        await self._record_end(RUN_CANCELLED, {"status": "cancelled", "outcome": "cancelled",
                                               "snapshot": {"outcome": "cancelled"}})
        await self.set_status("cancelled")
        self._publish("end", {"status": "cancelled", "outcome": "cancelled"})
        if self._run_stream is not None:
            self._emit(self._run_stream.cancelled())
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()

    async def _fail(self, error: dict[str, Any]) -> NoReturn:
        await self._record_end(RUN_FAILED, {"status": "failed", "outcome": None, "error": error,
                                            "snapshot": {"outcome": None}})
        await self.set_status("failed")
        self._publish("error", error)
        if self._run_stream is not None:
            self._emit(self._run_stream.failed(error))
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        raise ApplicationError(error["message"], error, type=error["code"], non_retryable=True)


def failure_cause(err: BaseException) -> ApplicationError | None:
    """The ``ApplicationError`` an activity or local activity failed with, if any.

    A scheduled activity's failure arrives as ``ActivityError`` with the error as its
    cause; a local activity's failure (sdk-core) arrives as the ``ApplicationError`` itself.
    """
    if isinstance(err, ApplicationError):
        return err
    cause = getattr(err, "cause", None)
    return cause if isinstance(cause, ApplicationError) else None


def final_status(values: Any, last_decision: str | None) -> tuple[str, str]:
    """``(status, outcome)`` of a finished graph.

    The graph decides: a final state with ``status: "rejected"`` (or ``completed``) and a
    string ``outcome`` says so itself. Otherwise the run is ``completed``, with the last
    decision as its outcome (``approved``, ``rejected``, ``revised`` …) or ``completed``.
    """
    if isinstance(values, dict):
        status = values.get("status")
        outcome = values.get("outcome")
        if status in ("completed", "rejected"):
            return status, outcome if isinstance(outcome, str) else status
    past = {"approve": "approved", "reject": "rejected", "revise": "revised"}
    return "completed", past.get(last_decision or "", last_decision or "completed")
