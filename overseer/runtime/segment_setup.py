"""What a run segment's attempt sets up around LangGraph's loop, and what a retried one runs.

Its LangGraph config (:func:`run_config`) and breakpoints (:func:`with_graph_breakpoints`,
:func:`loop_breakpoints`, a local try's :class:`YieldAfter`, :func:`own_breakpoint`), its
heartbeats (:func:`heartbeats`), and for an attempt that may have run before: its input
(:func:`retry_input`), the tokens it takes back (:func:`retract`), a leg's echoed first
chunks (:func:`echoed`) and the tasks LangGraph kept after a failure (:func:`kept_tasks`).
Used by :class:`overseer.runtime.segments.SegmentAttempt`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from temporalio import activity

from overseer.resources import get_runtime
from overseer.run_types import RUN_ID_KEY, SEGMENT_KEY
from overseer.runtime.segment_call import SegmentCall
from overseer.runtime.segment_record import NodeEvents, TaskSteps, node_completed, observe
from overseer.token_stream import TokenWriter, message_ids, retractions, segment_rows

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


def with_graph_breakpoints(call: SegmentCall) -> SegmentCall:
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


def loop_breakpoints(call: SegmentCall, placed: list[str]) -> dict[str, Any]:
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


def own_breakpoint(call: SegmentCall, following: list[str], last_step: list[str]) -> bool:
    """True when a segment stopped at one of the run's own breakpoints (not the runtime's)."""
    if call.one_step:
        return False
    before, after = call.interrupt_before, call.interrupt_after
    return bool(before == "*" or after == "*"
                or set(before or []) & set(following) or set(after or []) & set(last_step))


async def heartbeats(call: SegmentCall, started: dict[str, tuple[str, float]],
                      ran: list[str], inner: dict[str, tuple[str, float, int]]) -> None:
    """Heartbeat three times per heartbeat time-out, naming the nodes in progress.

    Runs beside the segment's loop, so a node that runs longer than the time-out (a slow
    model call, a long computation) is not taken for a dead worker. A subgraph's node in
    progress is named by its path (``"clause_extraction/initial_search"``). The first beat
    comes 60% of the time-out in, not as the first node starts: a short segment (most chats)
    then costs Temporal no heartbeat at all (~4 ms of its CPU per run at 100 concurrent runs,
    docs/performance-history.md), and a worker that dies before it is still noticed at the
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


async def retract(app: Any, config: dict[str, Any], call: SegmentCall,
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


async def retry_input(app: Any, config: dict[str, Any], call: SegmentCall,
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


async def kept_tasks(app: Any, config: dict[str, Any], call: SegmentCall,
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
