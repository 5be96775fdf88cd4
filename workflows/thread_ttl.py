"""A thread's time-to-live as a durable timer (:mod:`overseer.thread_ttl`).

``ThreadTtlWorkflow`` (id ``thread-ttl-<thread id>``) loops: its ``expire_thread``
activity sweeps the thread if it is due or says how long to wait, and the workflow sleeps
that long on a Temporal timer, woken early by a ``reset`` signal when the API sets a new
ttl. It ends when the thread is deleted or has no ttl, and continues as new when Temporal
suggests it (a ``keep_latest`` thread's timer runs for the thread's whole life). It runs no
LangGraph and holds no state of its own: everything it needs is in Postgres.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

EXPIRE_TIMEOUT = timedelta(minutes=5)
"""One sweep: a delete cancels a paused run first, a prune drops old checkpoints."""


@workflow.defn(name="ThreadTtlWorkflow")
class ThreadTtlWorkflow:
    """Sweep one thread when its ttl is up (see the module docstring)."""

    def __init__(self) -> None:
        self._reset = False

    @workflow.signal
    def reset(self) -> None:
        """The thread's ttl changed: read it again now."""
        self._reset = True

    @workflow.run
    async def run(self, thread_id: str) -> str:
        """Why the timer ended: ``deleted``, ``gone`` (deleted otherwise) or ``no_ttl``."""
        while True:
            self._reset = False
            answer: dict[str, Any] = await workflow.execute_activity(
                "expire_thread", args=[thread_id], start_to_close_timeout=EXPIRE_TIMEOUT,
                retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1),
                                         maximum_interval=timedelta(minutes=1)),
                summary="sweep the thread if its ttl is up")
            if "ended" in answer:
                return str(answer["ended"])
            if workflow.info().is_continue_as_new_suggested():
                workflow.continue_as_new(thread_id)
            try:
                await workflow.wait_condition(lambda: self._reset,
                                              timeout=timedelta(seconds=float(answer["wait"])),
                                              timeout_summary="until the thread's ttl is up")
            except TimeoutError:
                pass
