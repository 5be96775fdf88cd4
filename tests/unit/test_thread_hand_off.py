"""A run's ending hands its thread on (``overseer.thread_queue.hand_off``), unless the API cancels it.

On the real Postgres; no run is queued behind, so no Temporal call is made.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any, cast

import asyncpg

from overseer import thread_queue, token_reader
from overseer.settings import Settings
from overseer.store.events import (
    RUN_CANCELLED,
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_SUBMITTED,
    NewEvent,
    append_events,
)
from overseer.thread_sync import save_snapshot, segment_status


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
    feed = token_reader.listener(pool)
    woken = await feed.watch(str(rid))  # a runs.wait of the run
    try:
        left = await thread_queue.hand_off(pool, cast(Any, None), test_settings,
                                           thread_id=str(tid), run_id=str(rid),
                                           snapshot=_ended({"topic": "after"}))
        await asyncio.wait_for(woken.wait(), 5)  # NOTIFY'd with the state's commit
    finally:
        await feed.unwatch(str(rid), woken)
    row = await _thread(pool, tid)
    assert left.status == "idle" and row["last_run_id"] is None
    assert json.loads(row["values"]) == {"topic": "after"}
    assert await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1", rid) == \
        "success"
    # a retried hand-off (the local activity ran again) changes nothing
    again = await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                   run_id=str(rid), snapshot=_ended({"topic": "other"}))
    assert again.status == "idle"
    assert json.loads(await pool.fetchval('SELECT "values" FROM agent_threads '
                                          "WHERE thread_id = $1", tid)) == {"topic": "after"}


async def test_a_failed_run_leaves_the_thread_in_error(pool: asyncpg.Pool,
                                                       test_settings: Settings) -> None:
    tid, rid = await _thread_with_run(pool)
    left = await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                  run_id=str(rid), snapshot=_ended({"topic": "x"}, "error"))
    assert left.status == "error"
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
    assert left.status == "busy" and row["last_run_id"] == rid
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
    assert left.status == "error" and row["last_run_id"] is None  # a queued run may start now
    assert json.loads(row["values"]) == {"topic": "before"}


async def _submitted(pool: asyncpg.Pool, *endings: str) -> str:
    """A run on record (``run.submitted``), then each of ``endings`` as its terminal event."""
    run_id = str(uuid.uuid4())
    async with pool.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="api:test",
            data={"pipeline": "slow", "workflow_id": f"slow-{run_id}", "submitted_by": "test",
                  "idempotency_key": None, "input": {"input": {}}})])
        for ending in endings:
            await append_events(conn, [NewEvent(
                run_id=run_id, key="run.finished", type=ending, actor="workflow",
                data={"status": ending.removeprefix("run."), "outcome": "x"})])
    return run_id


async def test_a_run_ended_by_its_own_workflow_is_not_cancelled_by_a_late_starter(
        pool: asyncpg.Pool) -> None:
    # a second caller that started the same run finds the thread handed on: cancel only a
    # run that did not end by itself (issue 25's load run: two finished runs were cancelled)
    assert await thread_queue.ended_by_itself(pool, await _submitted(pool, RUN_COMPLETED))
    assert await thread_queue.ended_by_itself(pool, await _submitted(pool, RUN_FAILED))
    assert not await thread_queue.ended_by_itself(pool, await _submitted(pool))
    assert not await thread_queue.ended_by_itself(pool, await _submitted(pool, RUN_CANCELLED))
    assert not await thread_queue.ended_by_itself(pool, str(uuid.uuid4()))  # deleted, unknown


async def test_the_recovery_pass_leaves_a_young_queued_run_to_its_request(
        pool: asyncpg.Pool) -> None:
    young, old = uuid.uuid4(), uuid.uuid4()
    for tid, age in ((young, timedelta(0)), (old, timedelta(minutes=1))):
        await pool.execute("INSERT INTO agent_threads (thread_id, status) VALUES ($1, 'idle')",
                           tid)
        await pool.execute(
            """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id,
                                       workflow_run_id, kind, status, created_at)
               VALUES ($1, $2, 'slow', 'slow', $1, 'start', 'pending', now() - $3::interval)""",
            uuid.uuid4(), tid, age)
    try:
        # the request that made the young run is starting it; the old one nobody started
        found = await thread_queue.queued_threads(pool)
        assert str(old) in found and str(young) not in found
    finally:
        await pool.execute("DELETE FROM agent_threads WHERE thread_id = ANY($1)", [young, old])


async def test_every_active_run_of_the_workflow_gets_the_status_its_first_offset_reads(
        pool: asyncpg.Pool, test_settings: Settings) -> None:
    # one UPDATE sets them all (thread_sync._RUN_STATUSES): the same as segment_status
    tid, rid = await _thread_with_run(pool)  # its start reads from offset 0
    resumes = {uuid.uuid4(): offset for offset in (3, 5, 6, 9)}
    for run_id, offset in resumes.items():
        await pool.execute(
            """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id,
                                       workflow_run_id, kind, status, from_offset)
               VALUES ($1, $2, 'slow', 'slow', $3, 'resume', 'running', $4)""",
            run_id, tid, rid, offset)
    done = uuid.uuid4()  # a run of the workflow that had already ended stays as it ended
    await pool.execute(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   kind, status, from_offset)
           VALUES ($1, $2, 'slow', 'slow', $3, 'resume', 'error', 1)""", done, tid, rid)
    snap = {**_ended({"topic": "after"}), "published": 9, "closed": False,
            "marks": [{"offset": 2, "event": "interrupt"}, {"offset": 5, "event": "end"},
                      {"offset": 8, "event": "error"}]}
    await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                run_id=str(rid), snapshot=snap)
    got = {r["run_id"]: r["status"] for r in await pool.fetch(
        "SELECT run_id, status FROM agent_runs WHERE thread_id = $1", tid)}
    by_offset = {offset: got[r] for r, offset in resumes.items()}
    assert got[rid] == "interrupted" and got[done] == "error"
    assert by_offset == {3: "success", 5: "success", 6: "error", 9: "running"}
    expected = {rid: segment_status(snap, 0),
                **{r: segment_status(snap, offset) for r, offset in resumes.items()}}
    assert {r: got[r] for r in expected} == expected
    # a pause, and a cancelled ending: interrupted, as the Agent Server calls a cancelled run
    tid, rid = await _thread_with_run(pool)
    late = uuid.uuid4()
    await pool.execute(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   kind, status, from_offset)
           VALUES ($1, $2, 'slow', 'slow', $3, 'resume', 'running', 4)""", late, tid, rid)
    snap = {**_ended({"topic": "cancelled"}), "published": 6,
            "marks": [{"offset": 3, "event": "interrupt"},
                      {"offset": 5, "event": "end", "cancelled": True}]}
    await thread_queue.hand_off(pool, cast(Any, None), test_settings, thread_id=str(tid),
                                run_id=str(rid), snapshot=snap)
    got = {r["run_id"]: r["status"] for r in await pool.fetch(
        "SELECT run_id, status FROM agent_runs WHERE thread_id = $1", tid)}
    assert got == {rid: "interrupted", late: "interrupted"}
    assert got == {rid: segment_status(snap, 0), late: segment_status(snap, 4)}


async def test_a_workflow_that_failed_before_its_ending_leaves_its_thread_and_run_in_error(
        pool: asyncpg.Pool) -> None:
    # failed or timed out (e.g. an approval's execution time-out) with no ending of its own:
    # what query_state answers then, with its state or (query refused) without
    # (a run that had paused at an interrupt before stays interrupted: it ended there)
    for snap, run_status in (({"closed": True, "cancelled": False, "failed": True}, "error"),
                             ({**_ended({"topic": "half"}), "published": 3, "failed": True,
                               "marks": [{"offset": 2, "event": "interrupt"}]}, "interrupted")):
        tid, rid = await _thread_with_run(pool)
        row = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1", tid)
        await save_snapshot(pool, row, snap)
        thread = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1", tid)
        assert (thread["status"], thread["last_run_id"]) == ("error", None)  # was busy
        assert await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1",
                                   rid) == run_status == segment_status(snap, 0)
    # terminated (or cancelled) the same way: interrupted, and the thread idle
    tid, rid = await _thread_with_run(pool)
    row = await pool.fetchrow("SELECT * FROM agent_threads WHERE thread_id = $1", tid)
    await save_snapshot(pool, row, {"closed": True, "cancelled": True, "failed": False})
    assert await pool.fetchval("SELECT status FROM agent_threads WHERE thread_id = $1",
                               tid) == "idle"
    assert await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1",
                               rid) == "interrupted"
