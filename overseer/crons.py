"""Agent Server crons, each one a Temporal Schedule.

A cron is a row in ``agent_crons`` (what to run: the run payload, its thread or none, who
made it) and a Temporal Schedule ``cron-<cron_id>`` (when: its cron expression, time zone,
end time, paused while disabled), visible in the Temporal Web UI and kept by Temporal across
restarts: there is no polling loop of ours. Each time it fires, the schedule starts a
``CronTickWorkflow`` (:mod:`workflows.cron_tick`) whose activity :func:`fire` makes an
ordinary Overseer run through the same path as ``POST /threads/{id}/runs``
(:func:`overseer.thread_runs.create_run`): on the cron's thread, or for a stateless cron on a
new thread of its own, which :func:`finish` deletes once the run has ended
(``on_run_completed="delete"``, the default; ``"keep"`` keeps it; a run paused on an
interrupt keeps its thread, so the interrupt can still be answered).

Exactly once per tick: the run's id (and a stateless cron's thread id) is derived from the
tick's workflow id, which Temporal makes from the schedule id and the scheduled time, so a
retried activity finds its run instead of starting another.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import asyncpg
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.service import RPCError, RPCStatusCode

from overseer import access, assistants, run_body, thread_runs, threads
from overseer.cron_schedules import drop_schedules, schedule_id
from overseer.errors import InvalidRequestError, NotFoundError
from overseer.settings import Settings

CRON_TICK_WORKFLOW = "CronTickWorkflow"
"""The workflow type each schedule starts (:mod:`workflows.cron_tick`)."""
ON_RUN_COMPLETED = ("delete", "keep")
"""What a stateless cron does with its run's thread once the run has ended."""
PAYLOAD_KEYS = ("assistant_id", "input", "config", "context", "metadata", "interrupt_before",
                "interrupt_after", "webhook", "multitask_strategy", "stream_mode",
                "stream_subgraphs", "stream_resumable", "durability", "checkpoint_during")
"""The run body a cron keeps and every tick sends (as ``POST /threads/{id}/runs`` takes it)."""
SORT_COLUMNS = ("cron_id", "assistant_id", "thread_id", "created_at", "updated_at",
                "next_run_date", "end_time")
FINISH_POLL_SECONDS = 2.0
"""How often :func:`finish` looks whether a stateless cron's run has ended."""



def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _cron_uuid(cron_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(cron_id))
    except ValueError:
        raise NotFoundError(f"unknown cron {cron_id}") from None


def check_schedule(body: dict[str, Any], *, creating: bool) -> dict[str, Any]:
    """The schedule fields of a create or update body, checked.

    Returns:
        The fields given: ``schedule`` (str), ``timezone`` (IANA name or None),
        ``end_time`` (aware datetime or None), ``enabled`` (bool), ``on_run_completed``.

    Raises:
        InvalidRequestError: a missing schedule on create, or a malformed field (422,
            ``details.field``). Temporal itself judges the cron expression (:func:`create_cron`).
    """
    out: dict[str, Any] = {}
    if "schedule" in body or creating:
        if not isinstance(body.get("schedule"), str) or not body["schedule"].strip():
            raise InvalidRequestError("schedule must be a cron expression such as '0 9 * * 1'",
                                      details={"field": "schedule"})
        out["schedule"] = body["schedule"].strip()
    if body.get("timezone") is not None:
        try:
            ZoneInfo(str(body["timezone"]))
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidRequestError(f"unknown time zone {body['timezone']!r}",
                                      details={"field": "timezone"}) from None
        out["timezone"] = str(body["timezone"])
    if "end_time" in body:
        end = body["end_time"]
        if end is not None:
            try:
                end = datetime.fromisoformat(str(end))
            except ValueError:
                raise InvalidRequestError("end_time must be an ISO 8601 time",
                                          details={"field": "end_time"}) from None
            end = end if end.tzinfo else end.replace(tzinfo=UTC)
        out["end_time"] = end
    if body.get("enabled") is not None:
        if not isinstance(body["enabled"], bool):
            raise InvalidRequestError("enabled must be true or false",
                                      details={"field": "enabled"})
        out["enabled"] = body["enabled"]
    if body.get("on_run_completed") is not None:
        if body["on_run_completed"] not in ON_RUN_COMPLETED:
            raise InvalidRequestError(f"on_run_completed must be one of {ON_RUN_COMPLETED}",
                                      details={"field": "on_run_completed"})
        out["on_run_completed"] = body["on_run_completed"]
    return out


