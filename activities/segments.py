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
keyed by the task's superstep and path (:class:`TaskSteps`), the same when a superstep runs
again, so a node execution is recorded once.

Events, heartbeats and the Temporal UI stay per node: one ``node.completed`` per finished
task (handed to a writer beside the loop as it finishes, a superstep's in one commit, all
in the log before the segment reports: :class:`NodeEvents`; a retried segment writes those
a crash lost from the run's checkpoints: :func:`recoverable_tasks`), a heartbeat naming
the node in progress, and the segment's result names the nodes it ran.

Hosted by :class:`workflows.segment_run.SegmentRunWorkflow`, every run's workflow (``/v1``
runs and Agent Server runs alike): the five reference pipelines and every graph of a
``langgraph.json``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import as_application_error
from activities.graph_nodes import (
    BUG_TYPES,
    NODE_ERROR,
    UsageMeter,
    progress_snapshot,
    put_state_blob,
    record_ledger,
)
from activities.runtime import get_runtime
from overseer.budget import BudgetStop, over_budget, set_run_budget
from overseer.catalogue import DURABILITY_MODES
from overseer.errors import OverseerError
from overseer.graph_codec import (
    CLAIM_CHECK_BYTES,
    decode,
    encode,
    encoded_size,
    ref_marker,
    to_jsonable,
)
from overseer.store.events import NODE_COMPLETED, NewEvent
from overseer.token_stream import (
    CHUNK_FLUSH_SECONDS,
    FLUSH_SECONDS,
    TokenWriter,
    chunk_item,
    custom_item,
    event_item,
    own_item,
    token_item,
)

STREAM_MODES = ("values", "updates", "custom")
"""What an Agent Server run's segment always streams, live (:mod:`overseer.token_stream`)."""
EXTRA_STREAM_MODES = ("tasks", "checkpoints", "debug", "tools")
"""LangGraph modes an Agent Server run may also ask for (``SegmentCall.modes``)."""
RUN_ID_KEY = "overseer_run_id"
"""Checkpoint metadata naming the run that wrote a checkpoint (from the config's ``metadata``)."""

logger = logging.getLogger(__name__)


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
            (:func:`overseer.pipelines.placed_nodes`; ``interrupt_before``).
        modes: with ``stream``, LangGraph stream modes the run asked for beyond
            :data:`STREAM_MODES` (``tasks``, ``checkpoints``, ``debug``): their chunks are
            returned too; ``messages``: LangGraph's messages chunks (tokens as a model makes
            them) are written live to ``agent_run_tokens`` (:mod:`overseer.token_stream`).
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
            ``check_decision`` reads the state at the pause (``Pipeline.decides_on_state``).
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
    interrupt_before: list[str] | str | None = None
    interrupt_after: list[str] | str | None = None
    subgraphs: bool = False
    values_at_pause: bool = False


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


