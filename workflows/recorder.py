"""A run's event log and status: events written through one local activity, the status attribute, webhooks.

:class:`RunRecorder` is how every part of the workflow writes: ``record_events`` (a local
activity, idempotent by each event's key) appends events and, with an Agent Server run's
pause or ending, hands the thread on (:func:`overseer.thread_queue.hand_off`); the webhooks
that hand-off claims are POSTed by ``notify_webhook`` activities while the run goes on. The
run's status is kept here and in the ``OverseerStatus`` search attribute.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from overseer.run_types import PIPELINE_ATTRIBUTE, STATUS_ATTRIBUTE

with workflow.unsafe.imports_passed_through():
    from overseer.runtime.events import record_events
    from overseer.runtime.notify import notify_webhook
    from overseer.store.events import APPROVAL_REQUESTED

EVENT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=0,  # the event log must eventually be written: retry until Postgres is back
)
WEBHOOK_RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), backoff_coefficient=2.0,
                            maximum_interval=timedelta(minutes=5), maximum_attempts=8)
"""A run's webhook: retried by Temporal for about a quarter of an hour, then given up (logged)."""


class RunRecorder:
    """The run's events, status and webhooks (see the module docstring).

    Attributes:
        run_id: the run.
        pipeline: its pipeline's name.
        status: the run's status (``running``, ``awaiting_approval``, a terminal one).
        outcome: its outcome once it has ended.
        pause: what the run hands its thread at an interrupt, waiting to go with the
            interrupt's ``approval.requested`` (set by the run, taken by :meth:`record_batch`).
    """

    def __init__(self, run_id: str, pipeline: str, *, search_attributes: bool) -> None:
        self.run_id, self.pipeline = run_id, pipeline
        self.status = "running"
        self.outcome: str | None = None
        self.pause: dict[str, Any] | None = None
        self._search_attributes = search_attributes
        self._webhooks: list[Any] = []

    async def record(self, event_type: str, *, key: str, data: dict[str, Any],
                     actor: str = "workflow") -> None:
        """Append one event through the ``record_events`` activity (idempotent by ``key``)."""
        await self.record_batch([{"run_id": self.run_id, "key": key, "type": event_type,
                                  "data": data, "actor": actor,
                                  "occurred_at": workflow.now().isoformat()}], event_type)

    async def record_batch(self, events: list[dict[str, Any]], summary: str,
                           hand_off: dict[str, Any] | None = None) -> Any:
        """Append events (dicts as ``record_events`` takes them) in one call, idempotent by key.

        A local activity (no task-queue round trip). ``hand_off`` (a local activity's
        arguments are not in the history, so adding it replays) hands an Agent Server run's
        thread on with the run's ending or pause; an interrupt's ``approval.requested``
        takes the waiting :attr:`pause`, so ``runs.wait`` answers from Postgres. The
        webhooks a hand-off claimed (runs that ended, ``webhook`` set) are each POSTed by a
        ``notify_webhook`` activity, retried by Temporal (:data:`WEBHOOK_RETRY`).

        Returns:
            ``record_events``' result.
        """
        if hand_off is None and self.pause is not None and \
                any(e.get("type") == APPROVAL_REQUESTED for e in events):
            hand_off, self.pause = self.pause, None
        result = await workflow.execute_local_activity(
            record_events, args=[events, hand_off] if hand_off is not None else [events],
            start_to_close_timeout=timedelta(seconds=30), retry_policy=EVENT_RETRY,
            summary=summary)
        self.post_webhooks((result.get("webhooks") or []) if isinstance(result, dict) else [])
        return result

    def post_webhooks(self, webhooks: list[dict[str, Any]]) -> None:
        """POST each webhook a hand-off claimed (``{url, payload, delivery}``) in its own activity.

        They go out while the run goes on; :meth:`webhooks_sent` waits for them.
        """
        for hook in webhooks:
            self._webhooks.append(workflow.start_activity(
                notify_webhook, args=[hook["url"], hook["payload"], hook["delivery"]],
                start_to_close_timeout=timedelta(seconds=15), retry_policy=WEBHOOK_RETRY,
                summary=f"webhook: run {hook['delivery']} {hook['payload'].get('status')}"))

    async def set_status(self, status: str) -> None:
        """Set the status and the ``OverseerStatus`` search attribute."""
        self.status = status
        if self._search_attributes:
            workflow.upsert_search_attributes([
                PIPELINE_ATTRIBUTE.value_set(self.pipeline),
                STATUS_ATTRIBUTE.value_set(status),
            ])

    async def webhooks_sent(self) -> None:
        """Wait for the runs' webhooks still being POSTed (a closed workflow drops them).

        One that failed every attempt is logged; the run's own ending stands.
        """
        for handle in self._webhooks:
            try:
                await handle
            except ActivityError:
                workflow.logger.warning("run webhook not delivered", extra={
                    "run_id": self.run_id})
        self._webhooks = []
