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
keyed by LangGraph's task id, the same on the retry for a task computed from the same
stored checkpoint (docs/your-graph.md says when it is not).

Events, heartbeats and the Temporal UI stay per node: one ``node.completed`` per finished
task (written as it finishes), a heartbeat naming the node in progress, and the segment's
result names the nodes it ran.

Hosted by :class:`workflows.segment_run.SegmentRunWorkflow` (``/v1`` runs and Agent Server
runs alike) for pipelines declared with
``Pipeline(workflow="SegmentRunWorkflow")``; every other run still takes ``GraphRunWorkflow``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import as_application_error
from activities.graph_nodes import BUG_TYPES, NODE_ERROR, UsageMeter, record_ledger
from activities.runtime import get_runtime
from overseer.catalogue import DURABILITY_MODES
from overseer.errors import OverseerError
from overseer.graph_codec import decode, encode, to_jsonable
from overseer.store.events import NODE_COMPLETED, NewEvent

STREAM_MODES = ("values", "updates", "custom")
"""What an Agent Server run's segment hands its workflow to publish (``GraphRunWorkflow``'s modes)."""
STREAM_BUDGET_BYTES = 512 * 1024
"""Past this many bytes of chunks, intermediate ``values`` are dropped (a result is one payload)."""
RUN_ID_KEY = "overseer_run_id"
"""Checkpoint metadata naming the run that wrote a checkpoint (from the config's ``metadata``)."""


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
        after_local: the same segment was first tried as a local activity that did not
            finish in time: go on from what it checkpointed, as a retry does.
        stream: also return the segment's ``values``/``updates``/``custom`` chunks and the
            thread's state (an Agent Server run: the workflow publishes them on its durable
            stream, as ``GraphRunWorkflow`` does).
        segment: the segment's number in its run (0 = the start; each resume adds one): keys
            the ledger entries of the chat-model calls made in it.
        checkpoint_id: start from this past checkpoint of the thread (an Agent Server run
            with ``checkpoint_id``: LangGraph forks there); the first segment only.
    """

    run_id: str
    pipeline: str
    thread_id: str
    input: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    durability: str = "async"
    recursion_limit: int = 100
    after_local: bool = False
    stream: bool = False
    segment: int = 0
    checkpoint_id: str | None = None


@dataclass
class SegmentResult:
    """How a segment ended.

    Attributes:
        status: ``interrupted`` (waiting on ``interrupts``) or ``done``.
        values: the thread's values (JSON) when ``done``; None while interrupted (the
            checkpointer holds them).
        interrupts: ``[{"id", "value"}]`` pending, oldest first.
        nodes: the nodes this attempt ran, in order (what the Temporal UI summary names).
        stream: with ``SegmentCall.stream``: ``[{"event": mode, "data": chunk}]`` in order;
            past :data:`STREAM_BUDGET_BYTES` only the ``updates`` and ``custom`` chunks and
            the last ``values`` are kept.
        snapshot: with ``SegmentCall.stream``: the thread's state as ``GraphRunWorkflow``'s
            ``get_thread_state`` gives it (``values``, ``encoded``, ``next``, ``tasks``,
            ``interrupts``, checkpoint ids, ``metadata``, ``created_at``).
    """

    status: str
    values: dict[str, Any] | None = None
    interrupts: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    stream: list[dict[str, Any]] = field(default_factory=list)
    snapshot: dict[str, Any] | None = None


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
    """The pipeline's graph compiled with :func:`checkpointer` (once per process)."""
    if pipeline not in _compiled:
        from overseer.pipelines import get_registry

        _compiled[pipeline] = get_registry().builder(pipeline).compile(
            checkpointer=await checkpointer(database_url))
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

    if call.durability not in DURABILITY_MODES:
        raise ApplicationError(f"durability must be one of {DURABILITY_MODES}",
                               type="invalid_durability", non_retryable=True)
    app = await compiled(call.pipeline)
    meter = UsageMeter()
    config: dict[str, Any] = {"configurable": {"thread_id": call.thread_id},
                              "metadata": {RUN_ID_KEY: call.run_id},
                              "recursion_limit": call.recursion_limit, "callbacks": [meter]}
    graph_input: Any = (Command(resume=decode(call.resume)) if call.resume is not None
                        else decode(call.input) if call.input is not None else None)
    start = config if not call.checkpoint_id else {  # a run from a past checkpoint forks there
        **config, "configurable": {**config["configurable"], "checkpoint_id": call.checkpoint_id}}
    if activity.info().attempt > 1 or call.after_local:
        graph_input, resumed = await _retry_input(app, config, call, graph_input)
        if resumed:
            start = config  # on from this run's own latest checkpoint
    local = activity.info().is_local
    started: dict[str, tuple[str, float]] = {}
    wall_started: dict[str, int] = {}
    ran: list[str] = []
    chunks = _Chunks()
    modes = ["tasks", *STREAM_MODES] if call.stream else ["tasks"]
    try:
        async for mode, chunk in app.astream(graph_input, start, stream_mode=modes,
                                             durability=call.durability):
            if mode != "tasks":
                chunks.add(mode, chunk)
                continue
            task_id, name = str(chunk["id"]), str(chunk["name"])
            if "result" not in chunk and "error" not in chunk:  # the task starts
                started[task_id] = (name, time.perf_counter())
                wall_started[task_id] = time.time_ns()
                if not local:  # a local activity has no heartbeat: its time-out is short
                    activity.heartbeat({"node": name, "ran": ran})
                continue
            if chunk.get("error") is None and not chunk.get("interrupts"):
                began = started.pop(task_id, (name, time.perf_counter()))[1]
                seconds = time.perf_counter() - began
                ran.append(name)
                _observe(call, task_id, name, seconds, wall_started.pop(task_id, None))
                await _node_completed(call, task_id, name, seconds * 1000)
    except OverseerError as err:
        raise as_application_error(err) from err
    except BUG_TYPES as err:  # a bug fails the run once, with the node named
        node = next(iter(started.values()), ("?", 0.0))[0]
        raise ApplicationError(
            f"node {node} raised {type(err).__name__}: {str(err)[:500]}",
            {"node": node, "exception": type(err).__name__}, type=NODE_ERROR,
            non_retryable=True) from err
    finally:  # every chat-model call a node made is in the run's ledger, failed ones too
        await record_ledger(call.run_id, "segment", f"segment{call.segment}", meter)
    state = await app.aget_state(config)
    extra: dict[str, Any] = {"stream": chunks.items, "snapshot": snapshot_of(state)} \
        if call.stream else {}
    if state.interrupts:
        return SegmentResult(status="interrupted", nodes=ran, interrupts=[
            {"id": i.id, "value": to_jsonable(i.value)} for i in state.interrupts], **extra)
    return SegmentResult(status="done", values=to_jsonable(state.values), nodes=ran, **extra)


