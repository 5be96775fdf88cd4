"""The console's run/approval page: one approval with its document, fields, timeline and page images.

- ``GET /console/items/{run_id}``: the document page(s) next to current and proposed field
  values with evidence, Approve / Reject / Edit, Claim / Release / Reassign, the run's
  event timeline (polled while the run is live), a Temporal Web UI link and the trace id.
- ``GET /console/items/{run_id}/timeline``: the timeline alone (htmx polls it).
- ``GET /console/items/{run_id}/pages/{n}.png``: a page of the run's document as PNG.

:func:`item_page` assembles the page; the decision forms (``decisions.py``) re-render it with a
refusal inline.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any
from urllib.parse import quote

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from overseer.access import Principal
from overseer.errors import AuthenticationError, NotFoundError, OverseerError, PermissionDeniedError
from overseer.pipelines import ConsoleView
from overseer.registry import get_registry
from overseer.store.events import TERMINAL_STATUSES, fetch_events
from services.api.console import session as sessions
from services.api.console.hitl import human_interrupt
from services.api.console.pages import DocumentRef, document_of_run, document_text, render_page_png
from services.api.operations import get_approval_view, list_approval_views
from services.api.readmodels import parse_run_id
from services.api.routes.console.login import SESSION_DEP
from services.api.routes.console.queue import QUEUE_FILTERS, item_query, list_queue
from services.api.routes.console.render import duration, item_href, render
from services.api.schemas import ApprovalView

log = logging.getLogger("overseer.api.console")

router = APIRouter(prefix="/console", include_in_schema=False)


# --- item -------------------------------------------------------------------------------------


@router.get("/items/{run_id}", response_class=HTMLResponse)
async def item(request: Request, run_id: str, session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """One approval: document, fields, proposal and evidence, decision forms, timeline."""
    return await item_page(request, session, run_id)


@router.get("/items/{run_id}/timeline", response_class=HTMLResponse)
async def timeline(request: Request, run_id: str,
                   session: sessions.ConsoleSession = SESSION_DEP) -> Response:
    """The run's event timeline (htmx polls it while the run is live)."""
    pool = request.app.state.pool
    run = await _run_row(pool, run_id)
    events = await fetch_events(pool, str(run["run_id"]))
    return render(request, session, "_timeline.html",
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


# --- page assembly ----------------------------------------------------------------------------


async def pipeline_view(pool: Any, pipeline: str, run_id: str) -> ConsoleView | None:
    """The pipeline's own section of a run's page (``Pipeline.api.console_view``), if it has one.

    A pipeline the registry no longer has shows none.
    """
    registry = get_registry()
    if pipeline not in registry:
        return None
    view = registry.get(pipeline).api.console_view
    return await view(pool, run_id) if view is not None else None


async def item_page(request: Request, session: sessions.ConsoleSession, run_id: str, *,
                    status: int = 200, form_values: dict[str, str] | None = None,
                    error: OverseerError | None = None,
                    claim_error: OverseerError | None = None,
                    interrupt: str | None = None) -> Response:
    """The item page of ``run_id``: its approval, document, fields, timeline and queue links.

    Args:
        request: the request answered (``interrupt``, ``done`` and the queue filters are read
            from its query).
        session: the reviewer's session.
        run_id: the run's id as in the URL.
        status: the HTTP status of the answer (a refusal's, when re-rendered after one).
        form_values: the decision form as posted, to show again after a refusal.
        error: a refused decision, shown with the form (per field when it names fields).
        claim_error: a refused claim, release or reassignment, shown in the claim panel.
        interrupt: the interrupt whose approval to show (default: the query's, the form's,
            else the run's oldest pending).

    Returns:
        The HTML page.

    Raises:
        NotFoundError: ``run_id`` is not a run id, or no such run (404).
    """
    pool = request.app.state.pool
    settings = request.app.state.settings
    run = await _run_row(pool, run_id)
    rid = run["run_id"]
    interrupt = interrupt or request.query_params.get("interrupt") or \
        (form_values or {}).get("interrupt_id") or None
    approval = await page_approval(pool, rid, interrupt)
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
        "form_values": form_values or {}, "filters": filters, "item_query": item_query(filters),
        "prev_href": neighbours[0], "next_href": neighbours[1],
        "done": await _done_summary(pool, done) if done else None,
        "extra_decisions": _extra_decisions(run["pipeline"]),
        "pipeline_view": await pipeline_view(pool, run["pipeline"], str(rid)),
    }
    return render(request, session, "item.html", context, status=status)


def _extra_decisions(pipeline: str) -> list[str]:
    """Decision kinds the run's pipeline takes besides approve and reject (e.g. ``revise``)."""
    if pipeline not in get_registry():
        return []
    return [d for d in get_registry().get(pipeline).gate.decisions if d not in ("approve", "reject")]


async def _neighbours(pool: asyncpg.Pool, current: tuple[str, str | None],
                      filters: dict[str, Any],
                      principal: Principal) -> tuple[str | None, str | None]:
    """Links to the approvals before and after ``(run id, interrupt id)`` in the queue."""
    query = item_query(filters)
    items = [(a.run_id, a.interrupt_id)
             for a in await list_queue(pool, {**filters, "status": "pending"}, principal)]
    hrefs = [item_href(run, interrupt, query) for run, interrupt in items]
    if current not in items:
        return None, hrefs[0] if hrefs else None
    i = items.index(current)
    return (hrefs[i - 1] if i > 0 else None), (hrefs[i + 1] if i + 1 < len(hrefs) else None)


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


async def page_approval(pool: asyncpg.Pool, rid: uuid.UUID,
                        interrupt_id: str | None = None) -> ApprovalView | None:
    """The approval a page shows: the one of ``interrupt_id``, else the run's oldest pending.

    Args:
        pool: the Postgres pool.
        rid: the run's id.
        interrupt_id: the interrupt whose approval to show, when the page names one.

    Returns:
        The approval, or None when the run has none to show.
    """
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
        return f"reminder after {duration(d.get('waited_seconds'))} ({d.get('reason')})"
    if kind == "approval.sla_breached":
        return f"SLA of {duration(d.get('sla_seconds'))} passed"
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


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