def _schedule(row: asyncpg.Record | dict[str, Any], task_queue: str) -> Schedule:
    return Schedule(
        action=ScheduleActionStartWorkflow(
            CRON_TICK_WORKFLOW, str(row["cron_id"]), id=schedule_id(row["cron_id"]),
            task_queue=task_queue, static_summary=f"cron of {row['graph_id']}"),
        spec=ScheduleSpec(cron_expressions=[row["schedule"]],
                          time_zone_name=row["timezone"] or "UTC", end_at=row["end_time"]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL,
                              catchup_window=timedelta(minutes=5)),
        state=ScheduleState(paused=not row["enabled"],
                            note="disabled through the Agent Server API"
                            if not row["enabled"] else None))


def _refused(err: RPCError) -> InvalidRequestError:
    return InvalidRequestError(f"Temporal refused the schedule: {err.message}",
                               details={"field": "schedule"})


async def next_run_date(temporal: Client, cron_id: Any) -> str | None:
    """The cron's next fire time from its Temporal Schedule (None when it will not fire)."""
    try:
        described = await temporal.get_schedule_handle(schedule_id(cron_id)).describe()
    except RPCError:
        return None
    if described.schedule.state.paused:
        return None
    times = described.info.next_action_times
    return times[0].isoformat() if times else None


def cron_view(row: asyncpg.Record, next_run: str | None) -> dict[str, Any]:
    """A ``Cron`` as the SDK reads it."""
    return {"cron_id": str(row["cron_id"]), "assistant_id": row["assistant_id"],
            "thread_id": str(row["thread_id"]) if row["thread_id"] else None,
            "on_run_completed": row["on_run_completed"],
            "end_time": row["end_time"].isoformat() if row["end_time"] else None,
            "schedule": row["schedule"], "timezone": row["timezone"],
            "created_at": row["created_at"].isoformat(),
            "updated_at": row["updated_at"].isoformat(),
            "payload": _json(row["payload"]) or {}, "user_id": row["created_by"],
            "next_run_date": next_run, "metadata": _json(row["metadata"]) or {},
            "enabled": row["enabled"]}


async def create_cron(pool: asyncpg.Pool, temporal: Client, settings: Settings, *,
                      body: dict[str, Any], thread_id: str | None,
                      subject: str) -> dict[str, Any]:
    """Create a cron and its Temporal Schedule.

    Args:
        pool: the database.
        temporal: the Temporal client.
        settings: the task queue the ticks run on.
        body: the SDK's ``crons.create`` / ``create_for_thread`` body.
        thread_id: the thread every tick runs on; None for a stateless cron (a new thread
            per tick, deleted after its run unless ``on_run_completed="keep"``).
        subject: the owner.

    Returns:
        The cron as :func:`cron_view` shows it.

    Raises:
        NotFoundError: unknown assistant (404).
        InvalidRequestError: a malformed field, run options the graph cannot honour, or a
            cron expression Temporal does not accept (422).
    """
    assistant = await assistants.resolve(pool, str(body.get("assistant_id") or ""))
    pipeline = assistant.pipeline
    fields = check_schedule(body, creating=True)
    run_body.check_run_options(pipeline, (await assistants.run_body(pool, body))[0])
    run_body.check_webhook(body.get("webhook"))
    if body.get("stream_mode") is not None:
        run_body.stream_modes(body["stream_mode"])
    if body.get("input") is not None and not isinstance(body["input"], dict):
        raise InvalidRequestError("input must be a JSON object", details={"field": "input"})
    if thread_id is not None and "on_run_completed" in fields:
        raise InvalidRequestError("on_run_completed is for stateless crons only",
                                  details={"field": "on_run_completed"})
    payload = {k: body[k] for k in PAYLOAD_KEYS if body.get(k) is not None}
    cron_id = uuid.uuid4()
    row = await pool.fetchrow(
        """INSERT INTO agent_crons (cron_id, assistant_id, graph_id, thread_id, schedule,
                                    timezone, end_time, enabled, on_run_completed, payload,
                                    metadata, created_by)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::jsonb, $12)
           RETURNING *""",
        cron_id, assistant.assistant_id, pipeline.name,
        uuid.UUID(thread_id) if thread_id else None, fields["schedule"], fields.get("timezone"),
        fields.get("end_time"), fields.get("enabled", True),
        None if thread_id else fields.get("on_run_completed", "delete"),
        json.dumps(payload), json.dumps(dict(body.get("metadata") or {})), subject)
    assert row is not None
    try:
        await temporal.create_schedule(schedule_id(cron_id), _schedule(row, settings.task_queue))
    except ScheduleAlreadyRunningError:
        pass  # a retried create: the schedule is the one this row describes
    except RPCError as err:
        await pool.execute("DELETE FROM agent_crons WHERE cron_id = $1", cron_id)
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise _refused(err) from err
        raise
    return cron_view(row, await next_run_date(temporal, cron_id))


