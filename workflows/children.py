"""A submission of several parts: the pipeline's split activity, then one child run per part.

A pipeline that splits a submission (``Pipeline.run.split``) names an activity that returns
one dict per part; with more than one part the run starts one child run of its own
workflow per part (``run.submitted`` recorded first, so none is lost) and completes with
outcome ``split``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy

from overseer.run_types import GraphRunInput
from workflows.recorder import RunRecorder
from workflows.segment_calls import ACTIVITY_FAILURES, failure_cause

with workflow.unsafe.imports_passed_through():
    from overseer.graph_codec import encode, to_jsonable
    from overseer.pipelines import Pipeline
    from overseer.runtime.graph_nodes import NODE_ERROR
    from overseer.store.events import RUN_SPLIT, RUN_SUBMITTED

SPLIT_HEARTBEAT_SECONDS = 4
"""Heartbeat time-out of a pipeline's split activity: a dead worker is noticed within it
(``overseer.runtime.heartbeat.with_heartbeats`` sends one every 2 s while pages are OCR'd)."""


async def split_parts(spec: Pipeline, graph_input: Any,
                      fail: Callable[[dict[str, Any]], Awaitable[NoReturn]]) -> list[dict[str, Any]]:
    """The pipeline's split activity on the run's input: one dict per part.

    A short split (``Pipeline.run.split_locally``) is a local activity in the run's own
    workflow task; otherwise a heartbeating activity. A split that fails for good fails
    the run through ``fail`` (``{code, message, node}``).
    """
    assert spec.run.split is not None
    arg = to_jsonable(graph_input)
    retry = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=5,
                        non_retryable_error_types=[NODE_ERROR])
    try:
        if spec.run.split_locally is not None and spec.run.split_locally(arg):
            parts: list[dict[str, Any]] = await workflow.execute_local_activity(
                spec.run.split, arg, start_to_close_timeout=timedelta(minutes=2),
                retry_policy=retry, summary="split the submission into parts")
        else:
            parts = await workflow.execute_activity(
                spec.run.split, arg, start_to_close_timeout=timedelta(minutes=30),
                heartbeat_timeout=timedelta(seconds=SPLIT_HEARTBEAT_SECONDS),
                retry_policy=retry, summary="split the submission into parts")
    except ACTIVITY_FAILURES as err:
        cause = failure_cause(err)
        await fail({"code": cause.type if cause and cause.type else "activity_failed",
                    "message": cause.message if cause else str(err), "node": spec.run.split})
    return parts


async def start_children(inp: GraphRunInput, graph_input: dict[str, Any],
                         parts: list[dict[str, Any]], recorder: RunRecorder) -> list[str]:
    """Start one child run per part (``run.submitted`` first, so none is lost); ``run.split`` last.

    Each child's id is derived from the parent's and the part's index, so a replayed
    parent starts the same children. Children outlive the parent (``ABANDON``).

    Returns:
        The children's run ids, in part order.
    """
    children = []
    for index, part in enumerate(parts):
        child_id = str(uuid.uuid5(uuid.UUID(inp.run_id), f"entry:{index}"))
        child_input = {**graph_input, **part}
        if "run_id" in graph_input:
            child_input["run_id"] = child_id
        workflow_id = f"{inp.pipeline}-{child_id}"
        await recorder.record_batch(
            [{"run_id": child_id, "key": "run.submitted", "type": RUN_SUBMITTED,
              "actor": "workflow", "occurred_at": workflow.now().isoformat(),
              "data": {"pipeline": inp.pipeline, "workflow_id": workflow_id,
                       "parent_run_id": inp.run_id, "submitted_by": inp.submitted_by,
                       "input": {"part": to_jsonable(part)}}}],
            f"submit part {index + 1}")
        await workflow.start_child_workflow(
            workflow.info().workflow_type,  # the child runs on this run's workflow
            dataclasses.replace(inp, run_id=child_id, input=encode(child_input),
                                parent_run_id=inp.run_id),
            id=workflow_id, parent_close_policy=workflow.ParentClosePolicy.ABANDON)
        children.append(child_id)
    await recorder.record(RUN_SPLIT, key="run.split",
                          data={"snapshot": {"children": children, "entries": len(children)}})
    return children

