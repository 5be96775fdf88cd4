"""The event log on a real Postgres: idempotent appends, projections, append-only, migrations."""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest

from overseer.store.events import (
    APPROVAL_DECIDED,
    APPROVAL_REQUESTED,
    NODE_COMPLETED,
    ROUTE_DECIDED,
    RUN_COMPLETED,
    RUN_SUBMITTED,
    NewEvent,
    append_events,
    fetch_events,
)
from overseer.store.migrations import MIGRATIONS, apply_migrations


def submitted(run_id: str) -> NewEvent:
    return NewEvent(run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="api:alice",
                    data={"pipeline": "document_intake", "workflow_id": f"document_intake-{run_id}",
                          "submitted_by": "alice", "input": {}})


async def test_same_key_appends_once_and_projects_once(db: asyncpg.Pool):
    run_id = str(uuid.uuid4())
    async with db.acquire() as conn:
        assert len(await append_events(conn, [submitted(run_id)])) == 1
        assert await append_events(conn, [submitted(run_id)]) == []
        events = await fetch_events(conn, run_id)
    assert [e["type"] for e in events] == [RUN_SUBMITTED]
    assert await db.fetchval("SELECT status FROM runs WHERE run_id = $1",
                             uuid.UUID(run_id)) == "running"


async def test_a_batch_of_node_events_is_appended_and_merged_as_one_event_at_a_time_would(
        db: asyncpg.Pool):
    """The one-statement path: input order, duplicates skipped and not merged, later keys win."""
    run_id = str(uuid.uuid4())

    def node(key: str, snapshot: dict[str, object] | None, at: str) -> NewEvent:
        data: dict[str, object] = {"node": key}
        if snapshot is not None:
            data["snapshot"] = snapshot
        return NewEvent(run_id=run_id, key=key, type=NODE_COMPLETED, actor="activity:x",
                        data=data, occurred_at=at)

    first = node("node.completed:a:1", {"c": 0}, "2026-11-27T01:00:00+00:00")
    async with db.acquire() as conn:
        await append_events(conn, [submitted(run_id)])
        assert await append_events(conn, [first]) == [first]
        again = node("node.completed:a:1", {"c": 9}, "2026-11-27T01:00:09+00:00")
        b = node("node.completed:b:2", {"a": 1, "b": 1}, "2026-11-27T01:00:01+00:00")
        c = node("node.completed:c:3", {"a": 2}, "2026-11-27T01:00:02+00:00")
        quiet = NewEvent(run_id=run_id, key="route.decided:3", type=ROUTE_DECIDED,
                         data={"route": "end"}, occurred_at="2026-11-27T01:00:03+00:00")
        assert await append_events(conn, [again, b, c, quiet]) == [b, c, quiet]
        events = await fetch_events(conn, run_id)
    assert [e["event_id"] for e in events] == [str(x.event_id) for x in
                                                (submitted(run_id), first, b, c, quiet)]
    row = await db.fetchrow("SELECT result, updated_at FROM runs WHERE run_id = $1",
                            uuid.UUID(run_id))
    assert json.loads(row["result"]) == {"c": 0, "a": 2, "b": 1}
    assert row["updated_at"].isoformat() == "2026-11-27T01:00:02+00:00"


async def test_approval_lifecycle_projects_into_read_models(db: asyncpg.Pool):
    run_id = str(uuid.uuid4())
    async with db.acquire() as conn:
        await append_events(conn, [
            submitted(run_id),
            NewEvent(run_id=run_id, key="approval.requested:1", type=APPROVAL_REQUESTED,
                     data={"pipeline": "document_intake", "payload": {"missing_fields": ["grade"]},
                           "reason_codes": ["missing_grade"],
                           "sla_deadline": "2030-01-01T00:00:00+00:00"}),
        ])
        assert await conn.fetchval("SELECT status FROM runs WHERE run_id = $1",
                                   uuid.UUID(run_id)) == "awaiting_approval"
        await append_events(conn, [
            NewEvent(run_id=run_id, key="approval.decided:1", type=APPROVAL_DECIDED,
                     actor="reviewer:rita",
                     data={"decision": "approve", "decided_by": "rita", "updates": {"grade": "8"}}),
            NewEvent(run_id=run_id, key="run.finished", type=RUN_COMPLETED,
                     data={"status": "completed", "snapshot": {"outcome": "approved"}}),
        ])
        row = await conn.fetchrow("SELECT status, decided_by FROM approvals WHERE run_id = $1",
                                  uuid.UUID(run_id))
        run = await conn.fetchrow("SELECT status, result FROM runs WHERE run_id = $1",
                                  uuid.UUID(run_id))
    assert tuple(row) == ("decided", "rita")
    assert run["status"] == "completed"


async def test_events_are_append_only(db: asyncpg.Pool):
    run_id = str(uuid.uuid4())
    async with db.acquire() as conn:
        await append_events(conn, [submitted(run_id)])
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await conn.execute("UPDATE events SET actor = 'mallory'")
        with pytest.raises(asyncpg.RaiseError, match="append-only"):
            await conn.execute("DELETE FROM events")


async def test_migrations_apply_once(db: asyncpg.Pool):
    async with db.acquire() as conn:
        assert await apply_migrations(conn) == []
        count = await conn.fetchval("SELECT count(*) FROM schema_migrations")
    assert count == len(MIGRATIONS)
