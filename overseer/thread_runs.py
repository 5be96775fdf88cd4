"""What a client does to a thread's runs: create or queue one, resume an interrupt, cancel, update the state.

- a run with input (or ``command.goto``/``update``) is queued on the thread and starts a
  new ``SegmentRunWorkflow`` (an Overseer run: ``run.submitted``, the event log,
  approvals) on the thread's checkpoints when its turn comes (:mod:`overseer.thread_queue`);
  its stretch of the workflow's durable stream starts at offset 0;
- a run with ``command.resume`` is a decision on the interrupt the thread's workflow waits
  on (the shared gate's ``decide`` update with ``raw_resume``, so ``interrupt()`` gets the
  value unchanged and a decision from the admin API and one from here cannot both win);
  its stretch starts where the workflow's stream stood when the decision was accepted.

A run's stretch ends at the first ``interrupt`` (run ``interrupted``), ``end``
(``success``) or ``error`` (``error``) item.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

import asyncpg
from temporalio.client import Client

from overseer.access import Principal
from overseer.assistants import assistant_id_of, resolve_assistant
from overseer.checkpoints import checkpoint_view, segments_app
from overseer.errors import (
    ConflictError,
    InvalidRequestError,
    NotAwaitingApprovalError,
    NotFoundError,
    PermissionDeniedError,
)
from overseer.pipelines import Pipeline
from overseer.registry import get_registry
from overseer.run_body import check_run_body, check_webhook, graph_input, resume_target, run_kwargs
from overseer.run_decisions import decide
from overseer.settings import Settings
from overseer.thread_queue import advance_queue, claim, launch, sync_thread
from overseer.thread_sync import (
    cancel_thread_run,
    query_state,
    refresh,
    segment_status,
    thread_status,
    workflow_ending,
)
from overseer.threads import (
    get_thread,
    mirror_checkpointed,
    parse_json,
    parse_uuid,
    run_holds,
    state_view,
)


class ThreadBusyError(ConflictError):
    """The thread has a run in progress and ``multitask_strategy`` is ``reject`` (409)."""

    code = "thread_busy"


async def get_run(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                  run_id: str) -> asyncpg.Record:
    """The run as recorded, settled first if its workflow closed without writing its ending.

    A run's workflow writes its runs' statuses itself when it pauses at an interrupt and
    when it ends (:func:`overseer.thread_queue.hand_off`, committed before the workflow
    closes), and a cancel writes its own, so a ``running`` row is trusted while Temporal's
    server says the workflow runs: one ``describe``, which no worker has to answer (a query
    would wait for the workflow's task, which a stateless run's local try holds). A
    workflow that closed without its ending (terminated from the Temporal Web UI, failed)
    settles the run and its thread (:func:`overseer.thread_sync.refresh`).

    Raises:
        NotFoundError: unknown run on this thread (404).
        DependencyUnavailableError: Temporal refused the describe (503).
    """
    row = await _recorded_run(pool, thread_id, run_id)
    if row["status"] == "pending":  # queued: its turn may have come
        await advance_queue(pool, temporal, thread_id)
        row = await _recorded_run(pool, thread_id, run_id)
    if row["status"] != "running":
        return row
    ending = await workflow_ending(temporal, row["graph_id"], str(row["workflow_run_id"]))
    if ending is None or not ending["closed"]:
        return row
    await refresh(pool, temporal, thread_id)  # the thread and its attached workflow's runs
    row = await _recorded_run(pool, thread_id, run_id)
    if row["status"] == "running":  # its workflow no longer holds the thread: this run alone
        updated = await pool.fetchrow(
            "UPDATE agent_runs SET status = $2, updated_at = now() WHERE run_id = $1 "
            "AND status = 'running' RETURNING *", row["run_id"],
            segment_status(ending, row["from_offset"]))
        row = updated or await _recorded_run(pool, thread_id, run_id)
    return row


async def _recorded_run(pool: asyncpg.Pool, thread_id: str, run_id: str) -> asyncpg.Record:
    """The run's ``agent_runs`` row as recorded (no workflow asked).

    Raises:
        NotFoundError: unknown run on this thread (404).
    """
    row = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1 AND thread_id = $2",
                              parse_uuid(run_id, "run"), parse_uuid(thread_id))
    if row is None:
        raise NotFoundError(f"unknown run {run_id} on thread {thread_id}")
    return row


async def list_runs(pool: asyncpg.Pool, thread_id: str, limit: int, offset: int,
                    status: str | None) -> list[asyncpg.Record]:
    """The thread's runs, newest first."""
    await get_thread(pool, thread_id)
    return list(await pool.fetch(
        """SELECT * FROM agent_runs WHERE thread_id = $1 AND ($4::text IS NULL OR status = $4)
           ORDER BY created_at DESC LIMIT $2 OFFSET $3""",
        parse_uuid(thread_id), limit, offset, status))