class BudgetGuard(AsyncCallbackHandler):
    """Stops a node, or a chat-model call, before it starts once the run's spend has passed its budget.

    ``raise_error`` makes LangChain raise :class:`BudgetStop` at the start of the next task
    (a node, or a subgraph's node: before any of its code runs) or from a chat-model call in
    a node, so the call (and its cost) never happens; LangGraph keeps the writes of the
    superstep's finished tasks, and the next segment (after a reviewer raised the budget)
    runs the stopped node again from its start. A node that catches every exception of its
    model call goes on without the model's answer, and the run stops before its next node.

    Args:
        meter: this segment's :class:`UsageMeter` (its calls count on top of ``spent``).
        spent: the run's spend before the segment ``{"usd", "tokens"}``.
        budget: ``{"usd", "tokens"}``; None entries are not limited.
    """

    raise_error = True  # not run_inline: an inline raise leaves the other handlers' calls unawaited

    def __init__(self, meter: UsageMeter, spent: dict[str, Any], budget: dict[str, Any]) -> None:
        self.meter, self.spent, self.budget = meter, spent, budget
        self._tasks: set[str] = set()

    def total(self) -> dict[str, Any]:
        """The run's spend so far ``{"usd", "tokens", "calls"}`` (before plus this segment)."""
        return {"usd": float(self.spent.get("usd") or 0) + self.meter.cost_usd,
                "tokens": int(self.spent.get("tokens") or 0) + self.meter.input_tokens
                + self.meter.output_tokens,
                "calls": int(self.spent.get("calls") or 0) + self.meter.calls}

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any,
                                  metadata: dict[str, Any] | None = None,
                                  **kwargs: Any) -> None:
        """Raise :class:`BudgetStop` when the spend so far has passed the budget."""
        if over_budget(self.total(), self.budget):
            raise BudgetStop((metadata or {}).get("langgraph_node"))

    async def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any,
                             metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Raise :class:`BudgetStop` as a task starts when the spend so far has passed the budget.

        A task's first chain is its node (LangGraph's ``langgraph_checkpoint_ns`` ends in
        its task id); the chains a node calls itself are left to run.
        """
        meta = metadata or {}
        ns = str(meta.get("langgraph_checkpoint_ns") or "")
        if not ns or "langgraph_node" not in meta:
            return
        task = ns.rpartition(":")[2]
        if task in self._tasks:
            return
        self._tasks.add(task)
        if over_budget(self.total(), self.budget):
            parts = tuple(ns.split("|"))
            raise BudgetStop(node_path(parts[:-1], str(meta["langgraph_node"])))


class StepBarrier(AsyncCallbackHandler):
    """In a one-step segment, a task that fails waits for the step's other tasks before it raises.

    LangGraph cancels a superstep's tasks still running when one of them fails; in the step
    of a node with options (run as its own activity, with its attempts) that would run them
    again on the next attempt (their model calls twice, from a higher attempt number). A
    task's error is reported through ``on_chain_error`` of its first chain, which LangGraph
    awaits in the task before the error reaches its runner, so waiting there until the other
    tasks are done (their writes kept) lets the retry run the failed tasks only. Tasks that
    fail together do not wait for each other.
    """

    run_inline = True  # awaited in the task itself: asyncio.current_task() is the task

    def __init__(self) -> None:
        self._first: dict[Any, asyncio.Task[Any]] = {}  # a task's first chain → the task
        self._seen: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._failing: set[asyncio.Task[Any]] = set()

    async def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any,
                             metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Note a top-level task's first chain, and the asyncio task it runs in."""
        meta = metadata or {}
        ns = str(meta.get("langgraph_checkpoint_ns") or "")
        current = asyncio.current_task()
        if not ns or "|" in ns or "langgraph_node" not in meta or current is None:
            return
        task = ns.rpartition(":")[2]
        if task in self._seen:
            return
        self._seen.add(task)
        self._first[run_id] = current
        self._tasks.add(current)

    async def on_chain_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        """A task failed: unless the run fails, wait until the step's other tasks are done."""
        me = self._first.pop(run_id, None)
        if me is None or not _retried(error):
            return
        self._failing.add(me)
        try:
            while others := [t for t in self._tasks
                             if t is not me and not t.done() and t not in self._failing]:
                await asyncio.wait(others, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._failing.discard(me)


def _retried(error: BaseException) -> bool:
    """Whether Temporal retries a segment that failed with ``error``.

    Not after a bug, an interrupt, a cancellation or a permanent domain error.
    """
    from langgraph.errors import GraphBubbleUp

    if isinstance(error, (*BUG_TYPES, GraphBubbleUp, asyncio.CancelledError)):
        return False
    if isinstance(error, ApplicationError):
        return not error.non_retryable
    return error.retryable if isinstance(error, OverseerError) else True


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
            _observe(call, task.id, name, seconds, wall_started.pop(task.id, None))
            _node_completed(out, call, task.id, name, seconds * 1000, where.of(task.id),
                            task.result)
    return failed


def _naming(err: ApplicationError, node: str) -> ApplicationError:
    """``err`` with the failed node in its details (the run's ``error.node``)."""
    details = err.details[0] if err.details and isinstance(err.details[0], dict) else {}
    if details.get("node") or node == "?":
        return err
    return ApplicationError(err.message, {**details, "node": node}, type=err.type,
                            non_retryable=err.non_retryable,
                            next_retry_delay=err.next_retry_delay)


_saver: Any = None
_saver_lock = asyncio.Lock()
_compiled: dict[str, Any] = {}


async def checkpointer(database_url: str | None = None) -> Any:
    """This process's ``AsyncPostgresSaver`` on Overseer's Postgres (tables made once by ``setup()``).

    Args:
        database_url: where (default: the activity runtime's settings; the API passes its own).
    """
    global _saver
    async with _saver_lock:
        if _saver is None:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            settings = get_runtime().settings if database_url is None else None
            url = database_url or str(settings.database_url if settings else "")
            size = settings.worker_max_concurrent_activities if settings else 4
            pool = AsyncConnectionPool(
                url, min_size=1, max_size=max(4, size), open=False,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row})
            await pool.open(wait=True)
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]  # dict rows, as it expects
            await saver.setup()
            _saver = saver
    return _saver


