"""A person's decision reaching a run: the run's gate answers it, one refusal mapping for every caller.

Every decision, claim, release and reassignment — from the admin API, the console, a
pipeline's own routes, an Agent Server ``command.resume`` — is an Update on the run's
workflow (:func:`send_update`; :func:`decide` for a person's decision). The workflow's
validator refuses before history, and the refusal is mapped once to the API's error with a
stable code (:func:`refusal`).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from overseer.access import Principal
from overseer.errors import (
    ConflictError,
    DependencyUnavailableError,
    InvalidFieldEditsError,
    InvalidRequestError,
    NotAwaitingApprovalError,
    NotFoundError,
    OverseerError,
)
from overseer.pipelines import DecisionRefusedError


class ClaimedByOtherError(ConflictError):
    """The approval is claimed by another reviewer (409)."""

    code = "claimed_by_other"


async def send_update(pool: asyncpg.Pool, temporal: Client, run_id: str, name: str, arg: Any, *,
                      until: str = "completed") -> Any:
    """Send the Update ``name`` (``decide``, ``claim``, ``release``, ``reassign``) to a run's workflow.

    The one decision path for every pipeline (approvals API, console, pipelines' own routes,
    Agent Server resumes): the workflow's validator refuses before history, and the
    refusal is mapped once to a stable code.

    Args:
        pool: the database pool.
        temporal: the Temporal client.
        run_id: the run.
        name: the Update.
        arg: its argument.
        until: ``completed`` waits for the Update's result (the gate has taken the decision
            and the run has moved on); ``applied`` (a ``decide`` only) returns as soon as
            the gate has taken this decision (:func:`_applied`), with ``{"status":
            "accepted"}`` when the result is not in yet: an Agent Server resume answers
            then, and its client follows the run on its stream.

    Returns:
        The update's result as a dict.

    Raises:
        NotFoundError: unknown run (404).
        NotAwaitingApprovalError, ClaimedByOtherError: 409.
        InvalidFieldEditsError, DecisionRefusedError (the pipeline's code), InvalidRequestError: 422.
        DependencyUnavailableError: Temporal did not answer (503).
    """
    try:
        rid = uuid.UUID(str(run_id))
    except ValueError:
        raise NotFoundError(f"unknown run {run_id}") from None
    row = await pool.fetchrow("SELECT workflow_id, status FROM runs WHERE run_id = $1", rid)
    if row is None:
        raise NotFoundError(f"unknown run {run_id}")
    handle = temporal.get_workflow_handle(row["workflow_id"])
    try:
        if until == "applied":
            if not getattr(arg, "note", None):
                raise ValueError("until='applied' needs a decision with a note of its own")
            update = await handle.start_update(name, arg,
                                               wait_for_stage=WorkflowUpdateStage.ACCEPTED)
            result = await _applied(handle, update, str(arg.note))
        else:
            result = await handle.execute_update(name, arg)
    except WorkflowUpdateFailedError as err:
        raise refusal(err.cause, row["status"]) from err
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NotAwaitingApprovalError(
                f"run {run_id} is not awaiting approval", details={"status": row["status"]}
            ) from err
        raise DependencyUnavailableError("Temporal did not answer") from err
    return result if isinstance(result, dict) else vars(result)


async def _applied(handle: WorkflowHandle[Any, Any], update: WorkflowUpdateHandle[Any],
                   note: str) -> Any:
    """The accepted decision's result, or ``{"status": "accepted"}`` once the gate took it.

    Two decisions accepted in the same workflow task both pass the validator; the handler
    then refuses the later one. The update's result comes only once the run has moved on,
    so the gate's current decision (``decision_note`` of the workflow's
    ``get_thread_state`` query) says sooner which one won: ``note`` must be unique to
    this decision.

    Raises:
        WorkflowUpdateFailedError: the handler refused the decision.
    """
    result = asyncio.ensure_future(update.result())
    try:
        while True:
            done, _ = await asyncio.wait({result}, timeout=0.05)
            if done:
                return result.result()
            snap = await handle.query("get_thread_state")
            if isinstance(snap, dict) and snap.get("decision_note") == note:
                return {"status": "accepted"}
    finally:
        result.add_done_callback(lambda t: t.cancelled() or t.exception())
        if not result.done():
            result.cancel()


async def decide(pool: asyncpg.Pool, temporal: Client, run_id: str, principal: Principal,
                 decision: str, *, until: str = "completed", **fields: Any) -> dict[str, Any]:
    """``principal``'s decision on a run's approval, through the run's gate (:func:`send_update`).

    The one way a person's decision reaches a run (the admin API, the console, a pipeline's
    own route, an Agent Server ``command.resume``): who decided and whether they are an
    admin come from ``principal``.

    Args:
        pool: the database pool.
        temporal: the Temporal client.
        run_id: the run.
        principal: who decides.
        decision: ``approve``, ``reject`` or a kind the pipeline takes.
        until: when to return (:func:`send_update`).
        fields: the rest of :class:`~overseer.run_types.DecisionInput` (``updates``,
            ``note``, ``apply_proposal``, ``budget_usd``, ``budget_tokens``, ``resume``,
            ``raw_resume``, ``interrupt_id``, ``more_resumes``).

    Returns:
        The gate's answer once the run has taken the decision (``status``, ``outcome`` …).

    Raises:
        The errors of :func:`send_update` (404, 409, 422, 503).
    """
    from overseer.run_types import DecisionInput

    return dict(await send_update(pool, temporal, run_id, "decide", DecisionInput(
        decision=decision, decided_by=principal.subject, is_admin=principal.is_admin,
        **fields), until=until))


def refusal(cause: BaseException | None, status: str) -> OverseerError:
    """Map a refused Update's ``ApplicationError`` to the API's error (one mapping for all)."""
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