async def create_run(pool: asyncpg.Pool, temporal: Client, settings: Settings, *,
                     thread_id: str, body: dict[str, Any], principal: Principal,
                     check_role: bool = True,
                     run_id: str | None = None,
                     assistant_id: str | None = None,
                     fresh: bool = False,
                     pipeline: Pipeline | None = None) -> asyncpg.Record:
    """Start or queue a run on a thread, or resume its interrupt (see the module docstring).

    A run with input (or ``command.goto``/``update``) is first written to ``agent_runs`` as
    ``pending``, then started by :func:`advance_queue` when the thread is free: at once on an
    idle thread, or, with ``multitask_strategy="enqueue"`` (the default, as on LangGraph's
    Agent Server), when the run before it ends: that run's workflow starts it
    (:func:`hand_off`). The queue lives in Postgres, so a queued run outlives the API
    process that accepted it; one nobody started is started by whichever process next
    observes the thread, or by an API's recovery pass (:func:`sweep_queues`).

    Args:
        pool: the database pool.
        temporal: the Temporal client.
        settings: the process settings.
        thread_id: the thread.
        principal: the caller (who owns the run, or decides on a resume); its ``role``:
            ``submitter`` may start runs, ``reviewer`` may resume, ``admin`` both.
        body: the SDK's run body (``assistant_id``, ``input``, ``command``, ``metadata``,
            ``multitask_strategy``, ``if_not_exists`` …).
        check_role: False when a deployment's LangGraph ``Auth`` handlers already decided
            who may start and resume runs (its users have no Overseer role).
        run_id: the new run's id (a cron's tick gives one derived from the tick, so a
            retried tick finds its run instead of starting a second); a uuid4 when None.
            A run with this id already on the thread is returned as it is.
        assistant_id: the run's assistant when it is one made through the API
            (:func:`overseer.assistants.run_body` has already applied its config and
            context, and ``body["assistant_id"]`` names its graph); else the graph's own.
        fresh: the thread was made by this request for this run alone (a stateless run's,
            whose id nobody else knows): no run is on it or queued, so the run claims it as
            it is written, without looking, and starts without the thread being read again.
        pipeline: the graph ``body["assistant_id"]`` names, when the caller resolved it
            already (:func:`overseer.run_service.resolve_request`); else resolved here.

    Returns:
        The run row: ``running`` once started, ``pending`` while queued.

    Raises:
        NotFoundError: unknown assistant or thread (:mod:`overseer.run_service` creates a missing thread for
            ``if_not_exists="create"`` and checks the caller may run on it).
        ThreadBusyError: a run is in progress or queued and the strategy is ``reject`` (409).
        NotAwaitingApprovalError: a resume on a thread that waits for nothing (409).
        PermissionDeniedError: the role may not do this (403).
        InvalidRequestError: malformed input or strategy (422).
    """
    pipeline = pipeline or resolve_assistant(str(body.get("assistant_id") or ""))
    resuming = "resume" in (body.get("command") or {})
    if check_role:
        _check_role(principal, resuming)
    check_webhook(body.get("webhook"))
    if resuming:
        seen = await get_thread(pool, thread_id)
        if seen["last_run_id"] is not None or not state_view(seen)["next"]:
            return await _resume(pool, temporal, seen, pipeline, body, principal)
        # no run waits (its state was updated while paused): as LangGraph, the resume goes
        # to the thread's next tasks, in a new run that starts from its checkpoint
    body, strategy = check_run_body(pipeline, body)
    if run_id is not None:
        known = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1",
                                    uuid.UUID(run_id))
        if known is not None:
            return known
    run_id = run_id or str(uuid.uuid4())
    new = _NewRun(run_id, pipeline, body, strategy, principal.subject, assistant_id)
    if fresh:
        await _start_on_fresh_thread(pool, temporal, settings, thread_id, new)
    else:
        await _enqueue(pool, temporal, settings, thread_id, new)
    return await _run_row(pool, run_id)


