"""The document_intake graph (seed 000 §1.4, with Phase 2's review agent and a human gate).

    START → run_pipeline → route_after_pipeline ─┬─ retry    → retry_extraction → route_after_pipeline …
                                                 ├─ review   → review_agent → complete | escalate
                                                 ├─ complete → complete → END
                                                 └─ escalate → escalate (interrupt → human) → END

The graph runs as segments (``SegmentRunWorkflow``): from the start, or a reviewer's
decision, to the next interrupt or the end, LangGraph's own loop runs in one heartbeating
activity on its Postgres checkpointer. ``run_pipeline`` (read, extract, validate, score;
and for a scan only calibration would complete, a 400 dpi re-read of its weak fields),
the routers, ``complete`` and ``escalate`` run inside the segment, so a text-layer form
that completes is one activity. ``retry_extraction`` and ``review_agent`` may call a model:
each leaves the segment as its own activity with its own attempts (a model error gets 3,
seed 002 R5.6; the rest are for database outages), time-out and a 4 s heartbeat.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from activities.document_intake.assess import assess_record
from activities.document_intake.assess import route_after_review as decide_after_review
from activities.document_intake.routing import RoutingThresholds
from activities.document_intake.routing import route_after_pipeline as _route
from activities.document_intake.schema import FieldSchema
from activities.document_intake.state import DocumentIntakeState

GRAPH_NAME = "document_intake"

NON_RETRYABLE = ["unreadable_document", "unsupported_media_type", "not_found",
                 "llm_malformed_response"]

MODEL_STEP_ATTEMPTS = 10
"""Attempts of a model-calling node's activity: a model error gets 3 (seed 002 R5.6: the
node reports the failure itself on the 3rd); the rest are for database outages, which
must not fail a run."""


def build_document_intake_graph(*, for_temporal: bool = True) -> StateGraph[Any]:
    """Build (not compile) the document_intake graph.

    Args:
        for_temporal: give the model-calling nodes their own activity options (node
            metadata ``{"overseer": {...}}``, :class:`overseer.node_options.NodeOptions`);
            False gives a plain LangGraph graph (baselines, unit tests).

    Returns:
        A fresh ``StateGraph`` over :class:`DocumentIntakeState`.
    """
    from activities.document_intake import node_retry_extraction, node_review_agent, node_run_pipeline

    def model_step(summary: str, *, minutes: float) -> dict[str, Any] | None:
        if not for_temporal:
            return None
        return {"overseer": {
            "run_in": "activity", "timeout_seconds": minutes * 60,
            "heartbeat_seconds": 4,  # recovery ≈ 4.4 s (docs/performance-history.md)
            "max_attempts": MODEL_STEP_ATTEMPTS,
            "non_retryable": list(NON_RETRYABLE), "summary": summary}}

    graph = StateGraph(DocumentIntakeState)
    graph.add_node("run_pipeline", node_run_pipeline.run_pipeline)
    graph.add_node("retry_extraction", node_retry_extraction.retry_extraction,
                   metadata=model_step("extract missing fields again", minutes=15))
    graph.add_node("review_agent", node_review_agent.review_agent,
                   metadata=model_step("review agent: propose updates", minutes=10))
    graph.add_node("complete", complete)
    graph.add_node("escalate", escalate)
    routes: dict[Hashable, str] = {"retry": "retry_extraction", "review": "review_agent",
                                   "complete": "complete", "escalate": "escalate"}
    graph.add_edge(START, "run_pipeline")
    graph.add_conditional_edges("run_pipeline", route_after_pipeline, routes)
    graph.add_conditional_edges("retry_extraction", route_after_pipeline, routes)
    graph.add_conditional_edges("review_agent", route_after_review,
                                {"complete": "complete", "escalate": "escalate"})
    graph.add_edge("complete", END)
    graph.add_edge("escalate", END)
    return graph


async def route_after_pipeline(state: DocumentIntakeState) -> str:
    """Conditional edge after run_pipeline / retry_extraction (seed 000 §1.3, thresholds from options).

    Before the seed's rules: a permanent model failure goes to a human. (A call the run's
    LLM budget cannot pay for stops the run in the node itself: the run's budget stop.)
    """
    if state.get("llm_failure"):
        return "escalate"
    thresholds = RoutingThresholds.from_dict(state.get("options", {}).get("thresholds", {}))
    return _route(state, thresholds)


async def route_after_review(state: DocumentIntakeState) -> str:
    """Conditional edge after review_agent: complete only when its proposal was applied."""
    return decide_after_review(dict(state))


async def complete(state: DocumentIntakeState) -> dict[str, Any]:
    """Node ``complete`` (seed save_complete_node): the record is final."""
    applied = bool((state.get("proposal") or {}).get("acceptable"))
    return {"status": "completed", "outcome": "auto_reviewed" if applied else "completed"}


async def escalate(state: DocumentIntakeState) -> dict[str, Any]:
    """Node ``escalate`` (seed mark_human_node): ask a human through ``interrupt()``.

    The interrupt payload is what a reviewer sees; the workflow resumes the graph with
    ``{"decision": "approve"|"reject", "updates": {...}, "decided_by", "note"}`` where
    ``updates`` already merges the proposal with the reviewer's validated edits.

    Returns:
        On approve: the updated, re-assessed record with ``status`` completed and
        ``outcome`` approved; on reject: ``status``/``outcome`` rejected.
    """
    decision = interrupt(approval_payload(state))
    if decision["decision"] != "approve":
        return {"status": "rejected", "outcome": "rejected", "decision": decision}
    schema = FieldSchema.model_validate(state["field_schema"])
    record = {**state.get("record", {}), **(decision.get("updates") or {})}
    report = state.get("report", {})
    assessment = assess_record(
        record, schema, ocr_confidence_avg=state.get("ocr_confidence_avg"),
        exact_text=report.get("text_source") in ("text_layer", "plain_text"),
        options=state["options"],
    )
    return {"record": record, **assessment, "needs_review": False, "status": "completed",
            "outcome": "approved", "decision": decision}


def approval_payload(state: DocumentIntakeState) -> dict[str, Any]:
    """What the approval request shows: current record, gaps, reasons and any proposal."""
    proposal = state.get("proposal") or None
    reasons = list(state.get("review_reason_codes", []))
    if state.get("last_route") == "escalate" and not proposal:
        reasons.append("escalated_by_router")
    if proposal and not proposal.get("acceptable"):
        reasons.append(f"proposal_{proposal.get('reason') or 'not_acceptable'}")
    return {
        "kind": "review",
        "record": state.get("record", {}),
        "missing_fields": state.get("missing_fields", []),
        "invalid_fields": state.get("invalid_fields", {}),
        "confidence": state.get("confidence"),
        "review_reason_codes": sorted(set(reasons)),
        "proposal": proposal,
        "evidence": state.get("evidence", {}),
    }
