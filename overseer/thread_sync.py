"""A thread's row follows the workflow attached to it; a cancel detaches it.

While a run holds a thread (``agent_threads.last_run_id``), the run's ``SegmentRunWorkflow``
writes the row itself when it pauses on an interrupt and when it ends
(:func:`overseer.thread_queue.hand_off`); once it has ended it is detached. Its
``get_thread_state`` query (:func:`query_state`) is read into the row (:func:`refresh`,
:func:`save_snapshot`) only where the row cannot know: a paused thread (a decision from the
admin API resumes it) and a workflow that closed without its ending (terminated, failed).
:func:`cancel_thread_run` stops the attached workflow and detaches it, keeping the
thread's state or, for a ``rollback``, putting it back as the run found it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import asyncpg
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from overseer.checkpoints import drop_run_checkpoints
from overseer.errors import DependencyUnavailableError
from overseer.runs import cancel_run_workflow
from overseer.threads import (
    ACTIVE_RUN_STATUSES,
    RUN_ENDINGS,
    get_thread,
    mirror_checkpointed,
    workflow_id,
)

QUERY_TRIES = 5
"""A query that times out or finds Temporal unavailable is asked again this many times in all
(backoff 0.2 s doubling): with a hundred runs in flight on one worker a query can wait past
its deadline for the run's workflow task, which is no reason to fail a ``runs.wait``."""


TRANSIENT_RPC = frozenset({RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE,
                           RPCStatusCode.RESOURCE_EXHAUSTED, RPCStatusCode.CANCELLED})


async def query_state(temporal: Client, graph_id: str, run_id: str, *,
                      tries: int = QUERY_TRIES, deadline_seconds: float | None = None,
                      ending: dict[str, bool] | None = None) -> dict[str, Any] | None:
    """The workflow's ``get_thread_state`` answer, or None when it is gone or cannot answer.

    The answer gains ``closed``, ``cancelled`` and ``failed``: ``ending`` when the caller
    has just read them, else :func:`workflow_ending`. A query needs a worker: with none
    running it waits out its deadline (``deadline_seconds``, else the server's ~5 s) on each
    of the ``tries``.

    Raises:
        DependencyUnavailableError: Temporal failed the query ``tries`` times, or with an
            error that is not transient (503).
    """
    handle = temporal.get_workflow_handle(workflow_id(graph_id, run_id))
    rpc_timeout = None if deadline_seconds is None else timedelta(seconds=deadline_seconds)
    for attempt in range(1, tries + 1):
        try:
            snap: dict[str, Any] = await handle.query("get_thread_state", rpc_timeout=rpc_timeout)
            break
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            if err.status not in TRANSIENT_RPC or attempt == tries:
                raise DependencyUnavailableError("Temporal did not answer") from err
            await asyncio.sleep(0.2 * 2 ** (attempt - 1))
        except Exception:  # noqa: BLE001 - e.g. a workflow recorded before the query existed
            return None
    return {**snap, **(ending or await workflow_ending(temporal, graph_id, run_id) or RUNNING)}


RUNNING = {"closed": False, "cancelled": False, "failed": False}
""":func:`workflow_ending`'s answer for a workflow that still runs."""


async def workflow_ending(temporal: Client, graph_id: str,
                          run_id: str) -> dict[str, bool] | None:
    """How the run's workflow ended, from Temporal's server alone (a ``describe``; no worker).

    ``{"closed", "cancelled", "failed"}``: ``cancelled`` for one cancelled or terminated (the
    Temporal Web UI's "terminate"), ``failed`` for one failed, timed out or gone (its history
    deleted: how it ended is not known, and it wrote no ending); :data:`RUNNING` while it
    runs. None after a transient failure (deadline, unavailable): the caller asks later.

    Raises:
        DependencyUnavailableError: Temporal refused the describe otherwise (503).
    """
    try:
        desc = await temporal.get_workflow_handle(workflow_id(graph_id, run_id)).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return {"closed": True, "cancelled": False, "failed": True}
        if err.status in TRANSIENT_RPC:
            return None
        raise DependencyUnavailableError("Temporal did not answer") from err
    name = desc.status.name if desc.status is not None else "RUNNING"
    return {"closed": name != "RUNNING", "cancelled": name in ("CANCELED", "TERMINATED"),
            "failed": name in ("FAILED", "TIMED_OUT")}


