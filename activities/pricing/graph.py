"""The pricing orchestrator graph (seed 003 AC1, Task 1).

    START → router ─┬─ optimizer   → optimizer_worker     ─┐
                    ├─ policy      → policy_checker_worker ─┤
                    ├─ explainer   → explainer_worker      ─┤
                    ├─ sensitivity → sensitivity_worker    ─┼─→ router …
                    ├─ reporter    → reporter_worker       ─┘
                    ├─ approval    → approval_gate (interrupt → human) → END
                    └─ end         → END

The router follows the plan made from the ask (``router.build_plan``) one step per visit and
is bounded by ``max_iterations``. The graph runs as segments (``SegmentRunWorkflow``): from
the ask, or the sign-off, to the next interrupt or the end, LangGraph's own loop runs in one
heartbeating activity on its Postgres checkpointer, the router, the workers and the gate
inside it. ``reporter_worker``, which may stream a model's rewrite, leaves the segment as its
own activity with its own attempts and time-out.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from activities.pricing.router import next_route
from activities.pricing.state import PricingState
from overseer.plugin import node_retry_policy

GRAPH_NAME = "pricing"

STEP_NODES = {
    "optimizer": "optimizer_worker",
    "policy": "policy_checker_worker",
    "explainer": "explainer_worker",
    "sensitivity": "sensitivity_worker",
    "reporter": "reporter_worker",
    "approval": "approval_gate",
}
"""Plan step → node name (the seed's node names)."""

NODE_TOOLS = {
    "optimizer_worker": "optimize_price",
    "policy_checker_worker": "check_policy",
    "explainer_worker": "explain_decision",
    "sensitivity_worker": "sensitivity_analysis",
    "reporter_worker": "compose_report",
    "approval_gate": "request_approval",
}
"""Node → the tool it calls (the stream's ``tool_call`` name)."""

NON_RETRYABLE = ["invalid_request", "not_found", "llm_malformed_response"]

REPORTER_ATTEMPTS = node_retry_policy(NON_RETRYABLE).maximum_attempts
"""Attempts of the reporter's activity: a model error is reported by the node itself (its
template report), the rest are for database outages, which must not fail a run."""


def build_pricing_graph(*, for_temporal: bool = True) -> StateGraph[Any]:
    """Build (not compile) the pricing orchestrator graph.

    Args:
        for_temporal: give ``reporter_worker`` its own activity options (node metadata
            ``{"overseer": {...}}``, :class:`overseer.node_options.NodeOptions`); False gives a
            plain LangGraph graph (unit tests).

    Returns:
        A fresh ``StateGraph`` over :class:`PricingState`.
    """
    from activities.pricing import nodes

    reporter = {"overseer": {"run_in": "activity", "timeout_seconds": 300,
                             "heartbeat_seconds": 30, "max_attempts": REPORTER_ATTEMPTS,
                             "non_retryable": list(NON_RETRYABLE),
                             "summary": "compose analyst summary"}} if for_temporal else None
    graph = StateGraph(PricingState)
    graph.add_node("router", router)
    graph.add_node("optimizer_worker", nodes.optimizer_worker)
    graph.add_node("policy_checker_worker", nodes.policy_checker_worker)
    graph.add_node("explainer_worker", nodes.explainer_worker)
    graph.add_node("sensitivity_worker", nodes.sensitivity_worker)
    graph.add_node("reporter_worker", nodes.reporter_worker, metadata=reporter)
    graph.add_node("approval_gate", approval_gate)
    graph.add_edge(START, "router")
    graph.add_conditional_edges("router", route_after_router,
                                {**{n: n for n in STEP_NODES.values()}, "end": END})
    for step, node in STEP_NODES.items():
        if step != "approval":
            graph.add_edge(node, "router")
    graph.add_edge("approval_gate", END)
    return graph


async def router(state: PricingState) -> dict[str, Any]:
    """Node ``router`` (seed 003 router): pick the next plan step, bounded by max_iterations."""
    route, reason = next_route(dict(state))
    update: dict[str, Any] = {"route": route, "route_reason": reason}
    if route not in ("end", "approval"):
        update["iterations"] = int(state.get("iterations", 0)) + 1
    return update


async def route_after_router(state: PricingState) -> str:
    """Conditional edge: the node for the router's route (``end`` → END)."""
    route = state.get("route") or "end"
    return STEP_NODES.get(route, "end")


async def approval_gate(state: PricingState) -> dict[str, Any]:
    """Node ``approval_gate`` (seed 003 approval.py): pause the proposal for human sign-off.

    The interrupt payload is what the reviewer sees; the workflow resumes the graph with
    the gate's normalised decision ``{"decision", "updates", "decided_by", "note"}`` where
    ``updates`` are the reviewer's validated price edits ``{"<item_id>.<tier>": price}``.

    Returns:
        On approve: ``approved_prices``, status completed, outcome approved; on reject:
        status/outcome rejected.
    """
    decision = interrupt(approval_payload(state))
    steps = [*state.get("completed_steps", []), "approval"]
    if decision.get("decision") != "approve":
        return {"decision": decision, "status": "rejected", "outcome": "rejected",
                "completed_steps": steps}
    approved = {item: dict(prices) for item, prices in
                ((state.get("proposal") or {}).get("proposed_prices") or {}).items()}
    for key, price in (decision.get("updates") or {}).items():
        item, _, tier = key.rpartition(".")
        approved.setdefault(item, {})[tier] = float(price)
    return {"decision": decision, "approved_prices": approved,
            "status": "completed", "outcome": "approved", "completed_steps": steps}


def approval_payload(state: PricingState) -> dict[str, Any]:
    """What the approval request shows: the proposal, today's violations, the summary."""
    proposal = state.get("proposal") or {}
    policy = (state.get("outputs") or {}).get("policy") or {}
    changes = proposal.get("changes", {})
    return {
        "thread_id": state.get("run_id"),
        "kind": "pricing_proposal",
        "summary": state.get("report", ""),
        "changes": changes,
        "proposed_prices": proposal.get("proposed_prices", {}),
        "items_meta": proposal.get("items_meta", {}),
        "change_count": sum(len(v) for v in changes.values()),
        "uplift_pct": proposal.get("uplift_pct"),
        "objective": proposal.get("objective"),
        "violations_fixed": policy.get("violations_total", 0),
        "review_reason_codes": ["price_changes_need_sign_off"],
        "edit_format": "updates: {\"<item_id>.<tier>\": \"<price>\"}, checked against the policy",
    }
