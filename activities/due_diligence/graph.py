"""The due_diligence graph (seed 004): five agents in a fixed order, optional sign-off.

    START → ingestion → clause_extraction → risk_scoring → summary → checklist ─┬─ signoff → END
                                                                                 └─ END

``clause_extraction`` is a compiled subgraph (seed 004's custom clause graph):

    initial_search → validate_clauses ─┬─ retry    → retry_search → validate_clauses …
                                       └─ continue → deduplicate → score_confidence → END

Retry while ``not validation_passed and attempts < max_search_attempts`` (3). Routers are
plain sync functions. Plain LangGraph: nothing here imports Temporal. The graph runs as
segments (``SegmentRunWorkflow``): from the start to the sign-off's ``interrupt()`` (or the
end), LangGraph's loop runs in one heartbeating activity on its Postgres checkpointer, the
subgraph's nodes included, each with its own ``node.completed``; no node carries options
that would make it leave the segment (docs/performance-history.md has the measurement).
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from activities.due_diligence import nodes
from activities.due_diligence.state import DueDiligenceState

GRAPH_NAME = "due_diligence"
AGENTS: tuple[str, ...] = ("ingestion", "clause_extraction", "risk_scoring", "summary", "checklist")
"""The five agents in their fixed order (progress "n of 5")."""


def build_clause_extraction_graph() -> StateGraph[Any]:
    """Build (not compile) the clause-extraction subgraph over ``ClauseSearchState``."""
    graph = StateGraph(nodes.ClauseSearchState)
    graph.add_node("initial_search", nodes.initial_search)
    graph.add_node("validate_clauses", nodes.validate_clauses)
    graph.add_node("retry_search", nodes.retry_search)
    graph.add_node("deduplicate", nodes.deduplicate)
    graph.add_node("score_confidence", nodes.score_confidence)
    graph.add_edge(START, "initial_search")
    graph.add_edge("initial_search", "validate_clauses")
    graph.add_conditional_edges("validate_clauses", nodes.route_after_validation,
                                {"retry": "retry_search", "continue": "deduplicate"})
    graph.add_edge("retry_search", "validate_clauses")
    graph.add_edge("deduplicate", "score_confidence")
    graph.add_edge("score_confidence", END)
    return graph


def build_due_diligence_graph() -> StateGraph[Any]:
    """Build (not compile) the due_diligence graph; a fresh one on every call.

    Returns:
        A ``StateGraph`` over :class:`DueDiligenceState` whose ``clause_extraction`` node is
        the compiled :func:`build_clause_extraction_graph`.
    """
    graph = StateGraph(DueDiligenceState)
    graph.add_node("ingestion", nodes.ingestion)
    graph.add_node("clause_extraction", build_clause_extraction_graph().compile())
    graph.add_node("risk_scoring", nodes.risk_scoring)
    graph.add_node("summary", nodes.summary)
    graph.add_node("checklist", nodes.checklist)
    graph.add_node("signoff", signoff)
    graph.add_edge(START, "ingestion")
    for earlier, later in zip(AGENTS, AGENTS[1:], strict=False):
        graph.add_edge(earlier, later)
    graph.add_conditional_edges("checklist", route_after_checklist,
                                {"signoff": "signoff", "end": END})
    graph.add_edge("signoff", END)
    return graph


def route_after_checklist(state: DueDiligenceState) -> str:
    """Sign-off when ``options.require_signoff`` or ``metadata.require_signoff`` is set."""
    options = state.get("options") or {}
    metadata = state.get("metadata") or {}
    wanted = metadata.get("require_signoff", options.get("require_signoff", False))
    return "signoff" if _truthy(wanted) else "end"


async def signoff(state: DueDiligenceState) -> dict[str, Any]:
    """Node ``signoff``: a reviewer approves or rejects the findings via ``interrupt()``.

    The payload shows the overall risk, the risks, the summary and the checklist; the
    runtime resumes with ``{"decision", "note", "updates", "resume", "decided_by"}``.
    ``updates`` may carry ``checklist_notes`` (free text per checklist id), kept with the
    decision.
    """
    risks = state.get("risks") or {}
    decision = interrupt({
        "kind": "due_diligence_signoff",
        "filename": (state.get("document") or {}).get("filename"),
        "overall_risk": risks.get("overall"),
        "risk_counts": risks.get("counts"),
        "risks": risks.get("items", []),
        "summary": (state.get("summary") or {}).get("text"),
        "checklist": (state.get("checklist") or {}).get("items", []),
    })
    decision = dict(decision or {})
    record = {key: decision.get(key) for key in ("decision", "note", "decided_by", "updates")}
    status = "completed" if decision.get("decision") == "approve" else "rejected"
    return {"signoff": record, "status": status}


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
