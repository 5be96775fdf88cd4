"""Human decisions: ``GET /v1/admin/approvals``, ``POST /v1/admin/approvals/{run_id}/decision``."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from overseer.errors import (
    DependencyUnavailableError,
    InvalidFieldEditsError,
    InvalidRequestError,
    NotAwaitingApprovalError,
    NotFoundError,
)
from services.api.deps import PoolDep, ReviewerDep, TemporalDep
from services.api.readmodels import approval_view, parse_run_id
from services.api.schemas import ApprovalView, DecisionRequest, DecisionResponse
from workflows.approval import DecisionInput

router = APIRouter(prefix="/v1/admin/approvals", tags=["approvals"])


@router.get("", response_model=list[ApprovalView])
async def list_approvals(
    _: ReviewerDep,
    pool: PoolDep,
    status: Literal["pending", "decided", "cancelled"] | None = "pending",
    pipeline: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> list[ApprovalView]:
    """Approval requests, oldest first (the queue order)."""
    clauses, args = [], []
    for column, value in (("status", status), ("pipeline", pipeline)):
        if value:
            args.append(value)
            clauses.append(f"{column} = ${len(args)}")
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    args.append(limit)
    rows = await pool.fetch(
        f"SELECT * FROM approvals {where} ORDER BY requested_at LIMIT ${len(args)}", *args
    )
    return [approval_view(r) for r in rows]


@router.post("/{run_id}/decision", response_model=DecisionResponse)
async def decide(run_id: str, body: DecisionRequest, principal: ReviewerDep, pool: PoolDep,
                 temporal: TemporalDep) -> DecisionResponse:
    """Approve (optionally with field edits that must validate) or reject an escalated run."""
    rid = parse_run_id(run_id)
    row = await pool.fetchrow("SELECT workflow_id, status FROM runs WHERE run_id = $1", rid)
    if row is None:
        raise NotFoundError(f"unknown run {run_id}")
    handle = temporal.get_workflow_handle(row["workflow_id"])
    decision = DecisionInput(decision=body.decision, updates=body.updates, note=body.note,
                             decided_by=principal.subject, apply_proposal=body.apply_proposal,
                             budget_usd=body.budget_usd, budget_tokens=body.budget_tokens)
    try:
        result = await handle.execute_update("decide", decision)
    except WorkflowUpdateFailedError as err:
        raise _refusal(err.cause, row["status"]) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NotAwaitingApprovalError(
                f"run {run_id} is not awaiting approval", details={"status": row["status"]}
            ) from err
        raise DependencyUnavailableError("Temporal did not answer") from err
    return DecisionResponse(run_id=str(rid), status=result["status"] if isinstance(result, dict)
                            else result.status,
                            outcome=result["outcome"] if isinstance(result, dict) else result.outcome)


def _refusal(cause: BaseException | None, status: str) -> Exception:
    if isinstance(cause, ApplicationError):
        details = cause.details[0] if cause.details else {}
        details = details if isinstance(details, dict) else {"detail": details}
        if cause.type == "not_awaiting_approval":
            return NotAwaitingApprovalError(cause.message, details={"status": status, **details})
        if cause.type == "invalid_field_edits":
            return InvalidFieldEditsError(cause.message, details=details)
        return InvalidRequestError(cause.message, details={"code": cause.type, **details})
    return NotAwaitingApprovalError("the decision was refused", details={"status": status})
