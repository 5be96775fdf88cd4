"""A segment's node.completed writer (overseer.runtime.segment_record.NodeEvents) on the real Postgres log."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from overseer.runtime.segment_record import NodeEvents
from overseer.store.events import NODE_COMPLETED, NewEvent


def completed(run_id: str, node: str, step: int) -> NewEvent:
    return NewEvent(run_id=run_id, key=f"node.completed:{node}:{step}:{node}",
                    type=NODE_COMPLETED, actor=f"activity:{node}", data={"node": node})


async def rows(db: asyncpg.Pool, run_id: str) -> list[asyncpg.Record]:
    return await db.fetch("SELECT data->>'node' AS node, xmin::text AS tx FROM events "
                          "WHERE run_id = $1 ORDER BY seq", uuid.UUID(run_id))


async def test_a_superstep_handed_over_at_once_is_one_commit_in_order(db: asyncpg.Pool) -> None:
    run_id = str(uuid.uuid4())
    out = NodeEvents()
    for node in ("fetch", "enrich", "score"):  # the loop hands them over without waiting
        out.add(completed(run_id, node, 1))
    await out.close()
    got = await rows(db, run_id)
    assert [r["node"] for r in got] == ["fetch", "enrich", "score"]
    assert len({r["tx"] for r in got}) == 1  # one transaction, one commit

    # a later node goes in its own write; a retried segment's repeats write nothing twice
    again = NodeEvents()
    for node in ("fetch", "enrich", "score"):
        again.add(completed(run_id, node, 1))
    await asyncio.sleep(0)
    again.add(completed(run_id, "publish", 2))
    await again.close()
    assert [r["node"] for r in await rows(db, run_id)] == ["fetch", "enrich", "score", "publish"]


async def test_a_failed_write_is_raised_at_close_unless_the_segment_is_failing_anyway(
        db: asyncpg.Pool) -> None:
    out = NodeEvents()
    out.add(completed("not-a-uuid", "fetch", 1))
    await asyncio.sleep(0.05)  # the write has failed by now
    run_id = str(uuid.uuid4())
    out.add(completed(run_id, "enrich", 1))  # not started behind a failed write
    with pytest.raises(ValueError, match="hexadecimal UUID"):
        await out.close()
    assert await rows(db, run_id) == []

    quiet = NodeEvents()
    quiet.add(completed("not-a-uuid", "fetch", 1))
    await quiet.close(quiet=True)  # logged, not raised: the segment's own error goes up
