"""The consistency check rebuilds read models from the log: it passes on real runs and catches drift."""

from __future__ import annotations

import uuid

import asyncpg

from overseer.store.consistency import check_consistency
from overseer.store.events import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    RUN_COMPLETED,
    RUN_SUBMITTED,
    NewEvent,
    append_events,
)


def _life(run_id: str) -> list[NewEvent]:
    return [
        NewEvent(run_id=run_id, key="run.submitted", type=RUN_SUBMITTED,
                 data={"pipeline": "document_intake", "workflow_id": f"document_intake-{run_id}",
                       "submitted_by": "alice", "input": {}}),
        NewEvent(run_id=run_id, key="approval.requested:1", type=APPROVAL_REQUESTED,
                 data={"pipeline": "document_intake", "payload": {}, "reason_codes": ["x"]}),
        NewEvent(run_id=run_id, key="approval.decided:1", type=APPROVAL_DECIDED,
                 data={"decision": "approve", "decided_by": "rita"}),
        NewEvent(run_id=run_id, key="run.finished", type=RUN_COMPLETED,
                 data={"status": "completed", "snapshot": {"outcome": "approved"}}),
    ]


async def test_projected_read_models_are_consistent(db: asyncpg.Pool):
    async with db.acquire() as conn:
        for _ in range(3):
            await append_events(conn, _life(str(uuid.uuid4())))
        report = await check_consistency(conn)
    assert report.ok, report.to_dict()
    assert report.runs == 3 and report.by_status == {"completed": 3}


async def test_drift_and_duplicates_are_reported(db: asyncpg.Pool):
    run_id = str(uuid.uuid4())
    async with db.acquire() as conn:
        await append_events(conn, _life(run_id))
        await append_events(conn, [NewEvent(run_id=run_id, key="approval.decided:2",
                                            type=APPROVAL_DECIDED,
                                            data={"decision": "reject", "decided_by": "sam"})])
        await conn.execute("UPDATE runs SET status = 'failed' WHERE run_id = $1",
                           uuid.UUID(run_id))
        report = await check_consistency(conn)
        # nothing was left behind by the check itself
        assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE "
                                   "nspname = 'consistency_shadow'") == 0
    assert not report.ok
    assert run_id in report.mismatched["runs"]
    assert report.decisions_without_request == [run_id]
