"""SegmentRunWorkflow on a real dev server and real Postgres: routes, approval, events."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from overseer.graph_codec import decode
from overseer.run_types import DecisionInput
from tests import corpus
from tests.helpers import assert_eventually, event_types, submit_document
from workflows.segment_run import SegmentRunWorkflow


async def _start(client: Client, inp, task_queue: str):
    return await client.start_workflow(SegmentRunWorkflow.run, inp,
                                       id=f"document_intake-{inp.run_id}", task_queue=task_queue)


async def _awaiting(handle):
    async def check():
        view = await handle.query(SegmentRunWorkflow.get_status)
        assert view.status == "awaiting_approval", view.status
        return view
    return await assert_eventually(check)


async def test_clean_text_form_completes_automatically(dev_server: WorkflowEnvironment,
                                                       worker: Worker, db, task_queue: str):
    entry = corpus.make_entry(11)
    inp = await submit_document(db, corpus.render_text([entry]), "form.txt")
    handle = await _start(dev_server.client, inp, task_queue)
    result = await handle.result()
    assert result.status == "completed"
    assert result.outcome == "completed"
    record = result.result["record"]
    for name in ("student_name", "school", "grade"):
        assert record[name] == entry.fields[name], name
    assert result.result["confidence"] >= 0.9
    assert result.result["tools_used"] == ["run_pipeline"]
    assert result.result["strategy"] == "rules"
    rows = await db.fetch("SELECT type, data->>'node' AS node FROM events WHERE run_id = $1 "
                          "ORDER BY seq", uuid.UUID(inp.run_id))
    # one node.completed per node execution, the run_pipeline subgraph's nodes each their own
    # (the node's own route.decided may come between them); the whole run is one segment, a
    # local activity for a short text layer
    seen = [(r["type"], r["node"]) for r in rows]
    assert seen[0] == ("run.submitted", None) and seen[-1] == ("run.completed", None)
    assert sorted(seen[1:-1], key=str) == sorted([
        ("node.completed", "run_pipeline/read_text"),
        ("node.completed", "run_pipeline/extract_record"),
        ("node.completed", "run_pipeline/validate_and_score"), ("route.decided", None),
        ("node.completed", "run_pipeline"), ("node.completed", "complete")], key=str)
    history = await handle.fetch_history()
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    # a short segment is checkpointed when it ends (durability exit), not after every step
    rows = await db.fetch("SELECT checkpoint_ns, count(*) AS n FROM checkpoints "
                          "WHERE thread_id = $1 GROUP BY 1", inp.run_id)
    assert [(r["checkpoint_ns"], r["n"]) for r in rows] == [("", 1)]
    row = await db.fetchrow("SELECT status, result FROM runs WHERE run_id = $1",
                            uuid.UUID(inp.run_id))
    assert row["status"] == "completed"


async def test_missing_grade_waits_for_approval_then_completes(
    dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str
):
    entry = corpus.make_entry(12, drop=["grade"])
    inp = await submit_document(db, corpus.render_text([entry]), "form.txt")
    handle = await _start(dev_server.client, inp, task_queue)
    view = await _awaiting(handle)
    assert "grade" in view.approval["payload"]["missing_fields"]

    approval = await db.fetchrow("SELECT status FROM approvals WHERE run_id = $1",
                                 uuid.UUID(inp.run_id))
    assert approval["status"] == "pending"

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(SegmentRunWorkflow.decide,
                                    DecisionInput(decision="approve", decided_by="rev"))
    assert refused.value.cause.type == "invalid_field_edits"

    with pytest.raises(WorkflowUpdateFailedError) as bad_value:
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", updates={"grade": "banana"}, decided_by="rev"))
    assert bad_value.value.cause.type == "invalid_field_edits"

    done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="approve", updates={"grade": "9"}, decided_by="rev", note="checked by phone"))
    assert done.status == "completed"
    assert done.outcome == "approved"
    result = await handle.result()
    assert result.result["record"]["grade"] == "9"

    with pytest.raises(Exception):  # noqa: B017,PT011 — NOT_FOUND or update failure: both refuse
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", decided_by="rev"))

    types = await event_types(db, inp.run_id)
    assert types.count("approval.requested") == 1
    assert types.count("approval.decided") == 1
    assert types[-1] == "run.completed"
    decided = await db.fetchrow("SELECT status, decision, decided_by FROM approvals "
                                "WHERE run_id = $1", uuid.UUID(inp.run_id))
    assert tuple(decided) == ("decided", "approve", "rev")


async def test_reject_ends_run_rejected(dev_server: WorkflowEnvironment, worker: Worker, db,
                                        task_queue: str):
    entry = corpus.make_entry(13, drop=["school"])
    inp = await submit_document(db, corpus.render_text([entry]), "form.txt")
    handle = await _start(dev_server.client, inp, task_queue)
    await _awaiting(handle)
    done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="reject", decided_by="rev", note="not eligible"))
    assert (done.status, done.outcome) == ("rejected", "rejected")
    row = await db.fetchrow("SELECT status FROM runs WHERE run_id = $1", uuid.UUID(inp.run_id))
    assert row["status"] == "rejected"


async def test_batch_file_becomes_one_child_run_per_entry(
    dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str
):
    entries = [corpus.make_entry(s) for s in (21, 22, 23)]
    inp = await submit_document(db, corpus.render_typed_pdf(entries), "batch.pdf")
    handle = await _start(dev_server.client, inp, task_queue)
    result = await handle.result()
    assert result.outcome == "split"
    assert len(result.children) == 3
    assert await _split_placement(handle) == "local_activity"  # a 3-page text layer

    async def children_done():
        rows = await db.fetch("SELECT status, result FROM runs WHERE parent_run_id = $1",
                              uuid.UUID(inp.run_id))
        assert len(rows) == 3
        assert all(r["status"] == "completed" for r in rows), [r["status"] for r in rows]
        return rows

    rows = await assert_eventually(children_done, timeout=60)
    import json

    names = sorted(json.loads(r["result"])["record"]["student_name"] for r in rows)
    assert names == sorted(e.fields["student_name"] for e in entries)


async def _split_placement(handle) -> str:
    """Where the run's ``document_intake.split`` ran, from its history."""
    history = await handle.fetch_history()
    scheduled = [e.activity_task_scheduled_event_attributes.activity_type.name
                 for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")
               and b"document_intake.split" in e.marker_recorded_event_attributes.SerializeToString()]
    assert not ("document_intake.split" in scheduled and markers), "split ran twice"
    return ("activity" if "document_intake.split" in scheduled
            else "local_activity" if markers else "none")