async def compiled(pipeline: str, database_url: str | None = None) -> Any:
    """The pipeline's graph compiled with :func:`checkpointer` and the store (once per process).

    The store is :func:`overseer.graph_store.graph_store`: nodes get it as LangGraph's
    ``BaseStore`` (``store`` argument, ``get_store()``).
    """
    if pipeline not in _compiled:
        from overseer.graph_store import graph_store
        from overseer.pipelines import get_registry

        _compiled[pipeline] = get_registry().builder(pipeline).compile(
            checkpointer=await checkpointer(database_url),
            store=await graph_store(None if database_url else get_runtime().settings))
    return _compiled[pipeline]


@activity.defn(name="run_segment")
async def run_segment(call: SegmentCall) -> SegmentResult:
    """Run one segment of a run to its next interrupt or its end (see the module docstring).

    Raises:
        ApplicationError: ``invalid_durability`` (not retried); a node's own exception
            after LangGraph's checkpoint of the supersteps before it (Temporal retries the
            segment, which resumes from that checkpoint).
    """
    from langgraph.types import Command

    from overseer.pipelines import get_registry

    if call.durability not in DURABILITY_MODES:
        raise ApplicationError(f"durability must be one of {DURABILITY_MODES}",
                               type="invalid_durability", non_retryable=True)
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
    if activity.info().attempt > 1 or call.go_on:
        graph_input, resumed = await _retry_input(app, config, call, graph_input)
        if resumed:
            start = config  # on from this run's own latest checkpoint
    if activity.info().attempt > 1:  # a crash may have lost events of nodes that finished
        for task, key in await recoverable_tasks(app, config, call.run_id):
            _node_completed(nodes, call, str(task.id), str(task.name), None, key,
                            task.result, recovered=True)
    local = activity.info().is_local
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
    snapshot_of_node = spec.node_snapshot
    if snapshot_of_node is not None and "values" not in modes:
        modes.append("values")
    before: Any = None
    # a pipeline's own stream protocol (Pipeline.stream): its chunk events (and what its
    # nodes write with get_stream_writer()) go out live, as rows, as tokens do
    own = _OwnStream.open(spec, call) if spec.stream is not None else None
    if own is not None:
        modes += [m for m in ("updates", "custom", *own.modes) if m not in modes]
    # tokens and custom writes go live through Postgres (overseer.token_stream)
    tokens = TokenWriter(get_runtime().pool, call.run_id, call.stream_base) if call.stream \
        else None
    placed = _placed(call.pipeline)
    breakpoints = _breakpoints(call, placed)
    # LangGraph streams subgraphs' chunks only when asked; the segment always asks, for the
    # tasks of subgraph nodes (each its own node.completed), and drops the rest unless the
    # run asked (stream_subgraphs): what the client gets is LangGraph's subgraphs=False then
    subgraphs = call.stream and call.subgraphs
    inner: dict[str, tuple[str, float, int]] = {}  # subgraph tasks in progress
    last_step: list[str] = []  # the nodes of the latest superstep (an interrupt_after stop)
    beats = None if local else asyncio.create_task(_heartbeats(call, started, ran, inner))
    stopped: BudgetStop | None = None
    ended = False  # the loop ended or stopped at the budget (else the segment fails)
    try:
        loop_args: dict[str, Any] = {"stream_mode": modes, "durability": call.durability,
                                     "subgraphs": True, "context": call.context, **breakpoints}
        chunks = (_chunks_and_events(app.astream_events(graph_input, start, version="v2",
                                                        **loop_args), tokens)
                  if tokens is not None and "events" in call.modes
                  else app.astream(graph_input, start, **loop_args))
        async for ns, mode, chunk in chunks:
            if ns and mode == "tasks":  # a subgraph node starts or ends
                _inner_task(call, ns, chunk, inner, where, nodes)
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
                    await _live_chunk(tokens, f"{mode}|{'|'.join(ns)}", chunk)
                continue
            if tokens is not None and (mode != "tasks" or "tasks" in asked):
                await _live_chunk(tokens, mode, chunk)
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
                if not local:  # a local activity has no heartbeat: its time-out is short
                    activity.heartbeat({"node": name, "ran": ran})
                continue
            if chunk.get("error") is None and not chunk.get("interrupts"):
                began = started.pop(task_id, (name, time.perf_counter()))[1]
                seconds = time.perf_counter() - began
                ran.append(name)
                last_step.append(name)
                _observe(call, task_id, name, seconds, wall_started.pop(task_id, None))
                view = None
                if snapshot_of_node is not None and isinstance(chunk.get("result"), dict):
                    if before is None:  # no values chunk yet (a resume): the last checkpoint's
                        before = (await app.aget_state(config)).values
                    view = snapshot_of_node({**before, **chunk["result"]})
                _node_completed(nodes, call, task_id, name, seconds * 1000,
                                where.of(task_id), chunk.get("result"), view)
        ended = True
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
        if not ended:  # what finished before the failure is recorded all the same
            await nodes.close(quiet=True)
        if tokens is not None:  # committed before the segment reports (or fails and retries)
            await tokens.close()
        if own is not None:  # published before the segment reports
            await own.close()
        await record_ledger(call.run_id, "segment", f"segment{call.segment}"
                            + (f".{call.leg}" if call.leg else ""), meter)
    if stopped is not None:
        await _kept_tasks(app, config, call, started, wall_started, where, nodes)
    await nodes.close()  # in the log before the segment reports
    state = await app.aget_state(config)
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
    if state.next and _own_breakpoint(call, list(state.next), last_step):
        return SegmentResult(status="done", values=values, nodes=ran, next=list(state.next),
                             **extra)
    if state.next:  # a breakpoint before a node with options, or after a one-step segment
        return SegmentResult(status="paused", values=values, nodes=ran, next=list(state.next),
                             **extra)
    return SegmentResult(status="done", values=values, nodes=ran, **extra)


