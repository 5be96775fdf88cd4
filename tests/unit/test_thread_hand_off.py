"""A run's ending hands its thread on (``overseer.thread_queue.hand_off``), unless the API cancels it.

On the real Postgres; no run is queued behind, so no Temporal call is made.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, cast

import asyncpg

from overseer import thread_queue
from overseer.settings import Settings


async def _thread_with_run(pool: asyncpg.Pool) -> tuple[uuid.UUID, uuid.UUID]:
    tid, rid = uuid.uuid4(), uuid.uuid4()
    await pool.execute(
        """INSERT INTO agent_threads (thread_id, status, "values", last_run_id, graph_id)
           VALUES ($1, 'busy', '{"topic": "before"}'::jsonb, $2, 'slow')""", tid, rid)
    await pool.execute(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   kind, status)
           VALUES ($1, $2, 'slow', 'slow', $1, 'start', 'running')""", rid, tid)
    return tid, rid


async def _thread(pool: asyncpg.Pool, tid: uuid.UUID) -> asyncpg.Record:
    row = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1", tid)
    assert row is not None
    return row


def _ended(values: dict[str, Any], event: str = "end") -> dict[str, Any]:
    return {"values": values, "encoded": values, "next": [], "tasks": [], "interrupts": [],
            "checkpoint_id": None, "published": 3, "closed": True, "cancelled": False,
            "marks": [{"offset": 2, "event": event}], "decided": False}


async def test_the_ending_run_leaves_its_state_and_frees_the_thread(
        pool: asyncpg.Pool, test_settings: Settings) -> None:
    tid, rid = await _thread_with_run(pool)
    left = await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                  run_id=str(rid), snapshot=_ended({"topic": "after"}))
    row = await _thread(pool, tid)
    assert left == "idle" and row["last_run_id"] is None
    assert json.loads(row["values"]) == {"topic": "after"}
    assert await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1", rid) == \
        "success"
    # a retried hand-off (the local activity ran again) changes nothing
    again = await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                   run_id=str(rid), snapshot=_ended({"topic": "other"}))
    assert again == "idle"
    assert json.loads(await pool.fetchval('SELECT "values" FROM agent_threads '
                                          "WHERE thread_id = $1", tid)) == {"topic": "after"}


async def test_a_failed_run_leaves_the_thread_in_error(pool: asyncpg.Pool,
                                                       test_settings: Settings) -> None:
    tid, rid = await _thread_with_run(pool)
    left = await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                  run_id=str(rid), snapshot=_ended({"topic": "x"}, "error"))
    assert left == "error"
    assert await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1", rid) == "error"


async def test_a_run_the_api_is_cancelling_is_left_to_the_api(pool: asyncpg.Pool,
                                                              test_settings: Settings) -> None:
    tid, rid = await _thread_with_run(pool)
    await pool.execute("UPDATE agent_threads SET cancelling = last_run_id WHERE thread_id = $1",
                       tid)
    left = await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                  run_id=str(rid), snapshot=_ended({"topic": "after"}))
    row = await _thread(pool, tid)
    # a rollback keeps the state from before the run: the ending must not overwrite it
    assert left == "busy" and row["last_run_id"] == rid
    assert json.loads(row["values"]) == {"topic": "before"}
    assert await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1", rid) == \
        "running"


async def test_a_thread_given_to_another_run_is_not_touched(pool: asyncpg.Pool,
                                                            test_settings: Settings) -> None:
    tid, rid = await _thread_with_run(pool)
    newer = uuid.uuid4()
    await pool.execute("UPDATE agent_threads SET last_run_id = $2 WHERE thread_id = $1",
                       tid, newer)
    await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                           run_id=str(rid), snapshot=_ended({"topic": "after"}))
    row = await _thread(pool, tid)
    assert row["last_run_id"] == newer and json.loads(row["values"]) == {"topic": "before"}


async def test_a_run_that_failed_before_any_state_still_frees_the_thread(
        pool: asyncpg.Pool, test_settings: Settings) -> None:
    tid, rid = await _thread_with_run(pool)
    snap = {k: v for k, v in _ended({}, "error").items() if k not in ("values", "encoded")}
    left = await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                  run_id=str(rid), snapshot=snap)
    row = await _thread(pool, tid)
    assert left == "error" and row["last_run_id"] is None  # a queued run may start now
    assert json.loads(row["values"]) == {"topic": "before"}