async def get_cron(pool: asyncpg.Pool, cron_id: str, scope: access.Scope) -> asyncpg.Record:
    """The cron row, if ``scope`` reaches it.

    Raises:
        NotFoundError: no such cron, or another's (404, so the id is not confirmed).
    """
    args: list[Any] = [_cron_uuid(cron_id)]
    where = scope.sql(args, owner_column="created_by", metadata_column="metadata")
    row = await pool.fetchrow(
        f"SELECT * FROM agent_crons WHERE cron_id = $1 AND {where}", *args)  # noqa: S608
    if row is None:
        raise NotFoundError(f"unknown cron {cron_id}")
    return row


async def update_cron(pool: asyncpg.Pool, temporal: Client, settings: Settings, cron_id: str,
                      body: dict[str, Any], scope: access.Scope) -> dict[str, Any]:
    """Change a cron's schedule, end time, enabled state or run payload (``crons.update``).

    The schedule is updated in Temporal in place (same id, history kept); disabling pauses it.

    Raises:
        NotFoundError: unknown cron, or another's (404).
        InvalidRequestError: an empty body or a malformed field (422).
    """
    row = await get_cron(pool, cron_id, scope)
    if not body:
        raise InvalidRequestError("nothing to update: the body is empty")
    fields = check_schedule(body, creating=False)
    if row["thread_id"] is not None and "on_run_completed" in fields:
        raise InvalidRequestError("on_run_completed is for stateless crons only",
                                  details={"field": "on_run_completed"})
    run_body.check_run_options(assistants.resolve_assistant(row["graph_id"]), body)
    run_body.check_webhook(body.get("webhook"))
    payload = {**(_json(row["payload"]) or {}),
               **{k: body[k] for k in PAYLOAD_KEYS if k in body and k != "assistant_id"}}
    payload = {k: v for k, v in payload.items() if v is not None}
    new = await pool.fetchrow(
        """UPDATE agent_crons SET schedule = $2, timezone = $3, end_time = $4, enabled = $5,
                  on_run_completed = $6, payload = $7::jsonb, metadata = $8::jsonb,
                  updated_at = now()
           WHERE cron_id = $1 RETURNING *""",
        row["cron_id"], fields.get("schedule", row["schedule"]),
        fields.get("timezone", row["timezone"]), fields.get("end_time", row["end_time"]),
        fields.get("enabled", row["enabled"]),
        fields.get("on_run_completed", row["on_run_completed"]), json.dumps(payload),
        json.dumps(dict(body["metadata"]) if isinstance(body.get("metadata"), dict)
                   else _json(row["metadata"]) or {}))
    assert new is not None

    def updated(_: ScheduleUpdateInput) -> ScheduleUpdate:
        return ScheduleUpdate(schedule=_schedule(new, settings.task_queue))

    try:
        await temporal.get_schedule_handle(schedule_id(cron_id)).update(updated)
    except RPCError as err:
        await pool.execute(  # Temporal keeps what it had: so does the row
            """UPDATE agent_crons SET schedule = $2, timezone = $3, end_time = $4,
                      enabled = $5, on_run_completed = $6, payload = $7::jsonb,
                      metadata = $8::jsonb, updated_at = $9 WHERE cron_id = $1""",
            row["cron_id"], row["schedule"], row["timezone"], row["end_time"], row["enabled"],
            row["on_run_completed"], json.dumps(_json(row["payload"])),
            json.dumps(_json(row["metadata"])), row["updated_at"])
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise _refused(err) from err
        raise
    return cron_view(new, await next_run_date(temporal, cron_id))