class _Chunks:
    """A segment's stream chunks as ``GraphRunWorkflow._drive`` publishes them, within a budget."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._size = 0

    def add(self, mode: str, chunk: Any) -> None:
        if isinstance(chunk, dict) and "__interrupt__" in chunk:
            if mode == "updates":
                return  # the interrupt is published by the workflow, as one item
            chunk = {k: v for k, v in chunk.items() if k != "__interrupt__"}
        data = to_jsonable(chunk)
        self._size += len(json.dumps(data, default=str))
        if self._size > STREAM_BUDGET_BYTES:
            self.items = [i for i in self.items if i["event"] != "values"]
        self.items.append({"event": mode, "data": data})


def snapshot_of(state: Any) -> dict[str, Any]:
    """A LangGraph ``StateSnapshot`` as ``GraphRunWorkflow.get_thread_state`` shapes it."""
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

    from observability import metrics
    from observability.tracing import tracer

    metrics.observe_node(call.pipeline, node, seconds, outcome="ok")
    if started_ns is not None and trace.get_current_span().is_recording():
        span = tracer().start_span(f"node {node}", start_time=started_ns, attributes={
            "overseer.pipeline": call.pipeline, "overseer.run_id": call.run_id,
            "langgraph.graph": call.pipeline, "langgraph.node": node,
            "langgraph.task_id": task_id})
        span.end()


async def _node_completed(call: SegmentCall, task_id: str, node: str, duration_ms: float) -> None:
    """``node.completed`` for one finished task, keyed by LangGraph's task id (once per task)."""
    from activities.events import append_from_activity

    await append_from_activity([NewEvent(
        run_id=call.run_id, key=f"node.completed:{node}:{task_id}", type=NODE_COMPLETED,
        actor=f"activity:{node}",
        data={"node": node, "duration_ms": round(duration_ms, 3), "task_id": task_id,
              "attempt": activity.info().attempt, "placement": "segment"})])
