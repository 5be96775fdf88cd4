"""The append-only event log and the read models projected from it in the same transaction.

Every event has a deterministic id, ``uuid5(run_id, key)``, where ``key`` names the
logical step (never the attempt), so an activity retried after a crash appends
nothing twice: the insert is ``ON CONFLICT DO NOTHING`` and only newly inserted
events are projected.

Event types are wire names (``<noun>.<past-tense verb>``); add, never rename.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from overseer.registry import Registry, get_registry

#: A connection of its own or one acquired from a pool (asyncpg's proxy passes for either at run time).
Conn: TypeAlias = asyncpg.Connection | PoolConnectionProxy

EVENT_NAMESPACE = uuid.UUID("6d1f3c0e-9a53-4c51-9a3e-4f0c2d7b8e11")

RUN_SUBMITTED = "run.submitted"
RUN_SPLIT = "run.split"
RUN_COMPLETED = "run.completed"
RUN_FAILED = "run.failed"
RUN_CANCELLED = "run.cancelled"
NODE_COMPLETED = "node.completed"
ROUTE_DECIDED = "route.decided"
REVIEW_SUGGESTED = "review.suggested"
APPROVAL_REQUESTED = "approval.requested"
APPROVAL_SLA_BREACHED = "approval.sla_breached"
APPROVAL_DECIDED = "approval.decided"
APPROVAL_CLAIMED = "approval.claimed"
APPROVAL_RELEASED = "approval.released"
APPROVAL_REASSIGNED = "approval.reassigned"
APPROVAL_REMINDED = "approval.reminded"
APPROVAL_AUTO_DECIDED = "approval.auto_decided"
LLM_CALLED = "llm.called"

TERMINAL_STATUSES = frozenset({"completed", "rejected", "failed", "cancelled"})


@dataclass
class NewEvent:
    """An event to append.

    Attributes:
        run_id: the run (UUID string) the event belongs to.
        key: attempt-independent logical step key, unique within the run
            (e.g. ``"node.completed:run_pipeline:1"``); the event id derives from it.
        type: wire name, e.g. ``approval.decided``.
        data: JSON-serialisable payload; never raw document text.
        actor: who caused it: ``api:<subject>``, ``workflow``, ``activity:<node>``, ``reviewer:<subject>``.
        trace_id: 32-hex OpenTelemetry trace id, when known.
        occurred_at: ISO-8601 time; defaults to the insert time.
    """

    run_id: str
    key: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    actor: str = "workflow"
    trace_id: str | None = None
    occurred_at: str | None = None

    @property
    def event_id(self) -> uuid.UUID:
        """Deterministic id: the same run and key always give the same id."""
        return uuid.uuid5(EVENT_NAMESPACE, f"{self.run_id}:{self.key}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for Temporal payloads."""
        return asdict(self)


async def append_events(conn: Conn, events: Sequence[NewEvent]) -> list[NewEvent]:
    """Append events and project the new ones into the read models, atomically.

    Each new event goes through Overseer's projector for its type, then each pipeline's
    (``Pipeline.store.projectors``: :func:`projectors_of`). A batch whose events at most
    merge a snapshot into their run's result (``node.completed``, ``route.decided``,
    ``llm.called`` …, with no pipeline projector for their types) is appended and projected
    in one statement (:data:`_APPEND_MERGING`), the same rows as event by event: a
    segment's node events cost one round trip per write, not four per event.

    Args:
        conn: a connection; the caller's transaction, or one opened here.
        events: events in the order they happened.

    Returns:
        The events that were new (already-recorded ones are skipped silently).

    Raises:
        asyncpg.PostgresError: database failures (transient: the caller's retry policy applies).
    """
    if not events:
        return []
    ids = [e.event_id for e in events]
    if len(set(ids)) == len(ids) and all(_merges_at_most(e) for e in events):
        return await _append_merging(conn, events, ids)
    inserted: list[NewEvent] = []
    async with contextlib.nullcontext() if conn.is_in_transaction() else conn.transaction():
        for event in events:
            occurred = (
                datetime.fromisoformat(event.occurred_at) if event.occurred_at else datetime.now(UTC)
            )
            row = await conn.fetchrow(
                """INSERT INTO events (event_id, run_id, type, data, actor, occurred_at, trace_id)
                   VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7)
                   ON CONFLICT (event_id) DO NOTHING RETURNING seq""",
                event.event_id,
                uuid.UUID(event.run_id),
                event.type,
                json.dumps(event.data),
                event.actor,
                occurred,
                event.trace_id,
            )
            if row is None:
                continue
            for projector in projectors_of(event.type):
                await projector(conn, event, occurred)
            inserted.append(event)
    return inserted


