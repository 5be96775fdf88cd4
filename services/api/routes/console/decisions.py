"""The console's forms on an approval: decide (approve / reject / edit), claim, release, reassign.

- ``POST /console/items/{run_id}/decision``: the decision form; on success, the next item of
  the queue (same filters).
- ``POST /console/items/{run_id}/{claim|release|reassign}``: the claim panel's forms.

Both check the session's CSRF token and go through the same functions as the JSON admin API
(``services.api.operations``), so the workflow validates them and refusals (409, 422) are
shown on the item page.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from overseer.access import Principal
from overseer.errors import InvalidRequestError, NotFoundError, OverseerError
from services.api.console import session as sessions
from services.api.console.hitl import human_interrupt, human_resume
from services.api.errors import SECURITY_CODES, record_security_event
from services.api.operations import claim_run, decide_run, get_approval_view, reassign_run, release_run
from services.api.readmodels import parse_run_id
from services.api.routes.console.items import item_page, page_approval
from services.api.routes.console.login import SESSION_DEP, form_str
from services.api.routes.console.queue import QUEUE_FILTERS, list_queue
from services.api.routes.console.render import item_href, render
from services.api.schemas import DecisionRequest, ReassignRequest

router = APIRouter(prefix="/console", include_in_schema=False)


# ``/decision`` is declared before ``/{action}``, which would otherwise match it too.
@router.post("/items/{run_id}/decision", response_class=HTMLResponse)
async def decide(request: Request, run_id: str, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """Approve (with field edits) or reject; refusals re-render the page with the reasons inline."""
    form = await request.form()
    sessions.check_csrf(session, request, form_str(form.get("csrf_token")))
    values = {k: form_str(v) or "" for k, v in form.multi_items()}
    filters = {k: values.get(k, "") for k in QUEUE_FILTERS if values.get(k)}
    try:
        body = _decision_request(values)
    except ValidationError as err:
        errors = {".".join(str(p) for p in e["loc"]): e["msg"] for e in err.errors()}
        return await item_page(request, session, run_id, status=422, form_values=values,
                               error=InvalidRequestError("the decision is not valid",
                                                         details={"errors": errors}))
    except json.JSONDecodeError as err:
        return await item_page(request, session, run_id, status=422, form_values=values,
                               error=InvalidRequestError(
                                   "the answer is not valid JSON",
                                   details={"errors": {"resume": f"{err.msg} (line {err.lineno}, "
                                                                 f"column {err.colno})"}}))
    pool, temporal = request.app.state.pool, request.app.state.temporal
    if values.get("hitl") and body.decision == "approve":  # an action form: its shape's answer
        approval = await page_approval(pool, parse_run_id(run_id), body.interrupt_id)
        human = human_interrupt(approval.payload) if approval is not None else None
        if human is not None:
            try:
                body = body.model_copy(update={"resume": human_resume(human, values)})
            except InvalidRequestError as err:
                return await item_page(request, session, run_id, status=422,
                                       form_values=values, error=err)
    try:
        await decide_run(run_id, body, session.principal, pool, temporal)
    except OverseerError as err:
        if err.code in SECURITY_CODES:
            await record_security_event(request, err.code, err.http_status)
        return await item_page(request, session, run_id, status=err.http_status,
                               form_values=values, error=err)
    target = await _next_item(pool, run_id, body.interrupt_id, filters, session.principal)
    run, interrupt = target or (run_id, None)
    query = {"done": run_id, **filters, **({"interrupt": interrupt} if interrupt else {})}
    return RedirectResponse(f"/console/items/{quote(run)}?{urlencode(query)}", 303)


@router.post("/items/{run_id}/{action}", response_class=HTMLResponse)
async def claim_action(request: Request, run_id: str, action: str,
                       session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """Claim, release or reassign; htmx gets the claim panel back, a plain form a redirect."""
    if action not in ("claim", "release", "reassign"):
        raise NotFoundError(f"unknown action {action!r}")
    form = await request.form()
    sessions.check_csrf(session, request, form_str(form.get("csrf_token")))
    pool, temporal = request.app.state.pool, request.app.state.temporal
    interrupt = (form_str(form.get("interrupt_id")) or "").strip()[:200] or None
    error: OverseerError | None = None
    try:
        if action == "reassign":
            body = _reassign_request((form_str(form.get("assignee")) or "").strip() or None,
                                     (form_str(form.get("group")) or "").strip() or None, interrupt)
            await reassign_run(run_id, body, session.principal, pool, temporal)
        elif action == "claim":
            await claim_run(run_id, session.principal, pool, temporal, interrupt)
        else:
            await release_run(run_id, session.principal, pool, temporal, interrupt)
    except OverseerError as err:
        error = err
        if err.code in SECURITY_CODES:
            await record_security_event(request, err.code, err.http_status)
    if request.headers.get("hx-request"):
        approval = await page_approval(pool, parse_run_id(run_id), interrupt)
        return render(request, session, "_claim.html",
                      {"approval": approval, "run_id": run_id, "claim_error": error})
    if error is not None:
        return await item_page(request, session, run_id, status=error.http_status,
                               claim_error=error, interrupt=interrupt)
    return RedirectResponse(item_href(run_id, interrupt), 303)


# --- the forms --------------------------------------------------------------------------------


async def _next_item(pool: asyncpg.Pool, decided_id: str, interrupt_id: str | None,
                     filters: dict[str, Any],
                     principal: Principal) -> tuple[str, str | None] | None:
    """The pending approval to show after deciding one of ``decided_id``'s: the next, else the oldest.

    Returns:
        ``(run id, interrupt id)``, or None when the queue is empty.
    """
    items = await list_queue(pool, {**filters, "status": "pending"}, principal)
    try:
        decided = await get_approval_view(pool, decided_id, interrupt_id)
    except NotFoundError:
        decided = None
    others = [a for a in items if decided is None or
              (a.run_id, a.approval_key) != (decided.run_id, decided.approval_key)]
    if decided is not None:
        after = [a for a in others if a.requested_at >= decided.requested_at]
        if after:
            return after[0].run_id, after[0].interrupt_id
    return (others[0].run_id, others[0].interrupt_id) if others else None


def _decision_request(values: dict[str, str]) -> DecisionRequest:
    """The form as a :class:`DecisionRequest`: edits are the inputs that differ from the record.

    Inputs start at the proposed value (or the current one) and ``orig.<field>`` holds the
    current value, so what the reviewer sees is exactly what is applied: the proposal is sent
    as explicit edits and ``apply_proposal`` is off. ``resume`` (the generic request form's
    JSON answer) is parsed and sent as the decision's ``resume``: ``interrupt()`` returns it.

    Raises:
        pydantic.ValidationError: a field the decision schema refuses.
        json.JSONDecodeError: ``resume`` is not JSON.
    """
    decision = values.get("decision", "")
    updates: dict[str, str] = {}
    if decision == "approve":
        for key, value in values.items():
            if key.startswith("field."):
                name = key.removeprefix("field.")
                if value.strip() != values.get(f"orig.{name}", "").strip():
                    updates[name] = value.strip()
    budget_usd = values.get("budget_usd", "").strip()
    budget_tokens = values.get("budget_tokens", "").strip()
    raw_resume = values.get("resume", "").strip()
    return DecisionRequest.model_validate({
        "decision": decision, "updates": updates or None,
        "note": values.get("note", "").strip() or None, "apply_proposal": False,
        "budget_usd": budget_usd or None, "budget_tokens": budget_tokens or None,
        "resume": json.loads(raw_resume) if raw_resume else None,
        "interrupt_id": values.get("interrupt_id", "").strip() or None,
    })


def _reassign_request(assignee: str | None, group: str | None,
                      interrupt_id: str | None = None) -> ReassignRequest:
    """The reassign form as a :class:`ReassignRequest`.

    Raises:
        InvalidRequestError: neither a reviewer nor a group, or a value too long (422).
    """
    if assignee is None and group is None:
        raise InvalidRequestError("name a reviewer, a group, or both")
    try:
        return ReassignRequest(assignee=assignee, group=group, interrupt_id=interrupt_id)
    except ValidationError as err:
        raise InvalidRequestError("the reassignment is not valid",
                                  details={"errors": [e["msg"] for e in err.errors()]}) from err
