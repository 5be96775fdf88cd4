"""Replay recorded histories against today's workflow code: a nondeterministic change fails here.

Histories under ``tests/workflows/histories/`` were recorded from real runs on the dev
server (set ``OVERSEER_RECORD_HISTORIES=1`` while running the workflow tests to refresh
them). This test also records and replays a fresh history of each path, so it fails even
before any file is committed. The ``segment_run_*`` ones are runs of ``SegmentRunWorkflow``
(every run); they replay on the worker's own workflow runner.
``segment_run_intake_local_try_timed_out`` comes from ``make reliability``'s worker kills: a
document_intake run whose local segment try timed out (so the segment ran again as an
activity), cut where a restarted worker replays it after that activity's result; its
replayed time-out once failed the run where the live one had fallen back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from overseer.run_types import DecisionInput
from services.worker.main import WORKFLOWS, check_graphs, workflow_runner
from tests import corpus
from tests.helpers import submit_document
from workflows.segment_run import SegmentRunWorkflow

HISTORIES = Path(__file__).parent / "histories"


def _replayer() -> Replayer:
    check_graphs()  # as the worker does: every graph loaded before a task runs
    return Replayer(workflows=list(WORKFLOWS), workflow_runner=workflow_runner())


@pytest.mark.parametrize("path", sorted(HISTORIES.glob("*.json")), ids=lambda p: p.stem)
async def test_recorded_history_replays(path: Path):
    history = WorkflowHistory.from_json(path.stem, json.loads(path.read_text()))
    await _replayer().replay_workflow(history)


async def test_fresh_histories_replay(dev_server: WorkflowEnvironment, worker: Worker, db,
                                      task_queue: str):
    client = dev_server.client
    auto = await submit_document(db, corpus.render_text([corpus.make_entry(51)]), "a.txt")
    human = await submit_document(
        db, corpus.render_text([corpus.make_entry(52, drop=["grade"])]), "b.txt")
    h1 = await client.start_workflow(SegmentRunWorkflow.run, auto,
                                     id=f"document_intake-{auto.run_id}", task_queue=task_queue)
    await h1.result()
    h2 = await client.start_workflow(SegmentRunWorkflow.run, human,
                                     id=f"document_intake-{human.run_id}", task_queue=task_queue)
    from tests.helpers import assert_eventually

    async def awaiting():
        assert (await h2.query(SegmentRunWorkflow.get_status)).status == "awaiting_approval"
    await assert_eventually(awaiting)
    await h2.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="approve", updates={"grade": "10"}, decided_by="rev"))
    await h2.result()
    for name, handle in (("segment_run_intake_auto_complete", h1),
                         ("segment_run_intake_approved_after_escalation", h2)):
        history = await handle.fetch_history()
        await _replayer().replay_workflow(history)
        if os.environ.get("OVERSEER_RECORD_HISTORIES"):
            HISTORIES.mkdir(exist_ok=True)
            (HISTORIES / f"{name}.json").write_text(history.to_json())


async def test_fresh_thread_run_history_replays(dev_server: WorkflowEnvironment, worker: Worker,
                                                db, task_queue: str):
    """An Agent Server thread's run: its ending goes with the thread's hand-off."""
    import dataclasses
    import uuid

    auto = await submit_document(db, corpus.render_text([corpus.make_entry(53)]), "c.txt")
    inp = dataclasses.replace(auto, thread_id=str(uuid.uuid4()))
    handle = await dev_server.client.start_workflow(
        SegmentRunWorkflow.run, inp, id=f"document_intake-{inp.run_id}", task_queue=task_queue)
    assert (await handle.result()).status == "completed"
    history = await handle.fetch_history()
    await _replayer().replay_workflow(history)
    if os.environ.get("OVERSEER_RECORD_HISTORIES"):
        (HISTORIES / "segment_run_intake_thread_run.json").write_text(history.to_json())
