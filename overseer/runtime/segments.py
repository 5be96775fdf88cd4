"""Runtime v2, first step: a run segment is one activity on LangGraph's own Postgres checkpointer (issue 25).

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
(:mod:`overseer.runtime.segment_guards`). This module holds the activity, its call and result,
its config and breakpoints, and what a retried segment runs.

Hosted by :class:`workflows.segment_run.SegmentRunWorkflow`, every run's workflow (``/v1``
runs and Agent Server runs alike): the five reference pipelines and every graph of a
``langgraph.json``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
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
from overseer.resources import get_runtime
from overseer.run_options import DURABILITY_MODES
from overseer.run_types import RUN_ID_KEY, SEGMENT_KEY
from overseer.runtime.errors import as_application_error
from overseer.runtime.graph_nodes import BUG_TYPES, NODE_ERROR, UsageMeter, record_ledger
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
from overseer.runtime.segment_stream import (
    EXTRA_STREAM_MODES,
    STREAM_MODES,
    OwnStream,
    chunks_and_events,
    live_chunk,
)
from overseer.token_stream import (
    TokenWriter,
    current_writers,
    custom_item,
    message_ids,
    retractions,
    segment_rows,
    token_item,
)


@dataclass
class SegmentCall:
    """One segment of a run.

    Attributes:
        run_id: the Overseer run.
        pipeline: the registry name of its graph.
        thread_id: LangGraph's thread (the run's own id unless it belongs to a thread).
        input: the run's graph input, :func:`overseer.graph_codec.encode`-d (first segment).
        resume: ``{interrupt id: value}`` for a resume segment (LangGraph's resume map).
        durability: ``sync`` | ``async`` | ``exit`` (LangGraph's).
        recursion_limit: Pregel's step limit.
        go_on: the same segment already ran in part (a local try that did not finish in
            time, or a stop at the run's LLM budget that a reviewer raised): go on from
            what it checkpointed, as a retry does.
        stream: an Agent Server run: write the segment's chunks (``values``, ``updates``,
            ``custom`` and what ``modes`` asks for) live to ``agent_run_tokens`` as LangGraph's
            loop makes them (:mod:`overseer.token_stream`), and return the thread's state.
        segment: the segment's number in its run (0 = the start; each resume adds one): keys
            the ledger entries of the chat-model calls made in it.
        checkpoint_id: start from this past checkpoint of the thread (an Agent Server run
            with ``checkpoint_id``: LangGraph forks there); the first segment only.
        budget: the run's LLM budget ``{"usd", "tokens"}`` (None = not limited); a chat-model
            call that would start once ``spent`` plus this segment's calls have passed it
            is not made: the segment stops there (status ``budget``).
        spent: the run's LLM spend before this segment ``{"usd", "tokens", "calls"}``.
        heartbeat_seconds: the activity's heartbeat time-out; the segment heartbeats three
            times per time-out while a node runs, so a long node is not taken for a dead worker.
        leg: how many times this segment went on (``go_on``) before: keys its ledger entries
            apart from the earlier legs' (each leg's first attempt is attempt 1).
        one_step: run one superstep only (LangGraph's ``interrupt_after="*"``): the step of
            a node with options, run as its own activity with them. Otherwise the segment
            stops before any superstep that has such a node
            (:func:`overseer.node_options.placed_nodes`; ``interrupt_before``).
        modes: with ``stream``, LangGraph stream modes the run asked for beyond
            :data:`overseer.runtime.segment_stream.STREAM_MODES` (``tasks``, ``checkpoints``,
            ``debug``): their chunks are returned too; ``messages``: LangGraph's messages
            chunks (tokens as a model makes them) are written live to ``agent_run_tokens``
            (:mod:`overseer.token_stream`).
        stream_base: with ``stream``, how many items the run's durable stream held when the
            segment started: LangGraph's ``messages`` chunks (tokens as they come) are
            written with it to ``agent_run_tokens`` (:mod:`overseer.token_stream`).
        config: the run's own LangGraph config (an Agent Server run's ``config``):
            ``configurable`` keys (beyond the thread and checkpoint ids, which are the
            runtime's), ``tags`` and ``metadata``, given to every node as LangGraph gives them.
        context: the run's runtime context (LangGraph's ``context=``; a dict becomes the
            graph's ``context_schema`` when it is a dataclass or pydantic model).
        interrupt_before: the run's breakpoints before these nodes (``"*"``: every node).
        interrupt_after: the run's breakpoints after these nodes (``"*"``: every node).
            A segment stopped at one of the run's own breakpoints ends the run (``done``
            with ``next`` set); the thread's next run with no input goes on from there.
        subgraphs: with ``stream``, stream subgraphs' chunks too, their event named
            ``"<mode>|<namespace>"`` as the Agent Server names them (``stream_subgraphs``).
        values_at_pause: return the thread's values at an interrupt too: the pipeline's
            ``check_decision`` reads the state at the pause (``Pipeline.gate.decides_on_state``).
        ending: for a thread's run (``{"thread_state", "last_decision"}``:
            :meth:`workflows.durable_stream.DurableStream.segment_ending`): a segment that ends
            the graph (``done``) writes the run's ending and hands the thread on itself
            (:mod:`overseer.runtime.segment_ending`), and says so in ``SegmentResult.ended``.
        yield_after: a local try (only) stops at the first superstep boundary this many
            seconds after it started (0 = never) and reports ``paused`` with ``yielded``: the
            workflow goes on from its checkpoint in the heartbeating activity, so nothing
            runs twice and from then on a cancel reaches it at a heartbeat (:class:`YieldAfter`).
    """

    run_id: str
    pipeline: str
    thread_id: str
    input: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    durability: str = "async"
    recursion_limit: int = 100
    go_on: bool = False
    stream: bool = False
    segment: int = 0
    checkpoint_id: str | None = None
    budget: dict[str, Any] | None = None
    spent: dict[str, Any] = field(default_factory=dict)
    heartbeat_seconds: float = 10.0
    leg: int = 0
    one_step: bool = False
    modes: list[str] = field(default_factory=list)
    stream_base: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    context: Any = None
    # str first: Temporal's JSON converter tries a union's types in order, and would make
    # "*" the list ["*"], which LangGraph reads as a node named "*"
    interrupt_before: str | list[str] | None = None
    interrupt_after: str | list[str] | None = None
    subgraphs: bool = False
    values_at_pause: bool = False
    ending: dict[str, Any] | None = None
    yield_after: float = 0.0


@dataclass
class SegmentResult:
    """How a segment ended.

    Attributes:
        status: ``interrupted`` (waiting on ``interrupts``), ``budget`` (stopped before a
            chat-model call past the run's LLM budget, at ``stopped_at``), ``paused`` (the
            graph goes on with the nodes in ``next``: a node with options is among them, or a
            one-step segment ended) or ``done`` (the graph ended, or stopped at one of the
            run's own breakpoints: then ``next`` names the nodes it stopped before).
        values: the thread's values (JSON) when ``done``, ``budget`` or ``paused``; while
            interrupted only with ``SegmentCall.values_at_pause`` (the checkpointer holds
            them).
        interrupts: ``[{"id", "value"}]`` pending, oldest first.
        nodes: the nodes this attempt ran, in order (what the Temporal UI summary names).
        snapshot: with ``SegmentCall.stream``: the thread's state as the workflow's
            ``get_thread_state`` gives it (``values``, ``encoded``, ``next``, ``tasks``,
            ``interrupts``, checkpoint ids, ``metadata``, ``created_at``).
        usage: this attempt's chat-model spend ``{"cost_usd", "input_tokens",
            "output_tokens", "calls"}`` (a node activity's ``usage`` shape).
        stopped_at: with status ``budget``, the node whose call was not made.
        blocked: with status ``budget``, when the node stopped on its own pre-call
            estimate (:class:`overseer.budget.BudgetStop`): the spend and the call's
            estimate; None when the spend had passed the budget.
        next: with status ``paused`` (or ``done`` at a breakpoint), the nodes of the next
            superstep.
        interrupted_in: with status ``interrupted``, the nodes whose ``interrupt()`` waits.
        ended: with status ``done`` and ``SegmentCall.ending``, the ending the segment wrote:
            ``{"webhooks"}`` (:func:`overseer.runtime.segment_ending.write_ending`).
        yielded: with status ``paused``, a local try stopped at its ``yield_after``: the
            rest of the segment belongs in the heartbeating activity.
    """

    status: str
    values: dict[str, Any] | None = None
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    stopped_at: str | None = None
    blocked: dict[str, Any] | None = None
    next: list[str] = field(default_factory=list)
    interrupted_in: list[str] = field(default_factory=list)
    ended: dict[str, Any] | None = None
    yielded: bool = False


async def _kept_tasks(app: Any, config: dict[str, Any], call: SegmentCall,
                      started: dict[str, tuple[str, float]], wall_started: dict[str, int],
                      where: TaskSteps, out: NodeEvents) -> list[str]:
    """After a failure or a stop: ``node.completed`` for this attempt's tasks LangGraph kept.

    A task that finished as another task of its superstep failed (or was stopped at the
    LLM budget) has its writes kept by LangGraph, which does not run it again, but its
    ``tasks`` chunk may never have reached the segment's loop: it is recorded from the
    thread's state (a task whose writes were kept from an earlier attempt started no chain
    in this one, and is not recorded again).

    Returns:
        The names of the tasks that failed, in task order (the first names the failure).
    """
    state = await app.aget_state(config)
    failed: list[str] = []
    for task in state.tasks:
        if task.error is not None:
            failed.append(task.name)
        elif task.id in started and where.of(task.id) is not None \
                and task.result is not None and not task.interrupts:  # ran in this attempt
            name, began = started.pop(task.id)
            seconds = time.perf_counter() - began
            observe(call.run_id, call.pipeline, task.id, name, seconds,
                    wall_started.pop(task.id, None))
            node_completed(out, call.run_id, call.pipeline, task.id, name, seconds * 1000,
                           where.of(task.id), task.result)
    return failed


def _naming(err: ApplicationError, node: str) -> ApplicationError:
    """``err`` with the failed node in its details (the run's ``error.node``)."""
    details = err.details[0] if err.details and isinstance(err.details[0], dict) else {}
    if details.get("node") or node == "?":
        return err
    return ApplicationError(err.message, {**details, "node": node}, type=err.type,
                            non_retryable=err.non_retryable,
                            next_retry_delay=err.next_retry_delay)


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
    from langgraph.types import Command

    from overseer.registry import get_registry

    if call.durability not in DURABILITY_MODES:
        raise ApplicationError(f"durability must be one of {DURABILITY_MODES}",
                               type="invalid_durability", non_retryable=True)
    call = _with_graph_breakpoints(call)
    app = await compiled(call.pipeline)
    meter = UsageMeter()
    where = TaskSteps()
    callbacks: list[Any] = [meter, where]
    guard = None
    if call.budget and any(v is not None for v in call.budget.values()):
        guard = BudgetGuard(meter, call.spent, call.budget)
        callbacks.append(guard)
        # the nodes' own pre-call checks use the budget as raised (the activity's task has a
        # context of its own: nothing leaks to the next activity)
        set_run_budget(call.budget)
    if call.one_step:
        callbacks.append(StepBarrier())
    config = run_config(call, callbacks)
    graph_input: Any = (Command(resume=decode(call.resume)) if call.resume is not None
                        else decode(call.input) if call.input is not None else None)
    start = config if not call.checkpoint_id else {  # a run from a past checkpoint forks there
        **config, "configurable": {**config["configurable"], "checkpoint_id": call.checkpoint_id}}
    nodes = NodeEvents()  # node.completed, written beside the loop
    info = activity.info()
    # this attempt writes only while it holds the segment (overseer.fencing): it claims it
    # first, so an attempt it replaces, still running somewhere, writes nothing more
    fence = Fence(call.run_id, f"{call.segment}.{call.leg}")
    await fence.claim(get_runtime().pool, info.attempt, local=info.is_local)
    fencing.current.set(fence)  # the activity's task has a context of its own
    # a local try is run again from attempt 1 when its worker died (the workflow task timed
    # out and its replay schedules the try anew), so it too looks for this segment's checkpoints
    recovering = False
    if info.attempt > 1 or call.go_on or info.is_local:
        graph_input, resumed = await _retry_input(app, config, call, graph_input)
        if resumed:
            start = config  # on from this run's own latest checkpoint
            recovering = graph_input is None  # its own checkpoint, not a resume sent again
    # a leg that goes on after the last one ended as it should: LangGraph streams the state
    # (and checkpoint) it starts from first, which that leg streamed as its last; a run not
    # split in legs would not
    echo = set(ECHOED_MODES) if call.go_on and recovering and info.attempt == 1 else set()
    if info.attempt > 1 or (info.is_local and recovering):
        # a crash may have lost events of nodes that finished
        for task, key in await recoverable_tasks(app, config, call.run_id):
            node_completed(nodes, call.run_id, call.pipeline, str(task.id), str(task.name), None,
                           key, task.result, recovered=True)
    local = info.is_local
    started: dict[str, tuple[str, float]] = {}
    wall_started: dict[str, int] = {}
    ran: list[str] = []
    asked = [m for m in call.modes if m in EXTRA_STREAM_MODES] if call.stream else []
    live = call.stream and "messages" in call.modes  # the run asked for messages: tokens
    modes = ["tasks", *STREAM_MODES, *(m for m in asked if m != "tasks"),
             *(["messages"] if live else [])] if call.stream else ["tasks"]
    # a pipeline's node_snapshot reads the state after each node: the state before its
    # superstep (LangGraph's values chunks) with the node's update
    spec = get_registry().get(call.pipeline)
    snapshot_of_node = spec.nodes.node_snapshot
    if snapshot_of_node is not None and "values" not in modes:
        modes.append("values")
    before: Any = None
    # a pipeline's own stream protocol (Pipeline.run.stream): its chunk events (and what its
    # nodes write with get_stream_writer()) go out live, as rows, as tokens do
    own = OwnStream.open(spec, call.run_id, call.input, call.stream_base, fence) \
        if spec.run.stream is not None else None
    if own is not None:
        modes += [m for m in ("updates", "custom", *own.modes) if m not in modes]
    # tokens and custom writes go live through Postgres (overseer.token_stream)
    tokens = TokenWriter(get_runtime().pool, call.run_id, call.stream_base, fence) \
        if call.stream else None
    current_writers.set(tuple(w for w in (tokens, own.writer if own else None) if w))
    if tokens is not None and live and (info.attempt > 1 or (local and recovering)):
        await _retract(app, config, call, tokens)  # before the node that died streams again
    breakpoints = _breakpoints(call, placed(call.pipeline))
    due = None  # a local try hands over to the heartbeating activity after yield_after
    if local and call.yield_after > 0 and breakpoints.get("interrupt_after") != "*":
        due = YieldAfter(breakpoints.get("interrupt_after") or [], call.yield_after)
        breakpoints["interrupt_after"] = due
    # LangGraph streams subgraphs' chunks only when asked; the segment always asks, for the
    # tasks of subgraph nodes (each its own node.completed), and drops the rest unless the
    # run asked (stream_subgraphs): what the client gets is LangGraph's subgraphs=False then
    subgraphs = call.stream and call.subgraphs
    inner: dict[str, tuple[str, float, int]] = {}  # subgraph tasks in progress
    last_step: list[str] = []  # the nodes of the latest superstep (an interrupt_after stop)
    beats = None if local else asyncio.create_task(_heartbeats(call, started, ran, inner))
    stopped: BudgetStop | None = None
    ended = False  # the loop ended or stopped at the budget (else the segment fails)
    reading: asyncio.Task[Any] | None = None  # the state after the loop
    try:
        loop_args: dict[str, Any] = {"stream_mode": modes, "durability": call.durability,
                                     "subgraphs": True, "context": call.context, **breakpoints}
        chunks = (chunks_and_events(app.astream_events(graph_input, start, version="v2",
                                                       **loop_args), tokens)
                  if tokens is not None and "events" in call.modes
                  else app.astream(graph_input, start, **loop_args))
        async for ns, mode, chunk in chunks:
            if ns and mode == "tasks":  # a subgraph node starts or ends
                inner_task(call.run_id, call.pipeline, ns, chunk, inner, where, nodes)
            if ns and not subgraphs:
                continue
            if mode == "messages":  # a token (or a node's whole message), live to the API
                if tokens is not None:
                    await tokens.add(token_item(chunk[0], chunk[1], namespace=ns))
                continue
            if mode == "custom":  # get_stream_writer(): live too, as the node writes it
                if own is not None:
                    await own.chunk(mode, chunk)
                if tokens is not None:
                    await tokens.add(custom_item(chunk, ns))
                continue
            if ns:  # a subgraph's chunk: the client's, named by its namespace
                if tokens is not None and (mode != "tasks" or "tasks" in asked):
                    await live_chunk(tokens, f"{mode}|{'|'.join(ns)}", chunk)
                continue
            if not started and not ran and echoed(echo, mode, chunk):
                before = chunk if mode == "values" else before
                continue
            if tokens is not None and (mode != "tasks" or "tasks" in asked):
                await live_chunk(tokens, mode, chunk)
            if own is not None:
                await own.chunk(mode, chunk)
            if mode == "values":
                before = chunk
            if mode != "tasks":
                continue
            task_id, name = str(chunk["id"]), str(chunk["name"])
            if "result" not in chunk and "error" not in chunk:  # the task starts
                if not started:
                    last_step = []  # a new superstep
                started[task_id] = (name, time.perf_counter())
                wall_started[task_id] = time.time_ns()
                continue
            if chunk.get("error") is None and not chunk.get("interrupts"):
                began = started.pop(task_id, (name, time.perf_counter()))[1]
                seconds = time.perf_counter() - began
                ran.append(name)
                last_step.append(name)
                observe(call.run_id, call.pipeline, task_id, name, seconds,
                        wall_started.pop(task_id, None))
                view = None
                if snapshot_of_node is not None and isinstance(chunk.get("result"), dict):
                    if before is None:  # no values chunk yet (a resume): the last checkpoint's
                        before = (await app.aget_state(config)).values
                    view = snapshot_of_node({**before, **chunk["result"]})
                node_completed(nodes, call.run_id, call.pipeline, task_id, name, seconds * 1000,
                               where.of(task_id), chunk.get("result"), view)
        ended = True
        # read while the closing writes below go out (their round trips overlap: ~3 ms)
        reading = asyncio.create_task(app.aget_state(config))
    except BudgetStop as err:  # the call was not made; the finished tasks' writes are kept
        stopped, ended = err, True
    except Exception as err:
        try:
            failed = await _kept_tasks(app, config, call, started, wall_started, where, nodes)
        except Exception:  # noqa: BLE001 - the state unreadable (a database outage): raise err
            failed = []
        node = failed[0] if failed else next(iter(started.values()), ("?", 0.0))[0]
        if isinstance(err, OverseerError):
            raise _naming(as_application_error(err), node) from err
        if isinstance(err, ApplicationError):  # raised by the node itself
            raise _naming(err, node) from err
        if isinstance(err, BUG_TYPES):  # a bug fails the run once, with the node named
            raise ApplicationError(
                f"node {node} raised {type(err).__name__}: {str(err)[:500]}",
                {"node": node, "exception": type(err).__name__}, type=NODE_ERROR,
                non_retryable=True) from err
        raise
    finally:  # every chat-model call a node made is in the run's ledger, failed ones too
        if beats is not None:
            beats.cancel()
        try:
            if not ended:  # what finished before the failure is recorded all the same
                await nodes.close(quiet=True)
            if tokens is not None:  # committed before the segment reports (or fails, retries)
                await tokens.close()
            if own is not None:  # published before the segment reports
                await own.close()
            await record_ledger(call.run_id, "segment", f"segment{call.segment}"
                                + (f".{call.leg}" if call.leg else ""), meter)
        except BaseException:
            if reading is not None:
                reading.cancel()
            raise
    try:
        if stopped is not None:
            await _kept_tasks(app, config, call, started, wall_started, where, nodes)
        await nodes.close()  # in the log before the segment reports
        state = await (reading if reading is not None else app.aget_state(config))
    finally:
        if reading is not None and not reading.done():
            reading.cancel()
    values = await claim_checked(state.values)
    extra: dict[str, Any] = {}
    if call.stream:
        snapshot = snapshot_of(state)
        if values != snapshot["values"]:  # a value was claim-checked: the state refers to it
            snapshot.update(values=values, encoded=encode(values))
        extra = {"snapshot": snapshot}
    extra["usage"] = {"cost_usd": meter.cost_usd, "input_tokens": meter.input_tokens,
                      "output_tokens": meter.output_tokens, "calls": meter.calls}
    if stopped is not None:
        return SegmentResult(status="budget", values=values, nodes=ran,
                             stopped_at=stopped.node, blocked=stopped.blocked, **extra)
    if state.interrupts:
        return SegmentResult(status="interrupted", nodes=ran,
                             values=values if call.values_at_pause else None, interrupts=[
            {"id": i.id, "value": to_jsonable(i.value)} for i in state.interrupts],
            interrupted_in=sorted({t.name for t in state.tasks if t.interrupts}), **extra)
    if state.next and not _own_breakpoint(call, list(state.next), last_step):
        # a breakpoint before a node with options, or after a one-step segment
        return SegmentResult(status="paused", values=values, nodes=ran, next=list(state.next),
                             yielded=due is not None and due.fired, **extra)
    done = SegmentResult(status="done", values=values, nodes=ran, next=list(state.next), **extra)
    if call.ending is not None:  # a thread's run: its ending and hand-off go out from here
        ending = run_ending(values or {}, call.ending.get("last_decision"), spec.run.result)
        try:
            done.ended = await write_ending(call.run_id, call.thread_id, ending, {
                **(done.snapshot or {}), **call.ending["thread_state"]})
        except ENDING_UNAVAILABLE:  # the workflow writes it then, retried until it is in
            activity.logger.warning("the segment could not write the run's ending; its "
                                    "workflow will", exc_info=True)
    return done


ECHOED_MODES = ("values", "checkpoints", "debug")
"""Stream modes whose first chunk, when a segment goes on from its own checkpoint, repeats the
last chunk of the leg before (the state, or checkpoint, the loop starts from)."""


def echoed(echo: set[str], mode: str, chunk: Any) -> bool:
    """Whether ``chunk``, streamed before any task of a leg that goes on, repeats the last leg's.

    Takes its mode out of ``echo`` (the modes still to see, from :data:`ECHOED_MODES`) when it
    does: one chunk per mode, ``debug``'s checkpoint only. Streams joined this way are the
    stream of the run not split (``tests/unit/test_segment_yield.py``).
    """
    if mode not in echo or (mode == "debug" and chunk.get("type") != "checkpoint"):
        return False
    echo.discard(mode)
    return True


RUNTIME_CONFIGURABLE = ("thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map")
"""``configurable`` keys the runtime sets; a run's own ``config`` cannot change them."""


def run_config(call: SegmentCall, callbacks: list[Any]) -> dict[str, Any]:
    """The LangGraph config a segment runs with.

    The run's own ``config`` (:attr:`SegmentCall.config`: ``configurable``, ``tags``,
    ``metadata``) under the runtime's keys: the thread id, the run id in the metadata
    and the segment in the metadata (:data:`overseer.compiled_graphs.RUN_ID_KEY`,
    :data:`~overseer.compiled_graphs.SEGMENT_KEY`), the recursion limit and the callbacks.
    Keys LangGraph reserves for itself (``__pregel_*``, ``__``-prefixed) are dropped.
    """
    own = call.config if isinstance(call.config, dict) else {}
    configurable = {k: v for k, v in (own.get("configurable") or {}).items()
                    if k not in RUNTIME_CONFIGURABLE and not str(k).startswith("__")}
    config: dict[str, Any] = {
        "configurable": {**configurable, "thread_id": call.thread_id},
        "metadata": {**(own.get("metadata") or {}), RUN_ID_KEY: call.run_id,
                     SEGMENT_KEY: call.segment},
        "recursion_limit": call.recursion_limit, "callbacks": callbacks}
    if own.get("tags"):
        config["tags"] = [str(t) for t in own["tags"]]
    return config


def _with_graph_breakpoints(call: SegmentCall) -> SegmentCall:
    """``call`` with the graph's compiled breakpoints where the run named none of its own.

    LangGraph's ``astream`` stops at the breakpoints a graph was compiled with
    (``builder.compile(interrupt_before=[…])``) unless it is given its own (its
    ``interrupt_before or self.interrupt_before_nodes``: an empty list is none given), and
    so does a run here: each of ``interrupt_before`` / ``interrupt_after`` the run left
    empty is the graph's (:meth:`overseer.registry.Registry.breakpoints`), and stopping
    there ends the run as at the run's own.
    """
    from overseer.registry import get_registry

    compiled_with = get_registry().breakpoints(call.pipeline)
    if not compiled_with:
        return call
    return replace(call,
                   interrupt_before=call.interrupt_before
                   or compiled_with.get("interrupt_before"),
                   interrupt_after=call.interrupt_after or compiled_with.get("interrupt_after"))


def _breakpoints(call: SegmentCall, placed: list[str]) -> dict[str, Any]:
    """``interrupt_before`` / ``interrupt_after`` for ``astream``: the run's own and the runtime's.

    The runtime stops before a node with options (``placed``, run as its own activity) and,
    for a one-step segment, after every node.
    """
    before = call.interrupt_before
    after = "*" if call.one_step else call.interrupt_after
    if before != "*" and placed:
        before = sorted({*placed, *(before or [])})
    return {k: v for k, v in (("interrupt_before", before), ("interrupt_after", after)) if v}


class YieldAfter(Sequence[str]):
    """``interrupt_after`` for a local try: the run's own nodes, and every node once it is due.

    LangGraph asks ``node in interrupt_after`` for the tasks of each superstep it finishes
    (after their checkpoint, before the next superstep starts), so once ``seconds`` have
    passed the loop stops at the next superstep boundary as at a breakpoint: the finished
    supersteps are checkpointed and nothing in flight is cancelled. LangGraph's own nodes
    (``__start__`` and the like) never stop it, as with ``"*"``.

    Args:
        own: the nodes the run (or its one-step segment) stops after anyway.
        seconds: how long after now the try hands over.

    Attributes:
        fired: the try stopped (or was due to stop) because it ran out of time.
    """

    def __init__(self, own: Sequence[str], seconds: float) -> None:
        self._own = list(own)
        self._due = time.monotonic() + seconds
        self.fired = False

    def __contains__(self, node: object) -> bool:
        if node in self._own:
            return True
        if isinstance(node, str) and not node.startswith("__") and time.monotonic() >= self._due:
            self.fired = True
            return True
        return False

    def __getitem__(self, index: Any) -> Any:
        return self._own[index]

    def __len__(self) -> int:
        return len(self._own)

    def __bool__(self) -> bool:  # LangGraph skips an empty interrupt_after: this one never is
        return True


def _own_breakpoint(call: SegmentCall, following: list[str], last_step: list[str]) -> bool:
    """True when a segment stopped at one of the run's own breakpoints (not the runtime's)."""
    if call.one_step:
        return False
    before, after = call.interrupt_before, call.interrupt_after
    return bool(before == "*" or after == "*"
                or set(before or []) & set(following) or set(after or []) & set(last_step))


async def _heartbeats(call: SegmentCall, started: dict[str, tuple[str, float]],
                      ran: list[str], inner: dict[str, tuple[str, float, int]]) -> None:
    """Heartbeat three times per heartbeat time-out, naming the nodes in progress.

    Runs beside the segment's loop, so a node that runs longer than the time-out (a slow
    model call, a long computation) is not taken for a dead worker. A subgraph's node in
    progress is named by its path (``"clause_extraction/initial_search"``). The first beat
    comes 60% of the time-out in, not as the first node starts: a short segment (most chats)
    then costs Temporal no heartbeat at all (~4 ms of its CPU per run at 100 concurrent runs,
    docs/performance.md round 19), and a worker that dies before it is still noticed at the
    time-out, which Temporal counts from the activity's start. That first beat leaves the
    same margin as every later one: Temporal's SDK sends a heartbeat at most every 80% of the
    time-out, so the server hears one every 0.8 × time-out while the segment runs.
    """
    every = max(0.2, call.heartbeat_seconds / 3)
    await asyncio.sleep(max(every, call.heartbeat_seconds * 0.6))
    while True:
        running = {n for n, _ in started.values()} | {p for p, _, _ in inner.values()}
        activity.heartbeat({"node": ", ".join(sorted(running)), "ran": ran})
        await asyncio.sleep(every)


async def _retract(app: Any, config: dict[str, Any], call: SegmentCall,
                   tokens: TokenWriter) -> None:
    """Take back what earlier attempts of this segment streamed and the thread did not keep.

    A message is kept when it is in the state this attempt starts from or in the writes
    LangGraph kept of that superstep's finished tasks (those do not run again); any other
    message an earlier attempt streamed was cut off with it, and its node streams it again
    under a new id: :func:`overseer.token_stream.retractions`, written first.

    Raises:
        asyncpg.PostgresError, OSError: the rows or the state could not be read (Temporal
            retries the segment).
    """
    rows = await segment_rows(get_runtime().pool, call.run_id, call.stream_base)
    if not rows:
        return
    state = await app.aget_state(config)
    kept = message_ids(state.values) | message_ids([t.result for t in state.tasks])
    for item in retractions(rows, kept):
        await tokens.add(item)


async def _retry_input(app: Any, config: dict[str, Any], call: SegmentCall,
                       first_input: Any) -> tuple[Any, bool]:
    """What a segment that may have run before runs, and whether from the thread's latest checkpoint.

    Asked by a retry, a segment that goes on (``go_on``) and every local try (which runs
    again from attempt 1 after its worker died).

    - it still waits on the interrupt this resume answers → the same resume;
    - the thread's latest checkpoint was written by this segment of this run → ``None`` from
      there (LangGraph goes on where it stopped: a finished superstep never runs again; a
      segment that had ended, or reached its interrupt, ends again without running anything);
    - this segment wrote no checkpoint yet (died before its first, or is a first try whose
      run's earlier segments wrote the latest) → its own input, from where it started: a
      resume whose interrupt has not fired yet (the segment stopped before the node that
      asks) is sent again, not dropped.
    """
    state = await app.aget_state(config)
    metadata = state.metadata or {}
    mine = metadata.get(RUN_ID_KEY) == call.run_id and metadata.get(SEGMENT_KEY) == call.segment
    if call.resume is not None and state.interrupts and \
            {i.id for i in state.interrupts} & set(call.resume):
        return first_input, True
    if mine:
        return None, True
    return first_input, False
