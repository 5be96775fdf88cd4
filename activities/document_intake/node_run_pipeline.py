"""Node ``run_pipeline`` of the document_intake graph and its inner subgraph.

It runs in the run's segment activity and invokes a plain LangGraph subgraph with
``ainvoke`` (read, extract, validate, score, and for a scan only calibration would
complete, a re-read of its weak fields): its inner steps need no separate durability.
"""

from __future__ import annotations

import functools
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from activities.document_intake.assess import assess_record, fields_to_confirm
from activities.document_intake.confidence import field_ocr_confidences
from activities.document_intake.extract import extract_fields
from activities.document_intake.node_common import (
    entry_pages,
    evidence_dict,
    finish_step,
    page_texts,
    text_report,
)
from activities.document_intake.pages import limits_from_options, load_region_reread
from activities.document_intake.reread import read_region_fields
from activities.document_intake.routing import RoutingThresholds
from activities.document_intake.schema import FieldSchema
from activities.document_intake.state import DocumentIntakeState
from overseer.plugin import load_pages, temporal_errors


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
    entry = entry_pages(pages, state.get("span"))
    return {"pages": [p.to_dict() for p in entry], "report": text_report(entry)}


async def extract_record(state: PipelineState) -> dict[str, Any]:
    """Label-based field extraction (strict label matching first)."""
    schema = FieldSchema.model_validate(state["field_schema"])
    result = extract_fields(page_texts(state["pages"]), schema)
    return {
        "record": dict(result.values),
        "evidence": {k: evidence_dict(v) for k, v in result.evidence.items()},
        "rejected": dict(result.rejected),
    }


async def validate_and_score(state: PipelineState) -> dict[str, Any]:
    """Validation and seed §1.1 confidence."""
    schema = FieldSchema.model_validate(state["field_schema"])
    report = state["report"]
    field_conf = field_ocr_confidences(page_texts(state["pages"]), state["record"], state["evidence"])
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
    """Re-read the fields only calibration would let complete; trust agreement.

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
        state["document"], page_texts(state["pages"]), schema, extract=[], check=names,
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
    """The run_pipeline subgraph (seed §1.2, with the calibrated fields' confirmation).

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


@functools.cache
def _run_pipeline_graph() -> Any:
    """:func:`build_run_pipeline_graph` compiled once per process (it holds no run's state).

    Compiling it for every run cost ~7 % of the worker's CPU on a text-layer form.
    """
    return build_run_pipeline_graph().compile()


@temporal_errors
async def run_pipeline(state: DocumentIntakeState) -> dict[str, Any]:
    """Node ``run_pipeline`` (seed 000 §1.2 run_pipeline_node): read, extract, validate, score.

    A scanned record that would complete on calibrated confidence but not on Tesseract's raw
    numbers has its weak fields read again at the retry dpi first
    (:func:`confirm_calibrated_fields`): it completes only when they agree.

    Returns:
        State updates: record, evidence, report, confidence, missing/invalid fields,
        needs_review, review_reason_codes, tries + 1, tools_used + run_pipeline, strategy.

    Raises:
        ApplicationError: non-retryable ``unreadable_document`` for poison documents.
    """
    out = await _run_pipeline_graph().ainvoke(
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
    return await finish_step(state, "run_pipeline", update)