_APPEND_MERGING = """
WITH given AS (
    SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::jsonb[], $5::text[],
                         $6::timestamptz[], $7::text[])
        WITH ORDINALITY AS t(event_id, run_id, type, data, actor, occurred_at, trace_id, ord)
), new AS (
    INSERT INTO events (event_id, run_id, type, data, actor, occurred_at, trace_id)
    SELECT event_id, run_id, type, data, actor, occurred_at, trace_id FROM given ORDER BY ord
    ON CONFLICT (event_id) DO NOTHING
    RETURNING event_id
), merged AS (
    SELECT g.run_id, jsonb_object_agg(kv.key, kv.value ORDER BY g.ord) AS snapshot,
           (array_agg(g.occurred_at ORDER BY g.ord DESC))[1] AS at
    FROM given g JOIN new USING (event_id)
         CROSS JOIN LATERAL jsonb_each(g.data -> 'snapshot') AS kv
    WHERE jsonb_typeof(g.data -> 'snapshot') = 'object'
    GROUP BY g.run_id
), projected AS (
    UPDATE runs SET result = coalesce(runs.result, '{}'::jsonb) || merged.snapshot,
                    updated_at = merged.at
    FROM merged WHERE runs.run_id = merged.run_id
)
SELECT event_id FROM new
"""
"""One statement appending a batch and merging the new events' snapshots into their runs.

The same rows as :func:`append_events` event by event: events in the given order (so
``seq`` follows it), duplicates skipped, and each new event's ``data.snapshot`` merged
into ``runs.result`` in order (a later event's key wins, as ``||`` one at a time gives),
``updated_at`` the last merged event's time.
"""


def _merges_at_most(event: NewEvent) -> bool:
    """Whether the event's projection is at most :func:`_merge_result` (and its snapshot a dict)."""
    projectors = projectors_of(event.type)
    if projectors not in ([], [_merge_result]):
        return False
    snapshot = event.data.get("snapshot")
    return snapshot is None or isinstance(snapshot, dict)


async def _append_merging(conn: Conn, events: Sequence[NewEvent],
                          ids: list[uuid.UUID]) -> list[NewEvent]:
    """:func:`append_events` for a batch :func:`_merges_at_most` allows, in one statement.

    ``ids`` are the events' ids, in order (each a uuid5, computed once by the caller).
    """
    at = [datetime.fromisoformat(e.occurred_at) if e.occurred_at else datetime.now(UTC)
          for e in events]
    rows = await conn.fetch(
        _APPEND_MERGING, ids, [uuid.UUID(e.run_id) for e in events],
        [e.type for e in events], [json.dumps(e.data) for e in events],
        [e.actor for e in events], at, [e.trace_id for e in events])
    new = {r["event_id"] for r in rows}
    return [e for e, event_id in zip(events, ids, strict=True) if event_id in new]


async def fetch_events(conn: Conn | asyncpg.Pool, run_id: str) -> list[dict[str, Any]]:
    """All events of a run in append order.

    Returns:
        ``[{seq, event_id, type, data, actor, occurred_at, trace_id}]``.
    """
    rows = await conn.fetch(
        """SELECT seq, event_id, type, data, actor, occurred_at, trace_id
           FROM events WHERE run_id = $1 ORDER BY seq""",
        uuid.UUID(run_id),
    )
    return [
        {
            "seq": r["seq"],
            "event_id": str(r["event_id"]),
            "type": r["type"],
            "data": json.loads(r["data"]),
            "actor": r["actor"],
            "occurred_at": r["occurred_at"].isoformat(),
            "trace_id": r["trace_id"],
        }
        for r in rows
    ]


# --- projections -----------------------------------------------------------------------------

Projector = Callable[[Conn, NewEvent, datetime], Awaitable[None]]


async def _run_submitted(conn: Conn, e: NewEvent, at: datetime) -> None:
    d = e.data
    await conn.execute(
        """INSERT INTO runs (run_id, pipeline, workflow_id, status, parent_run_id, submitted_by,
                             idempotency_key, input, trace_id, created_at, updated_at)
           VALUES ($1, $2, $3, 'running', $4, $5, $6, $7::jsonb, $8, $9, $9)
           ON CONFLICT (run_id) DO NOTHING""",
        uuid.UUID(e.run_id),
        d["pipeline"],
        d["workflow_id"],
        uuid.UUID(d["parent_run_id"]) if d.get("parent_run_id") else None,
        d.get("submitted_by"),
        d.get("idempotency_key"),
        json.dumps(d.get("input", {})),
        e.trace_id,
        at,
    )


