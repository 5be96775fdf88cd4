"""The review console: server-rendered pages under ``/console`` for reviewers and admins.

- ``GET/POST /console/login``, ``POST /console/logout``: exchange an API token for a signed,
  HttpOnly, SameSite=Strict session cookie (see ``services/api/console/session.py``).
- ``GET /console/queue``: the approval queue, oldest first, filtered by status, pipeline,
  age, SLA state and assignee (htmx swaps the table as filters change).
- ``GET /console/items/{run_id}``: the document page(s) next to current and proposed field
  values with evidence, Approve / Reject / Edit, Claim / Release / Reassign, the run's
  event timeline (polled while the run is live), a Temporal Web UI link and the trace id.
- ``GET /console/items/{run_id}/pages/{n}.png``: a page of the run's document as PNG.
- ``GET /console/stats``: the orchestrator dashboard (``overseer.stats``).

Every POST checks the session's CSRF token. Decisions, claims and reassignments go through
the same functions as the JSON admin API (``services.api.routes.approvals``), so the workflow
validates them and refusals (409, 422) are shown on the page. Templates autoescape every value.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import asyncpg
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import ValidationError

from overseer.access import Principal
from overseer.catalogue import CATALOGUE
from overseer.errors import (
    AuthenticationError,
    InvalidRequestError,
    NotFoundError,
    OverseerError,
    PermissionDeniedError,
)
from overseer.stats import compute_stats, window_start
from overseer.store.events import TERMINAL_STATUSES, fetch_events
from services.api.console import session as sessions
from services.api.console.hitl import human_interrupt, human_resume
from services.api.console.pages import DocumentRef, document_of_run, document_text, render_page_png
from services.api.errors import SECURITY_CODES, record_security_event
from services.api.operations import (
    claim_run,
    decide_run,
    get_approval_view,
    list_approval_views,
    reassign_run,
    release_run,
)
from services.api.readmodels import parse_run_id
from services.api.schemas import ApprovalView, DecisionRequest, ReassignRequest

log = logging.getLogger("overseer.api.console")

CONSOLE_DIR = Path(__file__).resolve().parents[1] / "console"
HTMX_VERSION = "2.0.11"
"""Version of the vendored ``static/htmx.min.js`` (npm ``htmx.org``, 0BSD)."""
AGE_CHOICES = [("", "any age"), ("3600", "older than 1 h"), ("14400", "older than 4 h"),
               ("86400", "older than 1 day"), ("259200", "older than 3 days")]
STATS_WINDOWS = [("", "all time"), ("24", "last 24 h"), ("168", "last 7 days"),
                 ("720", "last 30 days")]
QUEUE_FILTERS = ("status", "pipeline", "sla_state", "assignee", "min_age_seconds")
SESSION_DEP = Depends(sessions.require_session)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

router = APIRouter(prefix="/console", include_in_schema=False)
templates = Environment(loader=FileSystemLoader(CONSOLE_DIR / "templates"),
                        autoescape=select_autoescape(default=True, default_for_string=True),
                        trim_blocks=True, lstrip_blocks=True)


def install_console(app: FastAPI) -> None:
    """Add the console's routes, its static files and its login redirect to ``app``."""
    app.include_router(router)
    app.mount("/console/static", StaticFiles(directory=CONSOLE_DIR / "static"), name="console-static")

    async def _login_redirect(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, sessions.LoginRequired)
        if request.headers.get("hx-request"):
            return Response(status_code=401, headers={"HX-Redirect": "/console/login"})
        return RedirectResponse(f"/console/login?{urlencode({'next': exc.next_path})}", 303)

    app.add_exception_handler(sessions.LoginRequired, _login_redirect)
    json_handler = app.exception_handlers.get(OverseerError)

    async def _console_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, OverseerError)
        path = request.url.path
        if not path.startswith("/console/") or path.endswith(".png") or json_handler is None:
            if json_handler is None:
                return Response(json.dumps({"code": exc.code, "message": exc.message,
                                            "details": exc.details}),
                                status_code=exc.http_status, media_type="application/json")
            answer = json_handler(request, exc)
            return await answer if inspect.isawaitable(answer) else answer
        if exc.code in SECURITY_CODES:
            await record_security_event(request, exc.code, exc.http_status)
        return _render(request, sessions.read_session(request), "error.html",
                       {"status": exc.http_status, "code": exc.code, "message": exc.message},
                       status=exc.http_status)

    app.add_exception_handler(OverseerError, _console_error)


