"""Claims, reassignment and races on a real dev server: one claimant, one decision, the rest refused."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from overseer.run_types import ClaimInput, DecisionInput, ReassignInput
from tests import corpus
from tests.helpers import assert_eventually, event_types, submit_document
from workflows.segment_run import SegmentRunWorkflow


async def _open(env, db, task_queue, seed):
    inp = await submit_document(db, corpus.render_text([corpus.make_entry(seed, drop=["grade"])]),
                                "form.txt")
    handle = await env.client.start_workflow(SegmentRunWorkflow.run, inp,
                                             id=f"document_intake-{inp.run_id}",
                                             task_queue=task_queue)

    async def awaiting():
        assert (await handle.query(SegmentRunWorkflow.get_status)).status == "awaiting_approval"
    await assert_eventually(awaiting)
    return handle, inp.run_id


async def _refused(coro) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await coro
    return err.value.cause.type


async def test_claim_fences_other_reviewers_until_released(dev_server: WorkflowEnvironment,
                                                          worker: Worker, db, task_queue: str):
    handle, run_id = await _open(dev_server, db, task_queue, 101)
    await handle.execute_update(SegmentRunWorkflow.claim, ClaimInput(reviewer="ann"))
    row = await db.fetchrow("SELECT assigned_to FROM approvals WHERE run_id = $1",
                            uuid.UUID(run_id))
    assert row["assigned_to"] == "ann"
    assert await _refused(handle.execute_update(
        SegmentRunWorkflow.claim, ClaimInput(reviewer="bob"))) == "claimed_by_other"
    assert await _refused(handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="reject", decided_by="bob"))) == "claimed_by_other"
    assert await _refused(handle.execute_update(
        SegmentRunWorkflow.release, ClaimInput(reviewer="bob"))) == "claimed_by_other"
    await handle.execute_update(SegmentRunWorkflow.release, ClaimInput(reviewer="ann"))
    await handle.execute_update(SegmentRunWorkflow.claim, ClaimInput(reviewer="bob"))
    await handle.execute_update(SegmentRunWorkflow.reassign, ReassignInput(
        by="bob", assignee="cat", group="second-line"))
    row = await db.fetchrow("SELECT assigned_to, assigned_group FROM approvals WHERE run_id = $1",
                            uuid.UUID(run_id))
    assert tuple(row) == ("cat", "second-line")
    # An admin may decide over a claim; the decision records who made it.
    done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="approve", updates={"grade": "5"}, decided_by="root", is_admin=True))
    assert done.status == "completed"
    decided = await db.fetchrow("SELECT decided_by FROM approvals WHERE run_id = $1",
                                uuid.UUID(run_id))
    assert decided["decided_by"] == "root"
    types = await event_types(db, run_id)
    assert [t for t in types if t.startswith("approval.")] == [
        "approval.requested", "approval.claimed", "approval.released", "approval.claimed",
        "approval.reassigned", "approval.decided"]


async def test_concurrent_decisions_exactly_one_wins(dev_server: WorkflowEnvironment,
                                                     worker: Worker, db, task_queue: str):
    handle, run_id = await _open(dev_server, db, task_queue, 102)
    attempts = [DecisionInput(decision="approve", updates={"grade": str(g)}, decided_by=f"r{g}")
                for g in range(3, 9)] + [DecisionInput(decision="reject", decided_by="rx")]
    results = await asyncio.gather(
        *(handle.execute_update(SegmentRunWorkflow.decide, d) for d in attempts),
        return_exceptions=True)
    wins = [r for r in results if not isinstance(r, BaseException)]
    losses = [r for r in results if isinstance(r, BaseException)]
    assert len(wins) == 1
    # Refused by the validator, or — when the winner ended the run first — aborted by the
    # server as the workflow closed (NOT_FOUND, which the API answers 409 not_awaiting_approval).
    assert all((isinstance(e, WorkflowUpdateFailedError)
                and e.cause.type == "not_awaiting_approval")
               or (isinstance(e, RPCError) and e.status == RPCStatusCode.NOT_FOUND)
               for e in losses), losses
    assert (await event_types(db, run_id)).count("approval.decided") == 1
    await handle.result()


async def test_concurrent_claims_exactly_one_claimant(dev_server: WorkflowEnvironment,
                                                      worker: Worker, db, task_queue: str):
    handle, run_id = await _open(dev_server, db, task_queue, 103)
    results = await asyncio.gather(
        *(handle.execute_update(SegmentRunWorkflow.claim, ClaimInput(reviewer=f"r{i}"))
          for i in range(6)), return_exceptions=True)
    winners = {r.approval["claimed_by"] for r in results if not isinstance(r, BaseException)}
    assert len(winners) == 1
    assert sum(isinstance(r, BaseException) for r in results) == 5
    assert (await event_types(db, run_id)).count("approval.claimed") == 1
    await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="reject", decided_by=winners.pop()))
    await handle.result()