async def _merge_result(conn: Conn, e: NewEvent, at: datetime) -> None:
    snapshot = e.data.get("snapshot")
    if snapshot:
        await conn.execute(
            """UPDATE runs SET result = coalesce(result, '{}'::jsonb) || $2::jsonb, updated_at = $3
               WHERE run_id = $1""",
            uuid.UUID(e.run_id),
            json.dumps(snapshot),
            at,
        )


async def _approval_update(conn: Conn, e: NewEvent, assignments: str, *args: Any) -> None:
    """``UPDATE approvals SET <assignments>`` on the row of the approval ``e`` names.

    ``$1`` is the run id, ``$2`` the approval key (``data.approval_key``), ``$3`` … ``args``.
    An event of an approval opened before approvals were keyed per interrupt names none, or
    names a key its row does not have: the run's unkeyed row is the one.
    """
    key = str(e.data.get("approval_key") or "")
    sql = f"UPDATE approvals SET {assignments} WHERE run_id = $1 AND approval_key = $2"
    done = await conn.execute(sql, uuid.UUID(e.run_id), key, *args)
    if done == "UPDATE 0" and key:
        await conn.execute(sql, uuid.UUID(e.run_id), "", *args)


async def _approval_requested(conn: Conn, e: NewEvent, at: datetime) -> None:
    d = e.data
    deadline = datetime.fromisoformat(d["sla_deadline"]) if d.get("sla_deadline") else None
    await conn.execute(
        """INSERT INTO approvals (run_id, pipeline, status, reason_codes, payload, requested_at,
                                  sla_deadline, approval_key, interrupt_id)
           VALUES ($1, $2, 'pending', $3::jsonb, $4::jsonb, $5, $6, $7, $8)
           ON CONFLICT (run_id, approval_key) DO UPDATE SET status = 'pending',
               reason_codes = excluded.reason_codes,
               payload = excluded.payload, requested_at = excluded.requested_at,
               sla_deadline = excluded.sla_deadline, sla_breached_at = NULL, decision = NULL,
               decided_by = NULL, decided_at = NULL, note = NULL, updates = NULL,
               assigned_to = NULL, assigned_group = NULL, claimed_at = NULL, reminded_at = NULL,
               escalation_level = 0, auto_action = NULL""",
        uuid.UUID(e.run_id),
        d["pipeline"],
        json.dumps(d.get("reason_codes", [])),
        json.dumps(d.get("payload", {})),
        at,
        deadline,
        str(d.get("approval_key") or ""),
        d.get("interrupt_id"),
    )
    await conn.execute(
        "UPDATE runs SET status = 'awaiting_approval', updated_at = $2 WHERE run_id = $1",
        uuid.UUID(e.run_id),
        at,
    )


async def _approval_sla_breached(conn: Conn, e: NewEvent, at: datetime) -> None:
    await _approval_update(conn, e, "sla_breached_at = coalesce(sla_breached_at, $3)", at)


async def _approval_decided(conn: Conn, e: NewEvent, at: datetime) -> None:
    d = e.data
    await _approval_update(
        conn, e, """status = 'decided', decision = $3, decided_by = $4, decided_at = $5,
                    note = $6, updates = $7::jsonb""",
        d["decision"],
        d.get("decided_by"),
        at,
        d.get("note"),
        json.dumps(d.get("updates") or {}),
    )
    await conn.execute(  # awaiting still while another of its approvals is open
        """UPDATE runs SET updated_at = $2, status = CASE WHEN EXISTS (
               SELECT 1 FROM approvals WHERE run_id = $1 AND status = 'pending')
               THEN 'awaiting_approval' ELSE 'running' END
           WHERE run_id = $1""",
        uuid.UUID(e.run_id),
        at,
    )


