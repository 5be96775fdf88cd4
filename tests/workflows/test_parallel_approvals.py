"""Each parallel interrupt is its own approval in the workflow: own ladder, own claim, kept
across continue-as-new (issue 26).

On the real servers with the user's ``parallel_approvals`` graph (one interrupt per ``Send``
branch): the time-skipping server shows one approval's ladder climbing after the other was
decided; the dev server shows an open approval, its claim included, carried whole when the
run continues as new between two segments.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from overseer.run_types import ClaimInput, DecisionInput
from overseer.store.events import fetch_events
from services.worker.main import build_worker
from tests.helpers import assert_eventually
from tests.workflows.test_graph_runtime import start, user_registry  # noqa: F401 (fixture)
from workflows.segment_run import SegmentRunWorkflow

HOUR = 3600.0
LADDER = {"approval": {"remind_after_seconds": 1 * HOUR, "reassign_after_seconds": 2 * HOUR,
                       "sla_seconds": 3 * HOUR, "final_after_seconds": 4 * HOUR,
                       "final_action": "keep_waiting", "reassign_to_group": "night-shift"}}


async def _open(handle, count: int) -> list[dict]:
    async def opened() -> list[dict]:
        view = await handle.query(SegmentRunWorkflow.get_status)
        waiting = [a for a in view.approvals if not a["decided"]]
        assert view.status == "awaiting_approval" and len(waiting) == count, view
        return waiting
    return await assert_eventually(opened, timeout=60)


async def _approval_events(db, run_id: str) -> list[tuple[str, str | None]]:
    return [(e["type"], e["data"].get("interrupt_id")) for e in await fetch_events(db, run_id)
            if e["type"].startswith("approval.")]


async def test_each_approval_climbs_its_own_ladder(time_skipping: WorkflowEnvironment, db,
                                                   task_queue: str):
    async with build_worker(time_skipping.client, task_queue=task_queue):
        run_id, handle = await start(time_skipping.client, db, task_queue, "parallel_approvals",
                                     {"topic": "p q"}, options=LADDER, search_attributes=False)
        by_item = {a["payload"]["item"]: a["interrupt_id"] for a in await _open(handle, 2)}
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", note="early", decided_by="rita", interrupt_id=by_item["p"]))
        await _open(handle, 1)
        await time_skipping.sleep(timedelta(hours=2.2))  # q's remind and reassign rungs

        async def climbed():
            kinds = [k for k, _ in await _approval_events(db, run_id)]
            assert "approval.reassigned" in kinds
        await assert_eventually(climbed)
        done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", note="late", decided_by="night", interrupt_id=by_item["q"],
            is_admin=True))
        assert done.status == "completed"
        assert (await handle.result()).output["summary"] == "p=approve:early,q=reject:late"
    events = await _approval_events(db, run_id)
    p, q = by_item["p"], by_item["q"]
    assert sorted(e for e in events if e[0] == "approval.requested") == sorted(
        [("approval.requested", p), ("approval.requested", q)])
    assert [e for e in events if e[0] in ("approval.reminded", "approval.reassigned")] == [
        ("approval.reminded", q), ("approval.reassigned", q)]  # p was decided before its rungs
    rows = {r["interrupt_id"]: r for r in await db.fetch(
        "SELECT * FROM approvals WHERE run_id = $1", uuid.UUID(run_id))}
    assert (rows[p]["status"], rows[p]["escalation_level"], rows[p]["reminded_at"]) == (
        "decided", 0, None)
    assert (rows[q]["status"], rows[q]["escalation_level"], rows[q]["assigned_group"]) == (
        "decided", 2, "night-shift")


async def test_an_open_approval_is_carried_whole_across_continue_as_new(dev_server, db,
                                                                       task_queue: str):
    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "parallel_approvals",
                                     {"topic": "p q"},
                                     options={"continue_as_new_after_segments": 1})
        by_item = {a["payload"]["item"]: a["interrupt_id"] for a in await _open(handle, 2)}
        await handle.execute_update(SegmentRunWorkflow.claim, ClaimInput(
            reviewer="rita", interrupt_id=by_item["q"]))
        first_run = (await handle.describe()).run_id
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", note="one", decided_by="sam", interrupt_id=by_item["p"]))

        async def continued():
            assert (await handle.describe()).run_id != first_run
            return await _open(handle, 1)
        left = await assert_eventually(continued, timeout=60)
        assert (left[0]["interrupt_id"], left[0]["claimed_by"]) == (by_item["q"], "rita")
        refused = DecisionInput(decision="approve", decided_by="sam", interrupt_id=by_item["q"])
        with pytest.raises(WorkflowUpdateFailedError) as err:  # rita's claim came along
            await handle.execute_update(SegmentRunWorkflow.decide, refused)
        assert err.value.cause.type == "claimed_by_other"
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", note="two", decided_by="rita", interrupt_id=by_item["q"]))
        assert (await handle.result()).output["summary"] == "p=approve:one,q=reject:two"
    kinds = [k for k, _ in await _approval_events(db, run_id)]
    assert kinds.count("approval.requested") == 2 and kinds.count("approval.decided") == 2


async def test_racing_decisions_apply_once_per_interrupt(dev_server, db, task_queue: str):
    """Two reviewers race on one interrupt: one decision applies. On two interrupts: both do."""
    import asyncio

    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "parallel_approvals",
                                     {"topic": "p q r"})
        by_item = {a["payload"]["item"]: a["interrupt_id"] for a in await _open(handle, 3)}

        async def decide(who: str, item: str) -> str:
            try:
                await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
                    decision="approve", note=who, decided_by=who, interrupt_id=by_item[item]))
                return "applied"
            except WorkflowUpdateFailedError as err:
                return str(err.cause.type)

        same = await asyncio.gather(decide("rita", "p"), decide("sam", "p"))
        assert sorted(same) == ["applied", "not_awaiting_approval"]
        apart = await asyncio.gather(decide("rita", "q"), decide("sam", "r"))
        assert apart == ["applied", "applied"]
        summary = (await handle.result()).output["summary"]
    winner = "rita" if "p=approve:rita" in summary else "sam"
    assert summary == f"p=approve:{winner},q=approve:rita,r=approve:sam"
    kinds = [k for k, _ in await _approval_events(db, run_id)]
    assert kinds.count("approval.decided") == 3  # one per interrupt, none twice
