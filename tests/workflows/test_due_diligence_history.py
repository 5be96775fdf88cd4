"""Record (OVERSEER_RECORD_HISTORIES=1) and replay a history of a project pipeline: due
diligence with a sign-off (as segments, ``SegmentRunWorkflow``), started through the run
service. The recorded file is replayed by tests/workflows/test_replay.py with every other
history."""

from __future__ import annotations

import os
from pathlib import Path

from temporalio.worker import Replayer

from overseer.run_types import DecisionInput
from overseer.settings import Settings
from services.worker.main import WORKFLOWS, build_worker, workflow_runner
from tests.helpers import assert_eventually, submit_agreement
from workflows.segment_run import SegmentRunWorkflow

HISTORIES = Path(__file__).parent / "histories"


async def test_due_diligence_with_sign_off_replays(dev_server, db, task_queue):
    client = dev_server.client
    settings = Settings(environment="test", task_queue=task_queue)
    async with build_worker(client, task_queue=task_queue):
        run = await submit_agreement(db, client, settings, metadata={"require_signoff": True})
        handle = client.get_workflow_handle(f"due_diligence-{run.run_id}")

        async def awaiting():
            assert (await handle.query(SegmentRunWorkflow.get_status)).status == \
                "awaiting_approval"
        await assert_eventually(awaiting, timeout=120)
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", note="signed", decided_by="rev"))
        result = await handle.result()
    assert result["status"] == "completed"
    history = await handle.fetch_history()
    assert history.events[0].workflow_execution_started_event_attributes.workflow_type.name \
        == "SegmentRunWorkflow"
    await Replayer(workflows=list(WORKFLOWS),
                   workflow_runner=workflow_runner()).replay_workflow(history)
    if os.environ.get("OVERSEER_RECORD_HISTORIES"):
        (HISTORIES / "segment_run_due_diligence_signoff.json").write_text(history.to_json())
