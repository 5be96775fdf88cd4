"""Activity-side nodes of the document_intake graph and their inner subgraphs.

Each node here runs in the run's segment activity (``retry_extraction`` and ``review_agent``
in one of their own, for their attempts): ``run_pipeline`` and ``review_agent`` each invoke
a plain LangGraph subgraph with ``ainvoke`` because their inner steps need no separate
durability.
Each node appends its ``route.decided`` event with a step-derived id, so a retried
activity never duplicates it; the runtime appends ``node.completed`` with the run view
(the pipeline's ``node_snapshot``).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from activities.document_intake.assess import (
    MIN_FIELD_OCR_CONFIDENCE,
    assess_record,
    fields_to_confirm,
    route_after_review,
)
from activities.document_intake.batch import EntrySpan, slice_pages
from activities.document_intake.confidence import aggregate_ocr_confidence, field_ocr_confidences
from activities.document_intake.extract import extract_fields
from activities.document_intake.llm_steps import extract_with_llm
from activities.document_intake.pages import (
    limits_from_options,
    load_pages,
    load_region_reread,
)
from activities.document_intake.reread import RegionRead, read_region_fields
from activities.document_intake.review import (
    proposal_from_llm,
    proposal_is_acceptable,
    propose_updates,
    quote_check_payload,
)
from activities.document_intake.routing import (
    RoutingThresholds,
    explain_route,
    route_after_pipeline,
)
from activities.document_intake.schema import FieldSchema
from activities.document_intake.state import DocumentIntakeState
from activities.errors import temporal_errors
from activities.events import append_from_activity
from activities.llm import llm_enabled
from activities.runtime import get_runtime
from overseer.documents import PageText
from overseer.plugin import REVIEW_SUGGESTED, ROUTE_DECIDED, NewEvent

# --- run_pipeline -------------------------------------------------------------------------------


class PipelineState(TypedDict, total=False):
    """Inner state of the run_pipeline subgraph (load → text → extract → validate → score)."""

    document: dict[str, Any]
    span: dict[str, Any] | None
    field_schema: dict[str, Any]
    options: dict[str, Any]
    pages: list[dict[str, Any]]
    record: dict[str, str | None]
    evidence: dict[str, dict[str, Any]]
    rejected: dict[str, str]
    report: dict[str, Any]
    ocr_confidence_avg: float | None
    field_ocr_confidence: dict[str, float]
    assessment: dict[str, Any]


async def read_text(state: PipelineState) -> dict[str, Any]:
    """Text layer where present, Tesseract OCR where not (cached per page)."""
    options = state["options"]
    pages = await load_pages(
        state["document"], dpi=int(options["ocr_dpi"]), limits=limits_from_options(options)
    )
    entry = _entry_pages(pages, state.get("span"))
    return {"pages": [p.to_dict() for p in entry], "report": text_report(entry)}


async def extract_record(state: PipelineState) -> dict[str, Any]:
    """Label-based field extraction (strict label matching first)."""
    schema = FieldSchema.model_validate(state["field_schema"])
    result = extract_fields(_pages(state["pages"]), schema)
    return {
        "record": dict(result.values),
        "evidence": {k: _evidence_dict(v) for k, v in result.evidence.items()},
        "rejected": dict(result.rejected),
    }


async def validate_and_score(state: PipelineState) -> dict[str, Any]:
    """Validation and seed §1.1 confidence."""
    schema = FieldSchema.model_validate(state["field_schema"])
    report = state["report"]
    field_conf = field_ocr_confidences(_pages(state["pages"]), state["record"], state["evidence"])
    assessment = assess_record(
        state["record"],
        schema,
        ocr_confidence_avg=report["ocr_confidence_avg"],
        exact_text=report["text_source"] in ("text_layer", "plain_text"),
        options=state["options"],
        field_confidences=field_conf,
    )
    return {"assessment": assessment, "ocr_confidence_avg": report["ocr_confidence_avg"],
            "field_ocr_confidence": field_conf}


async def confirm_calibrated_fields(state: PipelineState) -> dict[str, Any]:
    """Issue 28 item 3: re-read the fields only calibration would let complete; trust agreement.

    Runs when the record would complete on calibrated confidence but not on Tesseract's raw
    numbers (``assess.fields_to_confirm``). Those fields' lines are OCR'd again at the retry
    dpi (``reread.reread_regions``, as the offline retry does); a field whose second reading
    extracts the same value counts its calibrated confidence, any other keeps its raw one.
    A field read differently gets ``reread_disagrees_<field>`` and the record needs review.
    ``report["calibration_reread"]`` records the regions and the comparisons.
    """
    schema = FieldSchema.model_validate(state["field_schema"])
    options = state["options"]
    names = _to_confirm(state)
    record = state["record"]
    limits = limits_from_options(options)
    region = await load_region_reread(
        state["document"], _pages(state["pages"]), schema, extract=[], check=names,
        evidence=state["evidence"], dpi=int(options["retry_ocr_dpi"]), limits=limits,
    )
    checks: dict[str, dict[str, Any]] = {
        name: {"first": record.get(name), "reread": None, "agrees": None} for name in names}
    if region is not None:
        checks.update(read_region_fields(region, schema, record, extract=(), check=names)[1])
    agreed = sorted(name for name, check in checks.items() if check["agrees"] is True)
    differs = sorted(name for name, check in checks.items() if check["agrees"] is False)
    report = state["report"]
    assessment = assess_record(
        record, schema, ocr_confidence_avg=report["ocr_confidence_avg"],
        exact_text=report["text_source"] in ("text_layer", "plain_text"), options=options,
        field_confidences=state["field_ocr_confidence"], reread_agrees=agreed,
    )
    if differs:
        # Two readings of a value disagree: which is right is for a person to say.
        assessment["review_reason_codes"] = sorted({
            *assessment["review_reason_codes"], *(f"reread_disagrees_{n}" for n in differs)})
        assessment["needs_review"] = True
    return {"assessment": assessment, "report": {**report, "calibration_reread": {
        "dpi": int(options["retry_ocr_dpi"]), "checks": checks,
        "regions": [r.to_dict() for r in region.regions] if region is not None else [],
    }}}


def _to_confirm(state: PipelineState) -> list[str]:
    """Fields :func:`confirm_calibrated_fields` must re-read (none for a batch entry)."""
    if state.get("span"):
        return []  # a batch entry's fields are not placed on its page's slice; no re-read
    thresholds = RoutingThresholds.from_dict(state["options"].get("thresholds", {}))
    return fields_to_confirm(state["assessment"], thresholds.complete_confidence)


def _after_score(state: PipelineState) -> str:
    return "confirm_calibrated_fields" if _to_confirm(state) else END


def build_run_pipeline_graph() -> StateGraph[Any]:
    """The run_pipeline subgraph (seed §1.2, with issue 28 item 3's confirmation).

    read_text → extract_record → validate_and_score → [confirm_calibrated_fields, only for a
    record calibration alone would complete] → END.
    """
    graph = StateGraph(PipelineState)
    graph.add_node("read_text", read_text)
    graph.add_node("extract_record", extract_record)
    graph.add_node("validate_and_score", validate_and_score)
    graph.add_node("confirm_calibrated_fields", confirm_calibrated_fields)
    graph.add_edge(START, "read_text")
    graph.add_edge("read_text", "extract_record")
    graph.add_edge("extract_record", "validate_and_score")
    graph.add_conditional_edges("validate_and_score", _after_score,
                                ["confirm_calibrated_fields", END])
    graph.add_edge("confirm_calibrated_fields", END)
    return graph


@temporal_errors
async def run_pipeline(state: DocumentIntakeState) -> dict[str, Any]:
    """Node ``run_pipeline`` (seed 000 §1.2 run_pipeline_node): read, extract, validate, score.

    A scanned record that would complete on calibrated confidence but not on Tesseract's raw
    numbers has its weak fields read again at the retry dpi first
    (:func:`confirm_calibrated_fields`, issue 28 item 3): it completes only when they agree.

    Returns:
        State updates: record, evidence, report, confidence, missing/invalid fields,
        needs_review, review_reason_codes, tries + 1, tools_used + run_pipeline, strategy.

    Raises:
        ApplicationError: non-retryable ``unreadable_document`` for poison documents.
    """
    inner = build_run_pipeline_graph().compile()
    out = await inner.ainvoke(
        {k: state.get(k) for k in ("document", "span", "field_schema", "options")}
    )
    update: dict[str, Any] = {
        "record": out["record"],
        "evidence": out["evidence"],
        "report": out["report"],
        "ocr_confidence_avg": out["ocr_confidence_avg"],
        "field_ocr_confidence": out["field_ocr_confidence"],
        **out["assessment"],
        "tries": state.get("tries", 0) + 1,
        "tools_used": [*state.get("tools_used", []), "run_pipeline"],
        "strategy": "rules",
    }
    return await _finish_step(state, "run_pipeline", update)


# --- retry_extraction ---------------------------------------------------------------------------


@temporal_errors
async def retry_extraction(state: DocumentIntakeState) -> dict[str, Any]:
    """Node ``retry_extraction`` (seed 000 §1.2 retry_llm_node): extract only the missing fields.

    With an LLM configured it asks the model for the missing fields (JSON-validated);
    without one it runs a stronger deterministic pass: the OCR'd pages again at a higher
    dpi, then relaxed label matching, and records ``strategy: rules``. A value is only
    taken when it validates; present fields are never overwritten.

    With ``options["retry_ocr_region"]`` (``OVERSEER_RETRY_OCR_REGION``, default on) the higher dpi
    reads only a band of lines around each doubtful field (``reread.reread_regions``):
    missing and invalid fields to read again, and present fields read weakly (below
    ``min_field_ocr_confidence``, or with an ``ocr_confusion_*`` reason) to read again and
    compare. A kept value whose re-read differs gets ``reread_disagrees_<field>`` and the
    record needs review. When a field to read cannot be placed the whole pages are read
    again, as without the option. ``report["retry_ocr"]`` records which (``mode``
    ``region`` or ``page``), the regions and the comparisons. A region read leaves
    ``ocr_confidence_avg`` at the first reading's (a band's average is not the page's);
    the page read takes the higher of the two page averages.

    A permanent model failure (refusal, other 4xx, malformed JSON, or the last attempt
    of a transient one) is recorded as ``llm_failure`` and sends the run to a human; a
    call over the run's budget stops the run there (:class:`overseer.budget.BudgetStop`).

    Raises:
        ApplicationError: non-retryable ``unreadable_document``; transient model errors
            propagate before the last attempt so Temporal retries with backoff.
    """
    schema = FieldSchema.model_validate(state["field_schema"])
    options = state["options"]
    wanted = sorted(set(state.get("missing_fields", [])) | set(state.get("invalid_fields", {})))
    report = dict(state["report"])
    ocr_avg = state.get("ocr_confidence_avg")
    field_conf = dict(state.get("field_ocr_confidence", {}))
    step = len(state.get("tools_used", [])) + 1
    found: dict[str, str | None]
    evidence: dict[str, dict[str, Any]] = {}
    extra: dict[str, Any] = {}
    if llm_enabled(get_runtime().settings):
        pages = await load_pages(state["document"], dpi=int(options["ocr_dpi"]))
        entry = _entry_pages(pages, state.get("span"))
        asked = await extract_with_llm(dict(state), entry, wanted, schema,
                                       node="retry_extraction", step=step)
        found = dict(asked.values)
        evidence = {k: _evidence_dict(v) for k, v in asked.evidence.items()}
        strategy = asked.strategy
        extra = {"llm_quote_checks": asked.quote_checks}
        if asked.failure:
            extra["llm_failure"] = asked.failure
    else:
        force = report.get("ocr_pages", 0) > 0
        region, weak = None, _weak_fields(state, wanted)
        if force and options["retry_ocr_region"] and not state.get("span"):
            region = await _reread_regions(state, schema, wanted, weak)
        if region is not None:
            found, evidence, checks = _take_region_reading(
                state["record"], schema, region, wanted, weak)
            field_conf.update(field_ocr_confidences(region.pages, found, evidence))
            report = {**report, "retry_ocr": {
                "mode": "region", "dpi": int(options["retry_ocr_dpi"]),
                "regions": [r.to_dict() for r in region.regions], "checks": checks,
            }}
            extra["reread_disagreements"] = sorted(
                name for name, check in checks.items() if check.get("agrees") is False)
        else:
            pages = await load_pages(
                state["document"],
                dpi=int(options["retry_ocr_dpi"] if force else options["ocr_dpi"]),
                force_ocr=force,
                limits=limits_from_options(options),
            )
            entry = _entry_pages(pages, state.get("span"))
            result = extract_fields(entry, schema, relaxed=True, only=wanted)
            found = {k: v for k, v in result.values.items() if v is not None}
            evidence = {k: _evidence_dict(v) for k, v in result.evidence.items() if k in found}
            field_conf.update(field_ocr_confidences(entry, found, evidence))
            if force:
                new_report = text_report(entry)
                report = {**report, "retry_ocr_confidence_avg": new_report["ocr_confidence_avg"],
                          "retry_ocr": {"mode": "page", "dpi": int(options["retry_ocr_dpi"])}}
                if new_report["ocr_confidence_avg"] is not None:
                    ocr_avg = max(ocr_avg or 0.0, new_report["ocr_confidence_avg"])
        strategy = "rules"
    record = {**state["record"], **found}
    assessment = assess_record(
        record, schema, ocr_confidence_avg=ocr_avg,
        exact_text=report["text_source"] in ("text_layer", "plain_text"), options=options,
        field_confidences=field_conf, reread_agrees=_reread_agrees(state),
    )
    if extra.get("llm_failure"):
        assessment["review_reason_codes"] = sorted({*assessment["review_reason_codes"],
                                                   extra["llm_failure"]})
    disagreements = extra.pop("reread_disagreements", [])
    if disagreements:
        # The 400 dpi reading of a kept value differs from the 300 dpi one: which is right is
        # for a person to say, whatever the confidence.
        assessment["review_reason_codes"] = sorted({
            *assessment["review_reason_codes"], *(f"reread_disagrees_{n}" for n in disagreements)})
        assessment["needs_review"] = True
    update = {
        "record": record,
        "evidence": {**state.get("evidence", {}), **evidence},
        "report": report,
        "ocr_confidence_avg": ocr_avg,
        "field_ocr_confidence": field_conf,
        **extra,
        **assessment,
        "tries": state.get("tries", 0) + 1,
        "tools_used": [*state.get("tools_used", []), "retry_extraction"],
        "strategy": strategy,
    }
    return await _finish_step(state, "retry_extraction", update)


async def _reread_regions(
    state: DocumentIntakeState, schema: FieldSchema, wanted: list[str], weak: list[str]
) -> RegionRead | None:
    """The doubtful fields' regions at the retry dpi, or None to re-read whole pages."""
    options = state["options"]
    limits = limits_from_options(options)
    pages = await load_pages(state["document"], dpi=int(options["ocr_dpi"]), limits=limits)
    return await load_region_reread(
        state["document"], pages, schema, extract=wanted,
        check=weak, evidence=dict(state.get("evidence", {})),
        dpi=int(options["retry_ocr_dpi"]), limits=limits,
    )


def _weak_fields(state: DocumentIntakeState, wanted: list[str]) -> list[str]:
    """Present fields read weakly at the first dpi: below the per-field floor or confusable."""
    floor = float(state["options"].get("min_field_ocr_confidence", MIN_FIELD_OCR_CONFIDENCE))
    record = state["record"]
    codes = set(state.get("review_reason_codes", []))
    return sorted(
        name for name, value in record.items()
        if value is not None and name not in wanted
        and (state.get("field_ocr_confidence", {}).get(name, 1.0) < floor
             or f"ocr_confusion_{name}" in codes)
    )


def _take_region_reading(
    record: dict[str, str | None], schema: FieldSchema, region: RegionRead, wanted: list[str],
    weak: list[str],
) -> tuple[dict[str, str | None], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Values for ``wanted`` from the regions, and the comparison of the weak fields.

    Returns:
        ``(found, evidence, checks)``: valid values for wanted fields with their evidence
        (the region's exact line, the page number and the region's rows at the retry dpi);
        per re-read field ``{"first": value at the first dpi or None, "reread": value or
        None, "agrees": bool or None (nothing to compare)}``.
    """
    result, checks = read_region_fields(region, schema, record, extract=wanted, check=weak)
    found: dict[str, str | None] = {}
    evidence: dict[str, dict[str, Any]] = {}
    for name in wanted:
        value = result.values.get(name)
        if name in checks and value is not None:
            found[name] = value
            evidence[name] = {**_evidence_dict(result.evidence[name]),
                              "region": _region_of(region, name)}
    return found, evidence, checks


def _region_of(region: RegionRead, name: str) -> dict[str, Any] | None:
    band = next((r for r in region.regions if name in r.fields), None)
    return band.to_dict() if band else None


# --- review_agent -------------------------------------------------------------------------------


class ReviewAgentState(TypedDict, total=False):
    """Inner state of the review agent subgraph (seed 000 §2.1 ReviewAgentState)."""

    run_id: str
    step: int
    document: dict[str, Any]
    span: dict[str, Any] | None
    field_schema: dict[str, Any]
    options: dict[str, Any]
    record: dict[str, str | None]
    missing_fields: list[str]
    pages: list[dict[str, Any]]
    region: list[dict[str, Any]]
    proposal: dict[str, Any]
    failure: str | None
    success: bool


async def get_document(state: ReviewAgentState) -> dict[str, Any]:
    """Seed §2.1 get_pdf: the stored document's pages (from the page cache)."""
    options = state["options"]
    pages = await load_pages(
        state["document"], dpi=int(options["ocr_dpi"]), limits=limits_from_options(options)
    )
    return {"pages": [p.to_dict() for p in pages]}


async def extract_text_region(state: ReviewAgentState) -> dict[str, Any]:
    """Seed §2.1 extract_text_region: the entry's own pages (page-level regions)."""
    entry = _entry_pages(_pages(state["pages"]), state.get("span"))
    return {"region": [p.to_dict() for p in entry]}


async def infer_fields(state: ReviewAgentState) -> dict[str, Any]:
    """Seed §2.1 infer: propose values for missing or invalid fields, with evidence per field.

    With an LLM configured the model answers (each value with the line it quotes);
    otherwise the deterministic review rules look harder than extraction did.
    """
    schema = FieldSchema.model_validate(state["field_schema"])
    region = _pages(state["region"])
    failure = None
    if llm_enabled(get_runtime().settings):
        asked = await extract_with_llm(dict(state), region, state["missing_fields"], schema,
                                       node="review_agent", step=state["step"])
        failure = asked.failure
        proposal = proposal_from_llm(asked)
    else:
        proposal = propose_updates(region, state["record"], state["missing_fields"], schema)
    acceptable, reason = proposal_is_acceptable(
        proposal, state["record"], schema,
        min_evidence_score=float(state["options"]["review_min_evidence_score"]),
    )
    if failure:
        acceptable, reason = False, failure
    return {
        "failure": failure,
        "proposal": {
            "suggestion_id": str(uuid.uuid5(uuid.UUID(state["run_id"]), f"suggestion:{state['step']}")),
            "updates": dict(proposal.updates),
            "evidence": {k: _evidence_dict(v) for k, v in proposal.evidence.items()},
            "strength": float(proposal.strength),
            "strategy": proposal.strategy,
            "acceptable": acceptable,
            "reason": reason,
            **quote_check_payload(proposal),
        }
    }


def _after_infer(state: ReviewAgentState) -> str:
    return END if state.get("blocked") else "propose_update"


async def propose_update(state: ReviewAgentState) -> dict[str, Any]:
    """Seed §2.1 propose_update: write the review suggestion (event + read model)."""
    proposal = state["proposal"]
    if proposal["updates"] or proposal.get("suggestions"):
        await append_from_activity([
            NewEvent(
                run_id=state["run_id"],
                key=f"review.suggested:{state['step']}",
                type=REVIEW_SUGGESTED,
                actor="activity:review_agent",
                data={
                    "suggestion_id": proposal["suggestion_id"],
                    "current_values": {k: state["record"].get(k) for k in proposal["updates"]},
                    "proposed_updates": proposal["updates"],
                    "evidence": proposal["evidence"],
                    "strength": proposal["strength"],
                    "strategy": proposal["strategy"],
                    "auto_applied": proposal["acceptable"],
                    "reason": proposal["reason"],
                    "quote_verified": proposal.get("quote_verified", {}),
                    "suggestions": proposal.get("suggestions", {}),
                    "notes": proposal.get("notes", {}),
                    "unverified_fields": proposal.get("unverified_fields", []),
                },
            )
        ])
    return {"success": bool(proposal["acceptable"])}


def build_review_agent_graph() -> StateGraph[Any]:
    """Seed §2.1 review agent: get_document → extract_text_region → infer_fields → propose_update."""
    graph = StateGraph(ReviewAgentState)
    graph.add_node("get_document", get_document)
    graph.add_node("extract_text_region", extract_text_region)
    graph.add_node("infer_fields", infer_fields)
    graph.add_node("propose_update", propose_update)
    graph.add_edge(START, "get_document")
    graph.add_edge("get_document", "extract_text_region")
    graph.add_edge("extract_text_region", "infer_fields")
    graph.add_conditional_edges("infer_fields", _after_infer, ["propose_update", END])
    graph.add_edge("propose_update", END)
    return graph


@temporal_errors
async def review_agent(state: DocumentIntakeState) -> dict[str, Any]:
    """Node ``review_agent`` (seed 000 §2.2): propose updates; apply them only when they hold.

    Unlike the seed's edge to save_complete, a proposal is applied (and the run
    completes) only when the merged record validates and every proposed value's
    evidence is strong enough; otherwise the proposal goes to a human with the run.
    """
    tools = [*state.get("tools_used", []), "review_agent"]
    inner = build_review_agent_graph().compile()
    wanted = sorted(set(state.get("missing_fields", [])) | set(state.get("invalid_fields", {})))
    out = await inner.ainvoke({
        "run_id": state["run_id"], "step": len(tools), "document": state["document"],
        "span": state.get("span"), "field_schema": state["field_schema"],
        "options": state["options"], "record": state["record"], "missing_fields": wanted,
    })
    proposal = out["proposal"]
    update: dict[str, Any] = {"tools_used": tools, "proposal": proposal}
    if out.get("failure"):
        update["llm_failure"] = out["failure"]
        update["review_reason_codes"] = sorted({*state.get("review_reason_codes", []),
                                               out["failure"]})
    if out["success"]:
        schema = FieldSchema.model_validate(state["field_schema"])
        record = {**state["record"], **proposal["updates"]}
        report = state["report"]
        field_conf = {k: v for k, v in state.get("field_ocr_confidence", {}).items()
                      if k not in proposal["updates"]}
        update.update(
            record=record,
            evidence={**state.get("evidence", {}), **proposal["evidence"]},
            field_ocr_confidence=field_conf,
            **assess_record(
                record, schema, ocr_confidence_avg=state.get("ocr_confidence_avg"),
                exact_text=report["text_source"] in ("text_layer", "plain_text"),
                options=state["options"], field_confidences=field_conf,
                reread_agrees=_reread_agrees(state),
            ),
        )
        update["needs_review"] = False
    return await _finish_step(state, "review_agent", update)


# --- helpers ------------------------------------------------------------------------------------


def text_report(pages: list[PageText]) -> dict[str, Any]:
    """Where the text came from.

    Returns:
        ``{text_source, page_count, ocr_pages, coverage_min, ocr_confidence_avg}``.
    """
    sources = {p.source for p in pages}
    ocr = [p for p in pages if p.source == "ocr"]
    coverages = [p.coverage for p in ocr if p.coverage is not None]
    return {
        "text_source": sources.pop() if len(sources) == 1 else "mixed",
        "page_count": len(pages),
        "ocr_pages": len(ocr),
        "coverage_min": min(coverages) if coverages else None,
        "ocr_confidence_avg": aggregate_ocr_confidence(pages),
    }


async def _finish_step(state: DocumentIntakeState, node: str, update: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {**state, **update}
    if node == "review_agent":
        route = route_after_review(merged)
        reason = "proposal_applied" if route == "complete" else (
            (merged.get("proposal") or {}).get("reason") or "no_proposal"
        )
    else:
        thresholds = RoutingThresholds.from_dict(merged["options"].get("thresholds", {}))
        route = route_after_pipeline(merged, thresholds)
        reason = explain_route(merged, thresholds)
    update["last_route"] = route
    merged["last_route"] = route
    step = len(merged.get("tools_used", []))
    await append_from_activity([
        NewEvent(
            run_id=state["run_id"], key=f"route.decided:{step}", type=ROUTE_DECIDED,
            actor=f"activity:{node}",
            data={
                "after": node, "route": route, "reason": reason,
                "confidence": merged.get("confidence"), "tries": merged.get("tries"),
                "missing_fields": merged.get("missing_fields", []),
            },
        ),
    ])
    return update


def _reread_agrees(state: DocumentIntakeState) -> list[str]:
    """Fields run_pipeline's second reading confirmed (their values are never overwritten)."""
    return list((state.get("scan_calibration") or {}).get("reread_agrees", []))


def _entry_pages(pages: list[PageText], span: dict[str, Any] | None) -> list[PageText]:
    """The entry's part of each page (batch children); words and confidences stay the page's."""
    if not span:
        return pages
    by_number = {p.page_number: p for p in pages}
    return [dataclasses.replace(by_number[part.page_number], text=part.text)
            for part in slice_pages(pages, EntrySpan(**span))]


def _pages(dicts: list[dict[str, Any]]) -> list[PageText]:
    return [PageText.from_dict(d) for d in dicts]


def _evidence_dict(evidence: Any) -> dict[str, Any]:
    return {
        "page_number": evidence.page_number, "snippet": evidence.snippet,
        "label": evidence.label, "method": evidence.method, "score": float(evidence.score),
    }