async def delete_cron(pool: asyncpg.Pool, temporal: Client, cron_id: str,
                      scope: access.Scope) -> None:
    """Delete a cron and its schedule (runs it already started are left as they are).

    Raises:
        NotFoundError: unknown cron, or another's (404).
    """
    row = await get_cron(pool, cron_id, scope)
    await pool.execute("DELETE FROM agent_crons WHERE cron_id = $1", row["cron_id"])
    await drop_schedules(temporal, [row["cron_id"]])



async def search_crons(pool: asyncpg.Pool, temporal: Client, body: dict[str, Any],
                       scope: access.Scope) -> list[dict[str, Any]]:
    """``crons.search``: the caller's crons (all for admins), filtered, sorted, paged.

    Body: ``assistant_id`` (an id or a graph name), ``thread_id``, ``enabled``,
    ``metadata`` (containment), ``limit`` (default 10), ``offset``, ``sort_by``,
    ``sort_order`` (``asc``/``desc``), ``select`` (fields to keep).

    Raises:
        InvalidRequestError: a malformed filter, page or sort (422).
    """
    args: list[Any] = []
    where = [_filters(body, args), scope.sql(args, owner_column="created_by",
                                             metadata_column="metadata")]
    limit, offset = body.get("limit", 10), body.get("offset", 0)
    for name, number in (("limit", limit), ("offset", offset)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise InvalidRequestError(f"{name} must be a non-negative integer",
                                      details={"field": name})
    sort_by = body.get("sort_by") or "created_at"
    if sort_by not in SORT_COLUMNS:
        raise InvalidRequestError(f"sort_by must be one of {SORT_COLUMNS}",
                                  details={"field": "sort_by"})
    order = str(body.get("sort_order") or "desc").lower()
    if order not in ("asc", "desc"):
        raise InvalidRequestError("sort_order must be asc or desc",
                                  details={"field": "sort_order"})
    column = "created_at" if sort_by == "next_run_date" else sort_by  # sorted below
    args += [limit, offset]
    rows = await pool.fetch(
        f"SELECT * FROM agent_crons WHERE {' AND '.join(where)} "  # noqa: S608
        f"ORDER BY {column} {order}, cron_id LIMIT ${len(args) - 1} OFFSET ${len(args)}", *args)
    nexts = await asyncio.gather(*(next_run_date(temporal, r["cron_id"]) for r in rows))
    views = [cron_view(r, n) for r, n in zip(rows, nexts, strict=True)]
    if sort_by == "next_run_date":
        views.sort(key=lambda v: v["next_run_date"] or "~", reverse=order == "desc")
    select = body.get("select")
    if isinstance(select, list) and select:
        views = [{k: v for k, v in view.items() if k in select} for view in views]
    return views


async def count_crons(pool: asyncpg.Pool, body: dict[str, Any], scope: access.Scope) -> int:
    """``crons.count``: how many crons :func:`search_crons` would find with no page."""
    args: list[Any] = []
    where = [_filters(body, args), scope.sql(args, owner_column="created_by",
                                             metadata_column="metadata")]
    count: int = await pool.fetchval(
        f"SELECT count(*) FROM agent_crons WHERE {' AND '.join(where)}", *args)  # noqa: S608
    return count


def _filters(body: dict[str, Any], args: list[Any]) -> str:
    clauses = ["true"]
    if body.get("assistant_id"):
        try:  # a graph's own assistant (id or name): its crons; one made through the API: its
            args.append(assistants.resolve_assistant(str(body["assistant_id"])).name)
            clauses.append(f"graph_id = ${len(args)}")
        except NotFoundError:
            args.append(str(body["assistant_id"]))
            clauses.append(f"assistant_id = ${len(args)}")
    if body.get("thread_id"):
        try:
            args.append(uuid.UUID(str(body["thread_id"])))
        except ValueError:
            raise InvalidRequestError("thread_id must be a uuid",
                                      details={"field": "thread_id"}) from None
        clauses.append(f"thread_id = ${len(args)}")
    if body.get("enabled") is not None:
        args.append(bool(body["enabled"]))
        clauses.append(f"enabled = ${len(args)}")
    if isinstance(body.get("metadata"), dict) and body["metadata"]:
        args.append(json.dumps(body["metadata"]))
        clauses.append(f"metadata @> ${len(args)}::jsonb")
    return " AND ".join(clauses)


def tick_ids(cron_id: str, tick: str) -> tuple[str, str]:
    """``(run_id, thread_id)`` of one tick: uuid5 of the tick's workflow id, stable on retry."""
    namespace = uuid.UUID(str(cron_id))
    return str(uuid.uuid5(namespace, f"run:{tick}")), str(uuid.uuid5(namespace, f"thread:{tick}"))


async def fire(pool: asyncpg.Pool, temporal: Client, settings: Settings, cron_id: str,
               tick: str) -> dict[str, Any]:
    """Make one tick's run: an ordinary run on the cron's thread or a new one (idempotent).

    Args:
        pool: the database.
        temporal: the Temporal client (the worker's) that starts the run's workflow.
        settings: the process settings.
        cron_id: the cron.
        tick: the tick's workflow id (schedule id + scheduled time): keys the run's id.

    Returns:
        ``{"run_id", "thread_id", "stateless", "on_run_completed"}``, or ``{"skipped":
        reason}`` for a cron deleted or disabled meanwhile, or whose thread or assistant
        is gone.
    """
    row = await pool.fetchrow("SELECT * FROM agent_crons WHERE cron_id = $1",
                              uuid.UUID(cron_id))
    if row is None:
        return {"skipped": "the cron was deleted"}
    if not row["enabled"]:
        return {"skipped": "the cron is disabled"}
    run_id, new_thread = tick_ids(cron_id, tick)
    body = dict(_json(row["payload"]) or {})
    body["metadata"] = {**(_json(row["metadata"]) or {}), **(body.get("metadata") or {}),
                        "cron_id": cron_id}
    try:
        body, assistant = await assistants.run_body(pool, body)  # its latest version's config
    except NotFoundError:
        return {"skipped": "the cron's assistant was deleted"}
    stateless = row["thread_id"] is None
    if stateless:
        await threads.create_thread(pool, thread_id=new_thread,
                                    metadata={"cron_id": cron_id, "stateless": True},
                                    if_exists="do_nothing", subject=row["created_by"],
                                    scope=access.ANY, temporal=temporal, settings=settings)
        thread_id = new_thread
    else:
        thread_id = str(row["thread_id"])
        if await pool.fetchval("SELECT 1 FROM agent_threads WHERE thread_id = $1",
                               row["thread_id"]) is None:
            return {"skipped": "the cron's thread was deleted"}
    run = await thread_runs.create_run(pool, temporal, settings, thread_id=thread_id, body=body,
                                   principal=access.Principal(row["created_by"], "submitter"),
                                   check_role=False, run_id=run_id,
                                   assistant_id=assistant)
    return {"run_id": str(run["run_id"]), "thread_id": thread_id, "stateless": stateless,
            "on_run_completed": row["on_run_completed"]}


async def finish(pool: asyncpg.Pool, temporal: Client, run_id: str, thread_id: str,
                 beat: Any = None) -> str:
    """Wait for a stateless cron's run to end, then delete its thread unless it is paused.

    Args:
        pool: the database.
        temporal: the Temporal client.
        run_id: the tick's run.
        thread_id: its thread (the cron made it).
        beat: called on each poll (the activity's heartbeat).

    Returns:
        The run's final status (``success``, ``error``, ``interrupted``; ``deleted`` when
        the thread was already gone).
    """
    while True:
        status = await pool.fetchval("SELECT status FROM agent_runs WHERE run_id = $1",
                                     uuid.UUID(run_id))
        if status is None:
            return "deleted"
        if status not in threads.ACTIVE_RUN_STATUSES:
            break
        if beat is not None:
            beat(status)
        await asyncio.sleep(FINISH_POLL_SECONDS)
    if status != "interrupted":  # a paused run keeps its thread: its interrupt can be answered
        try:
            await threads.delete_thread(pool, temporal, thread_id, "cron")
        except NotFoundError:
            pass
    return str(status)