async def _run_finished(conn: Conn, e: NewEvent, at: datetime) -> None:
    status = e.data["status"]
    await conn.execute(  # its pending approvals are cancelled in the same statement
        """WITH cancelled AS (UPDATE approvals SET status = 'cancelled'
                              WHERE run_id = $1 AND status = 'pending')
           UPDATE runs SET status = $2, result = coalesce(result, '{}'::jsonb) || $3::jsonb,
                           error = $4::jsonb, updated_at = $5
           WHERE run_id = $1""",
        uuid.UUID(e.run_id),
        status,
        json.dumps(e.data.get("snapshot") or {}),
        json.dumps(e.data["error"]) if e.data.get("error") else None,
        at,
    )


async def _approval_claimed(conn: Conn, e: NewEvent, at: datetime) -> None:
    await _approval_update(conn, e, "assigned_to = $3, claimed_at = $4",
                           e.data.get("reviewer"), at)


async def _approval_released(conn: Conn, e: NewEvent, at: datetime) -> None:
    await _approval_update(conn, e, "assigned_to = NULL, claimed_at = NULL")


async def _approval_reassigned(conn: Conn, e: NewEvent, at: datetime) -> None:
    d = e.data
    ladder = d.get("by") == "escalation_policy"
    await _approval_update(
        conn, e, """assigned_to = $3, claimed_at = CASE WHEN $3::text IS NULL
                                                   THEN NULL ELSE $4::timestamptz END,
                    assigned_group = coalesce($5, assigned_group),
                    escalation_level = CASE WHEN $6 THEN greatest(escalation_level, 2)
                                            ELSE escalation_level END""",
        d.get("assignee"), at, d.get("group"), ladder,
    )


async def _approval_reminded(conn: Conn, e: NewEvent, at: datetime) -> None:
    await _approval_update(
        conn, e, "reminded_at = $3, escalation_level = greatest(escalation_level, 1)", at)


async def _approval_auto_decided(conn: Conn, e: NewEvent, at: datetime) -> None:
    await _approval_update(conn, e, "auto_action = $3, escalation_level = 3",
                           f"{e.data.get('action')}:{e.data.get('result')}")


PROJECTORS: dict[str, Projector] = {
    RUN_SUBMITTED: _run_submitted,
    NODE_COMPLETED: _merge_result,
    RUN_SPLIT: _merge_result,
    REVIEW_SUGGESTED: _merge_result,  # its snapshot; the suggestion itself is its pipeline's
    APPROVAL_REQUESTED: _approval_requested,
    APPROVAL_SLA_BREACHED: _approval_sla_breached,
    APPROVAL_DECIDED: _approval_decided,
    RUN_COMPLETED: _run_finished,
    RUN_FAILED: _run_finished,
    RUN_CANCELLED: _run_finished,
    APPROVAL_CLAIMED: _approval_claimed,
    APPROVAL_RELEASED: _approval_released,
    APPROVAL_REASSIGNED: _approval_reassigned,
    APPROVAL_REMINDED: _approval_reminded,
    APPROVAL_AUTO_DECIDED: _approval_auto_decided,
}


_PIPELINE_PROJECTORS: tuple[Registry, dict[str, list[Projector]]] | None = None


def projectors_of(event_type: str) -> list[Projector]:
    """The projectors an event of ``event_type`` goes through: Overseer's, then each pipeline's.

    The pipelines' are read from the registry once per registry (``Pipeline.store.projectors``).
    """
    global _PIPELINE_PROJECTORS
    registry = get_registry()
    if _PIPELINE_PROJECTORS is None or _PIPELINE_PROJECTORS[0] is not registry:
        by_type: dict[str, list[Projector]] = {}
        for pipeline in registry:
            for kind, projector in pipeline.store.projectors.items():
                by_type.setdefault(kind, []).append(projector)
        _PIPELINE_PROJECTORS = (registry, by_type)
    own = PROJECTORS.get(event_type)
    return ([own] if own is not None else []) + _PIPELINE_PROJECTORS[1].get(event_type, [])


def event_types() -> Iterable[str]:
    """Every event type this version writes (for docs and the consistency check)."""
    return [
        RUN_SUBMITTED, RUN_SPLIT, NODE_COMPLETED, ROUTE_DECIDED, REVIEW_SUGGESTED,
        APPROVAL_REQUESTED, APPROVAL_SLA_BREACHED, APPROVAL_DECIDED, RUN_COMPLETED, RUN_FAILED,
        RUN_CANCELLED, LLM_CALLED, APPROVAL_CLAIMED, APPROVAL_RELEASED, APPROVAL_REASSIGNED,
        APPROVAL_REMINDED, APPROVAL_AUTO_DECIDED,
    ]