class _OwnStream:
    """A pipeline's own stream protocol in a segment: :meth:`RunStream.chunk` events, live.

    Written as rows of the run's live stream (:func:`overseer.token_stream.own_item`, in
    the loop's order, within :data:`overseer.token_stream.FLUSH_SECONDS`), as tokens are;
    the workflow publishes the protocol's other events (start, interrupt, decision, end)
    on its durable stream, and the pipeline's reader merges both
    (:func:`overseer.token_stream.merge_live`). Nothing of it crosses Temporal.
    """

    def __init__(self, stream: Any, writer: TokenWriter) -> None:
        self._stream, self._writer = stream, writer
        self.modes: tuple[str, ...] = tuple(stream.stream_modes)

    @classmethod
    def open(cls, spec: Any, call: SegmentCall) -> _OwnStream:
        """The stream of ``spec`` for this segment's run, writing from ``call.stream_base``."""
        graph_input = decode(call.input) if call.input is not None else None
        return cls(spec.stream(graph_input or {"run_id": call.run_id}),
                   TokenWriter(get_runtime().pool, call.run_id, call.stream_base))

    async def chunk(self, mode: str, chunk: Any) -> None:
        """Buffer the protocol's events for one top-level LangGraph chunk."""
        for event in self._stream.chunk(mode, chunk):
            await self._writer.add(own_item(event))

    async def close(self) -> None:
        """Write what is buffered (before the segment reports).

        Raises:
            asyncpg.PostgresError, OSError: a write failed (Temporal retries the segment).
        """
        await self._writer.close()


