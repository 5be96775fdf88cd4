"""Issue 17: retry_extraction end to end, with the rules (re-read, relaxed labels) and with a
model (only quote-verified values enter the record). The routing thresholds send every
incomplete first pass (confidence below 1.0) to a retry, so the step runs on an ordinary form."""

from __future__ import annotations

import json
import uuid

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from overseer.runtime import llm
from tests import corpus
from tests.helpers import submit_document
from tests.workflows.llm_support import fake_model, llm_answer, llm_settings
from workflows.segment_run import SegmentRunWorkflow

RETRY_EVERY_FIRST_PASS = {"thresholds": {
    "max_steps": 5, "complete_confidence": 0.9, "retry_below_confidence": 1.0,
    "max_retry_tries": 2, "max_review_tries": 3}}


async def _routes(db, run_id: str) -> list[str]:
    rows = await db.fetch("SELECT data FROM events WHERE run_id = $1 AND type = 'route.decided' "
                          "ORDER BY seq", uuid.UUID(run_id))
    return [json.loads(r["data"]).get("route") for r in rows]


async def _run(dev_server: WorkflowEnvironment, db, task_queue: str, text: bytes):
    inp = await submit_document(db, text, "form.txt", options=RETRY_EVERY_FIRST_PASS)
    handle = await dev_server.client.start_workflow(
        SegmentRunWorkflow.run, inp, id=f"document_intake-{inp.run_id}",
        task_queue=task_queue)
    return inp, handle


async def test_retry_with_rules_runs_and_says_so(dev_server: WorkflowEnvironment, worker: Worker,
                                                 db, task_queue: str):
    inp, handle = await _run(dev_server, db, task_queue,
                             corpus.render_text([corpus.make_entry(61, drop=["grade"])]))
    from overseer.run_types import DecisionInput
    from tests.helpers import assert_eventually

    async def awaiting():
        assert (await handle.query(SegmentRunWorkflow.get_status)).status == \
            "awaiting_approval"
    await assert_eventually(awaiting, timeout=120)
    await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="reject", decided_by="rev"))
    result = await handle.result()
    assert "retry_extraction" in result.result["tools_used"]
    assert (await _routes(db, inp.run_id))[0] == "retry"
    assert result.result["strategies"] == ["rules"]


async def test_retry_with_a_model_applies_only_a_verified_value(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    school = corpus.make_entry(62).fields["school"]
    lines = corpus.render_text([corpus.make_entry(62, drop=["school"])]).decode().splitlines()
    text = "\n".join([lines[0], f"Attending: {school}", *lines[1:]]).encode()
    with llm_settings():
        llm.set_chat_model_factory(fake_model(llm_answer(school=(school, f"Attending: {school}"))))
        inp, handle = await _run(dev_server, db, task_queue, text)
        result = await handle.result()
    assert (await _routes(db, inp.run_id))[0] == "retry"
    assert "retry_extraction" in result.result["tools_used"]
    assert result.result["record"]["school"] == school  # its quote is in the document
    assert "llm:gpt-4o-mini" in result.result["strategies"]
