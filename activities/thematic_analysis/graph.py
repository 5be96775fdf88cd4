"""The thematic_analysis graph (seed 002 R3 long-term flow, R7 routing).

    START → load_dataset ─┬─ Send(coder, identity) × N ─→ code_aggregator → reviewer
                          └─ (empty window) ─────────────→ code_aggregator
    reviewer ─┬─ (review_codebook and codes) → codebook_review (interrupt → human) ─┐
              └──────────────────────────────────────────────────────────────────────┤
              ┌──────────────────────────────────────────────────────────────────────┘
              ├─ (codes, not rejected) → Send(theme_coder, identity) × N → theme_aggregator → finish
              └─ (0 codes or rejected) ──────────────────────────────────────────────────→ finish → END

Plain LangGraph: no Temporal import. The graph runs as segments (``SegmentRunWorkflow``;
docs/performance-history.md has the measurement): LangGraph's loop in one heartbeating activity per
stretch. Only ``coder`` and ``theme_coder`` carry node options (``{"overseer": {...}}``, see
:class:`overseer.node_options.NodeOptions`), so each fan-out's superstep leaves the segment as
one activity of its own with their time-out, heartbeat and attempts (the N coders run
together in it); the other nodes, the ``codebook_review`` interrupt and ``finish`` (it
reads the clock: inside an activity) run inside segments. The step allows
:data:`~activities.thematic_analysis.options.MAX_MODEL_ATTEMPTS` attempts and each coder's
model call stops at the run's ``llm_max_attempts`` (default 3, counted per call from the
ledger; seed R5.6: model retries with backoff are Temporal's), then that coder uses its
rules, so the option never outgrows the retry policy and a coder never fails the run; a
retry runs only the coders that have not finished (LangGraph keeps the others' writes).
Routers are sync and pure.
Build a fresh graph per registration.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send, interrupt

from activities.thematic_analysis import nodes
from activities.thematic_analysis.coding import apply_edits, validate_edits
from activities.thematic_analysis.options import MAX_MODEL_ATTEMPTS
from activities.thematic_analysis.state import ThematicState

GRAPH_NAME = "thematic_analysis"

NON_RETRYABLE = ["invalid_dataset", "invalid_identities", "not_found", "coding_failed",
                 "theme_stage_failed", "llm_malformed_response"]

EDIT_FORMAT = ('updates: {"merge": [["<code_id>", "<code_id>", ...]], '
               '"rename": {"<code_id>": "<new label>"}, "delete": ["<code_id>"]}')


def _meta(**overseer: Any) -> dict[str, Any]:
    return {"overseer": {"non_retryable": NON_RETRYABLE, **overseer}}


def build_thematic_analysis_graph() -> StateGraph[Any]:
    """Build (not compile) the thematic_analysis graph.

    Returns:
        A fresh ``StateGraph`` over :class:`ThematicState`; compile it with any checkpointer
        (the interrupt of ``codebook_review`` needs one).
    """
    # The nodes take plain dicts; LangGraph's typing wants each node typed with the state.
    graph: Any = StateGraph(ThematicState)
    graph.add_node("load_dataset", nodes.load_dataset)
    graph.add_node("coder", nodes.coder,
                   metadata=_meta(timeout_seconds=600, heartbeat_seconds=30, max_attempts=MAX_MODEL_ATTEMPTS,
                                  summary="coders: code the window, one per identity"))
    graph.add_node("code_aggregator", nodes.code_aggregator)
    graph.add_node("reviewer", nodes.reviewer)
    graph.add_node("codebook_review", codebook_review)
    graph.add_node("theme_coder", nodes.theme_coder,
                   metadata=_meta(timeout_seconds=600, heartbeat_seconds=30, max_attempts=MAX_MODEL_ATTEMPTS,
                                  summary="theme coders: group the codes, one per identity"))
    graph.add_node("theme_aggregator", nodes.theme_aggregator)
    graph.add_node("finish", nodes.finish)
    graph.add_edge(START, "load_dataset")
    graph.add_conditional_edges("load_dataset", fan_out_coders, ["coder", "code_aggregator"])
    graph.add_edge("coder", "code_aggregator")
    graph.add_edge("code_aggregator", "reviewer")
    graph.add_conditional_edges("reviewer", route_after_reviewer,
                                ["codebook_review", "theme_coder", "finish"])
    graph.add_conditional_edges("codebook_review", fan_out_theme_coders, ["theme_coder", "finish"])
    graph.add_edge("theme_coder", "theme_aggregator")
    graph.add_edge("theme_aggregator", "finish")
    graph.add_edge("finish", END)
    built: StateGraph[Any] = graph
    return built


def fan_out_coders(state: ThematicState) -> list[Send] | str:
    """Edge after load_dataset (R3.1): one ``Send`` per identity; an empty window skips coding."""
    if not (state.get("dataset") or {}).get("sentences"):
        return "code_aggregator"
    return [Send("coder", _coder_input(state, identity)) for identity in state.get("identities", [])]


def route_after_reviewer(state: ThematicState) -> list[Send] | str:
    """Edge after reviewer (R3.4, R7.1, R7.2): human codebook review if asked, else themes or finish."""
    if state.get("codebook") and (state.get("metadata") or {}).get("review_codebook"):
        return "codebook_review"
    return fan_out_theme_coders(state)


def fan_out_theme_coders(state: ThematicState) -> list[Send] | str:
    """Themes per identity (R3.5) when there are codes and the codebook was not rejected."""
    rejected = (state.get("codebook_decision") or {}).get("decision") == "reject"
    if rejected or not state.get("codebook"):
        return "finish"
    codebook = state["codebook"]
    return [Send("theme_coder", {**_coder_input(state, identity), "codebook": codebook})
            for identity in state.get("identities", [])]


async def codebook_review(state: ThematicState) -> dict[str, Any]:
    """Node ``codebook_review``: a reviewer approves (with optional edits) or rejects the codebook.

    The interrupt payload (``kind: codebook_review``) is the codebook with each code's id,
    label, definition, count, identities and up to five quote ids (text through the quotes
    endpoint). ``interrupt()`` returns ``{"decision", "note", "updates", "resume",
    "decided_by"}``; ``updates`` are :class:`~activities.thematic_analysis.coding.CodebookEdits`,
    already checked by ``check_decision`` and re-checked here (pure).

    Returns:
        On approve: the edited ``codebook`` and ``codebook_decision``; on reject: only
        ``codebook_decision`` (the run finishes without themes, status ``rejected``).
    """
    codebook = state.get("codebook") or []
    decision = interrupt(codebook_payload(state))
    recorded = {k: decision.get(k) for k in ("decision", "note", "updates", "decided_by")}
    if decision.get("decision") != "approve":
        return {"codebook_decision": recorded}
    edits = validate_edits(codebook, decision.get("updates") or {})
    return {"codebook": apply_edits(codebook, edits) if not edits.empty else codebook,
            "codebook_decision": recorded}


def codebook_payload(state: ThematicState) -> dict[str, Any]:
    """What the codebook approval shows (JSON; quote ids only, never text)."""
    return {
        "kind": "codebook_review",
        "analysis_id": state.get("run_id"),
        "account_id": state.get("account_id"),
        "window": {k: (state.get("dataset") or {}).get(k) for k in ("start_date", "end_date")},
        "codebook": [{"code_id": c["code_id"], "label": c["label"],
                      "definition": c.get("definition", ""), "count": c["count"],
                      "identities": c.get("identities", []), "quote_ids": c["quote_ids"][:5]}
                     for c in state.get("codebook") or []],
        "review_reason_codes": ["codebook_review_requested"],
        "edit_format": EDIT_FORMAT,
    }


def _coder_input(state: ThematicState, identity: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": state.get("run_id", ""), "identity": identity,
            "dataset": state.get("dataset", {}), "options": state.get("options", {}),
            "metadata": state.get("metadata", {})}
