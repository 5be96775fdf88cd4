"""A run segment is one activity on LangGraph's own Postgres checkpointer: ``run_segment``.

A *segment* is a run's stretch from its start (or a resume) to its next interrupt or its
end. :func:`run_segment` runs it in one heartbeating activity: LangGraph's own Pregel loop
(``graph.astream``) with ``AsyncPostgresSaver`` on Overseer's Postgres (LangGraph's tables,
made by its own ``setup()``), ``thread_id`` = the run's thread. LangGraph writes the
checkpoints (one per superstep, or at the end: ``durability``), the pending writes and the
interrupts; Overseer keeps only the run's events.

What a crash can cost: a retried segment (the worker died, the heartbeat timed out) resumes
from the thread's last checkpoint this run wrote to Postgres, so a superstep whose
checkpoint is stored never runs again (and a segment that had already ended, or reached its
interrupt, only ends again). With ``durability="sync"`` at most the nodes of the superstep in
flight run twice; with ``async`` (the default) also the superstep before, when its
checkpoint was still being written; with ``exit`` the whole segment. ``node.completed`` is
keyed by the task's superstep and path (:class:`overseer.runtime.segment_record.TaskSteps`), the
same when a superstep runs again, so a node execution is recorded once.

Events, heartbeats and the Temporal UI stay per node: one ``node.completed`` per finished
task (handed to a writer beside the loop as it finishes, a superstep's in one commit, all
in the log before the segment reports: :class:`overseer.runtime.segment_record.NodeEvents`; a
retried segment writes those a crash lost from the run's checkpoints:
:func:`overseer.runtime.segment_record.recoverable_tasks`), a heartbeat naming the nodes in
progress (every third of the heartbeat time-out, the first a third in: a segment shorter
than that sends none, and a dead worker's is still noticed within the time-out, which runs
from the activity's start), and the segment's result names the nodes it ran.

What the activity runs with lives beside it: the compiled graph and its checkpointer
(:mod:`overseer.compiled_graphs`), the thread's state as a segment hands it on
(:mod:`overseer.graph_state`), the live stream (:mod:`overseer.runtime.segment_stream`), the
per-node records (:mod:`overseer.runtime.segment_record`) and the budget and one-step callbacks
(:mod:`overseer.runtime.segment_guards`), its call and result
(:mod:`overseer.runtime.segment_call`), its config, breakpoints and what a retried attempt
runs (:mod:`overseer.runtime.segment_setup`). This module holds the activity and one
attempt at it (:class:`SegmentAttempt`), as a short sequence of steps.

Hosted by :class:`workflows.segment_run.SegmentRunWorkflow`, every run's workflow (``/v1``
runs and Agent Server runs alike): the five reference pipelines and every graph of a
``langgraph.json``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from overseer import fencing
from overseer.budget import BudgetStop, set_run_budget
from overseer.compiled_graphs import compiled, placed
from overseer.errors import OverseerError
from overseer.fencing import Fence
from overseer.graph_codec import decode, encode, to_jsonable
from overseer.graph_state import claim_checked, snapshot_of
from overseer.pipelines import Pipeline
from overseer.registry import get_registry
from overseer.resources import get_runtime
from overseer.run_options import DURABILITY_MODES
from overseer.runtime.errors import as_application_error
from overseer.runtime.graph_nodes import BUG_TYPES, NODE_ERROR, UsageMeter, record_ledger
from overseer.runtime.segment_call import SegmentCall, SegmentResult
from overseer.runtime.segment_ending import run_ending, write_ending
from overseer.runtime.segment_guards import BudgetGuard, StepBarrier
from overseer.runtime.segment_record import (
    NodeEvents,
    TaskSteps,
    inner_task,
    node_completed,
    observe,
    recoverable_tasks,
)
from overseer.runtime.segment_setup import (
    ECHOED_MODES,
    YieldAfter,
    echoed,
    heartbeats,
    kept_tasks,
    loop_breakpoints,
    own_breakpoint,
    retract,
    retry_input,
    run_config,
    with_graph_breakpoints,
)
from overseer.runtime.segment_stream import (
    EXTRA_STREAM_MODES,
    STREAM_MODES,
    OwnStream,
    chunks_and_events,
    live_chunk,
)
from overseer.token_stream import TokenWriter, current_writers, custom_item, token_item

ENDING_UNAVAILABLE = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, RPCError,
                      OverseerError)
"""What keeps a segment from writing its run's ending (Postgres, or the next queued run's start):
the segment reports without it and the workflow writes it (:mod:`overseer.runtime.segment_ending`)."""


@activity.defn(name="run_segment")
async def run_segment(call: SegmentCall) -> SegmentResult:
    """Run one segment of a run to its next interrupt or its end (see the module docstring).

    Raises:
        ApplicationError: ``invalid_durability`` (not retried); a node's own exception
            after LangGraph's checkpoint of the supersteps before it (Temporal retries the
            segment, which resumes from that checkpoint).
    """
    if call.durability not in DURABILITY_MODES:
        raise ApplicationError(f"durability must be one of {DURABILITY_MODES}",
                               type="invalid_durability", non_retryable=True)
    attempt = await SegmentAttempt.begin(call)
    await attempt.recover()
    await attempt.open_streams()
    await attempt.run_loop()
    return await attempt.result()


class SegmentAttempt:
    """One attempt at a segment, step by step (:func:`run_segment` calls them in order).

    1. :meth:`begin`: the compiled graph, the callbacks (usage meter, budget, one-step
       barrier), the LangGraph config and input, and the segment's fence claimed
       (:mod:`overseer.fencing`: an attempt it replaces, still running somewhere, writes
       nothing more);
    2. :meth:`recover`: an attempt that may have run before goes on from its own checkpoint
       and records the node events a crash lost;
    3. :meth:`open_streams`: the stream modes, the token stream and the pipeline's own
       stream, and the tokens an earlier attempt streamed and the thread did not keep
       taken back;
    4. :meth:`run_loop`: LangGraph's loop, each finished task recorded as it comes;
    5. :meth:`result`: the thread's state as the segment's result, and a thread run's
       ending written when the graph ended.
    """

    def __init__(self, call: SegmentCall, app: Any, spec: Pipeline) -> None:
        self.call, self.app, self.spec = call, app, spec
        self.info = activity.info()
        self.local = self.info.is_local
        self.meter = UsageMeter()
        self.where = TaskSteps()
        self.nodes = NodeEvents()  # node.completed, written beside the loop
        callbacks: list[Any] = [self.meter, self.where]
        if call.budget and any(v is not None for v in call.budget.values()):
            callbacks.append(BudgetGuard(self.meter, call.spent, call.budget))
            # the nodes' own pre-call checks use the budget as raised (the activity's task
            # has a context of its own: nothing leaks to the next activity)
            set_run_budget(call.budget)
        if call.one_step:
            callbacks.append(StepBarrier())
        self.config = run_config(call, callbacks)
        self.start = self.config if not call.checkpoint_id else {  # a past checkpoint: a fork
            **self.config, "configurable": {**self.config["configurable"],
                                            "checkpoint_id": call.checkpoint_id}}
        self.graph_input: Any = None
        self.fence = Fence(call.run_id, f"{call.segment}.{call.leg}")
        self.recovering = False
        self.echo: set[str] = set()
        self.modes: list[str] = []
        self.asked: list[str] = []
        self.tokens: TokenWriter | None = None
        self.own: OwnStream | None = None
        self.started: dict[str, tuple[str, float]] = {}
        self.wall_started: dict[str, int] = {}
        self.ran: list[str] = []
        self.last_step: list[str] = []  # the nodes of the latest superstep
        self.inner: dict[str, tuple[str, float, int]] = {}  # subgraph tasks in progress
        self.before: Any = None  # the state before the superstep (a pipeline's node_snapshot)
        self.due: YieldAfter | None = None
        self.stopped: BudgetStop | None = None
        self.state: Any = None

    @classmethod
    async def begin(cls, call: SegmentCall) -> SegmentAttempt:
        """Set the attempt up and claim its segment (step 1).

        Raises:
            StaleAttempt: a later attempt holds the segment already (this one writes nothing).
            asyncpg.PostgresError, OSError: the claim could not be written (retried).
        """
        from langgraph.types import Command

        call = with_graph_breakpoints(call)
        attempt = cls(call, await compiled(call.pipeline), get_registry().get(call.pipeline))
        attempt.graph_input = (Command(resume=decode(call.resume)) if call.resume is not None
                               else decode(call.input) if call.input is not None else None)
        await attempt.fence.claim(get_runtime().pool, attempt.info.attempt, local=attempt.local)
        fencing.current.set(attempt.fence)  # the activity's task has a context of its own
        return attempt

    async def recover(self) -> None:
        """Go on from this segment's own checkpoint, and record what a crash lost (step 2).

        Asked by a retry, a leg that goes on (``go_on``) and every local try: a local try is
        run again from attempt 1 when its worker died (the workflow task timed out and its
        replay schedules the try anew), so it too looks for this segment's checkpoints.
        """
        call, attempt = self.call, self.info.attempt
        if attempt > 1 or call.go_on or self.local:
            self.graph_input, resumed = await retry_input(self.app, self.config, call,
                                                          self.graph_input)
            if resumed:
                self.start = self.config  # on from this run's own latest checkpoint
                self.recovering = self.graph_input is None  # its checkpoint, not a resume again
        # a leg that goes on after the last one ended as it should: LangGraph streams the
        # state (and checkpoint) it starts from first, which that leg streamed as its last
        if call.go_on and self.recovering and attempt == 1:
            self.echo = set(ECHOED_MODES)
        if attempt > 1 or (self.local and self.recovering):
            # a crash may have lost events of nodes that finished
            for task, key in await recoverable_tasks(self.app, self.config, call.run_id):
                node_completed(self.nodes, call.run_id, call.pipeline, str(task.id),
                               str(task.name), None, key, task.result, recovered=True)

    async def open_streams(self) -> None:
        """The loop's stream modes and writers, and the tokens taken back (step 3).

        An Agent Server run streams LangGraph's chunks live (rows of
        :mod:`overseer.token_stream`); a pipeline's own stream protocol
        (``Pipeline.run.stream``) gets its chunk events (and what its nodes write with
        ``get_stream_writer()``) live too; a pipeline's ``node_snapshot`` needs the state
        before each superstep (``values``).
        """
        call = self.call
        self.asked = [m for m in call.modes if m in EXTRA_STREAM_MODES] if call.stream else []
        live = call.stream and "messages" in call.modes  # the run asked for tokens
        self.modes = ["tasks", *STREAM_MODES, *(m for m in self.asked if m != "tasks"),
                      *(["messages"] if live else [])] if call.stream else ["tasks"]
        if self.spec.nodes.node_snapshot is not None and "values" not in self.modes:
            self.modes.append("values")
        if self.spec.run.stream is not None:
            self.own = OwnStream.open(self.spec, call.run_id, call.input, call.stream_base,
                                      self.fence)
            self.modes += [m for m in ("updates", "custom", *self.own.modes)
                           if m not in self.modes]
        if call.stream:
            self.tokens = TokenWriter(get_runtime().pool, call.run_id, call.stream_base,
                                      self.fence)
        current_writers.set(tuple(w for w in (self.tokens, self.own.writer if self.own else None)
                                  if w))
        if self.tokens is not None and live and \
                (self.info.attempt > 1 or (self.local and self.recovering)):
            await retract(self.app, self.config, call, self.tokens)  # before its node streams again

    def _loop_args(self) -> dict[str, Any]:
        """``astream``'s arguments: the modes, durability, context and breakpoints."""
        call = self.call
        points = loop_breakpoints(call, placed(call.pipeline))
        # a local try hands over to the heartbeating activity after yield_after
        if self.local and call.yield_after > 0 and points.get("interrupt_after") != "*":
            self.due = YieldAfter(points.get("interrupt_after") or [], call.yield_after)
            points["interrupt_after"] = self.due
        # LangGraph streams subgraphs' chunks only when asked; the segment always asks, for
        # the tasks of subgraph nodes (each its own node.completed), and drops the rest
        # unless the run asked (stream_subgraphs)
        return {"stream_mode": self.modes, "durability": call.durability, "subgraphs": True,
                "context": call.context, **points}

    async def run_loop(self) -> None:
        """LangGraph's loop, each chunk where it goes and each finished task recorded (step 4).

        Ends with the thread's state read (``self.state``), or ``self.stopped`` at the run's
        LLM budget. Whatever happens, the node events, the streams and the ledger of the
        chat-model calls made are written before the segment reports.

        Raises:
            ApplicationError: a node's failure, named (a bug: not retried); the loop's own
                errors as they came (Temporal retries the segment).
        """
        call, app = self.call, self.app
        args = self._loop_args()
        beats = None if self.local else asyncio.create_task(
            heartbeats(call, self.started, self.ran, self.inner))
        ended = False  # the loop ended or stopped at the budget (else the segment fails)
        reading: asyncio.Task[Any] | None = None  # the state after the loop
        try:
            chunks = (chunks_and_events(app.astream_events(self.graph_input, self.start,
                                                           version="v2", **args), self.tokens)
                      if self.tokens is not None and "events" in call.modes
                      else app.astream(self.graph_input, self.start, **args))
            async for ns, mode, chunk in chunks:
                await self._on_chunk(ns, mode, chunk)
            ended = True
            # read while the closing writes below go out (their round trips overlap)
            reading = asyncio.create_task(app.aget_state(self.config))
        except BudgetStop as err:  # the call was not made; the finished tasks' writes are kept
            self.stopped, ended = err, True
        except Exception as err:
            failure = await self._failure(err)
            if failure is err:
                raise
            raise failure from err
        finally:  # every chat-model call a node made is in the run's ledger, failed ones too
            if beats is not None:
                beats.cancel()
            try:
                await self._close_writers(ended)
            except BaseException:
                if reading is not None:
                    reading.cancel()
                raise
        try:
            if self.stopped is not None:
                await kept_tasks(app, self.config, call, self.started, self.wall_started,
                                 self.where, self.nodes)
            await self.nodes.close()  # in the log before the segment reports
            self.state = await (reading if reading is not None else app.aget_state(self.config))
        finally:
            if reading is not None and not reading.done():
                reading.cancel()

    async def _on_chunk(self, ns: tuple[str, ...], mode: str, chunk: Any) -> None:
        """One chunk of the loop: live to the client, to the pipeline's stream, or a task's record."""
        call, tokens, own = self.call, self.tokens, self.own
        if ns and mode == "tasks":  # a subgraph node starts or ends
            inner_task(call.run_id, call.pipeline, ns, chunk, self.inner, self.where, self.nodes)
        if ns and not (call.stream and call.subgraphs):
            return
        if mode == "messages":  # a token (or a node's whole message), live to the API
            if tokens is not None:
                await tokens.add(token_item(chunk[0], chunk[1], namespace=ns))
            return
        if mode == "custom":  # get_stream_writer(): live too, as the node writes it
            if own is not None:
                await own.chunk(mode, chunk)
            if tokens is not None:
                await tokens.add(custom_item(chunk, ns))
            return
        if ns:  # a subgraph's chunk: the client's, named by its namespace
            if tokens is not None and (mode != "tasks" or "tasks" in self.asked):
                await live_chunk(tokens, f"{mode}|{'|'.join(ns)}", chunk)
            return
        if not self.started and not self.ran and echoed(self.echo, mode, chunk):
            self.before = chunk if mode == "values" else self.before
            return
        if tokens is not None and (mode != "tasks" or "tasks" in self.asked):
            await live_chunk(tokens, mode, chunk)
        if own is not None:
            await own.chunk(mode, chunk)
        if mode == "values":
            self.before = chunk
        elif mode == "tasks":
            await self._on_task(chunk)

    async def _on_task(self, chunk: dict[str, Any]) -> None:
        """A ``tasks`` chunk: a task starts, or one finished (its ``node.completed``)."""
        call = self.call
        task_id, name = str(chunk["id"]), str(chunk["name"])
        if "result" not in chunk and "error" not in chunk:  # the task starts
            if not self.started:
                self.last_step = []  # a new superstep
            self.started[task_id] = (name, time.perf_counter())
            self.wall_started[task_id] = time.time_ns()
            return
        if chunk.get("error") is not None or chunk.get("interrupts"):
            return
        began = self.started.pop(task_id, (name, time.perf_counter()))[1]
        seconds = time.perf_counter() - began
        self.ran.append(name)
        self.last_step.append(name)
        observe(call.run_id, call.pipeline, task_id, name, seconds,
                self.wall_started.pop(task_id, None))
        view = None
        snapshot_of_node = self.spec.nodes.node_snapshot
        if snapshot_of_node is not None and isinstance(chunk.get("result"), dict):
            if self.before is None:  # no values chunk yet (a resume): the last checkpoint's
                self.before = (await self.app.aget_state(self.config)).values
            view = snapshot_of_node({**self.before, **chunk["result"]})
        node_completed(self.nodes, call.run_id, call.pipeline, task_id, name, seconds * 1000,
                       self.where.of(task_id), chunk.get("result"), view)

    async def _failure(self, err: Exception) -> Exception:
        """The error the segment fails with: a node's, named (a bug is not retried), or ``err``."""
        try:
            failed = await kept_tasks(self.app, self.config, self.call, self.started,
                                      self.wall_started, self.where, self.nodes)
        except Exception:  # noqa: BLE001 - the state unreadable (a database outage): raise err
            failed = []
        node = failed[0] if failed else next(iter(self.started.values()), ("?", 0.0))[0]
        if isinstance(err, OverseerError):
            return _naming(as_application_error(err), node)
        if isinstance(err, ApplicationError):  # raised by the node itself
            return _naming(err, node)
        if isinstance(err, BUG_TYPES):  # a bug fails the run once, with the node named
            return ApplicationError(
                f"node {node} raised {type(err).__name__}: {str(err)[:500]}",
                {"node": node, "exception": type(err).__name__}, type=NODE_ERROR,
                non_retryable=True)
        return err

    async def _close_writers(self, ended: bool) -> None:
        """Node events (what finished, even on a failure), streams and the ledger, written."""
        call = self.call
        if not ended:  # what finished before the failure is recorded all the same
            await self.nodes.close(quiet=True)
        if self.tokens is not None:  # committed before the segment reports (or fails, retries)
            await self.tokens.close()
        if self.own is not None:  # published before the segment reports
            await self.own.close()
        await record_ledger(call.run_id, "segment", f"segment{call.segment}"
                            + (f".{call.leg}" if call.leg else ""), self.meter)

    async def result(self) -> SegmentResult:
        """The segment's result from the thread's state, a thread run's ending written (step 5)."""
        call, state, meter = self.call, self.state, self.meter
        values = await claim_checked(state.values)
        extra: dict[str, Any] = {}
        if call.stream:
            snapshot = snapshot_of(state)
            if values != snapshot["values"]:  # a value was claim-checked: the state refers to it
                snapshot.update(values=values, encoded=encode(values))
            extra = {"snapshot": snapshot}
        extra["usage"] = {"cost_usd": meter.cost_usd, "input_tokens": meter.input_tokens,
                          "output_tokens": meter.output_tokens, "calls": meter.calls}
        ran = self.ran
        if self.stopped is not None:
            return SegmentResult(status="budget", values=values, nodes=ran,
                                 stopped_at=self.stopped.node, blocked=self.stopped.blocked,
                                 **extra)
        if state.interrupts:
            return SegmentResult(
                status="interrupted", nodes=ran, values=values if call.values_at_pause else None,
                interrupts=[{"id": i.id, "value": to_jsonable(i.value)} for i in state.interrupts],
                interrupted_in=sorted({t.name for t in state.tasks if t.interrupts}), **extra)
        if state.next and not own_breakpoint(call, list(state.next), self.last_step):
            # a breakpoint before a node with options, or after a one-step segment
            return SegmentResult(status="paused", values=values, nodes=ran, next=list(state.next),
                                 yielded=self.due is not None and self.due.fired, **extra)
        done = SegmentResult(status="done", values=values, nodes=ran, next=list(state.next),
                             **extra)
        if call.ending is not None:  # a thread's run: its ending and hand-off go out from here
            ending = run_ending(values or {}, call.ending.get("last_decision"),
                                self.spec.run.result)
            try:
                done.ended = await write_ending(call.run_id, call.thread_id, ending, {
                    **(done.snapshot or {}), **call.ending["thread_state"]})
            except ENDING_UNAVAILABLE:  # the workflow writes it then, retried until it is in
                activity.logger.warning("the segment could not write the run's ending; its "
                                        "workflow will", exc_info=True)
        return done


def _naming(err: ApplicationError, node: str) -> ApplicationError:
    """``err`` with the failed node in its details (the run's ``error.node``)."""
    details = err.details[0] if err.details and isinstance(err.details[0], dict) else {}
    if details.get("node") or node == "?":
        return err
    return ApplicationError(err.message, {**details, "node": node}, type=err.type,
                            non_retryable=err.non_retryable,
                            next_retry_delay=err.next_retry_delay)
