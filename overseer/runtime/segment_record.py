"""Per-node records of a run segment: one ``node.completed`` event, duration sample and span per node.

Every finished task of a segment is recorded once per node execution, keyed by its superstep
and path (:class:`TaskSteps`), the same when a superstep runs again after a crash: its event
goes to a writer beside LangGraph's loop (:class:`NodeEvents`, :func:`node_completed`), its
duration to the metrics and, while spans are recorded, a span (:func:`observe`); a
subgraph's node is recorded under its path (:func:`inner_task`, :func:`node_path`). A
retried segment writes the events a crash lost from the run's checkpoints
(:func:`recoverable_tasks`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from temporalio import activity

from overseer.graph_codec import to_jsonable
from overseer.resources import get_runtime
from overseer.run_types import RUN_ID_KEY
from overseer.runtime.graph_nodes import progress_snapshot
from overseer.store.events import NODE_COMPLETED, NewEvent

logger = logging.getLogger(__name__)


def node_path(ns: tuple[str, ...], name: str) -> str:
    """A subgraph node's path as the run's events name it: ``"<parent>/…/<name>"``.

    ``ns`` is LangGraph's namespace of the task's graph (``("clause_extraction:<task id>",)``).
    """
    return "/".join([*(part.partition(":")[0] for part in ns), name])


def inner_task(run_id: str, pipeline: str, ns: tuple[str, ...], chunk: dict[str, Any],
               inner: dict[str, tuple[str, float, int]], where: TaskSteps,
               out: NodeEvents) -> None:
    """A subgraph node's ``tasks`` chunk: note its start, or record it once it finished.

    One ``node.completed`` per execution, keyed by the steps and paths of its enclosing
    tasks and its own (:class:`TaskSteps`), so a subgraph run again after a crash (or
    again in a later superstep) is recorded once per execution; one duration sample and span.

    Args:
        run_id: the run.
        pipeline: the registry name of its graph.
        ns: LangGraph's namespace of the task's graph.
        chunk: LangGraph's ``tasks`` chunk (a start, or a result or error).
        inner: the subgraph tasks in progress, task id → ``(path, perf_counter() at start,
            time_ns() at start)``; a start is added, an end removed.
        where: the segment's :class:`TaskSteps`.
        out: the segment's :class:`NodeEvents`.
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
        observe(run_id, pipeline, task_id, path, seconds, wall or None)
        node_completed(out, run_id, pipeline, task_id, path, seconds * 1000, where.of(task_id))


def observe(run_id: str, pipeline: str, task_id: str, node: str, seconds: float,
            started_ns: int | None) -> None:
    """One duration sample and, while spans are recorded, one span per node (as node activities have).

    Args:
        run_id: the run.
        pipeline: the registry name of its graph.
        task_id: LangGraph's task id.
        node: the node's name (a subgraph's node: its path, :func:`node_path`).
        seconds: how long the node ran.
        started_ns: when it started (``time.time_ns()``); None: no span.
    """
    from opentelemetry import trace

    from observability import metrics_recording
    from observability.tracing import tracer

    metrics_recording.observe_node(pipeline, node, seconds, outcome="ok")
    if started_ns is not None and trace.get_current_span().is_recording():
        span = tracer().start_span(f"node {node}", start_time=started_ns, attributes={
            "overseer.pipeline": pipeline, "overseer.run_id": run_id,
            "langgraph.graph": pipeline, "langgraph.node": node,
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


def node_completed(out: NodeEvents, run_id: str, pipeline: str, task_id: str, node: str,
                   duration_ms: float | None, where: str | None, update: Any = None,
                   view: dict[str, Any] | None = None, *, recovered: bool = False) -> None:
    """``node.completed`` for one finished task, once per node execution.

    Keyed by the task's step and path (:class:`TaskSteps`), or by LangGraph's task id for a
    task no run metadata named. ``view`` (a pipeline's ``node_snapshot`` of the state after
    the node) is its ``snapshot``, merged into the run's result as it runs; a pipeline's
    progress node (``Pipeline.nodes.progress_nodes``) has its ``update`` (LangGraph's ``tasks``
    result: the channels it wrote) with the run's progress instead
    (:func:`overseer.runtime.graph_nodes.progress_snapshot`). Handed to ``out``, which writes it
    off the graph's path (:class:`NodeEvents`). ``recovered``: read back from a checkpoint
    after a crash (:func:`recoverable_tasks`); its duration is unknown (None).

    Args:
        out: the segment's :class:`NodeEvents`.
        run_id: the run.
        pipeline: the registry name of its graph.
        task_id: LangGraph's task id.
        node: the node's name (a subgraph's node: its path, :func:`node_path`).
        duration_ms: how long it ran, in milliseconds; None when unknown.
        where: ``"<step>:<path>"`` from :class:`TaskSteps`; None keys it by ``task_id``.
        update: LangGraph's ``tasks`` result of the node (what a progress node wrote).
        view: the pipeline's ``node_snapshot`` of the state after the node.
        recovered: read back from a checkpoint after a crash.
    """
    from overseer.registry import get_registry

    data: dict[str, Any] = {"node": node, "task_id": task_id,
                            "duration_ms": None if duration_ms is None else round(duration_ms, 3),
                            "attempt": activity.info().attempt, "placement": "segment"}
    if recovered:
        data["recovered"] = True
    if view is not None:
        data["snapshot"] = to_jsonable(view)
    spec = get_registry().get(pipeline)
    progress = progress_snapshot(node, spec.nodes.progress_nodes, update) if spec.nodes.progress_nodes \
        else None
    if progress is not None:
        data["snapshot"] = progress
    out.add(NewEvent(
        run_id=run_id, key=f"node.completed:{node}:{where or task_id}", type=NODE_COMPLETED,
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
        run_id: the run (checkpoints carry it in their metadata,
            :data:`overseer.compiled_graphs.RUN_ID_KEY`).

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
    (:func:`overseer.runtime.events.append_from_activity`). So LangGraph's next superstep does not
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
        from overseer.fencing import check_current, current
        from overseer.runtime.events import append_from_activity

        while self._pending:
            batch, self._pending = self._pending, []
            if current.get() is not None:  # a replaced attempt records nothing
                await check_current(get_runtime().pool)
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
