"""The approval SLA timer on the time-skipping server: 72 hours pass in milliseconds."""

from __future__ import annotations

import uuid
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from overseer.run_types import DecisionInput
from services.worker.main import build_worker
from tests import corpus
from tests.helpers import assert_eventually, event_types, submit_document
from workflows.segment_run import SegmentRunWorkflow


async def test_sla_breach_is_recorded_and_the_request_stays_open(
    time_skipping: WorkflowEnvironment, db, task_queue: str
):
    entry = corpus.make_entry(41, drop=["grade"])
    inp = await submit_document(db, corpus.render_text([entry]), "form.txt",
                                search_attributes=False)
    async with build_worker(time_skipping.client, task_queue=task_queue):
        handle = await time_skipping.client.start_workflow(
            SegmentRunWorkflow.run, inp, id=f"document_intake-{inp.run_id}",
            task_queue=task_queue)

        async def awaiting():
            view = await handle.query(SegmentRunWorkflow.get_status)
            assert view.status == "awaiting_approval"
        await assert_eventually(awaiting)
        assert "approval.sla_breached" not in await event_types(db, inp.run_id)

        await time_skipping.sleep(timedelta(hours=71))
        assert "approval.sla_breached" not in await event_types(db, inp.run_id)

        await time_skipping.sleep(timedelta(hours=2))

        async def breached():
            assert "approval.sla_breached" in await event_types(db, inp.run_id)
        await assert_eventually(breached)
        row = await db.fetchrow("SELECT status, sla_breached_at FROM approvals WHERE run_id = $1",
                                uuid.UUID(inp.run_id))
        assert row["status"] == "pending"
        assert row["sla_breached_at"] is not None
        view = await handle.query(SegmentRunWorkflow.get_status)
        assert view.sla_breached and view.status == "awaiting_approval"

        done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", updates={"grade": "7"}, decided_by="late-reviewer"))
        assert done.status == "completed"
        assert (await handle.result()).result["record"]["grade"] == "7"
    types = await event_types(db, inp.run_id)
    assert types.count("approval.sla_breached") == 1
