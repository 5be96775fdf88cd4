"""One tick of an Agent Server cron: the workflow its Temporal Schedule starts.

The schedule (:mod:`overseer.crons`) starts ``CronTickWorkflow`` at each fire time, with
the workflow id Temporal derives from the schedule id and the scheduled time. The workflow
makes the tick's run with the ``fire_cron`` activity (an ordinary Overseer run, keyed by
that workflow id, so a retried activity never makes two), then, for a stateless cron whose
runs' threads are deleted (``on_run_completed="delete"``), waits for the run to end with
``delete_thread_after_run`` and deletes its thread. ``ThreadCleanupWorkflow`` does only
that, for a background stateless run (``on_completion="delete"``). It runs no LangGraph and holds no state of
its own: everything it needs is in Postgres.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

FIRE_TIMEOUT = timedelta(minutes=1)
FINISH_TIMEOUT = timedelta(days=1)
"""A stateless cron's run that has not ended after this long keeps its thread."""


@workflow.defn(name="CronTickWorkflow")
class CronTickWorkflow:
    """Make one cron tick's run (see the module docstring)."""

    @workflow.run
    async def run(self, cron_id: str) -> dict[str, Any]:
        """``{"run_id", "thread_id", …}`` of the run made, or ``{"skipped": reason}``."""
        fired: dict[str, Any] = await workflow.execute_activity(
            "fire_cron", args=[cron_id, workflow.info().workflow_id],
            start_to_close_timeout=FIRE_TIMEOUT,
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1),
                                     maximum_interval=timedelta(seconds=30),
                                     maximum_attempts=10,
                                     non_retryable_error_types=["not_found",
                                                                "invalid_request"]),
            summary="start the cron's run")
        if fired.get("stateless") and fired.get("on_run_completed") == "delete":
            fired["ended"] = await workflow.execute_activity(
                "delete_thread_after_run", args=[fired["run_id"], fired["thread_id"]],
                start_to_close_timeout=FINISH_TIMEOUT, heartbeat_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(maximum_attempts=3), summary="delete its thread")
        return fired


@workflow.defn(name="ThreadCleanupWorkflow")
class ThreadCleanupWorkflow:
    """Delete a stateless run's thread once the run has ended (``on_completion="delete"``).

    Started by the API next to a background stateless run (``POST /runs``, ``/runs/batch``),
    as the Agent Server deletes such a thread; a run paused on an interrupt keeps it.
    """

    @workflow.run
    async def run(self, run_id: str, thread_id: str) -> str:
        """The run's final status (``deleted`` when the thread was already gone)."""
        ended: str = await workflow.execute_activity(
            "delete_thread_after_run", args=[run_id, thread_id],
            start_to_close_timeout=FINISH_TIMEOUT, heartbeat_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=3), summary="delete its thread")
        return ended