def thread_status(snap: dict[str, Any]) -> str:
    """``idle`` | ``busy`` | ``interrupted`` | ``error`` from a workflow's state.

    A run that ended with nodes still to run (stopped at one of its own breakpoints,
    ``interrupt_before`` / ``interrupt_after``) leaves its thread ``interrupted``, as on the
    Agent Server, with no run attached: the next run goes on from there.
    """
    if snap.get("cancelled"):
        return "idle"
    marks, published = snap.get("marks") or [], int(snap.get("published") or 0)
    last = marks[-1] if marks else None
    if last and last["event"] == "error":
        return "error"
    if last and last["event"] == "end":
        return "interrupted" if snap.get("next") else "idle"
    if snap.get("closed"):  # failed or timed out before its own ending
        return "error"
    if last and last["event"] == "interrupt" and last["offset"] == published - 1 and \
            not snap.get("decided"):
        return "interrupted"
    return "busy"


def segment_status(snap: dict[str, Any] | None, from_offset: int) -> str:
    """A run's status: the first ``interrupt``/``end``/``error`` at or after its first offset.

    A run whose workflow was cancelled (its ``end`` mark says so) is ``interrupted``, as the
    Agent Server calls a cancelled run.
    """
    if snap is None:
        return "error"
    offsets, statuses, otherwise = mark_statuses(snap)
    return next((status for offset, status in zip(offsets, statuses, strict=True)
                 if offset >= from_offset), otherwise)


def mark_statuses(snap: dict[str, Any]) -> tuple[list[int], list[str], str]:
    """:func:`segment_status` as data: ``(offsets, statuses, otherwise)``.

    A run whose first offset is ``from_offset`` has the status of the first mark (in the
    state's order) whose offset is at or after it, ``otherwise`` when there is none, so one
    ``UPDATE`` can set every run of a workflow (:data:`_RUN_STATUSES`).
    """
    marks = snap.get("marks") or []
    return ([int(m["offset"]) for m in marks],
            ["interrupted" if m.get("cancelled") else RUN_ENDINGS[m["event"]] for m in marks],
            "error" if snap.get("failed") else "interrupted" if snap.get("closed")
            else "running")


_RUN_STATUSES = """
UPDATE agent_runs r SET status = coalesce(
        (SELECT m.status FROM unnest($2::int[], $3::text[]) WITH ORDINALITY AS m(off, status, ord)
         WHERE m.off >= r.from_offset ORDER BY m.ord LIMIT 1), $4),
    updated_at = now()
WHERE r.workflow_run_id = $1 AND r.status = ANY($5)
"""
"""Every active run of a workflow gets its :func:`segment_status` (``$2``–``$4`` from
:func:`mark_statuses`)."""

_LEFT = """RETURNING status, EXISTS (SELECT 1 FROM agent_runs WHERE thread_id = $1
                                 AND status = 'pending') AS queued"""
"""What :func:`write_snapshot`'s ``UPDATE`` of the thread answers (:class:`Snapshotted`)."""


async def refresh(pool: asyncpg.Pool, temporal: Client, thread_id: str) -> asyncpg.Record:
    """The thread's row, brought up to date with its attached workflow first (if any).

    Temporal's server is asked whether that workflow still runs (:func:`workflow_ending`,
    no worker needed):

    - closed: it closed without its ending, which detaches the thread before the workflow
      closes (terminated from the Temporal Web UI, failed, timed out, deleted), unless the
      run that holds the thread is still ``pending`` (claimed, its workflow not started:
      :func:`overseer.thread_queue.advance_queue` starts it). The thread and its
      runs are settled from how it closed (:func:`thread_status`, :func:`segment_status`:
      ``idle`` / ``interrupted`` when terminated, ``error`` when failed) and the thread's
      state becomes LangGraph's latest checkpoint, as after a cancel.
    - running, thread ``busy``: the row as recorded. The workflow writes the thread itself
      when it pauses at an interrupt and when it ends (:func:`overseer.thread_queue.hand_off`);
      between, its query answers no newer values than the row has
      (:func:`overseer.thread_runs.current_state` reads the latest checkpoint), and a query
      would wait for the workflow's task, which a stateless run's local try holds.
    - running, paused at an interrupt: the workflow is asked (one query, at most
      :data:`PAUSED_QUERY_SECONDS`), since a decision from the admin API or the escalation
      ladder resumes it without writing the thread. When no worker answers (down,
      restarting, overloaded) the pause as recorded is the answer, not a 503.

    Either way a pause the thread shows is the one its reader saw (``paused_checkpoint``
    becomes ``checkpoint``: :func:`write_snapshot`'s ``shown``).

    Raises:
        NotFoundError: unknown thread (404).
        DependencyUnavailableError: Temporal refused a describe (503).
    """
    row = await get_thread(pool, thread_id)
    if row["last_run_id"] is None or row["graph_id"] is None:
        return row
    graph_id, wrid = row["graph_id"], str(row["last_run_id"])
    ending = await workflow_ending(temporal, graph_id, wrid)
    if ending is not None and ending["closed"]:
        if await pool.fetchval("SELECT status = 'pending' FROM agent_runs WHERE run_id = $1",
                               row["last_run_id"]):
            return row  # claimed, its workflow not started yet (or gone): advance_queue's
        if await save_snapshot(pool, row, ending):
            await mirror_checkpointed(pool, row["thread_id"], graph_id)
        return await get_thread(pool, thread_id)
    if row["status"] == "busy":
        return row
    try:
        snap = await query_state(temporal, graph_id, wrid, tries=1,
                                 deadline_seconds=PAUSED_QUERY_SECONDS, ending=ending)
    except DependencyUnavailableError:
        snap = None
    if snap is None or not await save_snapshot(pool, row, snap):
        await pool.execute(
            """UPDATE agent_threads SET checkpoint = paused_checkpoint, paused_checkpoint = NULL
               WHERE thread_id = $1 AND last_run_id = $2 AND paused_checkpoint IS NOT NULL""",
            row["thread_id"], row["last_run_id"])
    return await get_thread(pool, thread_id)


