"""Human review over HTTP: the approval queue, claims, reassignment and decisions.

Routes under ``/v1/admin/approvals``. The plain ``*_run`` functions below are what the
routes (and the review console) call; each talks to the run's workflow through a
Temporal Update, so validation happens in one place — the workflow's validators —
and every refusal comes back with its stable code.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import asyncpg
from fastapi import APIRouter, Query
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from overseer.errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidFieldEditsError,
    InvalidRequestError,
    NotAwaitingApprovalError,
    NotFoundError,
    OverseerError,
)
from overseer.pipelines import DecisionRefusedError, get_registry
from services.api.deps import PoolDep, Principal, ReviewerDep, TemporalDep
from services.api.readmodels import approval_view, parse_run_id
from services.api.schemas import ApprovalView, DecisionRequest, DecisionResponse, ReassignRequest
from workflows.approval import ClaimInput, DecisionInput, ReassignInput

router = APIRouter(prefix="/v1/admin/approvals", tags=["approvals"])

SlaState = Literal["ok", "breached"]
MAX_AGE_SECONDS = 10 * 366 * 24 * 3600.0
"""Ten years: larger ages are refused (Postgres intervals overflow past that range)."""


class ClaimedByOtherError(ConflictError):
    """The approval is claimed by another reviewer (409)."""

    code = "claimed_by_other"


@router.get("", response_model=list[ApprovalView])
async def list_approvals(
    _: ReviewerDep,
    pool: PoolDep,
    status: Literal["pending", "decided", "cancelled"] | None = "pending",
    pipeline: str | None = None,
    assignee: str | None = None,
    sla_state: SlaState | None = None,
    min_age_seconds: Annotated[float | None, Query(ge=0, le=MAX_AGE_SECONDS)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> list[ApprovalView]:
    """Approval requests, oldest first (the queue order), filtered."""
    return await list_approval_views(pool, status=status, pipeline=pipeline, assignee=assignee,
                                     sla_state=sla_state, min_age_seconds=min_age_seconds,
                                     limit=limit)


@router.get("/{run_id}", response_model=ApprovalView)
async def read_approval(run_id: str, _: ReviewerDep, pool: PoolDep) -> ApprovalView:
    """One approval request (the latest for the run)."""
    return await get_approval_view(pool, run_id)


@router.post("/{run_id}/decision", response_model=DecisionResponse)
async def decide(run_id: str, body: DecisionRequest, principal: ReviewerDep, pool: PoolDep,
                 temporal: TemporalDep) -> DecisionResponse:
    """Approve (optionally with field edits that must validate) or reject an escalated run."""
    return await decide_run(run_id, body, principal, pool, temporal)


@router.post("/{run_id}/claim", response_model=ApprovalView)
async def claim(run_id: str, principal: ReviewerDep, pool: PoolDep,
                temporal: TemporalDep) -> ApprovalView:
    """Claim the approval so no one else works it (409 ``claimed_by_other`` if taken)."""
    return await claim_run(run_id, principal, pool, temporal)


@router.post("/{run_id}/release", response_model=ApprovalView)
async def release(run_id: str, principal: ReviewerDep, pool: PoolDep,
                  temporal: TemporalDep) -> ApprovalView:
    """Give a claimed approval back to the queue (claimant or admin)."""
    return await release_run(run_id, principal, pool, temporal)


@router.post("/{run_id}/reassign", response_model=ApprovalView)
async def reassign(run_id: str, body: ReassignRequest, principal: ReviewerDep, pool: PoolDep,
                   temporal: TemporalDep) -> ApprovalView:
    """Hand the approval to another reviewer and/or group (claimant, anyone if unclaimed, admin)."""
    return await reassign_run(run_id, body, principal, pool, temporal)


# --- the operations ----------------------------------------------------------------------------


async def decide_run(run_id: str, body: DecisionRequest, principal: Principal, pool: asyncpg.Pool,
                     temporal: Client) -> DecisionResponse:
    """Send a decision; answers once the run has moved on.

    Raises:
        NotFoundError: unknown run (404).
        NotAwaitingApprovalError, ClaimedByOtherError: 409.
        InvalidFieldEditsError, InvalidRequestError: 422.
    """
    known = sorted({d for p in get_registry() for d in p.decisions})
    if body.decision not in known:
        raise InvalidRequestError(f"decision must be one of {', '.join(known)}",
                                  details={"field": "decision", "allowed": known})
    decision = DecisionInput(decision=body.decision, updates=body.updates, note=body.note,
                             decided_by=principal.subject, apply_proposal=body.apply_proposal,
                             budget_usd=body.budget_usd, budget_tokens=body.budget_tokens,
                             is_admin=principal.is_admin, resume=body.resume)
    result = await _update(pool, temporal, run_id, "decide", decision)
    return DecisionResponse(run_id=str(parse_run_id(run_id)), status=result["status"],
                            outcome=result.get("outcome"))


async def claim_run(run_id: str, principal: Principal, pool: asyncpg.Pool,
                    temporal: Client) -> ApprovalView:
    """Claim for ``principal``; the view reflects the claim (read models are written first)."""
    await _update(pool, temporal, run_id, "claim",
                  ClaimInput(reviewer=principal.subject, is_admin=principal.is_admin))
    return await get_approval_view(pool, run_id)


async def release_run(run_id: str, principal: Principal, pool: asyncpg.Pool,
                      temporal: Client) -> ApprovalView:
    """Release ``principal``'s claim (an admin may release anyone's)."""
    await _update(pool, temporal, run_id, "release",
                  ClaimInput(reviewer=principal.subject, is_admin=principal.is_admin))
    return await get_approval_view(pool, run_id)


async def reassign_run(run_id: str, body: ReassignRequest, principal: Principal,
                       pool: asyncpg.Pool, temporal: Client) -> ApprovalView:
    """Reassign to ``body.assignee`` and/or ``body.group``."""
    await _update(pool, temporal, run_id, "reassign",
                  ReassignInput(by=principal.subject, assignee=body.assignee, group=body.group,
                                is_admin=principal.is_admin))
    return await get_approval_view(pool, run_id)


async def get_approval_view(pool: asyncpg.Pool, run_id: str) -> ApprovalView:
    """The approval of a run.

    Raises:
        NotFoundError: the run never asked for approval.
    """
    row = await pool.fetchrow("SELECT * FROM approvals WHERE run_id = $1", parse_run_id(run_id))
    if row is None:
        raise NotFoundError(f"run {run_id} has no approval request")
    return approval_view(row)


async def list_approval_views(pool: asyncpg.Pool, *, status: str | None = "pending",
                              pipeline: str | None = None, assignee: str | None = None,
                              sla_state: str | None = None, min_age_seconds: float | None = None,
                              limit: int = 100) -> list[ApprovalView]:
    """Approvals oldest first; ``assignee="none"`` lists unclaimed ones."""
    clauses: list[str] = []
    args: list[Any] = []

    def where(sql: str, value: Any) -> None:
        args.append(value)
        clauses.append(sql.format(f"${len(args)}"))

    if status:
        where("status = {}", status)
    if pipeline:
        where("pipeline = {}", pipeline)
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
           f"ORDER BY requested_at LIMIT ${len(args)}")
    return [approval_view(r) for r in await pool.fetch(sql, *args)]


async def _update(pool: asyncpg.Pool, temporal: Client, run_id: str, name: str, arg: Any) -> Any:
    rid = parse_run_id(run_id)
    row = await pool.fetchrow("SELECT workflow_id, status FROM runs WHERE run_id = $1", rid)
    if row is None:
        raise NotFoundError(f"unknown run {run_id}")
    handle = temporal.get_workflow_handle(row["workflow_id"])
    try:
        result = await handle.execute_update(name, arg)
    except WorkflowUpdateFailedError as err:
        raise _refusal(err.cause, row["status"]) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NotAwaitingApprovalError(
                f"run {run_id} is not awaiting approval", details={"status": row["status"]}
            ) from err
        raise DependencyUnavailableError("Temporal did not answer") from err
    return result if isinstance(result, dict) else vars(result)


def _refusal(cause: BaseException | None, status: str) -> OverseerError:
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else {}
        details = details if isinstance(details, dict) else {"detail": details}
        if cause.type == "not_awaiting_approval":
            return NotAwaitingApprovalError(cause.message, details={"status": status, **details})
        if cause.type == "claimed_by_other":
            return ClaimedByOtherError(cause.message, details=details)
        if cause.type == "invalid_field_edits":
            return InvalidFieldEditsError(cause.message, details=details)
        if cause.type and cause.type not in ("invalid_request",):
            return DecisionRefusedError(cause.message, code=cause.type, details=details)
        return InvalidRequestError(cause.message, details={"code": cause.type, **details})
    return NotAwaitingApprovalError("the request was refused", details={"status": status})