async def test_short_text_layer_split_runs_in_the_workflow_task(
    dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str
):
    """A text-layer document of a few pages is split by a local activity (no task-queue round
    trip: docs/performance.md); a scanned one by a scheduled, heartbeating activity."""
    typed = await submit_document(db, corpus.render_typed_pdf([corpus.make_entry(41)]), "form.pdf")
    scan = await submit_document(db, corpus.render_scanned_pdf([corpus.make_entry(42)]), "scan.pdf")
    assert decode(scan.input)["document"]["has_text_layer"] is False
    handles = [await _start(dev_server.client, inp, task_queue) for inp in (typed, scan)]
    assert (await handles[0].result()).status == "completed"

    async def placements():
        found = [await _split_placement(h) for h in handles]
        assert "none" not in found
        return found
    assert await assert_eventually(placements, timeout=120) == ["local_activity", "activity"]
    await handles[1].cancel()
    # the typed form's segment ran in a local activity too: one workflow task, no activity
    history = await handles[0].fetch_history()
    assert not [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    assert sum(e.HasField("workflow_task_completed_event_attributes") for e in history.events) == 1


async def test_corrupt_document_fails_once_without_retrying(
    dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str
):
    good = corpus.render_typed_pdf([corpus.make_entry(31)])
    inp = await submit_document(db, good, "form.pdf")
    # Replace the stored bytes behind the reference: the document turns unreadable mid-run.
    await db.execute("UPDATE artifacts SET content = $1 WHERE sha256 = $2",
                     good[: len(good) // 3], decode(inp.input)["document"]["sha256"])
    handle = await _start(dev_server.client, inp, task_queue)
    with pytest.raises(Exception) as failed:  # noqa: PT011
        await handle.result()
    assert "unreadable_document" in repr(failed.value.cause) or "corrupt" in repr(failed.value)
    row = await db.fetchrow("SELECT status, error FROM runs WHERE run_id = $1",
                            uuid.UUID(inp.run_id))
    assert row["status"] == "failed"
    history = await handle.fetch_history()
    attempts = [e for e in history.events if e.HasField("activity_task_started_event_attributes")]
    assert all(e.activity_task_started_event_attributes.attempt == 1 for e in attempts)