RUNTIME_CONFIGURABLE = ("thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map")
"""``configurable`` keys the runtime sets; a run's own ``config`` cannot change them."""


def run_config(call: SegmentCall, callbacks: list[Any]) -> dict[str, Any]:
    """The LangGraph config a segment runs with.

    The run's own ``config`` (:attr:`SegmentCall.config`: ``configurable``, ``tags``,
    ``metadata``) under the runtime's keys: the thread id, the run id in the metadata
    (:data:`RUN_ID_KEY`), the recursion limit and the callbacks. Keys LangGraph reserves
    for itself (``__pregel_*``, ``__``-prefixed) are dropped.
    """
    own = call.config if isinstance(call.config, dict) else {}
    configurable = {k: v for k, v in (own.get("configurable") or {}).items()
                    if k not in RUNTIME_CONFIGURABLE and not str(k).startswith("__")}
    config: dict[str, Any] = {
        "configurable": {**configurable, "thread_id": call.thread_id},
        "metadata": {**(own.get("metadata") or {}), RUN_ID_KEY: call.run_id},
        "recursion_limit": call.recursion_limit, "callbacks": callbacks}
    if own.get("tags"):
        config["tags"] = [str(t) for t in own["tags"]]
    return config


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


def _own_breakpoint(call: SegmentCall, following: list[str], last_step: list[str]) -> bool:
    """True when a segment stopped at one of the run's own breakpoints (not the runtime's)."""
    if call.one_step:
        return False
    before, after = call.interrupt_before, call.interrupt_after
    return bool(before == "*" or after == "*"
                or set(before or []) & set(following) or set(after or []) & set(last_step))


_placed_by_pipeline: dict[str, list[str]] = {}


def _placed(pipeline: str) -> list[str]:
    """The pipeline's nodes with options (each runs as its own activity), once per process."""
    if pipeline not in _placed_by_pipeline:
        from overseer.pipelines import get_registry, placed_nodes

        _placed_by_pipeline[pipeline] = placed_nodes(get_registry().builder(pipeline))
    return _placed_by_pipeline[pipeline]


async def _heartbeats(call: SegmentCall, started: dict[str, tuple[str, float]],
                      ran: list[str], inner: dict[str, tuple[str, float, int]]) -> None:
    """Heartbeat three times per heartbeat time-out, naming the nodes in progress.

    Runs beside the segment's loop, so a node that runs longer than the time-out (a slow
    model call, a long computation) is not taken for a dead worker. A subgraph's node in
    progress is named by its path (``"clause_extraction/initial_search"``).
    """
    every = max(0.2, call.heartbeat_seconds / 3)
    while True:
        await asyncio.sleep(every)
        running = {n for n, _ in started.values()} | {p for p, _, _ in inner.values()}
        activity.heartbeat({"node": ", ".join(sorted(running)), "ran": ran})


def node_path(ns: tuple[str, ...], name: str) -> str:
    """A subgraph node's path as the run's events name it: ``"<parent>/…/<name>"``.

    ``ns`` is LangGraph's namespace of the task's graph (``("clause_extraction:<task id>",)``).
    """
    return "/".join([*(part.partition(":")[0] for part in ns), name])


def _inner_task(call: SegmentCall, ns: tuple[str, ...], chunk: dict[str, Any],
                inner: dict[str, tuple[str, float, int]], where: TaskSteps,
                out: NodeEvents) -> None:
    """A subgraph node's ``tasks`` chunk: note its start, or record it once it finished.

    One ``node.completed`` per execution, keyed by the steps and paths of its enclosing
    tasks and its own (:class:`TaskSteps`), so a subgraph run again after a crash (or
    again in a later superstep) is recorded once per execution; one duration sample and span.
    """
    task_id = str(chunk["id"])
    if "result" not in chunk and "error" not in chunk:
        inner[task_id] = (node_path(ns, str(chunk["name"])), time.perf_counter(),
                          time.time_ns())
        return
    path, began, wall = inner.pop(task_id, (node_path(ns, str(chunk["name"])),
                                            time.perf_counter(), 0))
    if chunk.get("error") is None and not chunk.get("interrupts"):
        seconds = time.perf_counter() - began
        _observe(call, task_id, path, seconds, wall or None)
        _node_completed(out, call, task_id, path, seconds * 1000, where.of(task_id))


