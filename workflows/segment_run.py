"""``SegmentRunWorkflow``: the one workflow every run is, and its run loop.

Every registered graph — the five reference pipelines and every graph of a
``langgraph.json`` — runs here. The workflow never runs LangGraph itself: each segment —
the run's start, or a resume, up to the next interrupt or the end — is one heartbeating
``run_segment`` activity (:mod:`workflows.segment_calls`, :mod:`overseer.runtime.segments`) that runs
LangGraph's own loop on ``AsyncPostgresSaver``. Temporal owns what happens between
segments, each job in its own module, composed here:

- the run's carried state (:mod:`workflows.run_state`): counters and open approvals, the
  one dataclass that goes along when the run continues as new;
- the event log, status and webhooks (:mod:`workflows.recorder`);
- the durable stream and the thread's state (:mod:`workflows.durable_stream`);
- every interrupt as an approval on the shared gate (:mod:`workflows.approval`: ladder,
  console, claims, exactly-once decisions) with the pipeline's decisions
  (:mod:`workflows.decisions`): ``interrupt()`` gets the decision's ``resume`` as sent; each
  of parallel interrupts is its own approval, and the run goes on with whichever are
  decided, as LangGraph does with a resume map naming some of them;
- the LLM budget stop (:mod:`workflows.budget`): a segment stops before a chat-model call
  past the run's budget; a reviewer raises it or ends the run;
- a submission split into child runs (:mod:`workflows.children`);
- cancellation, failure and continue-as-new (here).

Between two segments the run continues as new when Temporal suggests it (its history is
large): the graph's state is in LangGraph's checkpointer, so only :class:`RunState`, the
segment that just ended and the stream's newest items go along. Pipelines with more than a
graph extend the run through hooks (:class:`overseer.pipelines.Pipeline`: ``make_input``,
``split``, ``check_decision``, ``result``, ``node_snapshot``, ``stream``), never with a
workflow of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, is_cancelled_exception

from overseer.run_types import (
    STATUS_ATTRIBUTE,
    ClaimInput,
    DecisionInput,
    GraphRunInput,
    GraphRunResult,
    ReassignInput,
)
from workflows.approval import (
    ApprovalGate,
    DecisionResult,
    EscalationLadder,
    RunStatusView,
)
from workflows.budget import BudgetDeniedError, BudgetGate
from workflows.children import split_parts, start_children
from workflows.decisions import PipelineDecisions, answer, question
from workflows.durable_stream import DurableStream
from workflows.recorder import RunRecorder
from workflows.run_state import Approval, RunState
from workflows.segment_calls import (
    ACTIVITY_FAILURES,
    LOCAL_SEGMENT_SECONDS,
    SEGMENT_HEARTBEAT_SECONDS,
    SegmentRunner,
    failure_cause,
)

with workflow.unsafe.imports_passed_through():
    from overseer.graph_codec import decode, encode
    from overseer.node_options import NodeOptions
    from overseer.registry import get_registry
    from overseer.runtime.segment_call import SegmentCall, SegmentResult
    from overseer.runtime.segment_ending import run_ending
    from overseer.store.events import RUN_CANCELLED, RUN_COMPLETED, RUN_FAILED

DEFAULT_RECURSION_LIMIT = 100
"""Pregel's step limit, unless the run's options set ``recursion_limit``."""


@workflow.defn(name="SegmentRunWorkflow", sandboxed=False)
class SegmentRunWorkflow:
    """Drives one run as segments to a terminal status (see the module docstring).

    Not sandboxed: no user graph code runs in this workflow (LangGraph's loop runs in the
    segment activities), only Overseer's own gate, events and bookkeeping and a pipeline's
    pure hooks (``result``, ``checked_decision``), which must be deterministic anyway. The
    sandbox's per-activation cost was ~20 ms of worker CPU per run
    (docs/performance-history.md).
    """

    @workflow.init
    def __init__(self, inp: GraphRunInput) -> None:
        self._inp = inp
        self._spec = get_registry().get(inp.pipeline)
        self._state = RunState()
        self._recorder = RunRecorder(inp.run_id, inp.pipeline,
                                     search_attributes=inp.search_attributes)
        self._out = DurableStream(inp, self._state)
        self.stream = self._out.stream
        self._gate = ApprovalGate(self._state, self._recorder, PipelineDecisions(
            self._spec, lambda: (self._out.snapshot or {}).get("values")))
        self._run = inp.run_settings()  # how the run runs, read once
        self._budget = BudgetGate(self._state, self._gate, self._run.approval)
        self._runner = SegmentRunner(inp.pipeline, self._run.local_seconds)
        self._ladders: dict[str, asyncio.Task[None]] = {}
        self._segments_run = 0
        self._denied = False

    # -- handlers: the approval gate, the thread's state ----------------------------------------

    @workflow.update
    async def decide(self, decision: DecisionInput) -> DecisionResult:
        """Apply a decision; answers once the run has taken it and reached its next state."""
        return await self._gate.decide(decision)

    @decide.validator
    def validate_decide(self, decision: DecisionInput) -> None:
        """Refuse before history: no open approval, unknown decision, invalid field edits."""
        self._gate.validate_decide(decision)

    @workflow.signal
    def submit_decision(self, decision: DecisionInput) -> None:
        """Signal twin of ``decide`` for the Temporal UI/CLI; an invalid decision is logged and dropped."""
        self._gate.submit_decision(decision)

    @workflow.query
    def get_status(self) -> RunStatusView:
        """Current status, the oldest approval waiting for a decision and every open one."""
        return self._gate.status_view()

    @workflow.update
    async def claim(self, request: ClaimInput) -> RunStatusView:
        """Claim an open approval for ``request.reviewer`` (idempotent for the claimant)."""
        return await self._gate.claim(request)

    @claim.validator
    def validate_claim(self, request: ClaimInput) -> None:
        """Refuse: nothing open, or claimed by someone else (admins may take it over)."""
        self._gate.validate_claim(request)

    @workflow.update
    async def release(self, request: ClaimInput) -> RunStatusView:
        """Give the claim back to the queue."""
        return await self._gate.release(request)

    @release.validator
    def validate_release(self, request: ClaimInput) -> None:
        """Only the claimant or an admin may release."""
        self._gate.validate_claim(request)

    @workflow.update
    async def reassign(self, request: ReassignInput) -> RunStatusView:
        """Hand the approval to another reviewer and/or group."""
        return await self._gate.reassign(request)

    @reassign.validator
    def validate_reassign(self, request: ReassignInput) -> None:
        """Only the claimant (or anyone when unclaimed, or an admin) may reassign."""
        self._gate.validate_reassign(request)

    @workflow.query
    def get_thread_state(self) -> dict[str, Any]:
        """The graph's state at its last pause or end, for the Agent Server API.

        ``{values, encoded, next, tasks, interrupts, checkpoint_id, parent_checkpoint_id,
        metadata, created_at}`` (empty before the first pause) plus ``status``, ``published``
        (stream items so far), ``marks``: ``[{offset, event, cancelled?}]`` of every ``interrupt``,
        ``end`` and ``error`` stream item, ``decided`` (a decision was taken since the run
        last paused: it goes on) and ``decision_note`` (the latest decision's note).
        """
        return self._out.thread_state(self._recorder.status, decided=self._gate.moving,
                                      decision_note=self._gate.last_note)

    @workflow.query
    def get_final_event(self) -> dict[str, Any] | None:
        """The pipeline stream's final event once the run has ended (None before, or without one)."""
        return self._out.final

    # -- the run loop ---------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: GraphRunInput) -> GraphRunResult:
        """Run segments until the graph ends; each interrupt waits on the approval gate.

        The steps: the first segment's call from the run's settings (:meth:`_first_call`),
        the run announced and marked running (:meth:`_announce`), a submission of several
        parts split into child runs (:meth:`_split`), the segments driven to the graph's end
        (:meth:`_drive`), and the run's ending written and published (:meth:`_end`).
        """
        call = self._first_call(inp)
        await self._announce(inp)
        split = await self._split(inp)
        if split is not None:
            return split
        return await self._end(inp, await self._drive(inp, call))

    def _first_call(self, inp: GraphRunInput) -> SegmentCall:
        """The first segment's call: the run's settings, its budget and its durability.

        A pipeline's short input (``Pipeline.run.local_segments``) runs its segments as
        local tries checkpointed when each ends (a crash reruns one, under 5 s) unless the
        run's settings already try them locally.
        """
        spec, run = self._spec, self._run
        self._state.budget = {"usd": run.llm_budget_usd, "tokens": run.llm_budget_tokens}
        durability = "async"
        if not self._runner.local_seconds and spec.run.local_segments is not None and \
                spec.run.local_segments(decode(inp.input) or {}):
            self._runner.local_seconds, durability = LOCAL_SEGMENT_SECONDS, "exit"
        return SegmentCall(run_id=inp.run_id, pipeline=inp.pipeline,
                           thread_id=inp.thread_id or inp.run_id, input=inp.input,
                           durability=run.durability or durability,
                           recursion_limit=run.recursion_limit or DEFAULT_RECURSION_LIMIT,
                           stream=inp.thread_id is not None,
                           modes=list(run.stream_modes),
                           checkpoint_id=run.checkpoint_id,
                           heartbeat_seconds=run.heartbeat_seconds or SEGMENT_HEARTBEAT_SECONDS,
                           config=dict(run.graph_config),
                           context=run.context,
                           interrupt_before=run.interrupt_before,
                           interrupt_after=run.interrupt_after,
                           subgraphs=run.stream_subgraphs,
                           values_at_pause=spec.gate.decides_on_state and inp.thread_id is None)

    async def _announce(self, inp: GraphRunInput) -> None:
        """Open the run's streams (the pipeline's own protocol, ``metadata``) and mark it running."""
        spec, out = self._spec, self._out
        if spec.run.stream is not None:  # the pipeline's own stream protocol (its chunks go out
            # live from the segments, the rest from here)
            run_stream = spec.run.stream(decode(inp.input) or {})
            out.use_protocol(run_stream)
            if inp.carry is None:
                out.emit(run_stream.start())
        if inp.carry is None and inp.announce:
            out.publish("metadata", {"run_id": inp.run_id, "pipeline": inp.pipeline,
                                     "workflow_id": workflow.info().workflow_id})
        if workflow.info().typed_search_attributes.get(STATUS_ATTRIBUTE) == "running":
            self._recorder.status = "running"  # the starter set the search attributes: no upsert
        else:
            await self._recorder.set_status("running")

    async def _split(self, inp: GraphRunInput) -> GraphRunResult | None:
        """A submission of several parts as one child run each, done; None for any other run."""
        if not self._spec.run.split or inp.carry is not None or inp.parent_run_id is not None \
                or inp.resume_from is not None:
            return None
        graph_input = decode(inp.input)
        parts = await split_parts(self._spec, graph_input, self._fail)
        if len(parts) <= 1:
            return None
        children = await start_children(inp, graph_input, parts, self._recorder)
        await self._finish("completed", "split", {
            "status": "completed", "outcome": "split",
            "snapshot": {"children": children, "outcome": "split"}})
        self._out.publish("end", {"status": "completed", "outcome": "split", "children": children})
        await self._closing()
        return GraphRunResult(run_id=inp.run_id, status="completed", outcome="split",
                              children=children)

    async def _drive(self, inp: GraphRunInput, call: SegmentCall) -> SegmentResult:
        """Segments until the graph ends: past budget stops, node pauses and approvals.

        Returns the last segment's result (the graph's values so far when the run failed or
        a reviewer ended it at its budget). A failed activity fails the run with its cause;
        a cancellation is recorded and re-raised.
        """
        try:
            if inp.carry is not None:  # a continued run: on from where the last one stopped
                self._restore(RunState.from_counters(inp.carry["counters"]))
                call = SegmentCall(**inp.carry["call"])
                result = SegmentResult(**inp.carry["result"])
                rounds = int(inp.carry["rounds"])
                self._keep_state(call, result)
            else:
                result = await self._segment(call, "start")
                rounds = 0
            while result.status != "done":
                if self._continue_as_new_due():
                    await self._continue_as_new(call, result, rounds)
                if result.status == "budget":  # stopped before a chat-model call past the budget
                    result = await self._past_budget_stop(call, result)
                elif result.status == "paused":  # before a node with options, or after its step
                    call.input, call.resume, call.checkpoint_id = None, None, None
                    call.go_on, call.leg = True, call.leg + 1
                    result = await self._next(call, result.next)
                else:  # interrupted: the approvals decide, then the graph resumes
                    rounds += 1
                    result = await self._past_interrupts(call, result, rounds)
        except BudgetDeniedError:
            self._denied = True  # a reviewer ended the run at its LLM budget, state so far kept
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        except ACTIVITY_FAILURES as err:  # a local try's bug is the error itself
            if is_cancelled_exception(err):
                await self._cancelled()
                raise
            cause = failure_cause(err)
            details = cause.details[0] if cause is not None and cause.details else {}
            await self._fail({
                "code": cause.type if cause is not None and cause.type else "activity_failed",
                "message": cause.message if cause is not None else str(err)[:500],
                "node": details.get("node") if isinstance(details, dict) else None})
        return result

    async def _past_budget_stop(self, call: SegmentCall, result: SegmentResult) -> SegmentResult:
        """Wait for the budget stop's approval, then go on with the node it stopped."""
        await self._budget.within_budget(result.stopped_at or "a node", result.blocked)
        call.go_on, call.leg = True, call.leg + 1
        return await self._segment(call, f"after budget stop {self._state.budget_stops}")

    async def _past_interrupts(self, call: SegmentCall, result: SegmentResult,
                               rounds: int) -> SegmentResult:
        """Publish the segment's interrupts, wait for their decisions, resume the graph with them."""
        pending = [SimpleNamespace(id=i["id"], value=i["value"])
                   for i in sorted(result.interrupts, key=lambda i: str(i["id"]))]
        if call.stream:
            self._out.publish("interrupt", [{"id": i.id, "value": i.value} for i in pending])
        answers = await self._ask(pending, rounds)  # the ones decided so far
        call.input, call.resume = None, encode(answers)
        call.segment, call.checkpoint_id, call.go_on, call.leg = rounds, None, False, 0
        return await self._next(call, result.interrupted_in, f"resume {rounds}")

    async def _end(self, inp: GraphRunInput, result: SegmentResult) -> GraphRunResult:
        """Write the run's ending (the segment may have written the same already) and publish it."""
        out = self._out
        values = result.values or {}
        ending = run_ending(values, self._state.last_decision, self._spec.run.result,
                            denied=self._denied)
        status, outcome = ending.status, ending.outcome
        await self._finish(status, outcome, ending.data, written=result.ended)
        out.publish("end", {"status": status, "outcome": outcome})
        if out.run_stream is not None:
            out.emit(out.run_stream.end(status, outcome, values))
        await self._closing()
        return GraphRunResult(run_id=inp.run_id, status=status, outcome=outcome, output=values,
                              result=ending.result, final_event=out.final)

    # -- segments -------------------------------------------------------------------------------

    async def _next(self, call: SegmentCall, nodes: list[str],
                    label: str = "go on") -> SegmentResult:
        """The next segment: one step in its own activity when ``nodes`` has a node with options."""
        placed = self._runner.placed(call, nodes)
        if placed is None:
            return await self._segment(call, label)
        opts, retry, node_label = placed
        return await self._segment(call, node_label, opts, retry)

    async def _segment(self, call: SegmentCall, label: str, opts: NodeOptions | None = None,
                       retry: RetryPolicy | None = None) -> SegmentResult:
        """Run a segment and keep what it returned.

        An Agent Server run's state goes to :meth:`get_thread_state`; its chunks went live
        from the segment itself (:mod:`overseer.token_stream`).
        """
        state = self._state
        if any(v is not None for v in state.budget.values()):
            call.budget, call.spent = dict(state.budget), dict(state.spent)
        call.stream_base = state.published  # its tokens come before its items (token_stream)
        # with no approval open, nothing the thread's state names changes while it runs
        call.ending = None if self._state.open else self._out.segment_ending(
            self._recorder.status, decided=self._gate.moving, decision_note=self._gate.last_note,
            last_decision=self._state.last_decision)
        result = await self._runner.run(call, label, opts, retry)
        task = asyncio.current_task()
        if task is not None and task.cancelling() and result.ended is None:
            # cancelled while the segment finished before it heard: the run ends cancelled
            # (unless the segment wrote its ending: then it has completed)
            raise asyncio.CancelledError
        self._segments_run += 1
        self._budget.count_usage(result.usage)
        self._keep_state(call, result)
        return result

    def _keep_state(self, call: SegmentCall, result: SegmentResult) -> None:
        """The thread's state after a segment, for :meth:`get_thread_state` and decision checks.

        An Agent Server run's whole snapshot; a ``/v1`` run's values at a pause when its
        pipeline's ``check_decision`` reads them (``SegmentCall.values_at_pause``).
        """
        if result.snapshot is not None:
            self._out.snapshot = result.snapshot
        elif call.values_at_pause and result.values is not None:
            self._out.snapshot = {"values": result.values}

    # -- interrupts -----------------------------------------------------------------------------

    async def _ask(self, pending: list[Any], rounds: int) -> dict[str, Any]:
        """Every pending interrupt is its own approval; wait until one has its decision.

        An interrupt whose approval is open already (the run went on with another one's
        answer and paused again on it) keeps it: its claim, its ladder and any decision
        taken meanwhile. Each approval climbs its own ladder in its own task.

        Returns:
            ``{interrupt id: what interrupt() returns}`` for every pending interrupt decided
            (at least one): the resume map of the next segment.
        """
        gate, out, recorder = self._gate, self._out, self._recorder
        ladder = EscalationLadder.from_dict(self._run.approval)
        sla = timedelta(seconds=ladder.sla_seconds or 72 * 3600)
        ids = [i.id for i in pending]
        self._state.moves += 1  # the run reached its next state
        known = {a.interrupt_id for a in self._state.open}
        fresh = [gate.new_approval(question(i, ids), sla=sla, key=f"{rounds}:{i.id}",
                                   interrupt_id=i.id) for i in pending if i.id not in known]
        recorder.pause = out.paused_hand_off(  # goes with approval.requested
            f"{rounds}:{ids[0]}", self.get_thread_state)
        if out.run_stream is not None:
            for approval in fresh:
                out.emit(out.run_stream.interrupt(approval.payload))
        if fresh:
            await gate.open_approvals(fresh)
        else:  # paused again on approvals open already
            if recorder.status != "awaiting_approval":  # a continued run's
                await recorder.set_status("awaiting_approval")
            if recorder.pause is not None:  # the thread's pause goes on without a new request
                hand_off, recorder.pause = recorder.pause, None
                await recorder.record_batch([], "paused again", hand_off)
        asking = [a for a in self._state.open if a.interrupt_id in ids]
        gate.moving = any(a.decision is not None for a in asking)  # decided meanwhile
        for approval in asking:
            if approval.key not in self._ladders:
                self._ladders[approval.key] = asyncio.create_task(gate.climb(ladder, approval))
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
        for approval, decision in zip(decided, await gate.take_decisions(decided), strict=True):
            self._state.last_decision = decision["decision"]
            if out.run_stream is not None:
                out.emit(out.run_stream.decision(decision))
            answers[str(approval.interrupt_id)] = answer(decision)
        return answers

    # -- continue-as-new ------------------------------------------------------------------------

    def _continue_as_new_due(self) -> bool:
        """Temporal suggests it (the history is large), or the run's options say so.

        Checked between segments; ``continue_as_new_after_segments`` (tests and tuning)
        continues after that many segments of this workflow run.
        """
        limit = self._run.continue_as_new_after_segments
        return workflow.info().is_continue_as_new_suggested() or \
            (limit > 0 and self._segments_run >= limit)

    async def _continue_as_new(self, call: SegmentCall, result: SegmentResult,
                               rounds: int) -> NoReturn:
        """Continue as new between two segments: the graph's state is in LangGraph's checkpointer.

        What goes along is the run's :class:`RunState`, the segment that just ended (so the
        new run asks its interrupts or goes on as this one would have), the next segment's
        call and the newest items of the event stream; nothing of the graph itself. Waits
        for the handlers in flight and the webhooks first.
        """
        workflow.logger.info("continuing as new", extra={"run_id": self._inp.run_id,
                                                         "segments": self._segments_run})
        carry = {"counters": self._state.counters(), "call": dataclasses.asdict(call),
                 "result": dataclasses.asdict(result), "rounds": rounds}
        self.stream.detach_pollers()
        self._gate.handing_over = True  # a decide waiting for the next state answers "running"
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._recorder.webhooks_sent()
        workflow.continue_as_new(dataclasses.replace(
            self._inp, carry=carry, stream_state=self._out.carried(), resume_from=None))

    def _restore(self, state: RunState) -> None:
        """Go on with a continued run's state (the one instance every part holds)."""
        for f in dataclasses.fields(RunState):
            setattr(self._state, f.name, getattr(state, f.name))

    # -- endings --------------------------------------------------------------------------------

    async def _record_end(self, event_type: str, data: dict[str, Any],
                          written: dict[str, Any] | None = None) -> None:
        """``run.finished`` (and the thread's hand-off), once the ladders still climbing stop.

        ``written``: the last segment wrote both already (``SegmentResult.ended``); only the
        webhooks its hand-off claimed are left to POST.
        """
        for task in self._ladders.values():
            task.cancel()
        self._ladders = {}
        if written is not None:
            self._recorder.post_webhooks(written.get("webhooks") or [])
            return
        await self._recorder.record_batch(
            [{"run_id": self._inp.run_id, "key": "run.finished", "type": event_type,
              "data": data, "actor": "workflow", "occurred_at": workflow.now().isoformat()}],
            event_type, self._out.ending_hand_off(event_type, self.get_thread_state))

    async def _finish(self, status: str, outcome: str | None, data: dict[str, Any],
                      written: dict[str, Any] | None = None) -> None:
        """The run completed (``data``: ``run.completed``'s); ``written`` as :meth:`_record_end`."""
        self._recorder.outcome = outcome
        await self._record_end(RUN_COMPLETED, data, written)
        await self._recorder.set_status(status)

    async def _closing(self) -> None:
        """Let the stream's pollers go, finish the handlers in flight and the webhooks."""
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._recorder.webhooks_sent()

    async def _cancelled(self) -> None:
        """Record and announce a cancelled run (the caller re-raises the cancellation)."""
        self._recorder.outcome = "cancelled"
        await self._record_end(RUN_CANCELLED, {"status": "cancelled", "outcome": "cancelled",
                                               "snapshot": {"outcome": "cancelled"}})
        await self._recorder.set_status("cancelled")
        self._out.publish("end", {"status": "cancelled", "outcome": "cancelled"})
        if self._out.run_stream is not None:
            self._out.emit(self._out.run_stream.cancelled())
        await self._closing()

    async def _fail(self, error: dict[str, Any]) -> NoReturn:
        """Record and announce a failed run, then fail the workflow (non-retryable)."""
        await self._record_end(RUN_FAILED, {"status": "failed", "outcome": None, "error": error,
                                            "snapshot": {"outcome": None}})
        await self._recorder.set_status("failed")
        self._out.publish("error", error)
        if self._out.run_stream is not None:
            self._out.emit(self._out.run_stream.failed(error))
        await self._closing()
        raise ApplicationError(error["message"], error, type=error["code"], non_retryable=True)

