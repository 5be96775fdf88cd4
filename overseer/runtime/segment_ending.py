"""A run's ending: its status, its ``run.finished`` event and what its thread is handed.

The run's workflow writes the ending of most runs (``record_events``, a local activity, once
the last segment has reported). The last segment of an Agent Server thread's run, when no
approval of the run is open, writes it itself (:func:`write_ending`): the run's
``run.finished`` event and the thread's hand-off (:func:`overseer.thread_queue.hand_off`: the
thread's final state, the next queued run, the ``NOTIFY`` that answers ``runs.wait``) go out
before the segment reports, so a waiting client has its answer without the segment's
report, a workflow task and a local activity in between (the answer comes ~18 ms sooner
after the segment, which spends ~6 ms more on the write; docs/performance-history.md). The
workflow then only publishes the ``end`` item, sets its status and closes; it computes the
same status with the same function (:func:`run_ending`), from the same values and decision.

When the segment cannot write it (Postgres unavailable, a next queued run that does not
start: :data:`overseer.runtime.segments.ENDING_UNAVAILABLE`), it reports without it and the
workflow writes it as for any other run, retried until it is in. Written twice (a segment
retried after it wrote the ending, its report lost; or written in part, then by the
workflow), nothing changes: the event's id is its key's, the hand-off detaches the thread
only while the run is still attached, and the webhooks' claim returns the same list for the
same key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from overseer.graph_codec import to_jsonable
from overseer.resources import get_runtime
from overseer.store.events import RUN_COMPLETED, RUN_FAILED

PAST_TENSE = {"approve": "approved", "reject": "rejected", "revise": "revised"}
"""A decision's kind as a run's outcome."""


def final_status(values: Any, last_decision: str | None) -> tuple[str, str]:
    """``(status, outcome)`` of a finished graph.

    The graph decides: a final state with ``status: "rejected"`` (or ``completed``) and a
    string ``outcome`` says so itself. Otherwise the run is ``completed``, with the last
    decision as its outcome (``approved``, ``rejected``, ``revised`` …) or ``completed``.
    """
    if isinstance(values, dict):
        status = values.get("status")
        outcome = values.get("outcome")
        if status in ("completed", "rejected"):
            return status, outcome if isinstance(outcome, str) else status
    return "completed", PAST_TENSE.get(last_decision or "", last_decision or "completed")


@dataclass
class RunEnding:
    """How a finished graph's run ends.

    Attributes:
        status: ``completed`` or ``rejected``.
        outcome: the run's outcome (the graph's own, the pipeline's ``result`` hook's, or the
            last decision's).
        result: the pipeline's ``result`` hook's answer (``{}`` without the hook).
        data: the ``run.completed`` event's data: ``{status, outcome, snapshot}``.
    """

    status: str
    outcome: str
    result: dict[str, Any]
    data: dict[str, Any]


def run_ending(values: dict[str, Any], last_decision: str | None,
               result: Callable[[Mapping[str, Any]], dict[str, Any]] | None, *,
               denied: bool = False) -> RunEnding:
    """The ending of a run whose graph ended with ``values`` (or stopped at its LLM budget).

    Args:
        values: the thread's final values (JSON).
        last_decision: the kind of the run's latest decision, if any.
        result: the pipeline's ``result`` hook (``Pipeline.run.result``), if any: its
            ``outcome``, when a string, is the run's.
        denied: a reviewer ended the run at its LLM budget: ``rejected``, outcome
            ``budget_denied`` (unless the ``result`` hook names one).
    """
    status, outcome = ("rejected", "budget_denied") if denied else \
        final_status(values, last_decision)
    spec_result = result(values) if result else {}
    if isinstance(spec_result.get("outcome"), str):
        outcome = spec_result["outcome"]
    return RunEnding(status, outcome, spec_result, {
        "status": status, "outcome": outcome,
        "snapshot": {**(spec_result or {"output": values}), "outcome": outcome}})


def ending_snapshot(thread_state: dict[str, Any], event_type: str) -> dict[str, Any]:
    """What a thread's run hands the thread at its end (:func:`overseer.thread_queue.hand_off`).

    ``thread_state`` is what the run's ``get_thread_state`` query answers before the
    ending; the snapshot is its answer once the ``end`` (or, for ``run.failed``, ``error``)
    item is published: that item marked, counted, and the run ``closed``.
    """
    published = int(thread_state["published"])
    mark = {"offset": published, "event": "error" if event_type == RUN_FAILED else "end"}
    return dict(to_jsonable({**thread_state, "marks": [*thread_state["marks"], mark],
                             "published": published + 1, "closed": True, "cancelled": False}))


async def write_ending(run_id: str, thread_id: str, ending: RunEnding,
                       thread_state: dict[str, Any]) -> dict[str, Any]:
    """Write a thread's run's ending from the segment that ended its graph (see the module docstring).

    Args:
        run_id: the run (its workflow's run id, the thread's ``last_run_id``).
        thread_id: the thread.
        ending: the run's ending (:func:`run_ending`).
        thread_state: the thread's state as the run's ``get_thread_state`` answers before
            the ending (:func:`ending_snapshot`).

    Returns:
        ``{"webhooks": [...]}``: the webhooks the hand-off claimed, for the workflow to POST
        (``record_events``' own answer). The status is not returned: the workflow computes
        the same one with :func:`run_ending`.

    Raises:
        asyncpg.PostgresError, OSError: the database is unavailable; temporalio's
            ``RPCError``, ``OverseerError``: the next queued run did not start (the segment
            then reports without the ending and its workflow writes it).
        overseer.fencing.StaleAttempt: a newer attempt holds the segment (it ends the run).
    """
    from overseer.fencing import check_current
    from overseer.runtime.events import record_events
    from overseer.token_stream import ending_item

    await check_current(get_runtime().pool)  # a replaced attempt ends nothing
    event = {"run_id": run_id, "key": "run.finished", "type": RUN_COMPLETED, "data": ending.data,
             "actor": "workflow", "occurred_at": datetime.now(UTC).isoformat()}
    # the end item the workflow publishes next, as a row: a reader of the run's stream ends
    # on it without following the workflow's stream (overseer.token_stream.ending_item)
    item = ending_item(int(thread_state["published"]), "end",
                       {"status": ending.status, "outcome": ending.outcome})
    written = await record_events([event], {
        "thread_id": thread_id, "run_id": run_id, "key": "end",
        "snapshot": ending_snapshot(thread_state, RUN_COMPLETED), "ending": item})
    webhooks = written.get("webhooks") if isinstance(written, dict) else None
    return {"webhooks": webhooks or []}