async def _chunks_and_events(events: AsyncIterator[dict[str, Any]],
                             tokens: TokenWriter) -> AsyncIterator[Any]:
    """LangGraph's ``(namespace, mode, chunk)`` out of ``astream_events``; the rest, live as ``events``.

    The run asked for the ``events`` stream mode: the loop runs under LangChain's
    ``astream_events(version="v2")``, as the Agent Server runs it then. The root run's
    ``on_chain_stream`` events carry LangGraph's chunks (the loop goes on with them as with
    ``astream``); every other event (the graph's and each node's, chat-model and tool
    events …) goes to the run's ``events`` readers, except those tagged
    ``langsmith:hidden`` (LangGraph's internal writers), which the Agent Server drops too.
    """
    async for event in events:
        if "langsmith:hidden" in (event.get("tags") or ()):
            continue
        if event.get("event") == "on_chain_stream" and not event.get("parent_ids"):
            yield event["data"]["chunk"]
        else:
            await tokens.add(event_item(event))


async def _live_chunk(tokens: TokenWriter, mode: str, chunk: Any) -> None:
    """One of LangGraph's chunks, live to the run's readers as the loop makes it.

    Claim-checked like the thread's state; a chunk holding the pause (``__interrupt__``)
    is left to the workflow's one ``interrupt`` item (the API gives ``updates``, then
    ``values``, as LangGraph streams a pause).
    """
    if isinstance(chunk, dict) and "__interrupt__" in chunk and mode in ("updates", "values"):
        return
    if mode == "updates" and isinstance(chunk, dict):  # {node: update}
        data: Any = {node: await claim_checked(update) for node, update in chunk.items()}
    else:
        data = await claim_checked(chunk)
    await tokens.add(chunk_item(mode, data), within=(  # a tool's start shows at once
        FLUSH_SECONDS if mode.split("|")[0] == "tools" else CHUNK_FLUSH_SECONDS))


async def claim_checked(values: Any) -> Any:
    """``values`` as JSON, each top-level value over the claim-check size stored and referenced.

    What crosses Temporal from a segment (its result, stream chunks, the thread's state)
    stays under the payload limit however large the graph's state grows; the API resolves
    the references (:func:`services.api.readmodels.resolve_output_refs`).
    """
    if not isinstance(values, dict):
        return to_jsonable(values)
    out: dict[str, Any] = {}
    for key, value in values.items():
        encoded = encode(value)
        size = encoded_size(encoded)
        out[key] = ref_marker(await put_state_blob(encoded), size) \
            if size > CLAIM_CHECK_BYTES else to_jsonable(value)
    return out


def snapshot_of(state: Any) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as the workflow's ``get_thread_state`` shapes it."""
    conf = (state.config or {}).get("configurable") or {}
    parent = (state.parent_config or {}).get("configurable") or {}
    return {
        "values": to_jsonable(state.values), "encoded": encode(state.values),
        "next": list(state.next),
        "tasks": [{"id": t.id, "name": t.name,
                   "error": None if t.error is None else repr(t.error)[:500],
                   "interrupts": [{"value": to_jsonable(i.value), "id": i.id}
                                  for i in t.interrupts],
                   "result": to_jsonable(t.result)} for t in state.tasks],
        "interrupts": [{"value": to_jsonable(i.value), "id": i.id} for i in state.interrupts],
        "checkpoint_id": conf.get("checkpoint_id"),
        "parent_checkpoint_id": parent.get("checkpoint_id"),
        "metadata": to_jsonable(dict(state.metadata or {})),
        "created_at": state.created_at,
    }


