"""Running a segment: the ``run_segment`` activity with the run's placement, time-outs and retries.

A *segment* is one heartbeating ``run_segment`` activity (:mod:`overseer.runtime.segments`) that
runs LangGraph's own loop on its Postgres checkpointer from a start or a resume to the
next interrupt or the end; a retried segment resumes from its last checkpoint. A node with
options (node metadata ``{"overseer": {...}}``) runs its superstep alone, as its own
activity with its time-out, heartbeat and attempts. A run may first try each segment as a
local activity (``segment_local_seconds``, or ``Pipeline.run.local_segments`` for a short
input) and go on as a heartbeating activity from the local try's checkpoints: at the first
superstep boundary after ``LOCAL_YIELD_SECONDS`` (nothing runs twice), or when the try runs
out of time (the superstep in flight runs again).
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception
from temporalio.exceptions import TimeoutError as ActivityTimeoutError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from overseer.node_options import NodeOptions, node_options, placed_nodes
    from overseer.registry import get_registry
    from overseer.runtime.graph_nodes import NODE_ERROR
    from overseer.runtime.segment_call import SegmentCall, SegmentResult

SEGMENT_HEARTBEAT_SECONDS = 6.0
"""A dead worker's segment runs again on another worker after this long; the run option
``segment_heartbeat_seconds`` (``OVERSEER_SEGMENT_HEARTBEAT_SECONDS``) changes it."""
SEGMENT_ATTEMPTS = 10
"""Attempts of a segment for errors that may pass (a bug fails the run at once): with a 1 s
first back-off doubling up to 30 s, the tenth starts ~2.5 min after the first, so a database
or network outage that long costs a run nothing (as the nodes' own policy:
:func:`overseer.runtime.retry.node_retry_policy`)."""
LOCAL_SEGMENT_SECONDS = 5.0
"""How long a segment a pipeline calls short for its input (``Pipeline.run.local_segments``) may
run as a local activity before it goes on as a heartbeating activity."""
LOCAL_YIELD_SECONDS = 2.0
"""A local try stops at the first superstep boundary after this long and the segment goes on
in the heartbeating activity: from then on the Temporal UI names the node in progress and a
cancel reaches the segment at the activity's next heartbeat the server hears (within ~8 s;
a local try holds its workflow's task, so a cancel waits for the try's end or the task's
heartbeat, ~8 s, and nothing shows the node in progress). A segment shorter than this, as
most are, costs one workflow task; a longer one pays one more workflow task and an activity
task, a few ms in seconds."""
SEGMENT_TIMEOUT = timedelta(hours=1)
"""Start-to-close time-out of one segment attempt (the heartbeat notices a dead worker first)."""

ACTIVITY_FAILURES = (ActivityError, ApplicationError, ActivityTimeoutError)
"""What a failed activity raises in the workflow, scheduled or local, live or replayed.