# --- login ------------------------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
async def console_home() -> Response:
    """Go to the queue."""
    return RedirectResponse("/console/queue", 303)


@router.get("/login", response_class=HTMLResponse)
async def login_page(request: Request, next: str | None = None) -> Response:
    """The login form: one field for an API token (reviewer or admin); logged in, go on."""
    if sessions.read_session(request) is not None:
        return RedirectResponse(sessions.safe_next(next), 303)
    return _login_form(request, next_path=sessions.safe_next(next))


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    """Check the token and the form's CSRF token; issue the session cookie."""
    form = await request.form()
    next_path = sessions.safe_next(_str(form.get("next")))
    secret = sessions.console_secret(request)
    if secret is None:
        return _login_form(request, next_path=next_path, status=503,
                           error="The console is disabled: set OVERSEER_CONSOLE_SESSION_SECRET.")
    if not sessions.check_login_csrf(secret, request, _str(form.get("csrf_token"))):
        return _login_form(request, next_path=next_path, status=403,
                           error="The login form expired. Please try again.")
    token = (_str(form.get("token")) or "").strip()
    grant = sessions.grant_for_token(request, token) if token else None
    if grant is None:
        await record_security_event(request, "unauthenticated", 401)
        return _login_form(request, next_path=next_path, status=401, error="Unknown token.")
    if sessions.grant_expired(grant):
        await record_security_event(request, "token_expired", 401)
        return _login_form(request, next_path=next_path, status=401, error="This token has expired.")
    if grant["role"] not in sessions.CONSOLE_ROLES:
        await record_security_event(request, "forbidden", 403)
        return _login_form(request, next_path=next_path, status=403,
                           error="The console is for reviewers and admins; this token may not use it.")
    settings = request.app.state.settings
    value, _ = sessions.issue_session(secret, token, grant, settings.console_session_seconds)
    response = RedirectResponse(next_path, 303)
    response.set_cookie(sessions.COOKIE, value, max_age=int(settings.console_session_seconds),
                        path=sessions.COOKIE_PATH, httponly=True, samesite="strict",
                        secure=_secure(request))
    response.delete_cookie(sessions.LOGIN_COOKIE, path=sessions.COOKIE_PATH)
    return response


