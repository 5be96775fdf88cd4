"""Queries over the read models (runs, approvals) shaped for the API."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import asyncpg

from overseer import access
from overseer.access import Principal
from overseer.errors import NotFoundError
from overseer.graph_codec import REF_KEY, decode, is_ref, to_jsonable
from overseer.store.artifacts import load_artifact
from services.api.schemas import ApprovalView, RunView

_RUN_COLUMNS = """run_id, pipeline, workflow_id, status, parent_run_id, submitted_by, created_at,
                  updated_at, trace_id, result, error"""


def parse_run_id(run_id: str) -> uuid.UUID:
    """The UUID of a path parameter; an unparsable id is simply unknown.

    Raises:
        NotFoundError: not a UUID.
    """
    try:
        return uuid.UUID(run_id)
    except ValueError:
        raise NotFoundError(f"unknown run {run_id!r}") from None


async def get_run(conn: asyncpg.Connection | asyncpg.Pool, run_id: str,
                  principal: Principal) -> RunView:
    """A run with its pending approvals (one per pending interrupt) and children.

    Raises:
        NotFoundError: unknown run, or a submitter asking for someone else's run (no leak).
    """
    rid = parse_run_id(run_id)
    row = await conn.fetchrow(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = $1", rid)
    if row is None or not can_read(principal, row["submitted_by"]):
        raise NotFoundError(f"unknown run {run_id}")
    view = run_view(row)
    view.result = await resolve_output_refs(conn, view.result)
    view.pending_approvals = [approval_view(a) for a in await conn.fetch(
        "SELECT * FROM approvals WHERE run_id = $1 AND status = 'pending' "
        "ORDER BY requested_at, approval_key", rid)]
    view.pending_approval = view.pending_approvals[0] if view.pending_approvals else None
    kids = await conn.fetch(
        "SELECT run_id, status FROM runs WHERE parent_run_id = $1 ORDER BY created_at, run_id", rid
    )
    view.children = [{"run_id": str(k["run_id"]), "status": k["status"],
                      "links": {"self": f"/v1/runs/{k['run_id']}"}} for k in kids]
    view.llm_usage = await llm_usage(conn, rid)
    return view


async def resolve_output_refs(conn: asyncpg.Connection | asyncpg.Pool,
                              result: dict[str, Any] | None) -> dict[str, Any] | None:
    """``result.output`` with claim-checked values replaced by the stored values.

    State keys over 256 KB were stored by hash while the run ran; the API answers the final
    state.
    """
    output = (result or {}).get("output")
    if not isinstance(output, dict) or not any(is_ref(v) for v in output.values()):
        return result
    resolved = dict(output)
    for key, value in output.items():
        if is_ref(value):
            data, _ = await load_artifact(conn, value[REF_KEY])
            resolved[key] = to_jsonable(decode(json.loads(data)))
    return {**(result or {}), "output": resolved}


async def llm_usage(conn: asyncpg.Connection | asyncpg.Pool, run_id: uuid.UUID) -> dict[str, Any]:
    """Seed 002 R8: LLM calls, tokens and cost of a run, in total and per node and model.

    Every attempt is one ledger event, so failed attempts count their calls (and any
    tokens the endpoint billed) but are never counted twice.
    """
    rows = await conn.fetch(
        """SELECT data->>'node' AS node, data->>'model' AS model, count(*) AS calls,
                  count(*) FILTER (WHERE data->>'outcome' = 'error') AS failed,
                  coalesce(sum((data->>'input_tokens')::bigint), 0)::bigint AS input_tokens,
                  coalesce(sum((data->>'output_tokens')::bigint), 0)::bigint AS output_tokens,
                  coalesce(sum((data->>'cost_usd')::float8), 0) AS cost_usd
           FROM events WHERE run_id = $1 AND type = 'llm.called'
           GROUP BY 1, 2 ORDER BY 1, 2""",
        run_id,
    )
    keys = ("calls", "failed", "input_tokens", "output_tokens", "cost_usd")
    total = {k: 0 for k in keys}
    by_node: dict[str, dict[str, float]] = {}
    by_model: dict[str, dict[str, float]] = {}
    for r in rows:
        for group, name in ((by_node, r["node"]), (by_model, r["model"])):
            bucket = group.setdefault(name, {k: 0 for k in keys})
            for k in keys:
                bucket[k] += r[k]
        for k in keys:
            total[k] += r[k]
    return {"total": total, "by_node": by_node, "by_model": by_model}


async def list_runs(conn: asyncpg.Connection | asyncpg.Pool, principal: Principal, *,
                    pipeline: str | None, status: str | None, limit: int) -> list[RunView]:
    """Runs newest first, filtered; submitters see only their own."""
    clauses: list[str] = []
    args: list[Any] = []
    for column, value in (("pipeline", pipeline), ("status", status)):
        if value:
            args.append(value)
            clauses.append(f"{column} = ${len(args)}")
    owned = access.scope(principal, "read")
    if owned is not access.ANY:
        clauses.append(owned.sql(args, owner_column="submitted_by"))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    args.append(limit)
    rows = await conn.fetch(
        f"SELECT {_RUN_COLUMNS} FROM runs {where} ORDER BY created_at DESC LIMIT ${len(args)}", *args
    )
    return [run_view(r) for r in rows]


def can_read(principal: Principal, submitted_by: str | None) -> bool:
    """Submitters read their own runs; reviewers and admins read all (:func:`overseer.access.can`)."""
    return access.can(principal, "read", submitted_by)


def run_view(row: asyncpg.Record) -> RunView:
    """A ``runs`` row as a :class:`RunView`."""
    run_id = str(row["run_id"])
    return RunView(
        run_id=run_id, pipeline=row["pipeline"], workflow_id=row["workflow_id"],
        status=row["status"],
        parent_run_id=str(row["parent_run_id"]) if row["parent_run_id"] else None,
        submitted_by=row["submitted_by"], created_at=row["created_at"].isoformat(),
        updated_at=row["updated_at"].isoformat(), trace_id=row["trace_id"],
        result=_json(row["result"]), error=_json(row["error"]),
        links={"self": f"/v1/runs/{run_id}", "events": f"/v1/runs/{run_id}/events"},
    )


def approval_view(row: asyncpg.Record) -> ApprovalView:
    """An ``approvals`` row as an :class:`ApprovalView`."""
    return ApprovalView(
        run_id=str(row["run_id"]), interrupt_id=row["interrupt_id"],
        approval_key=row["approval_key"], pipeline=row["pipeline"], status=row["status"],
        reason_codes=_json(row["reason_codes"]) or [], payload=_json(row["payload"]) or {},
        requested_at=row["requested_at"].isoformat(),
        sla_deadline=row["sla_deadline"].isoformat() if row["sla_deadline"] else None,
        sla_breached=row["sla_breached_at"] is not None, decision=row["decision"],
        decided_by=row["decided_by"],
        decided_at=row["decided_at"].isoformat() if row["decided_at"] else None,
        note=row["note"], assigned_to=row["assigned_to"], assigned_group=row["assigned_group"],
        claimed_at=_iso(row["claimed_at"]), reminded_at=_iso(row["reminded_at"]),
        escalation_level=row["escalation_level"], auto_action=row["auto_action"],
        age_seconds=max(0.0, ((row["decided_at"] or datetime.now(UTC))
                              - row["requested_at"]).total_seconds()),
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