async def _retry_input(app: Any, config: dict[str, Any], call: SegmentCall,
                       first_input: Any) -> tuple[Any, bool]:
    """What a retried segment runs, and whether from the thread's latest checkpoint.

    - it still waits on the interrupt this resume answers → the same resume;
    - the thread's latest checkpoint was written by this run → ``None`` from there (LangGraph
      goes on where it stopped: a finished superstep never runs again; a segment that had
      ended, or reached its interrupt, ends again without running anything);
    - this run wrote no checkpoint yet (died before its first) → the original input, from
      where the first attempt started.
    """
    state = await app.aget_state(config)
    mine = (state.metadata or {}).get(RUN_ID_KEY) == call.run_id
    if call.resume is not None and state.interrupts and \
            {i.id for i in state.interrupts} & set(call.resume):
        return first_input, True
    if mine:
        return None, True
    return first_input, False


def _observe(call: SegmentCall, task_id: str, node: str, seconds: float,
             started_ns: int | None) -> None:
    """One duration sample and, while spans are recorded, one span per node (as node activities have)."""
    from opentelemetry import trace

    from observability import metrics_recording
    from observability.tracing import tracer

    metrics_recording.observe_node(call.pipeline, node, seconds, outcome="ok")
    if started_ns is not None and trace.get_current_span().is_recording():
        span = tracer().start_span(f"node {node}", start_time=started_ns, attributes={
            "overseer.pipeline": call.pipeline, "overseer.run_id": call.run_id,
            "langgraph.graph": call.pipeline, "langgraph.node": node,
            "langgraph.task_id": task_id})
        span.end()


class TaskSteps(BaseCallbackHandler):
    """Where each task of a segment runs: its superstep and path, from LangGraph's run metadata.

    LangGraph tags every run inside a task with ``langgraph_step``, ``langgraph_path`` and
    ``langgraph_checkpoint_ns`` (``"<node>:<task id>"`` at the top level). A superstep that
    runs again after a crash — from an earlier checkpoint than the first attempt wrote, or
    from the same one re-created when an ``async``/``exit`` write never reached Postgres —
    has the same step and path, where its task ids can differ; ``node.completed`` is keyed
    by them, so a node execution is recorded once whatever the durability.
    """

    run_inline = True

    def __init__(self) -> None:
        self._where: dict[str, str] = {}

    def on_chain_start(self, serialized: Any, inputs: Any, *, metadata: dict[str, Any] | None = None,
                       **kwargs: Any) -> None:
        """Note the task's step and path; a subgraph's task's after its enclosing task's."""
        meta = metadata or {}
        ns = str(meta.get("langgraph_checkpoint_ns") or "")
        if not ns or "langgraph_step" not in meta:
            return
        parts = ns.split("|")
        task_id = parts[-1].rpartition(":")[2]
        if task_id in self._where:
            return
        path = meta.get("langgraph_path") or ()
        here = f"{meta['langgraph_step']}:" + "/".join(map(str, path))
        if len(parts) > 1:  # inside a subgraph: where its enclosing task ran comes first
            outer = self._where.get(parts[-2].rpartition(":")[2])
            if outer is None:
                return
            here = f"{outer}|{here}"
        self._where[task_id] = here

    def of(self, task_id: str) -> str | None:
        """``"<step>:<path>"`` of a task seen to start, else None.

        Inside a subgraph: ``"<its enclosing task's>|<step>:<path>"``.
        """
        return self._where.get(task_id)


def _node_completed(out: NodeEvents, call: SegmentCall, task_id: str, node: str,
                    duration_ms: float | None, where: str | None, update: Any = None,
                    view: dict[str, Any] | None = None, *, recovered: bool = False) -> None:
    """``node.completed`` for one finished task, once per node execution.

    Keyed by the task's step and path (:class:`TaskSteps`), or by LangGraph's task id for a
    task no run metadata named. ``view`` (a pipeline's ``node_snapshot`` of the state after
    the node) is its ``snapshot``, merged into the run's result as it runs; a pipeline's
    progress node (``Pipeline.progress_nodes``) has its ``update`` (LangGraph's ``tasks``
    result: the channels it wrote) with the run's progress instead
    (:func:`activities.graph_nodes.progress_snapshot`). Handed to ``out``, which writes it
    off the graph's path (:class:`NodeEvents`). ``recovered``: read back from a checkpoint
    after a crash (:func:`recoverable_tasks`); its duration is unknown (None).
    """
    from overseer.pipelines import get_registry

    data: dict[str, Any] = {"node": node, "task_id": task_id,
                            "duration_ms": None if duration_ms is None else round(duration_ms, 3),
                            "attempt": activity.info().attempt, "placement": "segment"}
    if recovered:
        data["recovered"] = True
    if view is not None:
        data["snapshot"] = to_jsonable(view)
    spec = get_registry().get(call.pipeline)
    progress = progress_snapshot(node, spec.progress_nodes, update) if spec.progress_nodes \
        else None
    if progress is not None:
        data["snapshot"] = progress
    out.add(NewEvent(
        run_id=call.run_id, key=f"node.completed:{node}:{where or task_id}", type=NODE_COMPLETED,
        actor=f"activity:{node}", data=data))