@dataclass(frozen=True)
class _NewRun:
    """A run with input, checked, about to be written on its thread."""

    run_id: str
    pipeline: Pipeline
    body: dict[str, Any]
    strategy: str
    subject: str
    assistant_id: str | None


def _check_role(principal: Principal, resuming: bool) -> None:
    """Overseer's roles: a submitter starts runs, a reviewer resumes them, an admin both.

    Raises:
        PermissionDeniedError: the role may not do this (403).
    """
    needs = "reviewer" if resuming else "submitter"
    if not principal.is_admin and principal.role != needs:
        raise PermissionDeniedError(
            f"role {principal.role!r} may not {'resume' if resuming else 'start'} runs",
            details={"needs": [needs]})


async def _start_on_fresh_thread(pool: asyncpg.Pool, temporal: Client, settings: Settings,
                                 thread_id: str, new: _NewRun) -> None:
    """Write the run on the thread made for it, claim the thread as it is written, start it.

    Raises:
        InvalidRequestError: an input the graph refuses (422, before anything is written).
    """
    graph_input(new.pipeline, new.body, new.run_id, has_state=False)  # 422 before it is written
    tid = parse_uuid(thread_id)
    async with pool.acquire() as conn, conn.transaction():
        run = await _insert_run(conn, new.run_id, tid, new.pipeline, new.body, new.strategy,
                                new.subject, new.assistant_id)
        claimed = run is not None and await claim(conn, tid, run)
    if run is not None and claimed:
        await launch(pool, temporal, settings, run, fresh=True)
    else:  # not so fresh after all: the queue decides, as for any thread
        await advance_queue(pool, temporal, thread_id, settings)


async def _enqueue(pool: asyncpg.Pool, temporal: Client, settings: Settings, thread_id: str,
                   new: _NewRun) -> None:
    """Queue the run on its thread after its multitask strategy is applied; the queue starts it.

    Raises:
        InvalidRequestError: an input the graph refuses given the thread's state (422).
        ThreadBusyError: a run is in progress or queued and the strategy is ``reject`` (409).
    """
    row = await sync_thread(pool, temporal, thread_id, settings)
    graph_input(new.pipeline, new.body, new.run_id,
                has_state=row["state"] is not None)  # 422 before queueing
    queued = await pool.fetchval("SELECT count(*) FROM agent_runs WHERE thread_id = $1 "
                                 "AND status = 'pending'", row["thread_id"])
    if row["status"] == "busy" or queued:
        if new.strategy == "reject":
            raise ThreadBusyError(f"thread {thread_id} has a run in progress",
                                  details={"multitask_strategy": new.strategy, "queued": queued})
        if new.strategy in ("interrupt", "rollback"):  # stop the run in progress and the queue
            await pool.execute("UPDATE agent_runs SET status = 'interrupted', updated_at = now() "
                               "WHERE thread_id = $1 AND status = 'pending'", row["thread_id"])
            row = await get_thread(pool, thread_id)
            await cancel_thread_run(pool, temporal, row, new.subject,
                                    rollback=new.strategy == "rollback")
    async with pool.acquire() as conn:
        await _insert_run(conn, new.run_id, row["thread_id"], new.pipeline, new.body,
                          new.strategy, new.subject, new.assistant_id)
    await advance_queue(pool, temporal, thread_id, settings)


