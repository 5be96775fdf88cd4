"""The pricing chat's sign-off routes: ``POST /api/v1/chat/approve`` and ``/cancel`` by thread id.

Both answer the run's final event once its workflow has closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from temporalio.client import WorkflowFailureError

from activities.pricing.chat_runs import is_orchestrated
from activities.pricing.chat_sse import canonical
from activities.pricing.schemas import ChatStreamEvent, ThreadRequest
from overseer.plugin import (
    ConflictError,
    DependencyUnavailableError,
    NotFoundError,
    PoolDep,
    Principal,
    PrincipalDep,
    ReviewerDep,
    TemporalDep,
    cancel_run_workflow,
    count_own,
    decide,
    visible_run,
)

router = APIRouter(prefix="/api/v1/chat", tags=["chat"])


@router.post("/approve", response_model=ChatStreamEvent)
async def approve(body: ThreadRequest, principal: ReviewerDep, pool: PoolDep,
                  temporal: TemporalDep) -> JSONResponse:
    """Sign off a paused plan (reviewers); answers the run's final event once it has finished.

    The same decision path as ``/v1/admin/approvals`` (claims fence other reviewers with 409
    ``claimed_by_other``, admins may override, the same refusal codes).
    """
    handle = await thread_handle(pool, temporal, body.thread_id, principal)
    await decide(pool, temporal, body.thread_id, principal, "approve", updates=body.updates,
                 note=body.note)
    return JSONResponse(await final_event(pool, handle, body.thread_id))


@router.post("/cancel", response_model=ChatStreamEvent)
async def cancel(body: ThreadRequest, principal: PrincipalDep, pool: PoolDep,
                 temporal: TemporalDep) -> JSONResponse:
    """Cancel a running or paused plan (its owner, reviewers, admins); answers the final event."""
    view = await visible_run(pool, body.thread_id, principal)
    handle = await thread_handle(pool, temporal, body.thread_id, principal)
    if view.status in ("completed", "rejected", "failed", "cancelled"):
        raise ConflictError(f"thread {body.thread_id} has already ended ({view.status})",
                            details={"status": view.status})
    if not await cancel_run_workflow(pool, temporal, handle.id, view.run_id, principal.subject):
        raise ConflictError(f"thread {body.thread_id} has already ended")
    return JSONResponse(await final_event(pool, handle, body.thread_id))


async def thread_handle(pool: Any, temporal: Any, thread_id: str, principal: Principal) -> Any:
    """The workflow handle of an orchestrated thread the caller may see.

    Raises:
        NotFoundError: unknown thread, a fast-path answer, or someone else's thread.
    """
    view = await visible_run(pool, thread_id, principal)
    if not is_orchestrated(view):
        raise NotFoundError(f"no orchestrated pricing thread {thread_id}")
    return temporal.get_workflow_handle(view.workflow_id)


async def final_event(pool: Any, handle: Any, run_id: str,
                      timeout_seconds: float = 60.0) -> dict[str, Any]:
    """The run's final stream event (with its ``seq``) once the workflow has closed.

    Its ``seq`` is the one :func:`activities.pricing.chat_orchestrator.orchestrator_events`
    gives it: every durable item and every live row of the run come before it.

    Raises:
        DependencyUnavailableError: the run has not finished within ``timeout_seconds``.
    """
    try:
        await asyncio.wait_for(handle.result(), timeout_seconds)
    except (WorkflowFailureError, TimeoutError):
        pass
    event = await handle.query("get_final_event")  # SegmentRunWorkflow's query
    if not event:
        raise DependencyUnavailableError("the run has not finished yet", details={"retry": True})
    items = await handle.query("__temporal_workflow_stream_offset", result_type=int)
    return canonical({**event, "seq": items + await count_own(pool, run_id)})