async def recoverable_tasks(app: Any, config: dict[str, Any], run_id: str
                            ) -> list[tuple[Any, str]]:
    """This run's finished top-level tasks that LangGraph's checkpoints kept, each with its key.

    A worker killed between a node's end and the write of its ``node.completed``
    (:class:`NodeEvents`) leaves the node's writes in the checkpointer (LangGraph never runs
    it again) and no event. A retried segment reads the thread's history back to the first
    checkpoint another run wrote and returns ``(task, "<step>:<path>")`` for every task that
    finished without error (one that interrupted did once it was resumed): the task of a
    checkpoint at step ``k`` ran at LangGraph step ``k + 1``, so the key is the one
    :class:`TaskSteps` gave it when it ran, and an event already in the log is not written
    twice. Hidden tasks (``__start__``) and
    subgraphs' inner tasks are not returned.

    Args:
        app: the compiled graph, on the run's checkpointer.
        config: the segment's config (its ``thread_id``).
        run_id: the run (checkpoints carry it in their metadata, :data:`RUN_ID_KEY`).

    Returns:
        ``[(PregelTask, where)]``, newest checkpoint first.
    """
    found: list[tuple[Any, str]] = []
    async for snap in app.aget_state_history({"configurable": config["configurable"]}):
        metadata = snap.metadata or {}
        if metadata.get(RUN_ID_KEY) != run_id:
            break
        step = metadata.get("step")
        if not isinstance(step, int):
            continue
        for task in snap.tasks:
            if str(task.name).startswith("__") or task.error is not None or task.result is None:
                continue  # a task still waiting on an interrupt has no result yet
            found.append((task, f"{step + 1}:" + "/".join(map(str, task.path))))
    return found


class NodeEvents:
    """A segment's ``node.completed`` events, written beside the graph's loop, in batches.

    :meth:`add` hands an event over without waiting; one background write at a time appends
    everything handed over since the last write in one transaction
    (:func:`activities.events.append_from_activity`). So LangGraph's next superstep does not
    wait for Postgres, and the nodes of a superstep cost one commit, not one each. A node's
    event reaches the log a write later than its ``tasks`` chunk reaches the loop (a few
    milliseconds); :meth:`close` writes the rest before the segment reports. Ids are uuid5
    of the run and the key, so a retried segment writes none twice.
    """

    def __init__(self) -> None:
        self._pending: list[NewEvent] = []
        self._writing: asyncio.Task[None] | None = None

    def add(self, event: NewEvent) -> None:
        """Queue ``event``; start a write unless one is under way (or the last one failed)."""
        self._pending.append(event)
        if self._writing is None or (self._writing.done() and not self._writing.cancelled()
                                     and self._writing.exception() is None):
            self._writing = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        from activities.events import append_from_activity

        while self._pending:
            batch, self._pending = self._pending, []
            await append_from_activity(batch)

    async def close(self, *, quiet: bool = False) -> None:
        """Write what is queued and wait for it.

        Args:
            quiet: log a failed write instead of raising it (the segment is failing anyway,
                with its own error).

        Raises:
            asyncpg.PostgresError, OSError: a write failed (the segment fails; Temporal
                retries it).
        """
        try:
            if self._writing is not None:
                await self._writing
            await self._drain()
        except Exception:
            if not quiet:
                raise
            logger.warning("node.completed events of a failing segment not written",
                           exc_info=True)
