"""Runs queued on a thread start in turn, each handed the thread by the run before.

A run with input waits in ``agent_runs`` as ``pending`` until the thread is free
(:func:`advance_queue`): the durable queue behind ``multitask_strategy="enqueue"``. The
run before it starts it: its workflow hands the thread on with its ending
(:func:`hand_off`), so the queue moves when Temporal ends a run and not when someone next
looks; the API only recovers queued runs nobody started (:func:`sweep_queues`). A run
that ends also has its webhooks claimed here, once each (:func:`claim_webhooks`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from temporalio.client import Client
from temporalio.service import RPCError

from overseer.errors import NotFoundError, OverseerError
from overseer.graph_codec import to_jsonable
from overseer.registry import get_registry
from overseer.run_body import graph_input, segment_settings
from overseer.runs import RunRequest, start
from overseer.settings import Settings, get_settings
from overseer.store.events import RUN_SUBMITTED, TERMINAL_STATUSES, NewEvent, append_events
from overseer.thread_sync import (
    Snapshotted,
    cancel_thread_run,
    cancel_workflow,
    refresh,
    write_snapshot,
)
from overseer.threads import ACTIVE_RUN_STATUSES, get_thread, parse_json, parse_uuid, run_view
from overseer.token_stream import INSERT_ENDING_ROW, STATE_CHANNEL

logger = logging.getLogger(__name__)


async def sync_thread(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                      settings: Settings | None = None) -> asyncpg.Record:
    """Bring the thread's row up to date with its attached workflow (see the module docstring).

    Observing a thread also starts its next queued run when its turn has come
    (:func:`advance_queue`).
    """
    row = await refresh(pool, temporal, thread_id)
    if await pool.fetchval("SELECT EXISTS (SELECT 1 FROM agent_runs WHERE thread_id = $1 "
                           "AND status = 'pending')", row["thread_id"]):
        await advance_queue(pool, temporal, thread_id, settings)
        row = await get_thread(pool, thread_id)
    return row


async def advance_queue(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                        settings: Settings | None = None) -> None:
    """Start the thread's oldest ``pending`` run if the thread is free (idempotent, race-safe).

    The thread row is locked while a run is claimed (``last_run_id`` set to it, status
    ``busy``); the workflow is then started under the run's own id, so two processes
    claiming or starting the same run start one workflow. A claimed run whose workflow
    never started (the process died in between) is started by the next caller. A thread
    paused on an interrupt with runs queued behind it drops the interrupt first, as new
    input on a paused thread does.
    """
    settings = settings or get_settings()
    for _ in range(3):
        row = await refresh(pool, temporal, thread_id)
        if row["last_run_id"] is not None:
            claimed = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1 "
                                          "AND status = 'pending'", row["last_run_id"])
            if claimed is not None:
                await launch(pool, temporal, settings, claimed)
                return
            nxt = await pool.fetchrow("SELECT created_by FROM agent_runs WHERE thread_id = $1 "
                                      "AND status = 'pending' ORDER BY created_at LIMIT 1",
                                      row["thread_id"])
            if row["status"] != "interrupted" or nxt is None:
                return
            await cancel_thread_run(pool, temporal, row, nxt["created_by"] or "queue",
                                    rollback=False)
            continue
        async with pool.acquire() as conn, conn.transaction():
            locked = await conn.fetchrow("SELECT last_run_id FROM agent_threads "
                                         "WHERE thread_id = $1 FOR UPDATE", row["thread_id"])
            if locked is None or locked["last_run_id"] is not None:
                continue
            claimed = await conn.fetchrow(
                "SELECT * FROM agent_runs WHERE thread_id = $1 AND status = 'pending' "
                "ORDER BY created_at, run_id LIMIT 1", row["thread_id"])
            if claimed is None:
                return
            await claim(conn, row["thread_id"], claimed)
        await launch(pool, temporal, settings, claimed)
        return


async def claim(conn: Any, thread_id: uuid.UUID, run: asyncpg.Record) -> bool:
    """Give a free thread (no ``last_run_id``) to ``run`` (its ``agent_runs`` row): ``busy``.

    Called inside the transaction that found the thread free (:func:`advance_queue`, under
    the row's lock) or made the run on a thread made for it
    (:func:`overseer.thread_runs.create_run`); :func:`launch` then starts it.

    Returns:
        False when the thread was not free (nothing changed).
    """
    done = await conn.execute(
        """UPDATE agent_threads SET status = 'busy', last_run_id = $2, graph_id = $3,
               interrupts = '{}'::jsonb, updated_at = now()
           WHERE thread_id = $1 AND last_run_id IS NULL""",
        thread_id, run["run_id"], run["graph_id"])
    return bool(done == "UPDATE 1")


SWEEP_GRACE_SECONDS = 10.0
""":func:`sweep_queues` leaves a run this young to the request that made it: under load its
start can take seconds, and a second starter only repeats the work."""


async def sweep_queues(pool: asyncpg.Pool, temporal: Client,
                       settings: Settings | None = None) -> int:
    """One pass over every thread with a queued run (:func:`advance_queue`); how many there were.

    Each API process runs it at start-up and every ``queue_recovery_seconds``: it starts
    queued runs no run handed the thread to (accepted by an API process that died before
    starting them, or whose start Temporal did not answer). Runs younger than
    :data:`SWEEP_GRACE_SECONDS` are left to the request that made them, which is starting
    them; a thread deleted meanwhile is skipped.
    """
    threads = await queued_threads(pool)
    for thread_id in threads:
        try:
            await advance_queue(pool, temporal, thread_id, settings)
        except NotFoundError:
            continue  # the thread (and its queue) was deleted since the pass read it
        except (OverseerError, RPCError, asyncpg.PostgresError, OSError) as err:
            logger.warning("queued run not started yet", extra={
                "thread_id": thread_id, "error": type(err).__name__})
    return len(threads)


async def queued_threads(pool: asyncpg.Pool) -> list[str]:
    """The threads :func:`sweep_queues` looks at: with a ``pending`` run older than the grace."""
    rows = await pool.fetch(
        "SELECT DISTINCT thread_id FROM agent_runs WHERE status = 'pending' "
        "AND created_at < now() - make_interval(secs => $1)", SWEEP_GRACE_SECONDS)
    return [str(r["thread_id"]) for r in rows]


@dataclass(frozen=True)
class HandedOff:
    """What :func:`hand_off` did.

    ``status``: the thread's after it (None: the thread no longer exists); ``inserted``: the
    events it appended that were new; ``webhooks``: those it claimed (:func:`claim_webhooks`).
    """

    status: str | None
    inserted: list[NewEvent]
    webhooks: list[dict[str, Any]]


async def hand_off(pool: asyncpg.Pool, temporal: Client, settings: Settings, *,
                   thread_id: str, run_id: str, snapshot: dict[str, Any],
                   pause: bool = False, events: Sequence[NewEvent] = (),
                   claim: str | None = None, ending: dict[str, Any] | None = None) -> HandedOff:
    """A thread's run has ended: write its final state to the thread, start the next queued run.

    With ``pause`` the run has stopped at an interrupt instead (its approval is being
    opened): its state and statuses are written (thread ``interrupted``, the runs that
    ended there ``interrupted``) and nothing more. Either way a ``NOTIFY`` on
    :data:`overseer.token_stream.STATE_CHANNEL` wakes the API's ``runs.wait`` callers
    (:func:`overseer.thread_streams.wait_values`), which wait on Postgres, not on the workflow's stream.

    Called by the run's own workflow with its ending (``record_events``' ``hand_off``), so the
    thread's queue moves when Temporal ends a run and not when someone next looks: the
    per-thread ordering the Agent Server's multitask strategies promise, driven by the run
    workflows. The run's ``events`` (its ``run.finished``, or its
    ``approval.requested`` at a pause), the thread's state, the runs' statuses and the
    webhooks' ``claim`` commit in one transaction, which holds the thread's row lock; the
    next queued run is started after the commit. Idempotent, so a retried call writes
    nothing twice and starts no run twice: the events are keyed, the thread is detached
    only while the ending run is still attached, a claim is given the same webhooks again,
    and :func:`advance_queue` claims under the thread's row lock. Writes no state while the
    API is cancelling the run (``agent_threads.cancelling``): :func:`cancel_thread_run` then
    sets the thread's state (a rollback's is the state before the run) and its caller
    starts the next run.

    Args:
        pool: the database pool.
        temporal: the Temporal client (the worker's) that starts the next run.
        settings: the process settings.
        thread_id: the thread (uuid text).
        run_id: the ending run's workflow run id (``agent_threads.last_run_id`` while it ran).
        snapshot: what :meth:`SegmentRunWorkflow.get_thread_state` will answer once the
            ending is published (its last mark ``end`` or ``error``), with ``closed`` set;
            with ``pause``, what it answers at the interrupt.
        pause: the run paused on an interrupt (see above).
        events: appended (:func:`overseer.store.events.append_events`) in the transaction.
        claim: the key to claim the ended runs' webhooks with (:func:`claim_webhooks`);
            None claims none.
        ending: the run's ending item as a row (:func:`overseer.token_stream.ending_item`),
            written with the thread's state (and only then: not while the API cancels the
            run); from the segment that ends the run.

    Returns:
        :class:`HandedOff`.

    Raises:
        asyncpg.PostgresError, OSError: the database is unavailable (the activity retries).
    """
    async with pool.acquire() as conn, conn.transaction():
        inserted = await append_events(conn, events) if events else []
        left = await _hand_over(conn, thread_id=thread_id, run_id=run_id, snapshot=snapshot,
                                pause=pause, ending=ending)
        webhooks = await claim_webhooks(conn, run_id, claim) if claim is not None else []
    if left is None or pause or not left.queued:
        return HandedOff(left.status if left is not None else None, inserted, webhooks)
    try:
        await advance_queue(pool, temporal, thread_id, settings)
    except (OverseerError, RPCError) as err:  # the API's recovery pass starts it later
        logger.warning("queued run not started at hand-off", extra={
            "thread_id": thread_id, "error": type(err).__name__})
    status: str | None = await pool.fetchval(
        "SELECT status FROM agent_threads WHERE thread_id = $1", parse_uuid(thread_id))
    return HandedOff(status, inserted, webhooks)


async def _hand_over(conn: Any, *, thread_id: str, run_id: str, snapshot: dict[str, Any],
                     pause: bool, ending: dict[str, Any] | None = None) -> Snapshotted | None:
    """:func:`hand_off`'s writes to the thread, in its transaction.

    Locks the thread's row, ``NOTIFY``s :data:`overseer.token_stream.STATE_CHANNEL` (sent
    at the commit) and, while the run is attached and not being cancelled, writes its state
    (:func:`overseer.thread_sync.write_snapshot`) and its ``ending`` row.

    Returns:
        The thread's status and whether a run is queued on it; None when the thread no
        longer exists.
    """
    row = await conn.fetchrow(  # the NOTIFY rides on the lock's statement
        "SELECT thread_id, status, last_run_id, cancelling, pg_notify($2, $3) "
        "FROM agent_threads WHERE thread_id = $1 FOR UPDATE",
        parse_uuid(thread_id), STATE_CHANNEL, run_id)
    if row is None:
        return None
    if row["cancelling"] is not None and str(row["cancelling"]) == run_id:
        return Snapshotted(str(row["status"]), False)  # the API is cancelling it: it hands on
    if row["last_run_id"] is not None and str(row["last_run_id"]) == run_id:
        if ending is not None:
            durable = ending["durable"]
            await conn.execute(INSERT_ENDING_ROW, parse_uuid(run_id), int(durable["offset"]),
                               json.dumps(ending))
        return await write_snapshot(conn, row["thread_id"], row["last_run_id"], snapshot,
                                    shown=not pause)
    queued = await conn.fetchval("SELECT EXISTS (SELECT 1 FROM agent_runs WHERE thread_id = $1 "
                                 "AND status = 'pending')", row["thread_id"])
    return Snapshotted(str(row["status"]), bool(queued))


async def launch(pool: asyncpg.Pool, temporal: Client, settings: Settings,
                 run: asyncpg.Record, *, fresh: bool = False) -> None:
    """Start the ``SegmentRunWorkflow`` of a claimed run on the thread's checkpoints (idempotent).

    ``run`` is its ``agent_runs`` row; the thread's ``last_run_id`` is the run (claimed by
    :func:`advance_queue`, or by :func:`overseer.thread_runs.create_run` on a thread made
    for it: ``fresh``, which has no state and was claimed in the caller's transaction, so
    it is not read again; its segments are first tried as local activities,
    ``Settings.stateless_segment_local_seconds``). A failure to reach Temporal leaves the run
    claimed and ``pending``: the next :func:`advance_queue` starts it.
    """
    has_state = False
    if not fresh:
        row = await pool.fetchrow("SELECT last_run_id, state IS NOT NULL AS has_state "
                                  "FROM agent_threads WHERE thread_id = $1", run["thread_id"])
        if row is None or row["last_run_id"] != run["run_id"]:
            return
        has_state = bool(row["has_state"])
    pipeline = get_registry().get(run["graph_id"])
    run_id, thread_id = str(run["run_id"]), str(run["thread_id"])
    kwargs, metadata = parse_json(run["kwargs"]) or {}, parse_json(run["metadata"]) or {}
    body = {**kwargs, "metadata": metadata}
    try:
        value, recorded = graph_input(pipeline, body, run_id, has_state=has_state)
    except Exception as err:  # noqa: BLE001 - the input no longer fits the thread: the run fails
        await _fail_unstarted(pool, run, f"{type(err).__name__}: {err}"[:500])
        return
    wid = pipeline.workflow_id(run_id)
    async with pool.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED,
            actor=f"api:{run['created_by']}",
            data={"pipeline": pipeline.name, "workflow_id": wid,
                  "submitted_by": run["created_by"], "idempotency_key": None,
                  "input": {"input": to_jsonable(recorded), "metadata": metadata,
                            "thread_id": thread_id, "agent_server": True}})])
    own = segment_settings(kwargs)
    if fresh and settings.stateless_segment_local_seconds > 0:  # a stateless run's: local tries
        own["local_seconds"] = settings.stateless_segment_local_seconds
    config = own.setdefault("graph_config", {})  # who the run is for, as the Agent Server says
    config["configurable"] = {**(config.get("configurable") or {}),
                              "langgraph_auth_user_id": run["created_by"] or ""}
    request = RunRequest(pipeline=pipeline, run_id=run_id, input=value, metadata=metadata,
                         submitted_by=run["created_by"] or "unknown", own=own,
                         thread_id=thread_id, summary=f"{pipeline.name}: thread {thread_id}",
                         start_delay_seconds=float(kwargs.get("after_seconds") or 0))
    try:  # Temporal holds the first task until after_seconds
        await start(temporal, settings, request)
    except RPCError as err:
        logger.warning("queued run not started: Temporal did not answer",
                       extra={"run_id": run_id, "error": err.message})
        return
    still = await pool.fetchval(  # started: running; and is the thread still the run's?
        """WITH started AS (UPDATE agent_runs SET status = 'running', updated_at = now()
                            WHERE run_id = $1 AND status = 'pending')
           SELECT last_run_id FROM agent_threads WHERE thread_id = $2""",
        run["run_id"], run["thread_id"])
    if still != run["run_id"] and not await ended_by_itself(pool, run_id):
        # cancelled or deleted while it was being started (not: another caller started it,
        # it ran, and its own ending handed the thread on before this caller looked)
        await cancel_workflow(pool, temporal, pipeline.name, run_id, run["created_by"] or "queue")


async def ended_by_itself(pool: asyncpg.Pool, run_id: str) -> bool:
    """Whether the run's own workflow has written its ending (``completed``, ``rejected``, ``failed``).

    Read from the ``runs`` read model. A run ``cancelled`` (the API recorded it), or with no
    ending yet, has not.
    """
    status = await pool.fetchval("SELECT status FROM runs WHERE run_id = $1",
                                 parse_uuid(run_id, "run"))
    return status in TERMINAL_STATUSES - {"cancelled"}


async def _fail_unstarted(pool: asyncpg.Pool, run: asyncpg.Record, message: str) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE agent_runs SET status = 'error', updated_at = now(), "
                           "kwargs = kwargs || $2::jsonb WHERE run_id = $1", run["run_id"],
                           json.dumps({"error": {"error": "invalid_request",
                                                 "message": message}}))
        await conn.execute("UPDATE agent_threads SET status = 'idle', last_run_id = NULL, "
                           "updated_at = now() WHERE thread_id = $1 AND last_run_id = $2",
                           run["thread_id"], run["run_id"])


async def claim_webhooks(db: Any, workflow_run_id: str,
                         claim: str) -> list[dict[str, Any]]:
    """The webhooks due for the workflow's runs that have ended, each claimed once.

    A run (a start or a resume) with a ``webhook`` whose status is final is claimed with
    ``claim`` (the hand-off's own key: the same on a retried hand-off, so a retry gets the
    same list back and no other hand-off gets it at all). ``db`` is the pool, or the
    connection of the hand-off's transaction (:func:`overseer.runtime.events.record_events`).

    Returns:
        ``[{"url", "payload", "delivery"}]``: the payload is the run as the SDK reads it plus
        ``values`` (the thread's), ``run_started_at``, ``run_ended_at`` and, for a failed
        run, ``error`` ``{error, message}`` — the Agent Server's webhook body; ``delivery``
        is the run id (one delivery per run).
    """
    rows = await db.fetch(
        """UPDATE agent_runs SET kwargs = kwargs || jsonb_build_object('webhook_claim', $2::text)
           WHERE workflow_run_id = $1 AND status <> ALL($3) AND kwargs ? 'webhook'
             AND (NOT kwargs ? 'webhook_claim' OR kwargs->>'webhook_claim' = $2)
           RETURNING *""", uuid.UUID(workflow_run_id), claim, list(ACTIVE_RUN_STATUSES))
    due: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: r["created_at"]):
        view = run_view(row)
        view["kwargs"].pop("webhook_claim", None)
        values = parse_json(await db.fetchval('SELECT "values" FROM agent_threads '
                                             "WHERE thread_id = $1", row["thread_id"]))
        payload = {**view, "run_started_at": view["created_at"],
                   "run_ended_at": view["updated_at"], "values": values}
        if row["status"] == "error":
            payload["error"] = await run_error(db, workflow_run_id)
        due.append({"url": view["kwargs"]["webhook"], "payload": payload,
                    "delivery": view["run_id"]})
    return due


async def run_error(db: Any, workflow_run_id: str) -> dict[str, Any]:
    """``{error, message}`` of a failed run, from its ``run.failed`` event."""
    data = parse_json(await db.fetchval(
        "SELECT data FROM events WHERE run_id = $1 AND type = 'run.failed' "
        "ORDER BY seq DESC LIMIT 1", uuid.UUID(workflow_run_id))) or {}
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return {"error": "error", "message": "the run failed"}
    return {"error": error.get("code", "error"), "message": error.get("message", "")}
