"""``SegmentRunWorkflow``: the one workflow every run is (issue 25).

Every registered graph — the five reference pipelines and every graph of a
``langgraph.json`` — runs here. The workflow never runs LangGraph itself: each segment —
the run's start, or a resume, up to the next interrupt or the end — is one heartbeating
``run_segment`` activity (:mod:`activities.segments`) that runs LangGraph's own loop on
``AsyncPostgresSaver``. Temporal owns what happens between segments
(:class:`workflows.run_base.RunWorkflowBase`): segment retries (a retried segment resumes
from its last checkpoint), every interrupt as an approval on the shared gate (ladder,
console, claims, exactly-once decisions; ``interrupt()`` gets the decision's ``resume`` as
sent; each of parallel interrupts is its own approval, and the run goes on with whichever
are decided, as LangGraph does with a resume map naming some of them), the LLM budget gate (a
segment stops before a chat-model call past the run's budget; a reviewer raises it or ends
the run), nodes with options (each runs as its own activity with its time-out, heartbeat and
attempts, between segments), cancellation and the run's events.

An Agent Server run's chunks go live from the segment (:mod:`overseer.token_stream`), its
state per segment from what the activity returns. Between two segments the run continues as
new when Temporal suggests it (its history is large): the graph's state is in LangGraph's
checkpointer, so only the run's counters, the segment that just ended and the stream's
newest items go along. A pipeline that splits a submission (``Pipeline.split``) runs its
split activity first; with several parts the run starts one child run of this workflow per
part and completes with outcome ``split``. A node placed ``run_in: workflow |
local_activity`` (the words of Temporal's LangGraph plugin) runs inside its segment
(docs/your-graph.md, "Runs as segments").
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from types import SimpleNamespace

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from activities.graph_nodes import NODE_ERROR
    from activities.segments import SegmentCall, SegmentResult
    from overseer.graph_codec import decode, encode
    from overseer.pipelines import NodeOptions, get_registry, node_options, placed_nodes
    from overseer.run_types import STATUS_ATTRIBUTE, GraphRunInput, GraphRunResult
    from workflows.run_base import (
        DEFAULT_RECURSION_LIMIT,
        BudgetDeniedError,
        RunWorkflowBase,
        failure_cause,
        final_status,
    )

SEGMENT_HEARTBEAT_SECONDS = 10.0
"""A dead worker's segment runs again on another worker after this long (issue 25); the run
option ``segment_heartbeat_seconds`` (``OVERSEER_SEGMENT_HEARTBEAT_SECONDS``) changes it."""
LOCAL_SEGMENT_SECONDS = 5.0
"""How long a segment a pipeline calls short for its input (``Pipeline.local_segments``) may
run as a local activity before it goes on as a heartbeating activity."""
SEGMENT_TIMEOUT = timedelta(hours=1)
"""Start-to-close time-out of one segment attempt (the heartbeat notices a dead worker first)."""


@workflow.defn(name="SegmentRunWorkflow", sandboxed=False)
class SegmentRunWorkflow(RunWorkflowBase):
    """Drives one run as segments to a terminal status (see the module docstring).

    Not sandboxed: no user graph code runs in this workflow (LangGraph's loop runs in the
    segment activities), only Overseer's own gate, events and bookkeeping and a pipeline's
    pure hooks (``result``, ``checked_decision``), which must be deterministic anyway. The
    sandbox's per-activation cost was ~20 ms of worker CPU per run (docs/performance.md,
    round 7).
    """

    @workflow.run
    async def run(self, inp: GraphRunInput) -> GraphRunResult:
        """Run segments until the graph ends; each interrupt waits on the approval gate."""
        self._placed_nodes: list[str] | None = None
        self._inp, self._run_id, self._pipeline = inp, inp.run_id, inp.pipeline
        self._use_search_attributes = inp.search_attributes
        self._spec = get_registry().get(inp.pipeline)
        self._budget = {"usd": inp.options.get("llm_budget_usd"),
                        "tokens": inp.options.get("llm_budget_tokens")}
        self._segments_run = 0
        self._local_seconds, durability = float(inp.options.get("segment_local_seconds") or 0), "async"
        if not self._local_seconds and self._spec.local_segments is not None and \
                self._spec.local_segments(decode(inp.input) or {}):
            # short: local tries, checkpointed when each ends (a crash reruns one, < 5 s)
            self._local_seconds, durability = LOCAL_SEGMENT_SECONDS, "exit"
        durability = str(inp.options.get("durability") or durability)  # the run's, or the operator's
        if self._spec.stream is not None:  # the pipeline's own stream protocol (its chunks
            # go out live from the segments, the rest from here)
            self._run_stream = self._spec.stream(decode(inp.input) or {})
            self._own_topic = self.stream.topic(self._run_stream.topic)
            if inp.carry is None:
                self._emit(self._run_stream.start())
        if inp.carry is None:
            self._publish("metadata", {"run_id": inp.run_id, "pipeline": inp.pipeline,
                                       "workflow_id": workflow.info().workflow_id})
        if workflow.info().typed_search_attributes.get(STATUS_ATTRIBUTE) == "running":
            self._status = "running"  # the starter set the search attributes: no upsert
        else:
            await self.set_status("running")
        call = SegmentCall(run_id=inp.run_id, pipeline=inp.pipeline,
                           thread_id=inp.thread_id or inp.run_id, input=inp.input,
                           durability=durability,
                           recursion_limit=int(inp.options.get("recursion_limit")
                                               or DEFAULT_RECURSION_LIMIT),
                           stream=inp.thread_id is not None,
                           modes=list(inp.options.get("stream_modes") or []),
                           checkpoint_id=inp.options.get("checkpoint_id"),
                           heartbeat_seconds=float(inp.options.get("segment_heartbeat_seconds")
                                                   or SEGMENT_HEARTBEAT_SECONDS),
                           config=dict(inp.options.get("graph_config") or {}),
                           context=inp.options.get("context"),
                           interrupt_before=inp.options.get("interrupt_before"),
                           interrupt_after=inp.options.get("interrupt_after"),
                           subgraphs=bool(inp.options.get("stream_subgraphs")),
                           values_at_pause=self._spec.decides_on_state
                           and inp.thread_id is None)
        if self._spec.split and inp.carry is None and inp.parent_run_id is None and \
                inp.resume_from is None:  # a submission of several parts: one child run each
            graph_input = decode(inp.input)
            parts = await self._split_parts(graph_input)
            if len(parts) > 1:
                return await self._start_children(graph_input, parts)
        try:
            if inp.carry is not None:  # a continued run: on from where the last one stopped
                self._restore_counters(inp.carry["counters"])
                call = SegmentCall(**inp.carry["call"])
                result = SegmentResult(**inp.carry["result"])
                rounds = int(inp.carry["rounds"])
                self._keep_state(call, result)
            else:
                result = await self._segment(call, "start")
                rounds = 0
            while result.status != "done":
                if self._continue_as_new_due():
                    await self._continue_segments_as_new(call, result, rounds)
                if result.status == "budget":  # stopped before a chat-model call past the budget
                    await self._within_budget(result.stopped_at or "a node", result.blocked)
                    call.go_on, call.leg = True, call.leg + 1
                    result = await self._segment(call, f"after budget stop {self._budget_stops}")
                    continue
                if result.status == "paused":  # before a node with options, or after its step
                    call.input, call.resume, call.checkpoint_id = None, None, None
                    call.go_on, call.leg = True, call.leg + 1
                    result = await self._next(call, result.next)
                    continue
                rounds += 1
                pending = [SimpleNamespace(id=i["id"], value=i["value"])
                           for i in sorted(result.interrupts, key=lambda i: str(i["id"]))]
                if call.stream:
                    self._publish("interrupt", [{"id": i.id, "value": i.value} for i in pending])
                answers = await self._ask(pending, rounds)  # the ones decided so far
                call.input, call.resume = None, encode(answers)
                call.segment, call.checkpoint_id, call.go_on, call.leg = rounds, None, False, 0
                result = await self._next(call, result.interrupted_in, f"resume {rounds}")
        except BudgetDeniedError:
            self._denied = True  # a reviewer ended the run at its LLM budget, state so far kept
        except asyncio.CancelledError:
            await self._cancelled()
            raise
        except (ActivityError, ApplicationError) as err:  # a local try's bug is the error itself
            if is_cancelled_exception(err):
                await self._cancelled()
                raise
            cause = failure_cause(err)
            details = cause.details[0] if cause is not None and cause.details else {}
            await self._fail({
                "code": cause.type if cause is not None and cause.type else "activity_failed",
                "message": cause.message if cause is not None else str(err)[:500],
                "node": details.get("node") if isinstance(details, dict) else None})
        values = result.values or {}
        status, outcome = (("rejected", "budget_denied") if self._denied
                           else final_status(values, self._last_decision))
        spec_result = self._spec.result(values) if self._spec.result else {}
        if isinstance(spec_result.get("outcome"), str):
            outcome = spec_result["outcome"]
        await self._finish(status, outcome, spec_result or {"output": values})
        self._publish("end", {"status": status, "outcome": outcome})
        if self._run_stream is not None:
            self._emit(self._run_stream.end(status, outcome, values))
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._webhooks_sent()
        return GraphRunResult(run_id=inp.run_id, status=status, outcome=outcome, output=values,
                              result=spec_result, final_event=self._final)

    def _continue_as_new_due(self) -> bool:
        """Temporal suggests it (the history is large), or the run's options say so.

        Checked between segments; ``continue_as_new_after_segments`` (tests and tuning)
        continues after that many segments of this workflow run.
        """
        assert self._inp is not None
        limit = int(self._inp.options.get("continue_as_new_after_segments") or 0)
        return workflow.info().is_continue_as_new_suggested() or \
            (limit > 0 and self._segments_run >= limit)

    async def _continue_segments_as_new(self, call: SegmentCall, result: SegmentResult,
                                        rounds: int) -> None:
        """Continue as new between two segments: the graph's state is in LangGraph's checkpointer.

        What goes along is the run's counters, the segment that just ended (so the new run
        asks its interrupts or goes on as this one would have), the next segment's call and
        the newest items of the event stream; nothing of the graph itself.
        """
        assert self._inp is not None
        workflow.logger.info("continuing as new", extra={"run_id": self._inp.run_id,
                                                         "segments": self._segments_run})
        await self._hand_over({"counters": self._counters(), "call": dataclasses.asdict(call),
                               "result": dataclasses.asdict(result), "rounds": rounds})

    async def _next(self, call: SegmentCall, nodes: list[str],
                    label: str = "go on") -> SegmentResult:
        """The next segment: one step in its own activity when ``nodes`` has a node with options.

        Such a node's superstep runs alone, with the node's time-out, heartbeat, attempts (or
        the plugin's ``retry_policy``) and summary (the first such node's, in name order, when
        a superstep has several).
        """
        placed = sorted(set(nodes) & set(self._placed()))
        call.one_step = bool(placed)
        if not placed:
            return await self._segment(call, label)
        opts, retry = node_options(
            get_registry().builder(call.pipeline).nodes[placed[0]].metadata)
        return await self._segment(call, f"node {opts.summary or placed[0]}", opts, retry)

    def _placed(self) -> list[str]:
        if self._placed_nodes is None:
            self._placed_nodes = placed_nodes(get_registry().builder(self._pipeline))
        return self._placed_nodes

    async def _segment(self, call: SegmentCall, label: str, opts: NodeOptions | None = None,
                       retry: RetryPolicy | None = None) -> SegmentResult:
        """Run a segment and keep what it returned.

        An Agent Server run's state goes to :meth:`get_thread_state`; its chunks went live
        from the segment itself (:mod:`overseer.token_stream`).
        """
        if any(v is not None for v in self._budget.values()):
            call.budget, call.spent = dict(self._budget), dict(self._spent)
        call.stream_base = self._published  # its tokens come before its items (token_stream)
        result = await self._run_segment(call, label, opts, retry)
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # the run was cancelled while the segment
            raise asyncio.CancelledError  # finished before it heard: the run ends cancelled
        self._segments_run += 1
        self._count_usage(result.usage)
        self._keep_state(call, result)
        return result

    def _keep_state(self, call: SegmentCall, result: SegmentResult) -> None:
        """The thread's state after a segment, for :meth:`get_thread_state` and decision checks.

        An Agent Server run's whole snapshot; a ``/v1`` run's values at a pause when its
        pipeline's ``check_decision`` reads them (``SegmentCall.values_at_pause``).
        """
        if result.snapshot is not None:
            self._snapshot = result.snapshot
        elif call.values_at_pause and result.values is not None:
            self._snapshot = {"values": result.values}

    async def _run_segment(self, call: SegmentCall, label: str, opts: NodeOptions | None = None,
                           retry: RetryPolicy | None = None) -> SegmentResult:
        """One segment, retried by Temporal; first tried as a local activity when the run allows.

        Without ``segment_local_seconds`` or a pipeline that calls the run's input short
        (``Pipeline.local_segments``), or when the local try does not finish in time, it is
        a heartbeating activity.

        A bug fails the run once, on either path. A local try that times out or fails
        otherwise hands over to the activity, which goes on from the checkpoints the local
        try wrote (at most the superstep it was in runs again).
        """
        assert self._inp is not None
        if opts is not None:  # a node with options: its own activity, with them
            step: SegmentResult = await workflow.execute_activity(
                "run_segment", dataclasses.replace(
                    call, heartbeat_seconds=opts.heartbeat_seconds or call.heartbeat_seconds),
                result_type=SegmentResult,
                start_to_close_timeout=timedelta(seconds=opts.timeout_seconds),
                heartbeat_timeout=(timedelta(seconds=opts.heartbeat_seconds)
                                   if opts.heartbeat_seconds else None),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                retry_policy=retry or RetryPolicy(
                    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
                    maximum_attempts=opts.max_attempts,
                    non_retryable_error_types=[NODE_ERROR, "invalid_durability",
                                               *opts.non_retryable]),
                summary=label)
            return step
        local_seconds = self._local_seconds
        if local_seconds > 0:
            try:
                local: SegmentResult = await workflow.execute_local_activity(
                    "run_segment", call, result_type=SegmentResult,
                    start_to_close_timeout=timedelta(seconds=local_seconds),
                    retry_policy=RetryPolicy(maximum_attempts=1), summary=f"segment: {label}")
                return local
            except (ActivityError, ApplicationError) as err:
                cause = failure_cause(err)
                if cause is not None and cause.non_retryable:
                    raise
                call.go_on, call.leg = True, call.leg + 1  # the caller goes on from here too
        result: SegmentResult = await workflow.execute_activity(
            "run_segment", call, result_type=SegmentResult,
            start_to_close_timeout=SEGMENT_TIMEOUT,
            heartbeat_timeout=timedelta(seconds=call.heartbeat_seconds),
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1),
                                     maximum_interval=timedelta(seconds=30), maximum_attempts=5,
                                     non_retryable_error_types=[NODE_ERROR,
                                                                "invalid_durability"]),
            summary=f"segment: {label}")
        return result