@router.post("/logout")
async def logout(request: Request, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """End the session (clears the cookie)."""
    form = await request.form()
    sessions.check_csrf(session, request, _str(form.get("csrf_token")))
    response = RedirectResponse("/console/login", 303)
    response.delete_cookie(sessions.COOKIE, path=sessions.COOKIE_PATH, httponly=True,
                           samesite="strict", secure=_secure(request))
    return response


# --- queue ------------------------------------------------------------------------------------


@router.get("/queue", response_class=HTMLResponse)
async def queue(request: Request, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """The approval queue with filters; an htmx request gets only the table."""
    filters = _queue_filters(request, session.principal)
    pool = request.app.state.pool
    items = await _list_queue(pool, filters, session.principal)
    pipelines = sorted(set(CATALOGUE) | {a.pipeline for a in items})
    context = {"items": items, "filters": filters, "pipelines": pipelines,
               "age_choices": AGE_CHOICES, "item_query": _item_query(filters)}
    if request.headers.get("hx-request") and request.headers.get("hx-target") == "queue-table":
        return _render(request, session, "_queue_table.html", context)
    return _render(request, session, "queue.html", context)


# --- item -------------------------------------------------------------------------------------


@router.get("/items/{run_id}", response_class=HTMLResponse)
async def item(request: Request, run_id: str, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """One approval: document, fields, proposal and evidence, decision forms, timeline."""
    return await _item_page(request, session, run_id)


@router.get("/items/{run_id}/timeline", response_class=HTMLResponse)
async def timeline(request: Request, run_id: str,
                   session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """The run's event timeline (htmx polls it while the run is live)."""
    pool = request.app.state.pool
    run = await _run_row(pool, run_id)
    events = await fetch_events(pool, str(run["run_id"]))
    return _render(request, session, "_timeline.html",
                   {"events": _timeline(events), "run": dict(run),
                    "live": run["status"] not in TERMINAL_STATUSES})


@router.get("/items/{run_id}/pages/{page}.png")
async def page_image(request: Request, run_id: str, page: int) -> Response:
    """Page ``page`` of the run's document as PNG (reviewers and admins: session or bearer token).

    Size-capped: the longest side is ``console_page_max_px``; larger sources are refused.
    """
    _page_principal(request)
    pool = request.app.state.pool
    doc = await _document(pool, run_id)
    settings = request.app.state.settings
    png = await render_page_png(pool, doc, page, max_px=settings.console_page_max_px,
                                max_pixels=settings.max_pixels_per_page)
    return Response(png, media_type="image/png",
                    headers={"Cache-Control": "private, max-age=3600",
                             "X-Content-Type-Options": "nosniff"})


@router.post("/items/{run_id}/decision", response_class=HTMLResponse)
async def decide(request: Request, run_id: str, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """Approve (with field edits) or reject; refusals re-render the page with the reasons inline."""
    form = await request.form()
    sessions.check_csrf(session, request, _str(form.get("csrf_token")))
    values = {k: _str(v) or "" for k, v in form.multi_items()}
    filters = {k: values.get(k, "") for k in QUEUE_FILTERS if values.get(k)}
    try:
        body = _decision_request(values)
    except ValidationError as err:
        errors = {".".join(str(p) for p in e["loc"]): e["msg"] for e in err.errors()}
        return await _item_page(request, session, run_id, status=422, form_values=values,
                                error=InvalidRequestError("the decision is not valid",
                                                          details={"errors": errors}))
    except json.JSONDecodeError as err:
        return await _item_page(request, session, run_id, status=422, form_values=values,
                                error=InvalidRequestError(
                                    "the answer is not valid JSON",
                                    details={"errors": {"resume": f"{err.msg} (line {err.lineno}, "
                                                                  f"column {err.colno})"}}))
    pool, temporal = request.app.state.pool, request.app.state.temporal
    if values.get("hitl") and body.decision == "approve":  # an action form: its shape's answer
        approval = await _approval(pool, parse_run_id(run_id), body.interrupt_id)
        human = human_interrupt(approval.payload) if approval is not None else None
        if human is not None:
            try:
                body = body.model_copy(update={"resume": human_resume(human, values)})
            except InvalidRequestError as err:
                return await _item_page(request, session, run_id, status=422,
                                        form_values=values, error=err)
    try:
        await decide_run(run_id, body, session.principal, pool, temporal)
    except OverseerError as err:
        if err.code in SECURITY_CODES:
            await record_security_event(request, err.code, err.http_status)
        return await _item_page(request, session, run_id, status=err.http_status,
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
    sessions.check_csrf(session, request, _str(form.get("csrf_token")))
    pool, temporal = request.app.state.pool, request.app.state.temporal
    interrupt = (_str(form.get("interrupt_id")) or "").strip()[:200] or None
    error: OverseerError | None = None
    try:
        if action == "reassign":
            body = _reassign_request((_str(form.get("assignee")) or "").strip() or None,
                                     (_str(form.get("group")) or "").strip() or None, interrupt)
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
        approval = await _approval(pool, parse_run_id(run_id), interrupt)
        return _render(request, session, "_claim.html",
                       {"approval": approval, "run_id": run_id, "claim_error": error})
    if error is not None:
        return await _item_page(request, session, run_id, status=error.http_status,
                                claim_error=error, interrupt=interrupt)
    return RedirectResponse(item_href(run_id, interrupt), 303)


# --- stats ------------------------------------------------------------------------------------


@router.get("/stats", response_class=HTMLResponse)
async def stats_page(request: Request, session: sessions.ConsoleSession = SESSION_DEP,
                     pipeline: str | None = None, hours: str | None = None) -> Response:
    """The orchestrator dashboard: the figures of ``GET /v1/admin/stats`` as tables."""
    window = float(hours) if hours and hours.replace(".", "", 1).isdigit() else None
    stats = await compute_stats(request.app.state.pool, pipeline=pipeline or None,
                                since=window_start(window))
    return _render(request, session, "stats.html",
                   {"stats": stats, "pipelines": sorted(CATALOGUE), "windows": STATS_WINDOWS,
                    "filters": {"pipeline": pipeline or "", "hours": hours or ""}})


# --- the queue ----------------------------------------------------------------------------------


async def _list_queue(pool: asyncpg.Pool, filters: dict[str, Any], principal: Principal,
                      limit: int = 500) -> list[ApprovalView]:
    """The admin API's queue listing; ``me`` is the caller, ``unassigned`` the unclaimed ones."""
    assignee = filters.get("assignee") or None
    if assignee == "me":
        assignee = principal.subject
    elif assignee in ("unassigned", "none"):
        assignee = "none"
    return await list_approval_views(
        pool, status=filters.get("status") or None, pipeline=filters.get("pipeline") or None,
        assignee=assignee, sla_state=filters.get("sla_state") or None,
        min_age_seconds=_float(filters.get("min_age_seconds")), limit=limit)


# --- page assembly ----------------------------------------------------------------------------


async def _item_page(request: Request, session: sessions.ConsoleSession, run_id: str, *,
                     status: int = 200, form_values: dict[str, str] | None = None,
                     error: OverseerError | None = None,
                     claim_error: OverseerError | None = None,
                     interrupt: str | None = None) -> Response:
    pool = request.app.state.pool
    settings = request.app.state.settings
    run = await _run_row(pool, run_id)
    rid = run["run_id"]
    interrupt = interrupt or request.query_params.get("interrupt") or \
        (form_values or {}).get("interrupt_id") or None
    approval = await _approval(pool, rid, interrupt)
    siblings = [a for a in await list_approval_views(pool, status="pending", run_id=str(rid))
                if approval is None or a.approval_key != approval.approval_key]
    events = await fetch_events(pool, str(rid))
    doc = await document_of_run(pool, rid)
    text_pages = await document_text(pool, doc) if doc is not None and doc.kind == "text" else []
    filters = {k: request.query_params[k] for k in QUEUE_FILTERS if request.query_params.get(k)}
    if form_values:
        filters = {k: form_values[k] for k in QUEUE_FILTERS if form_values.get(k)}
    neighbours = await _neighbours(pool, (str(rid), approval.interrupt_id if approval else None),
                                   filters, session.principal)
    done = request.query_params.get("done")
    context = {
        "run": dict(run), "run_id": str(rid), "approval": approval, "siblings": siblings,
        "result": _json(run["result"]) or {}, "run_error": _json(run["error"]),
        "fields": _field_rows(approval, form_values), "payload_kind": _payload_kind(approval),
        "human": human_interrupt(approval.payload) if approval is not None else None,
        "doc": doc, "doc_pages": _doc_pages(doc), "text_pages": text_pages,
        "events": _timeline(events), "live": run["status"] not in TERMINAL_STATUSES,
        "temporal_url": (f"{settings.temporal_web_base_url()}/namespaces/"
                         f"{quote(settings.temporal_namespace, safe='')}/workflows/"
                         f"{quote(run['workflow_id'], safe='')}"),
        "error": error, "error_fields": _error_fields(error), "claim_error": claim_error,
        "form_values": form_values or {}, "filters": filters, "item_query": _item_query(filters),
        "prev_href": neighbours[0], "next_href": neighbours[1],
        "done": await _done_summary(pool, done) if done else None,
        "extra_decisions": _extra_decisions(run["pipeline"]),
    }
    return _render(request, session, "item.html", context, status=status)


def _extra_decisions(pipeline: str) -> list[str]:
    """Decision kinds the run's pipeline takes besides approve and reject (e.g. ``revise``)."""
    from overseer.pipelines import get_registry

    if pipeline not in get_registry():
        return []
    return [d for d in get_registry().get(pipeline).gate.decisions if d not in ("approve", "reject")]


def _render(request: Request, session: sessions.ConsoleSession | None, name: str,
            context: dict[str, Any], status: int = 200) -> HTMLResponse:
    html = templates.get_template(name).render(
        request=request, session=session, csrf_token=session.csrf_token if session else "",
        user=session.principal if session else None, htmx_version=HTMX_VERSION,
        path=request.url.path, **context)
    return HTMLResponse(html, status_code=status, headers=_security_headers())


def _login_form(request: Request, *, next_path: str, status: int = 200,
                error: str | None = None) -> HTMLResponse:
    secret = sessions.console_secret(request)
    nonce = request.cookies.get(sessions.LOGIN_COOKIE) or sessions.login_nonce()
    response = _render(request, None, "login.html", {
        "next_path": next_path, "error": error, "disabled": secret is None,
        "login_token": sessions.login_form_token(secret, nonce) if secret else "",
    }, status=status)
    response.set_cookie(sessions.LOGIN_COOKIE, nonce, max_age=sessions.LOGIN_NONCE_SECONDS,
                        path=sessions.COOKIE_PATH, httponly=True, samesite="strict",
                        secure=_secure(request))
    return response


def _security_headers() -> dict[str, str]:
    return {"Content-Security-Policy": CSP, "X-Frame-Options": "DENY",
            "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store"}


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.app.state.settings.environment == "production"


def _queue_filters(request: Request, principal: Principal) -> dict[str, str]:
    q = request.query_params
    status = q.get("status", "pending")
    return {
        "status": status if status in ("pending", "decided", "cancelled", "") else "pending",
        "pipeline": q.get("pipeline", ""),
        "sla_state": q.get("sla_state", "") if q.get("sla_state") in ("ok", "breached") else "",
        "assignee": q.get("assignee", "").strip()[:200],
        "min_age_seconds": q.get("min_age_seconds", "") if _float(q.get("min_age_seconds")) else "",
    }


def _item_query(filters: dict[str, Any]) -> str:
    kept = {k: v for k, v in filters.items() if v and not (k == "status" and v == "pending")}
    return f"?{urlencode(kept)}" if kept else ""


def item_href(run_id: str, interrupt_id: str | None = None, item_query: str = "") -> str:
    """The console page of one approval: its run, its interrupt when it has one, the filters."""
    query = item_query
    if interrupt_id:
        query = f"{query}&" if query else "?"
        query += urlencode({"interrupt": interrupt_id})
    return f"/console/items/{quote(str(run_id))}{query}"


async def _neighbours(pool: asyncpg.Pool, current: tuple[str, str | None],
                      filters: dict[str, Any],
                      principal: Principal) -> tuple[str | None, str | None]:
    """Links to the approvals before and after ``(run id, interrupt id)`` in the queue."""
    query = _item_query(filters)
    items = [(a.run_id, a.interrupt_id)
             for a in await _list_queue(pool, {**filters, "status": "pending"}, principal)]
    hrefs = [item_href(run, interrupt, query) for run, interrupt in items]
    if current not in items:
        return None, hrefs[0] if hrefs else None
    i = items.index(current)
    return (hrefs[i - 1] if i > 0 else None), (hrefs[i + 1] if i + 1 < len(hrefs) else None)


async def _next_item(pool: asyncpg.Pool, decided_id: str, interrupt_id: str | None,
                     filters: dict[str, Any],
                     principal: Principal) -> tuple[str, str | None] | None:
    """The pending approval to show after deciding one of ``decided_id``'s: the next, else the oldest.

    Returns:
        ``(run id, interrupt id)``, or None when the queue is empty.
    """
    items = await _list_queue(pool, {**filters, "status": "pending"}, principal)
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


async def _done_summary(pool: asyncpg.Pool, run_id: str) -> dict[str, Any] | None:
    """What became of a run just decided here, read back from the read models (never the URL)."""
    try:
        rid = parse_run_id(run_id)
    except NotFoundError:
        return None
    row = await pool.fetchrow(
        """SELECT r.run_id, r.status, r.result->>'outcome' AS outcome, a.decision, a.decided_by
           FROM runs r LEFT JOIN LATERAL (
               SELECT decision, decided_by FROM approvals
               WHERE run_id = r.run_id AND status = 'decided'
               ORDER BY decided_at DESC LIMIT 1) a ON true
           WHERE r.run_id = $1""", rid)
    return dict(row, run_id=str(row["run_id"])) if row else None


async def _run_row(pool: asyncpg.Pool, run_id: str) -> asyncpg.Record:
    rid = parse_run_id(run_id)
    row = await pool.fetchrow(
        """SELECT run_id, pipeline, workflow_id, status, parent_run_id, submitted_by, trace_id,
                  created_at, updated_at, result, error FROM runs WHERE run_id = $1""", rid)
    if row is None:
        raise NotFoundError(f"unknown run {run_id}")
    return row


async def _approval(pool: asyncpg.Pool, rid: uuid.UUID,
                    interrupt_id: str | None = None) -> ApprovalView | None:
    """The approval a page shows: the one of ``interrupt_id``, else the run's oldest pending."""
    try:
        return await get_approval_view(pool, str(rid), interrupt_id)
    except NotFoundError:
        return None


async def _document(pool: asyncpg.Pool, run_id: str) -> DocumentRef:
    doc = await document_of_run(pool, parse_run_id(run_id))
    if doc is None:
        raise NotFoundError(f"run {run_id} has no stored document")
    return doc


def _page_principal(request: Request) -> Principal:
    """The caller of a page image: a console session, or a reviewer/admin bearer token."""
    session = sessions.read_session(request)
    if session is not None:
        return session.principal
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    grant = sessions.grant_for_token(request, token.strip()) if scheme.lower() == "bearer" else None
    if grant is None:
        raise AuthenticationError("log in to the console or send a bearer token")
    if grant["role"] not in sessions.CONSOLE_ROLES:
        raise PermissionDeniedError(f"role {grant['role']!r} may not do this",
                                    details={"needs": list(sessions.CONSOLE_ROLES)})
    return Principal(subject=grant["subject"], role=grant["role"])


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


def _payload_kind(approval: ApprovalView | None) -> str:
    """Which decision form the item page shows: ``budget`` for the run's LLM budget stop.

    The runtime's one budget stop (``kind: llm_budget``, any graph, whether the spend
    passed the budget or a node's pre-call estimate would) takes a new budget with an
    approval.
    """
    if approval is None:
        return "none"
    kind = approval.payload.get("kind")
    if kind == "llm_budget":
        return "budget"
    if kind == "review" or isinstance(approval.payload.get("record"), dict):
        return "review"
    return "generic"


def _field_rows(approval: ApprovalView | None, form_values: dict[str, str] | None) -> list[dict[str, Any]]:
    """One row per field: current value, proposal with evidence, problems, and the edit box."""
    if approval is None or not isinstance(approval.payload.get("record"), dict):
        return []
    payload = approval.payload
    record: dict[str, Any] = payload["record"]
    proposal = payload.get("proposal") or {}
    proposed: dict[str, Any] = proposal.get("updates") or {}
    proposed_evidence: dict[str, Any] = proposal.get("evidence") or {}
    evidence: dict[str, Any] = payload.get("evidence") or {}
    missing = set(payload.get("missing_fields") or [])
    invalid: dict[str, Any] = payload.get("invalid_fields") or {}
    specs = _field_specs(approval.pipeline)
    unverified = set(proposal.get("suggestions") or {})
    names = [n for n in specs if n in record or n in proposed or n in missing or n in unverified]
    names += sorted((set(record) | set(proposed) | missing | unverified) - set(names))
    rows = []
    for name in names:
        current = record.get(name)
        current_text = "" if current is None else str(current)
        value = str(proposed[name]) if name in proposed else current_text
        if form_values is not None and f"field.{name}" in form_values:
            value = form_values[f"field.{name}"]
        spec = specs.get(name, {})
        rows.append({
            "name": name, "label": spec.get("label", name.replace("_", " ").capitalize()),
            "required": spec.get("required", False), "current": current_text,
            "proposed": proposed.get(name), "proposed_evidence": proposed_evidence.get(name),
            "evidence": evidence.get(name), "missing": name in missing,
            "invalid": invalid.get(name), "value": value,
            # A model's value whose quote is not in the document: shown, never pre-filled.
            "unverified": (proposal.get("suggestions") or {}).get(name),
            "unverified_note": (proposal.get("notes") or {}).get(
                name, "quote not found in the document"),
        })
    return rows


def _field_specs(pipeline: str) -> dict[str, dict[str, Any]]:
    """Labels and required flags of the record a pipeline's approvals edit, in its order.

    From ``Pipeline.api.record_fields``; ``{}`` when it declares none (the record's own keys
    show).
    """
    from overseer.pipelines import get_registry

    try:
        fields = get_registry().get(pipeline).api.record_fields
        return {k: dict(v) for k, v in fields().items()} if fields is not None else {}
    except Exception:  # a console without the pipeline's fields still shows the record
        log.warning("record fields of %s could not be read", pipeline, exc_info=True)
        return {}


def _doc_pages(doc: DocumentRef | None, limit: int = 20) -> list[int]:
    if doc is None or doc.kind == "text":
        return []
    return list(range(doc.first_page, min(doc.last_page, doc.first_page + limit - 1) + 1))


def _error_fields(error: OverseerError | None) -> dict[str, str]:
    if error is None:
        return {}
    errors = error.details.get("errors")
    if isinstance(errors, dict):
        return {str(k).removeprefix("updates."): str(v) for k, v in errors.items()}
    return {}


def _timeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**e, "summary": _summary(e["type"], e["data"]),
             "json": json.dumps(e["data"], indent=2, sort_keys=True, ensure_ascii=False)}
            for e in events]


def _summary(kind: str, d: dict[str, Any]) -> str:
    """A one-line description of an event for the timeline."""
    def join(items: Any) -> str:
        return ", ".join(str(i) for i in items) if items else "none"

    if kind == "run.submitted":
        document = (d.get("input") or {}).get("document") or {}
        return f"submitted by {d.get('submitted_by')}: {document.get('filename') or document.get('kind', '')}"
    if kind == "node.completed":
        return f"node {d.get('node')} finished"
    if kind == "route.decided":
        return (f"after {d.get('after')}: {d.get('route')} ({d.get('reason')}), "
                f"confidence {d.get('confidence')}")
    if kind == "review.suggested":
        return f"review agent proposed {join(sorted(d.get('proposed_updates') or {}))}"
    if kind == "approval.requested":
        return f"waiting for a reviewer: {join(d.get('reason_codes'))}"
    if kind in ("approval.claimed", "approval.released"):
        return f"{kind.split('.')[1]} by {d.get('reviewer')}"
    if kind == "approval.reassigned":
        return (f"reassigned to {d.get('assignee') or 'nobody'} / group {d.get('group') or '-'} "
                f"by {d.get('by')} ({d.get('reason')})")
    if kind == "approval.reminded":
        return f"reminder after {_duration(d.get('waited_seconds'))} ({d.get('reason')})"
    if kind == "approval.sla_breached":
        return f"SLA of {_duration(d.get('sla_seconds'))} passed"
    if kind == "approval.auto_decided":
        return f"escalation policy {d.get('action')}: {d.get('result')} ({d.get('reason')})"
    if kind == "approval.decided":
        edits = join(sorted(d.get("updates") or {}))
        return f"{d.get('decision')} by {d.get('decided_by')}; edits: {edits}"
    if kind.startswith("run."):
        error = d.get("error") or {}
        return " ".join(str(x) for x in (d.get("status"), d.get("outcome") or "",
                                         error.get("code", "") if isinstance(error, dict) else "") if x)
    if kind == "llm.called":
        return (f"{d.get('model')} for {d.get('node')}: {d.get('outcome')}, "
                f"{d.get('input_tokens')}+{d.get('output_tokens')} tokens")
    return ""


def _duration(seconds: Any) -> str:
    """``93784`` → ``1 d 2 h``; ``75`` → ``1 min 15 s``."""
    try:
        s = float(seconds)
    except (TypeError, ValueError):
        return "?"
    if math.isnan(s):
        return "?"
    s = max(0, int(s))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s" if minutes < 10 else f"{minutes} min"
    return f"{secs} s"


def _sla_state(approval: ApprovalView) -> str:
    """``breached`` (recorded), ``overdue`` (past the deadline, not yet recorded) or ``ok``."""
    if approval.sla_breached:
        return "breached"
    if approval.status == "pending" and approval.sla_deadline and \
            datetime.fromisoformat(approval.sla_deadline) < datetime.now(UTC):
        return "overdue"
    return "ok"


def _short_time(value: str | None) -> str:
    if not value:
        return ""
    return datetime.fromisoformat(value).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


templates.filters.update(duration=_duration, short_time=_short_time, urlquote=lambda v: quote(str(v)))
templates.globals.update(sla_state=_sla_state, item_href=item_href)
