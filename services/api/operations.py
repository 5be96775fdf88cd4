"""What the approval routes and the review console do: decide, claim, release, reassign, list.

HTTP-free: every operation talks to the run's workflow through the run service's one
update path (:func:`overseer.run_decisions.send_update`), so validation lives in the workflow's
validators and every refusal comes back with the same stable code wherever it was sent.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from temporalio.client import Client

from overseer.access import Principal
from overseer.errors import InvalidRequestError, NotFoundError
from overseer.registry import get_registry
from overseer.run_decisions import decide, send_update
from overseer.run_types import ClaimInput, ReassignInput
from services.api.readmodels import approval_view, parse_run_id
from services.api.schemas import ApprovalView, DecisionRequest, DecisionResponse, ReassignRequest


async def decide_run(run_id: str, body: DecisionRequest, principal: Principal, pool: asyncpg.Pool,
                     temporal: Client) -> DecisionResponse:
    """Send a decision; answers once the run has moved on.

    Raises:
        NotFoundError: unknown run (404).
        NotAwaitingApprovalError, ClaimedByOtherError: 409.
        InvalidFieldEditsError, InvalidRequestError: 422.
    """
    known = sorted({d for p in get_registry() for d in p.gate.decisions})
    if body.decision not in known:
        raise InvalidRequestError(f"decision must be one of {', '.join(known)}",
                                  details={"field": "decision", "allowed": known})
    result = await decide(pool, temporal, run_id, principal, body.decision,
                          updates=body.updates, note=body.note,
                          apply_proposal=body.apply_proposal, budget_usd=body.budget_usd,
                          budget_tokens=body.budget_tokens, resume=body.resume,
                          interrupt_id=body.interrupt_id)
    return DecisionResponse(run_id=str(parse_run_id(run_id)), status=result["status"],
                            outcome=result.get("outcome"))


async def claim_run(run_id: str, principal: Principal, pool: asyncpg.Pool,
                    temporal: Client, interrupt_id: str | None = None) -> ApprovalView:
    """Claim for ``principal`` the run's approval of ``interrupt_id`` (None: the oldest pending).

    The view reflects the claim (read models are written first).
    """
    status = await send_update(pool, temporal, run_id, "claim", ClaimInput(
        reviewer=principal.subject, is_admin=principal.is_admin, interrupt_id=interrupt_id))
    return await get_approval_view(pool, run_id, _acted_on(status, interrupt_id))


async def release_run(run_id: str, principal: Principal, pool: asyncpg.Pool,
                      temporal: Client, interrupt_id: str | None = None) -> ApprovalView:
    """Release ``principal``'s claim (an admin may release anyone's)."""
    status = await send_update(pool, temporal, run_id, "release", ClaimInput(
        reviewer=principal.subject, is_admin=principal.is_admin, interrupt_id=interrupt_id))
    return await get_approval_view(pool, run_id, _acted_on(status, interrupt_id))


async def reassign_run(run_id: str, body: ReassignRequest, principal: Principal,
                       pool: asyncpg.Pool, temporal: Client) -> ApprovalView:
    """Reassign to ``body.assignee`` and/or ``body.group``."""
    status = await send_update(pool, temporal, run_id, "reassign", ReassignInput(
        by=principal.subject, assignee=body.assignee, group=body.group,
        is_admin=principal.is_admin, interrupt_id=body.interrupt_id))
    return await get_approval_view(pool, run_id, _acted_on(status, body.interrupt_id))


def _acted_on(status: dict[str, Any], interrupt_id: str | None) -> str | None:
    """The interrupt a claim update acted on: the one named, else the gate's oldest waiting."""
    return interrupt_id or ((status or {}).get("approval") or {}).get("interrupt_id")


async def get_approval_view(pool: asyncpg.Pool, run_id: str,
                            interrupt_id: str | None = None) -> ApprovalView:
    """An approval of a run: the one of ``interrupt_id``, else the oldest pending, else the latest.

    Raises:
        NotFoundError: the run never asked for approval (or not for that interrupt).
    """
    rid = parse_run_id(run_id)
    if interrupt_id:
        row = await pool.fetchrow(
            "SELECT * FROM approvals WHERE run_id = $1 AND interrupt_id = $2 "
            "ORDER BY requested_at DESC LIMIT 1", rid, interrupt_id)
    else:
        row = await pool.fetchrow(
            "SELECT * FROM approvals WHERE run_id = $1 "
            "ORDER BY status = 'pending' DESC, "
            "CASE WHEN status = 'pending' THEN requested_at END, requested_at DESC, "
            "approval_key LIMIT 1", rid)
    if row is None:
        raise NotFoundError(f"run {run_id} has no approval request"
                            + (f" for interrupt {interrupt_id}" if interrupt_id else ""))
    return approval_view(row)


async def list_approval_views(pool: asyncpg.Pool, *, status: str | None = "pending",
                              pipeline: str | None = None, assignee: str | None = None,
                              sla_state: str | None = None, min_age_seconds: float | None = None,
                              run_id: str | None = None, limit: int = 100) -> list[ApprovalView]:
    """Approvals oldest first; ``assignee="none"`` lists unclaimed ones, ``run_id`` one run's."""
    clauses: list[str] = []
    args: list[Any] = []

    def where(sql: str, value: Any) -> None:
        args.append(value)
        clauses.append(sql.format(f"${len(args)}"))

    if status:
        where("status = {}", status)
    if pipeline:
        where("pipeline = {}", pipeline)
    if run_id:
        where("run_id = {}", parse_run_id(run_id))
    if assignee == "none":
        clauses.append("assigned_to IS NULL")
    elif assignee:
        where("assigned_to = {}", assignee)
    if sla_state == "breached":
        clauses.append("sla_breached_at IS NOT NULL")
    elif sla_state == "ok":
        clauses.append("sla_breached_at IS NULL")
    if min_age_seconds is not None:
        where("requested_at <= now() - make_interval(secs => {})", float(min_age_seconds))
    args.append(limit)
    sql = (f"SELECT * FROM approvals {'WHERE ' + ' AND '.join(clauses) if clauses else ''} "
           f"ORDER BY requested_at, run_id, approval_key LIMIT ${len(args)}")
    return [approval_view(r) for r in await pool.fetch(sql, *args)]
