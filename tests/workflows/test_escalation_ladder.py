"""Every rung of the escalation ladder on the time-skipping server: days pass in milliseconds."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from overseer.run_types import DecisionInput
from overseer.runtime import llm
from services.worker.main import build_worker
from tests import corpus
from tests.helpers import assert_eventually, event_types, submit_document
from tests.workflows.llm_support import fake_model, llm_answer, llm_settings
from workflows.segment_run import SegmentRunWorkflow

HOUR = 3600.0


def ladder(**kw) -> dict:
    base = {"remind_after_seconds": 1 * HOUR, "reassign_after_seconds": 2 * HOUR,
            "sla_seconds": 3 * HOUR, "final_after_seconds": 4 * HOUR,
            "final_action": "keep_waiting", "reassign_to_group": "night-shift"}
    return {"approval": {**base, **kw}}


async def _open(env: WorkflowEnvironment, db, task_queue: str, seed: int, **options
                ) -> tuple[WorkflowHandle, str]:
    inp = await submit_document(db, corpus.render_text([corpus.make_entry(seed, drop=["grade"])]),
                                "form.txt", search_attributes=False, options=options)
    handle = await env.client.start_workflow(SegmentRunWorkflow.run, inp,
                                             id=f"document_intake-{inp.run_id}",
                                             task_queue=task_queue)

    async def awaiting():
        assert (await handle.query(SegmentRunWorkflow.get_status)).status == "awaiting_approval"
    await assert_eventually(awaiting)
    return handle, inp.run_id


async def _approval(db, run_id: str):
    return await db.fetchrow("SELECT * FROM approvals WHERE run_id = $1", uuid.UUID(run_id))


async def _until(db, run_id: str, event_type: str):
    async def seen():
        assert event_type in await event_types(db, run_id)
    await assert_eventually(seen)


async def test_each_rung_fires_in_order_and_the_request_stays_open(
    time_skipping: WorkflowEnvironment, db, task_queue: str
):
    async with build_worker(time_skipping.client, task_queue=task_queue):
        handle, run_id = await _open(time_skipping, db, task_queue, 91, **ladder())
        rungs = ["approval.reminded", "approval.reassigned", "approval.sla_breached",
                 "approval.auto_decided"]
        for hours, expected in zip((1.1, 1.0, 1.0, 1.0), rungs, strict=True):
            assert expected not in await event_types(db, run_id)
            await time_skipping.sleep(timedelta(hours=hours))
            await _until(db, run_id, expected)
        row = await _approval(db, run_id)
        assert row["status"] == "pending"
        assert row["escalation_level"] == 3
        assert row["assigned_group"] == "night-shift"
        assert row["reminded_at"] is not None and row["sla_breached_at"] is not None
        assert row["auto_action"] == "keep_waiting:kept_waiting"
        done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", updates={"grade": "6"}, decided_by="night-reviewer"))
        assert done.status == "completed"
    types = await event_types(db, run_id)
    assert [t for t in types if t.startswith("approval.")] == [
        "approval.requested", *rungs, "approval.decided"]


async def test_final_rung_auto_rejects_when_configured(time_skipping: WorkflowEnvironment, db,
                                                       task_queue: str):
    async with build_worker(time_skipping.client, task_queue=task_queue):
        handle, run_id = await _open(time_skipping, db, task_queue, 92,
                                     **ladder(final_action="auto_reject"))
        await time_skipping.sleep(timedelta(hours=5))
        result = await handle.result()
    assert (result.status, result.outcome) == ("rejected", "rejected")
    row = await _approval(db, run_id)
    assert (row["decision"], row["decided_by"]) == ("reject", "escalation_policy")


async def test_auto_approve_never_applies_a_proposal_that_does_not_validate(
    time_skipping: WorkflowEnvironment, db, task_queue: str
):
    async with build_worker(time_skipping.client, task_queue=task_queue):
        handle, run_id = await _open(time_skipping, db, task_queue, 93,
                                     **ladder(final_action="auto_approve"))
        await time_skipping.sleep(timedelta(hours=5))
        await _until(db, run_id, "approval.auto_decided")
        view = await handle.query(SegmentRunWorkflow.get_status)
        assert view.status == "awaiting_approval"
        rows = await db.fetch("SELECT data FROM events WHERE run_id = $1 AND "
                              "type = 'approval.auto_decided'", uuid.UUID(run_id))
        data = json.loads(rows[0]["data"])
        assert data["result"] == "kept_waiting"
        assert data["reason"] == "auto_approve_refused:invalid_field_edits"
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", decided_by="rev"))
        await handle.result()


async def test_auto_approve_never_applies_an_unverified_model_value(
    time_skipping: WorkflowEnvironment, db, task_queue: str
):
    """Issue 17 changed this test: it used to expect the ladder to apply a model's grade that
    quotes nothing in the document. An unverified value is now only a suggestion, so the
    final rung finds nothing that validates and keeps waiting, recorded."""
    with llm_settings():
        llm.set_chat_model_factory(fake_model(llm_answer(grade=("11", None))))
        async with build_worker(time_skipping.client, task_queue=task_queue):
            handle, run_id = await _open(time_skipping, db, task_queue, 94,
                                         **ladder(final_action="auto_approve"))
            view = await handle.query(SegmentRunWorkflow.get_status)
            proposal = view.approval["payload"]["proposal"]
            assert proposal["updates"] == {}
            assert proposal["suggestions"] == {"grade": "11"}
            await time_skipping.sleep(timedelta(hours=5))
            await _until(db, run_id, "approval.auto_decided")
            assert (await handle.query(SegmentRunWorkflow.get_status)).status == \
                "awaiting_approval"
            rows = await db.fetch("SELECT data FROM events WHERE run_id = $1 AND "
                                  "type = 'approval.auto_decided'", uuid.UUID(run_id))
            assert json.loads(rows[0]["data"])["result"] == "kept_waiting"
            await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
                decision="reject", decided_by="rev"))
            await handle.result()


async def test_decision_before_the_first_rung_fires_nothing(time_skipping: WorkflowEnvironment,
                                                            db, task_queue: str):
    async with build_worker(time_skipping.client, task_queue=task_queue):
        handle, run_id = await _open(time_skipping, db, task_queue, 95, **ladder())
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", updates={"grade": "4"}, decided_by="early-bird"))
        await handle.result()
        await time_skipping.sleep(timedelta(hours=10))
    types = await event_types(db, run_id)
    assert not {"approval.reminded", "approval.reassigned", "approval.sla_breached",
                "approval.auto_decided"} & set(types)