async def _insert_run(conn: Any, run_id: str, thread_id: uuid.UUID, pipeline: Pipeline,
                      body: dict[str, Any], strategy: str, subject: str,
                      assistant_id: str | None) -> asyncpg.Record | None:
    """Write a new run ``pending`` on its thread; the row, or None when it was there already."""
    row: asyncpg.Record | None = await conn.fetchrow(
        """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id, workflow_run_id,
                                   from_offset, kind, status, metadata, kwargs,
                                   multitask_strategy, created_by)
           VALUES ($1, $2, $3, $4, $1, 0, 'start', 'pending', $5::jsonb, $6::jsonb, $7, $8)
           ON CONFLICT (run_id) DO NOTHING RETURNING *""",
        uuid.UUID(run_id), thread_id, assistant_id or assistant_id_of(pipeline.name),
        pipeline.name,
        json.dumps(dict(body.get("metadata") or {})), json.dumps(run_kwargs(body)), strategy,
        subject)
    return row


async def _run_row(pool: asyncpg.Pool, run_id: str) -> asyncpg.Record:
    run = await pool.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1", uuid.UUID(run_id))
    assert run is not None  # inserted by create_run
    return run


async def _resume(pool: asyncpg.Pool, temporal: Client, row: asyncpg.Record, pipeline: Pipeline,
                  body: dict[str, Any], principal: Principal) -> asyncpg.Record:
    """A ``command.resume``: a run that is ``principal``'s decision on the thread's interrupt.

    The decision goes through the run's gate like every person's decision
    (:func:`overseer.run_decisions.decide`, answered as soon as the gate has taken it); the run's
    row is written first, so the workflow's hand-offs see it. The interrupt is on the
    stream a moment before its approval opens: a refusal in that moment is tried again
    for up to 10 s.

    Raises:
        NotAwaitingApprovalError: nothing waits, or someone else answered first (409).
        The other refusals of :func:`overseer.run_decisions.send_update` (409, 422, 503).
    """
    if row["last_run_id"] is None or row["graph_id"] is None:
        raise NotAwaitingApprovalError(f"thread {row['thread_id']} has no pending interrupt",
                                       details={"status": row["status"]})
    graph = get_registry().get(row["graph_id"])
    kind = "approve" if "approve" in graph.gate.decisions else graph.gate.decisions[0]
    interrupt_id, value, more = resume_target(body["command"]["resume"], (
        parse_json(row["checkpoint"]) or {}).get("interrupts") or [])
    run_id = uuid.uuid4()
    note = f"resumed through the Agent Server API (run {run_id})"
    deadline = asyncio.get_running_loop().time() + 10.0
    seen: int | None = None
    recorded = False
    try:
        while True:
            snap = await query_state(temporal, row["graph_id"], str(row["last_run_id"]))
            offset = int((snap or {}).get("published") or 0)
            if seen is not None and offset != seen:  # the run moved on: someone else decided
                raise NotAwaitingApprovalError("the interrupt was already answered",
                                               details={"status": "running"})
            seen = offset
            if not recorded:  # in before the decision, so the run's hand-offs see it
                await pool.execute(
                    """INSERT INTO agent_runs (run_id, thread_id, assistant_id, graph_id,
                                               workflow_run_id, from_offset, kind, status,
                                               metadata, kwargs, multitask_strategy, created_by)
                       VALUES ($1, $2, $3, $4, $5, $6, 'resume', 'running', $7::jsonb,
                               $8::jsonb, $9, $10)""",
                    run_id, row["thread_id"], assistant_id_of(pipeline.name), row["graph_id"],
                    row["last_run_id"], offset, json.dumps(body.get("metadata") or {}),
                    json.dumps(run_kwargs(body)), body.get("multitask_strategy") or "reject",
                    principal.subject)
                recorded = True
            try:
                await decide(pool, temporal, str(row["last_run_id"]), principal, kind,
                             until="applied", resume=value, raw_resume=True, note=note,
                             interrupt_id=interrupt_id, more_resumes=more or None)
                break
            except NotAwaitingApprovalError:
                # the interrupt is on the stream a moment before its approval opens: wait
                if snap and thread_status(snap) != "idle" and \
                        (snap.get("marks") or [{}])[-1].get("event") == "interrupt" and \
                        not snap.get("decided") and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.1)
                    continue
                raise
    except BaseException:
        if recorded:  # refused: the run never was
            await pool.execute("DELETE FROM agent_runs WHERE run_id = $1", run_id)
        raise
    async with pool.acquire() as conn, conn.transaction():
        # locked, so the run's ending (hand_off) either saw this run or has not run yet
        attached = await conn.fetchval("SELECT last_run_id FROM agent_threads "
                                       "WHERE thread_id = $1 FOR UPDATE", row["thread_id"])
        run = await conn.fetchrow("SELECT * FROM agent_runs WHERE run_id = $1", run_id)
        # busy, unless a hand-off already ended the run or paused it at its next interrupt
        if attached == row["last_run_id"] and run is not None and run["status"] == "running":
            await conn.execute("UPDATE agent_threads SET status = 'busy', "
                               "interrupts = '{}'::jsonb, updated_at = now() "
                               "WHERE thread_id = $1", row["thread_id"])
    assert run is not None  # inserted above; only a refusal deletes it
    return run


