"""Human review over HTTP: the approval queue, claims, reassignment and decisions.

Routes under ``/v1/admin/approvals``. The plain ``*_run`` functions below are what the
routes (and the review console) call; each talks to the run's workflow through a
Temporal Update, so validation happens in one place — the workflow's validators —
and every refusal comes back with its stable code.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from overseer.http_routes import PoolDep, ReviewerDep, TemporalDep
from overseer.run_decisions import ClaimedByOtherError
from services.api.operations import (
    claim_run,
    decide_run,
    get_approval_view,
    list_approval_views,
    reassign_run,
    release_run,
)
from services.api.schemas import (
    ApprovalView,
    ClaimRequest,
    DecisionRequest,
    DecisionResponse,
    ReassignRequest,
)

router = APIRouter(prefix="/v1/admin/approvals", tags=["approvals"])

SlaState = Literal["ok", "breached"]
MAX_AGE_SECONDS = 10 * 366 * 24 * 3600.0
"""Ten years: larger ages are refused (Postgres intervals overflow past that range)."""


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
async def read_approval(run_id: str, _: ReviewerDep, pool: PoolDep,
                        interrupt_id: str | None = None) -> ApprovalView:
    """One approval of the run: the one of ``interrupt_id``, else the oldest pending, else the latest."""
    return await get_approval_view(pool, run_id, interrupt_id)


@router.post("/{run_id}/decision", response_model=DecisionResponse)
async def decide(run_id: str, body: DecisionRequest, principal: ReviewerDep, pool: PoolDep,
                 temporal: TemporalDep) -> DecisionResponse:
    """Approve (optionally with field edits that must validate) or reject one of a run's approvals.

    ``interrupt_id`` names which (each pending interrupt is its own approval); without it,
    the oldest pending one.
    """
    return await decide_run(run_id, body, principal, pool, temporal)


@router.post("/{run_id}/claim", response_model=ApprovalView)
async def claim(run_id: str, principal: ReviewerDep, pool: PoolDep, temporal: TemporalDep,
                body: ClaimRequest | None = None) -> ApprovalView:
    """Claim the approval so no one else works it (409 ``claimed_by_other`` if taken).

    The body's ``interrupt_id`` names which of the run's approvals; the oldest pending by default.
    """
    return await claim_run(run_id, principal, pool, temporal, (body or ClaimRequest()).interrupt_id)


@router.post("/{run_id}/release", response_model=ApprovalView)
async def release(run_id: str, principal: ReviewerDep, pool: PoolDep, temporal: TemporalDep,
                  body: ClaimRequest | None = None) -> ApprovalView:
    """Give a claimed approval back to the queue (claimant or admin)."""
    return await release_run(run_id, principal, pool, temporal,
                             (body or ClaimRequest()).interrupt_id)


@router.post("/{run_id}/reassign", response_model=ApprovalView)
async def reassign(run_id: str, body: ReassignRequest, principal: ReviewerDep, pool: PoolDep,
                   temporal: TemporalDep) -> ApprovalView:
    """Hand the approval to another reviewer and/or group (claimant, anyone if unclaimed, admin)."""
    return await reassign_run(run_id, body, principal, pool, temporal)

__all__ = ["ClaimedByOtherError", "router"]
