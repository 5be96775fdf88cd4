"""Callbacks that hold a run segment's tasks back: the run's LLM budget and a one-step barrier.

:class:`BudgetGuard` stops a node, or a chat-model call, before it starts once the run's
spend has passed its budget; :class:`StepBarrier` makes a failed task of a one-step segment
wait for the step's other tasks, so a retry runs the failed ones only. Both are LangChain
callback handlers in the segment's LangGraph config.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler
from temporalio.exceptions import ApplicationError

from overseer.budget import BudgetStop, over_budget
from overseer.errors import OverseerError
from overseer.runtime.graph_nodes import BUG_TYPES, UsageMeter
from overseer.runtime.segment_record import node_path


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