PAUSED_QUERY_SECONDS = 3.0
"""How long a read of a paused thread waits for its workflow's answer before it answers
from the row (:func:`refresh`): a healthy worker answers in milliseconds."""


@dataclass(frozen=True)
class Snapshotted:
    """What :func:`write_snapshot` left: the thread's status, whether a run is queued on it."""

    status: str
    queued: bool


async def save_snapshot(pool: asyncpg.Pool, row: asyncpg.Record, snap: dict[str, Any], *,
                        shown: bool = True) -> bool:
    """Write a workflow's state into the thread and its runs' statuses (its own transaction).

    ``row`` is the thread's row as read before; nothing is written (False) when the thread
    has since been detached or given to another run. See :func:`write_snapshot`.
    """
    async with pool.acquire() as conn, conn.transaction():
        # the thread's row first: a resume's run row is in, or the thread detached, not both
        locked = await conn.fetchval("SELECT last_run_id FROM agent_threads "
                                     "WHERE thread_id = $1 FOR UPDATE", row["thread_id"])
        if locked != row["last_run_id"]:
            return False
        await write_snapshot(conn, row["thread_id"], locked, snap, shown=shown)
    return True


async def write_snapshot(conn: Any, thread_id: Any, wrid: Any, snap: dict[str, Any], *,
                         shown: bool = True) -> Snapshotted:
    """Write workflow ``wrid``'s state into its thread and its runs' statuses.

    Called in a transaction that holds the thread's row lock (``SELECT … FOR UPDATE``) and
    found ``wrid`` attached (``last_run_id``): :func:`save_snapshot`, and the run's own
    ending or pause (:func:`overseer.thread_queue.hand_off`). The thread's status follows
    :func:`thread_status`; a workflow that ended (``idle``, ``error`` or ``closed``) is
    detached. ``shown=False`` (a pause handed over by the workflow, not yet shown to any
    client) leaves the thread's ``checkpoint`` — the state a resume without an interrupt id
    answers (:func:`resume_target`) — as it was and keeps the pause's in
    ``paused_checkpoint``, so a resume never lands on an interrupt no client has read;
    :func:`overseer.thread_streams.wait_values` and every read of the thread show it
    (:func:`refresh`).

    Args:
        conn: the transaction's connection.
        thread_id: the thread (``uuid.UUID``).
        wrid: the workflow run id attached to it (``uuid.UUID``).
        snap: the workflow's ``get_thread_state`` answer.
        shown: see above.

    Returns:
        The thread's status now and whether a run is queued on it (read after the writes,
        so a run queued by a transaction the lock waited for counts).

    Raises:
        asyncpg.PostgresError: the database failed (the caller's transaction rolls back).
    """
    status = thread_status(snap)
    await conn.execute(_RUN_STATUSES, wrid, *mark_statuses(snap), list(ACTIVE_RUN_STATUSES))
    ended = bool(status in ("idle", "error") or snap.get("closed"))
    if "values" not in snap:  # e.g. failed before its first state: an ended run detaches
        left = await conn.fetchrow(
            """UPDATE agent_threads SET status = $2, updated_at = now(),
                   last_run_id = CASE WHEN $4 THEN NULL ELSE last_run_id END,
                   cancelling = CASE WHEN $4 THEN NULL ELSE cancelling END
               WHERE thread_id = $1 AND last_run_id = $3 """ + _LEFT,
            thread_id, status, wrid, ended)
        return Snapshotted(str(left["status"]), bool(left["queued"]))
    cp = {k: snap.get(k) for k in ("next", "tasks", "interrupts", "checkpoint_id",
                                    "parent_checkpoint_id", "metadata", "created_at")}
    interrupts = {t["id"]: t["interrupts"] for t in snap.get("tasks") or [] if t["interrupts"]}
    if status != "interrupted":
        cp["interrupts"], interrupts = [], {}
        cp["tasks"] = [t for t in cp.get("tasks") or [] if not t.get("interrupts")]
    left = await conn.fetchrow(
        """UPDATE agent_threads SET status = $2, "values" = $3::jsonb, state = $4::jsonb,
               checkpoint = CASE WHEN $9 THEN $5::jsonb ELSE checkpoint END,
               paused_checkpoint = CASE WHEN $9 THEN NULL ELSE $5::jsonb END,
               interrupts = $6::jsonb, updated_at = now(),
               last_run_id = CASE WHEN $7 THEN NULL ELSE last_run_id END,
               cancelling = CASE WHEN $7 THEN NULL ELSE cancelling END
           WHERE thread_id = $1 AND last_run_id = $8 """ + _LEFT,
        thread_id, status, json.dumps(snap["values"]), json.dumps(snap["encoded"]),
        json.dumps(cp), json.dumps(interrupts), ended, wrid, shown)
    return Snapshotted(str(left["status"]), bool(left["queued"]))