async def cancel_run(pool: asyncpg.Pool, temporal: Client, thread_id: str, run_id: str,
                     subject: str, action: str) -> asyncpg.Record:
    """``POST .../cancel``: stop the run's workflow if the run is still active.

    With ``action="rollback"`` the thread is also put back as the run found it. Decided
    from the rows as recorded, without asking the run's workflow first: a local try holds
    its workflow's task, so a query would wait for the try's end or the task's heartbeat
    (~8 s) before the cancel went out. :func:`cancel_thread_run` leaves a run that ended
    and handed the thread on meanwhile as it ended.
    """
    run = await _recorded_run(pool, thread_id, run_id)
    row = await get_thread(pool, thread_id)
    # a run paused on an interrupt still has its workflow waiting: cancelling drops the interrupt
    if row["status"] in ("busy", "interrupted") and row["last_run_id"] == run["workflow_run_id"]:
        await cancel_thread_run(pool, temporal, row, subject, rollback=action == "rollback")
    elif run["status"] == "pending":  # still queued: it never starts
        await pool.execute("UPDATE agent_runs SET status = 'interrupted', updated_at = now() "
                           "WHERE run_id = $1 AND status = 'pending'", run["run_id"])
    await advance_queue(pool, temporal, thread_id)  # the next queued run, if any
    return await get_run(pool, temporal, thread_id, run_id)


async def current_state(pool: asyncpg.Pool, temporal: Client, thread_id: str,
                        settings: Settings | None = None, *,
                        subgraphs: bool = False) -> dict[str, Any]:
    """The thread's ``ThreadState`` now; during a segments run, its latest checkpoint.

    As the Agent Server reads it: the checkpoint LangGraph wrote last (``next`` names the
    nodes running), so a UI that reloads mid-run sees the run going on; before the run's
    first checkpoint, the state before it with ``next: ["__start__"]`` (LangGraph's first
    checkpoint of a run names the same). Otherwise (idle, paused on an interrupt) the
    thread's own state (:func:`state_view`). With ``subgraphs``, read from LangGraph's
    checkpointer with each task's subgraph state (``tasks[i].state``), as
    ``aget_state(subgraphs=True)`` gives it.
    """
    row = await sync_thread(pool, temporal, thread_id, settings)
    busy = row["status"] == "busy"
    if row["graph_id"] is not None and (busy or subgraphs):
        app = await segments_app(row["graph_id"])
        state = await app.aget_state({"configurable": {"thread_id": str(row["thread_id"])}},
                                     subgraphs=subgraphs)
        if state.config and (state.next or not busy):
            return checkpoint_view(str(row["thread_id"]), state)
        if busy:
            return {**state_view(row), "next": ["__start__"]}
    return state_view(row)


