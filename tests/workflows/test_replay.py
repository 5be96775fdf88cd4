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
``segment_run_intake_thread_run_ending_local_activity`` is an Agent Server thread's run from
before its last segment wrote the run's ending (the workflow's ``record_events`` did);
``..._ending_in_segment`` is one from after. ``thread_ttl_deleted`` is a thread's ttl timer
(``ThreadTtlWorkflow``): a wait on a timer, then the sweep that deleted the thread
(``tests/workflows/test_thread_ttl.py`` records it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("case", ["in_segment", "segment_failed", "written_then_lost"])
async def test_fresh_thread_run_history_replays(dev_server: WorkflowEnvironment, worker: Worker,
                                                db, task_queue: str, case: str,
                                                monkeypatch: pytest.MonkeyPatch):
    """An Agent Server thread's run: its last segment writes the ending with the thread's hand-off.

    No ``record_events`` local activity after the segment (its history recorded before the
    change, ``..._ending_local_activity``, has one and still replays), and the log holds
    ``run.completed`` once, with the status the workflow reports. A segment that cannot
    write it (``segment_failed``: Postgres down at that moment) leaves it to the workflow;
    one whose report is lost after it wrote it (``written_then_lost``: the segment fails
    right after, as a worker killed then would) runs again and writes nothing twice.
    """
    import dataclasses
    import uuid

    from temporalio.exceptions import ApplicationError

    import overseer.runtime.segments

    segment_writes = case != "segment_failed"
    real, attempts = overseer.runtime.segments.write_ending, []

    async def ending(*args: Any) -> Any:
        attempts.append(1)
        if case == "segment_failed":
            raise OSError("connection refused")
        written = await real(*args)
        if case == "written_then_lost" and len(attempts) == 1:
            raise ApplicationError("the worker died before the segment reported")
        return written
    monkeypatch.setattr(overseer.runtime.segments, "write_ending", ending)
    auto = await submit_document(db, corpus.render_text([corpus.make_entry(53)]), "c.txt")
    inp = dataclasses.replace(auto, thread_id=str(uuid.uuid4()))
    handle = await dev_server.client.start_workflow(
        SegmentRunWorkflow.run, inp, id=f"document_intake-{inp.run_id}", task_queue=task_queue)
    assert (await handle.result()).status == "completed"
    history = await handle.fetch_history()
    await _replayer().replay_workflow(history)
    markers = [e.marker_recorded_event_attributes for e in history.events
               if e.HasField("marker_recorded_event_attributes")]
    kinds = [json.loads(m.details["data"].payloads[0].data)["activity_type"] for m in markers]
    assert kinds[-1] == ("run_segment" if segment_writes else "record_events")
    assert ("record_events" in kinds) is not segment_writes
    finished = await db.fetch("SELECT type, data FROM events WHERE run_id = $1 AND "
                              "type IN ('run.completed', 'run.failed')", uuid.UUID(inp.run_id))
    assert [(r["type"], json.loads(r["data"])["status"]) for r in finished] == \
        [("run.completed", "completed")]
    assert len(attempts) == (2 if case == "written_then_lost" else 1)
    nodes = await db.fetch("SELECT data->>'node' AS node, count(*) AS n FROM events WHERE "
                           "run_id = $1 AND type = 'node.completed' GROUP BY 1",
                           uuid.UUID(inp.run_id))
    assert nodes and all(r["n"] == 1 for r in nodes), nodes
    if case == "in_segment" and os.environ.get("OVERSEER_RECORD_HISTORIES"):
        (HISTORIES / "segment_run_intake_thread_run_ending_in_segment.json").write_text(
            history.to_json())