A scheduled activity's failure is an ``ActivityError`` (the error is its cause); a local
activity's is the error itself: an ``ApplicationError``, or Temporal's ``TimeoutError``
when a local try ran out of time and its marker is replayed (live, the same time-out
arrives as an ``ActivityError``). Catch all three wherever a failure changes the path, or a
replay takes another path than the run did and the workflow is stuck on nondeterminism
(the reliability suite found such runs after worker kills).
"""


class SegmentRunner:
    """Runs a run's segments with its placement (see the module docstring).

    Args:
        pipeline: the run's pipeline (its graph's nodes with options are placed apart).
        local_seconds: how long a segment is first tried as a local activity (0 = never).
    """

    def __init__(self, pipeline: str, local_seconds: float) -> None:
        self._pipeline, self.local_seconds = pipeline, local_seconds
        self._placed_nodes: list[str] | None = None
        self._yielded: int | None = None  # the segment whose local try handed over

    def placed(self, call: SegmentCall, nodes: list[str]
               ) -> tuple[NodeOptions, RetryPolicy | None, str] | None:
        """The options of the first node with options among ``nodes`` (name order), or None.

        Sets ``call.one_step``: such a node's superstep runs alone, with the node's
        time-out, heartbeat, attempts (or the node's ``retry_policy``) and summary.

        Returns:
            ``(options, retry policy, label)`` or None when no node of ``nodes`` has options.
        """
        if self._placed_nodes is None:
            self._placed_nodes = placed_nodes(get_registry().node_metadata(self._pipeline))
        placed = sorted(set(nodes) & set(self._placed_nodes))
        call.one_step = bool(placed)
        if not placed:
            return None
        opts, retry = node_options(get_registry().node_metadata(call.pipeline)[placed[0]])
        return opts, retry, f"node {opts.summary or placed[0]}"

    async def run(self, call: SegmentCall, label: str, opts: NodeOptions | None = None,
                  retry: RetryPolicy | None = None) -> SegmentResult:
        """One segment, retried by Temporal; first tried as a local activity when the run allows.

        A bug fails the run once, on either path. A local try that times out or fails
        otherwise hands over to the activity, which goes on from the checkpoints the local
        try wrote (at most the superstep it was in runs again). A local try that ran for
        ``LOCAL_YIELD_SECONDS`` returns ``paused`` with ``yielded`` at its next superstep
        boundary; the rest of that segment (the caller's next legs) runs in the activity.

        Raises:
            ActivityError, ApplicationError: the segment failed for good.
        """
        if opts is not None:  # a node with options: its own activity, with them
            step: SegmentResult = await workflow.execute_activity(
                "run_segment", dataclasses.replace(
                    call, heartbeat_seconds=opts.heartbeat_seconds or call.heartbeat_seconds),
                result_type=SegmentResult,
                start_to_close_timeout=timedelta(seconds=opts.timeout_seconds),
                heartbeat_timeout=(timedelta(seconds=opts.heartbeat_seconds)
                                   if opts.heartbeat_seconds else None),
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                retry_policy=retry or RetryPolicy(
                    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30),
                    maximum_attempts=opts.max_attempts,
                    non_retryable_error_types=[NODE_ERROR, "invalid_durability",
                                               *opts.non_retryable]),
                summary=label)
            return step
        if self.local_seconds > 0 and call.segment != self._yielded:
            try:
                local: SegmentResult = await workflow.execute_local_activity(
                    "run_segment", dataclasses.replace(call, yield_after=LOCAL_YIELD_SECONDS),
                    result_type=SegmentResult,
                    start_to_close_timeout=timedelta(seconds=self.local_seconds),
                    # a cancelled run's segment ends (its writes kept) before the run does
                    cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                    retry_policy=RetryPolicy(maximum_attempts=1), summary=f"segment: {label}")
                if local.yielded:
                    self._yielded = call.segment
                return local
            except ACTIVITY_FAILURES as err:
                cause = failure_cause(err)
                if is_cancelled_exception(err) or (cause is not None and cause.non_retryable):
                    raise
                call.go_on, call.leg = True, call.leg + 1  # the caller goes on from here too
        result: SegmentResult = await workflow.execute_activity(
            "run_segment", call, result_type=SegmentResult,
            start_to_close_timeout=SEGMENT_TIMEOUT,
            heartbeat_timeout=timedelta(seconds=call.heartbeat_seconds),
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1),
                                     maximum_interval=timedelta(seconds=30),
                                     maximum_attempts=SEGMENT_ATTEMPTS,
                                     non_retryable_error_types=[NODE_ERROR,
                                                                "invalid_durability"]),
            summary=f"segment: {label}")
        return result


def failure_cause(err: BaseException) -> ApplicationError | None:
    """The ``ApplicationError`` an activity or local activity failed with, if any.

    A scheduled activity's failure arrives as ``ActivityError`` with the error as its
    cause; a local activity's failure (sdk-core) arrives as the ``ApplicationError`` itself.
    """
    if isinstance(err, ApplicationError):
        return err
    cause = getattr(err, "cause", None)
    return cause if isinstance(cause, ApplicationError) else None
