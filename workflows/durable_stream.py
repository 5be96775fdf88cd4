"""A run's durable stream and what it hands its Agent Server thread.

Every run publishes on a ``WorkflowStream`` (topic :data:`overseer.run_types.STREAM_TOPIC`):
``metadata``, each ``interrupt``, the ``end`` or ``error``; a pipeline with a stream
protocol of its own (``Pipeline.run.stream``) publishes its events on its own topic instead, so
its offsets stay dense. The live rows a segment writes (tokens, custom writes) come before
the item at the segment's ``stream_base`` (:mod:`overseer.token_stream`), so every item
counts in :attr:`RunState.published <workflows.run_state.RunState>`.

An Agent Server run also hands its thread the state the ``get_thread_state`` query answers,
when it pauses on an interrupt and when it ends (:meth:`DurableStream.paused_hand_off`,
:meth:`DurableStream.ending_hand_off`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import workflow

from overseer.run_types import STREAM_TOPIC, GraphRunInput
from workflows.run_state import RunState

with workflow.unsafe.imports_passed_through():
    from temporalio.contrib.workflow_streams import WorkflowStream

    from overseer.graph_codec import to_jsonable
    from overseer.pipelines import RunStream
    from overseer.runtime.segment_ending import ending_snapshot
    from overseer.store.events import RUN_CANCELLED

CARRIED_STREAM_ITEMS = 100
"""Stream items a run hands to its next run when it continues as new (the newest)."""


class DurableStream:
    """The run's durable stream, its pipeline's own stream protocol and the thread's state.

    Attributes:
        stream: the ``WorkflowStream`` (its handlers are the workflow's).
        run_stream: the pipeline's stream protocol for this run, or None.
        snapshot: the graph's state at the last pause or end (an Agent Server run's whole
            snapshot; a ``/v1`` run's values when its pipeline decides on state).
        final: the pipeline stream's final event once the run has ended.
    """

    def __init__(self, inp: GraphRunInput, state: RunState) -> None:
        self.stream = WorkflowStream(prior_state=inp.stream_state)
        self._topic = self.stream.topic(STREAM_TOPIC)
        self._inp, self._state = inp, state
        self.run_stream: RunStream | None = None
        self._own_topic: Any = None
        self.snapshot: dict[str, Any] | None = None
        self.final: dict[str, Any] | None = None

    def use_protocol(self, run_stream: RunStream) -> None:
        """Publish the pipeline's own events on its topic from now on (and nothing generic)."""
        self.run_stream = run_stream
        self._own_topic = self.stream.topic(run_stream.topic)

    def publish(self, event: str, data: Any) -> None:
        """Publish a generic item (``metadata``, ``interrupt``, ``end``, ``error``); marks the last three."""
        if self.run_stream is not None:
            return  # the pipeline's own stream is the run's stream (dense offsets)
        if event in ("interrupt", "end", "error"):
            mark = {"offset": self._state.published, "event": event}
            if event == "end" and isinstance(data, dict) and data.get("status") == "cancelled":
                mark["cancelled"] = True  # the run's readers see it interrupted, not a success
            self._state.marks.append(mark)
        self._topic.publish({"event": event, "data": to_jsonable(data)})
        self._state.published += 1

    def emit(self, events: list[dict[str, Any]]) -> None:
        """Publish a pipeline stream's events on its topic; a ``done`` event is the final one.

        They are the run's durable stream (:meth:`publish` publishes nothing then), so
        they count in ``published``: a segment's live rows come before the item at its
        ``stream_base`` (:mod:`overseer.token_stream`).
        """
        for event in events:
            self._own_topic.publish(event)
            self._state.published += 1
            if event.get("done"):
                self.final = event

    def thread_state(self, status: str, *, decided: bool, decision_note: str | None,
                     snapshot: bool = True) -> dict[str, Any]:
        """What the ``get_thread_state`` query answers (see the workflow's query).

        ``snapshot=False``: without the graph's state (what a segment ending the run adds).
        """
        return {**((self.snapshot or {}) if snapshot else {}), "status": status,
                "published": self._state.published, "marks": list(self._state.marks),
                "decided": decided, "decision_note": decision_note}

    @property
    def hands_off(self) -> bool:
        """Whether the run hands its state to an Agent Server thread (at a pause and at its end).

        A run with a thread and no stream protocol of its own (whose chunks are the thread's).
        """
        return self._inp.thread_id is not None and self.run_stream is None

    def paused_hand_off(self, key: str, thread_state: Callable[[], dict[str, Any]]
                        ) -> dict[str, Any] | None:
        """What a thread's run hands the thread when it pauses on an interrupt (published).

        ``key`` (the approval's) claims the webhooks of the runs that ended there;
        ``thread_state`` gives the query's answer, asked only for a thread's run.
        """
        if not self.hands_off:
            return None
        return {"thread_id": self._inp.thread_id, "run_id": self._inp.run_id, "pause": True,
                "key": f"pause:{key}",
                "snapshot": to_jsonable({**thread_state(), "decided": False,
                                         "closed": False, "cancelled": False})}

    def ending_hand_off(self, event_type: str, thread_state: Callable[[], dict[str, Any]]
                        ) -> dict[str, Any] | None:
        """What an Agent Server run's ending hands its thread (:func:`overseer.thread_queue.hand_off`).

        The thread's state as the ``get_thread_state`` query answers once the ending's
        ``end`` or ``error`` item is published (right after the events are written). None
        for a run without a thread or with its own stream protocol, and for a cancelled run:
        whoever cancelled it through the API owns the thread's state then (an ``interrupt``
        keeps the run's last state, a ``rollback`` the state before it) and starts the next
        run.
        """
        if not self.hands_off or event_type == RUN_CANCELLED:
            return None
        return {"thread_id": self._inp.thread_id, "run_id": self._inp.run_id, "key": "end",
                "snapshot": ending_snapshot(thread_state(), event_type)}

    def segment_ending(self, status: str, *, decided: bool, decision_note: str | None,
                       last_decision: str | None) -> dict[str, Any] | None:
        """What a segment needs to write the run's ending itself (``SegmentCall.ending``).

        For a thread's run that hands its thread on at its end (:meth:`ending_hand_off`):
        ``{"thread_state", "last_decision"}``, the state the ``get_thread_state`` query
        answers now without the graph's snapshot (the segment adds the one it ends with);
        None for any other run (:mod:`overseer.runtime.segment_ending`).
        """
        if not self.hands_off:
            return None
        return {"thread_state": to_jsonable(self.thread_state(
                    status, decided=decided, decision_note=decision_note, snapshot=False)),
                "last_decision": last_decision}

    def carried(self) -> Any:
        """The stream's state for a continued run: its newest items only.

        Values chunks hold whole states and the hand-over must stay small: a reader further
        behind is refused and reads from 0, which starts at the retained base.
        """
        end = self.stream._on_offset()
        self.stream.truncate(max(0, end - CARRIED_STREAM_ITEMS))
        return self.stream.get_state()