async def cancel_thread_run(pool: asyncpg.Pool, temporal: Client, row: asyncpg.Record,
                            subject: str, *, rollback: bool) -> None:
    """Cancel the workflow attached to a thread; its runs become ``interrupted``.

    With ``rollback`` the thread's state stays what it was before that workflow; otherwise
    it keeps the workflow's last saved state. The thread is marked ``cancelling`` first, so
    the workflow's own ending (:func:`hand_off`) leaves the thread to this function; a run
    that ended and handed the thread on before is left as it ended. A rollback waits (at
    most :data:`CLOSE_WAIT_SECONDS`) for the run's segment to stop, then deletes the
    checkpoints the run wrote (:func:`drop_run_checkpoints`); either way the thread's row
    then follows its latest checkpoint (:func:`mirror_checkpointed`).
    """
    if row["last_run_id"] is None or row["graph_id"] is None:
        return
    wrid = str(row["last_run_id"])
    if await pool.fetchval(  # the run's own ending no longer hands the thread on (hand_off)
            "UPDATE agent_threads SET cancelling = last_run_id WHERE thread_id = $1 "
            "AND last_run_id = $2 RETURNING thread_id", row["thread_id"], row["last_run_id"]
    ) is None:
        return  # the run ended and handed the thread on before the cancel: nothing to stop
    await cancel_workflow(pool, temporal, row["graph_id"], wrid, subject)
    if rollback:  # once its segment has stopped writing, drop what it wrote
        await _closed(temporal, row["graph_id"], wrid)
        async with pool.acquire() as conn:
            await drop_run_checkpoints(conn, str(row["thread_id"]), wrid)
    await mirror_checkpointed(pool, row["thread_id"], row["graph_id"])
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("UPDATE agent_runs SET status = 'interrupted', updated_at = now() "
                           "WHERE workflow_run_id = $1 AND status = ANY($2)",
                           row["last_run_id"], list(ACTIVE_RUN_STATUSES))
        await conn.execute(  # unless the run's own ending already handed the thread on
            """UPDATE agent_threads SET status = 'idle', last_run_id = NULL, cancelling = NULL,
                   interrupts = '{}'::jsonb, updated_at = now()
               WHERE thread_id = $1 AND (last_run_id = $2 OR last_run_id IS NULL)""",
            row["thread_id"], row["last_run_id"])


CLOSE_WAIT_SECONDS = 30.0
"""How long a rollback waits for a cancelled run's workflow to close (its segment activity
is cancelled at the next heartbeat the server hears, within ~8 s with the 10 s heartbeat
time-out; a local try at its workflow task's next heartbeat, ~8 s)."""


async def _closed(temporal: Client, graph_id: str, run_id: str) -> None:
    """Wait until the run's workflow has closed (or :data:`CLOSE_WAIT_SECONDS` passed)."""
    handle = temporal.get_workflow_handle(workflow_id(graph_id, run_id))
    with contextlib.suppress(Exception):  # cancelled, failed, gone, or still closing: go on
        await asyncio.wait_for(handle.result(), CLOSE_WAIT_SECONDS)


async def cancel_workflow(pool: asyncpg.Pool, temporal: Client, graph_id: str, run_id: str,
                          subject: str) -> None:
    """Cancel the run's workflow and record it (:func:`overseer.runs.cancel_run_workflow`)."""
    await cancel_run_workflow(pool, temporal, workflow_id(graph_id, run_id), run_id, subject)
