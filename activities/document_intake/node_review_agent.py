"""Node ``review_agent`` of the document_intake graph and its inner subgraph.

It runs in an activity of its own (for its attempts) and invokes a plain LangGraph subgraph
with ``ainvoke`` (get_document → extract_text_region → infer_fields → propose_update): its
inner steps need no separate durability. A proposal is applied only when it holds.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from activities.document_intake.assess import assess_record
from activities.document_intake.llm_steps import extract_with_llm
from activities.document_intake.node_common import (
    entry_pages,
    evidence_dict,
    finish_step,
    page_texts,
    reread_agrees,
)
from activities.document_intake.pages import limits_from_options
from activities.document_intake.review import (
    proposal_from_llm,
    proposal_is_acceptable,
    propose_updates,
    quote_check_payload,
)
from activities.document_intake.schema import FieldSchema
from activities.document_intake.state import DocumentIntakeState
from overseer.plugin import (
    REVIEW_SUGGESTED,
    NewEvent,
    append_from_activity,
    get_runtime,
    llm_enabled,
    load_pages,
    temporal_errors,
)


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
    entry = entry_pages(page_texts(state["pages"]), state.get("span"))
    return {"region": [p.to_dict() for p in entry]}


async def infer_fields(state: ReviewAgentState) -> dict[str, Any]:
    """Seed §2.1 infer: propose values for missing or invalid fields, with evidence per field.

    With an LLM configured the model answers (each value with the line it quotes);
    otherwise the deterministic review rules look harder than extraction did.
    """
    schema = FieldSchema.model_validate(state["field_schema"])
    region = page_texts(state["region"])
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
            "evidence": {k: evidence_dict(v) for k, v in proposal.evidence.items()},
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
                reread_agrees=reread_agrees(state),
            ),
        )
        update["needs_review"] = False
    return await finish_step(state, "review_agent", update)