async def _checkpoint_config(app: Any, thread_id: Any,
                             checkpoint: dict[str, Any] | None) -> dict[str, Any]:
    """The ``configurable`` an update of the thread at ``checkpoint`` is made with.

    ``checkpoint`` (``checkpoint_id`` and/or ``checkpoint_ns``) names a past checkpoint (the
    update forks from it: LangGraph's time travel) or a subgraph's state; None the latest.

    Raises:
        NotFoundError: no such checkpoint on the thread (404): LangGraph would start from
            an empty state instead.
    """
    configurable: dict[str, Any] = {"thread_id": str(thread_id)}
    if checkpoint:
        configurable["checkpoint_ns"] = str(checkpoint.get("checkpoint_ns") or "")
        if checkpoint.get("checkpoint_id"):
            configurable["checkpoint_id"] = str(checkpoint["checkpoint_id"])
        if await app.checkpointer.aget_tuple({"configurable": configurable}) is None:
            raise NotFoundError(f"unknown checkpoint {checkpoint.get('checkpoint_id') or ''} "
                                f"(namespace {configurable['checkpoint_ns']!r})")
    return configurable


async def _update_checkpointed(pool: asyncpg.Pool, row: asyncpg.Record, values: Any,
                               as_node: str | None,
                               configurable: dict[str, Any]) -> dict[str, Any]:
    """``update_state`` of a thread that runs as segments: LangGraph writes a new checkpoint.

    ``configurable``: :func:`_checkpoint_config`'s. A fork's checkpoint (its parent the past
    one) is the thread's latest afterwards; the thread is ``interrupted`` when it has next
    tasks, else ``idle``, as the Agent Server sets it.

    Raises:
        NotFoundError: an unknown subgraph namespace (404).
        InvalidRequestError: LangGraph refused the update (422).
    """
    from langgraph.errors import InvalidUpdateError

    app = await segments_app(row["graph_id"])
    try:
        written = await app.aupdate_state({"configurable": configurable}, values, as_node=as_node)
    except InvalidUpdateError as err:
        raise InvalidRequestError(f"LangGraph refused the update: {err}",
                                  details={"field": "as_node"}) from err
    except ValueError as err:  # LangGraph: "Subgraph <name> not found"
        raise NotFoundError(f"unknown checkpoint namespace: {err}") from err
    await mirror_checkpointed(pool, row["thread_id"], row["graph_id"], status_from_next=True)
    return {"checkpoint": {**written.get("configurable", {}), "checkpoint_map": None}}


async def update_state(pool: asyncpg.Pool, temporal: Client, thread_id: str, values: Any,
                       as_node: str | None, subject: str,
                       checkpoint: dict[str, Any] | None = None) -> dict[str, Any]:
    """``POST /threads/{id}/state``: LangGraph's own ``aupdate_state`` (reducers apply).

    ``checkpoint``: update from a past checkpoint (a fork) or a subgraph's state
    (:func:`_checkpoint_config`), checked before a paused run is let go.

    On an idle thread, or one paused on an interrupt, as LangGraph allows. A paused thread's
    run, which waits at the approval gate, is let go first (its approval cancelled,
    ``run.cancelled``, the thread keeping its state), as new input on a paused thread does:
    on LangGraph's servers that run has already ended. As in plain LangGraph, the thread
    then has its next tasks and no pending interrupt; a ``command.resume`` starts a run that
    runs them again, their ``interrupt()`` answered by the value (:func:`create_run`).

    Raises:
        ConflictError: the thread is busy (a run in progress), or has never run.
        NotFoundError: an unknown ``checkpoint`` (404).
    """
    row = await get_thread(pool, thread_id)
    if row["status"] == "busy":
        raise ConflictError(f"thread {thread_id} is busy; update its state when idle or paused")
    if row["graph_id"] is None:
        raise ConflictError(f"thread {thread_id} has no graph yet; run it once first")
    configurable = await _checkpoint_config(await segments_app(row["graph_id"]),
                                            row["thread_id"], checkpoint)
    if run_holds(row):  # paused on an interrupt: let its run go, keep its state
        await cancel_thread_run(pool, temporal, row, subject, rollback=False)
        row = await get_thread(pool, thread_id)
        if run_holds(row):  # it moved on meanwhile (someone decided)
            raise ConflictError(f"thread {thread_id} is {row['status']}; update its state "
                                "when idle or paused")
    return await _update_checkpointed(pool, row, values, as_node, configurable)
