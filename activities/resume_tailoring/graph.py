"""The resume_tailoring graph: a Command-based supervisor over phases (seed 001 §1–§6).

    START → supervisor ─┬─ input_processing_agent ─┐
                        ├─ format_strategy_agent  ─┤
                        ├─ resume_drafting_agent  ─┤  (repeats until draft_complete)
                        ├─ ats_optimization_agent ─┤
                        ├─ reflexion_agent        ─┼─→ supervisor …
                        ├─ human_review_agent     ─┤  (interrupt → approve / revise / reject)
                        ├─ finalization_agent     ─┘
                        └─ END

Routing (seed 001 §6, :func:`route`): initial → input processing → format strategy →
drafting (until ``draft_complete``) → ATS optimization → reflexion while ``ats_score <
target_ats_objective`` and revisions remain (and the score still moves) → drafting …; when
the target is met or revisions are spent: human review if ``human_review_enabled`` else
finalization; ``approved`` → finalization, ``revise`` → reflexion with the note,
``rejected`` → END, ``timeout`` / ``error`` → finalization; an unknown phase → END with
``error``. A model draft that breaks the honesty rule goes to reflexion with the
violations. Every agent returns to the supervisor.

The graph runs as segments (``SegmentRunWorkflow``): from the start, or a reviewer's
decision, to the next interrupt or the end, LangGraph's own loop runs in one heartbeating
activity on its Postgres checkpointer, so no node carries options of its own (a node with
options would leave the segment as its own activity). The Temporal Web UI names the nodes
each segment ran; docs/performance-history.md has the measurement that chose this.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from activities.resume_tailoring import nodes
from activities.resume_tailoring.state import (
    DEFAULT_MAX_REVISIONS,
    DEFAULT_TARGET_ATS,
    ResumeInputState,
    ResumeState,
)

GRAPH_NAME = "resume_tailoring"

AGENTS = ("input_processing_agent", "format_strategy_agent", "resume_drafting_agent",
          "ats_optimization_agent", "reflexion_agent", "human_review_agent",
          "finalization_agent")
"""The seed's agent nodes; each has an edge back to ``supervisor``."""

MAX_DRAFT_PASSES = 8
"""Safety bound on drafting visits for one draft (a drafter that never completes)."""


def build_resume_tailoring_graph() -> StateGraph[Any]:
    """Build (not compile) the resume_tailoring graph.

    Returns:
        A fresh ``StateGraph`` over :class:`ResumeState` whose input schema is
        :class:`ResumeInputState` (``base_resume``, ``job_description``, ``preferences``,
        ``run_id``, ``options``, ``metadata``).
    """
    graph = StateGraph(ResumeState, input_schema=ResumeInputState)
    graph.add_node("supervisor", supervisor, destinations=(*AGENTS, END))
    graph.add_node("input_processing_agent", nodes.input_processing_agent)
    graph.add_node("format_strategy_agent", nodes.format_strategy_agent)
    graph.add_node("resume_drafting_agent", nodes.resume_drafting_agent)
    graph.add_node("ats_optimization_agent", nodes.ats_optimization_agent)
    graph.add_node("reflexion_agent", nodes.reflexion_agent)
    graph.add_node("human_review_agent", human_review_agent)
    graph.add_node("finalization_agent", nodes.finalization_agent)
    graph.add_edge(START, "supervisor")
    for agent in AGENTS:
        graph.add_edge(agent, "supervisor")
    return graph


async def supervisor(state: ResumeState) -> Command[Any]:
    """Node ``supervisor`` (seed 001 §6): route by ``current_phase`` with ``Command``.

    Writes ``current_phase`` (the phase after the node it routes to), ``phase_history``,
    ``feedback_source``, ``draft_complete`` (reset for a new draft), ``revision_count``
    (incremented when reflexion sends drafting a new round) and ``error`` (unknown phase).
    """
    goto, update = route(state)
    phase = str(state.get("current_phase") or "initial")
    update["phase_history"] = [*(state.get("phase_history") or []), phase]
    return Command(goto=goto, update=update)


def route(state: ResumeState) -> tuple[str, dict[str, Any]]:
    """The routing table (pure): ``(next node or END, state update)``."""
    phase = state.get("current_phase") or "initial"
    revisions = int(state.get("revision_count") or 0)
    max_revisions = int(state.get("max_revisions", DEFAULT_MAX_REVISIONS))
    if phase == "initial":
        return "input_processing_agent", {"current_phase": "after_input_processing"}
    if phase == "after_input_processing":
        if state.get("error"):
            return END, {"current_phase": "failed"}
        return "format_strategy_agent", {"current_phase": "after_format_strategy"}
    if phase == "after_format_strategy":
        return "resume_drafting_agent", {"current_phase": "after_drafting",
                                         "draft_complete": False}
    if phase == "after_drafting":
        if not state.get("draft_complete"):
            if _drafting_visits(state) >= MAX_DRAFT_PASSES:
                return "finalization_agent", {"current_phase": "after_finalization",
                                              "error": "drafting did not complete"}
            return "resume_drafting_agent", {}
        if state.get("honesty_violations") and revisions < max_revisions:
            return "reflexion_agent", {"current_phase": "after_reflexion",
                                       "feedback_source": "honesty"}
        return "ats_optimization_agent", {"current_phase": "after_ats_optimization"}
    if phase == "after_ats_optimization":
        score = float(state.get("ats_score") or 0.0)
        target = float(state.get("target_ats_objective", DEFAULT_TARGET_ATS))
        # A redraft the reviewer asked for goes back to the reviewer, not round the ATS loop.
        human_round = state.get("feedback_source") == "human"
        if score < target and revisions < max_revisions and not human_round \
                and not _plateaued(state):
            return "reflexion_agent", {"current_phase": "after_reflexion",
                                       "feedback_source": "ats"}
        return _after_quality_gate(state)
    if phase == "after_reflexion":
        return "resume_drafting_agent", {"current_phase": "after_drafting",
                                         "draft_complete": False,
                                         "revision_count": revisions + 1}
    if phase == "after_human_review":
        decision = state.get("human_decision")
        if decision == "approved":
            return "finalization_agent", {"current_phase": "after_finalization"}
        if decision == "revise":
            if revisions >= max_revisions:
                # The gate refuses this (max_revisions_reached); if one slips through, ask again.
                return "human_review_agent", {"current_phase": "after_human_review",
                                              "error": "max_revisions reached; approve or reject"}
            return "reflexion_agent", {"current_phase": "after_reflexion",
                                       "feedback_source": "human"}
        if decision == "rejected":
            return END, {"current_phase": "rejected"}
        return "finalization_agent", {"current_phase": "after_finalization"}
    if phase in ("after_finalization", "rejected", "failed"):
        return END, {}
    return END, {"error": f"unknown phase: {phase}"}


async def human_review_agent(state: ResumeState) -> dict[str, Any]:
    """Node ``human_review_agent`` (seed 001 §3): stop for a reviewer with ``interrupt``.

    The payload (:func:`review_payload`) shows the draft, its ATS score and report, the
    diff against the base resume and the revision count. ``interrupt`` returns the
    runtime's decision ``{"decision": "approve"|"reject"|"revise", "note", "updates",
    "resume", "decided_by"}``; a decision taken by the escalation ladder
    (``decided_by == "escalation_policy"``) is the seed's ``timeout``, which finalizes
    with ``human_approved: false``.

    Writes ``human_decision``, ``human_feedback``, ``review_history``; clears ``error``.
    """
    answer = interrupt(review_payload(state))
    if not isinstance(answer, dict):
        answer = {"decision": str(answer)}
    raw = str(answer.get("decision") or "")
    decided_by = answer.get("decided_by")
    if decided_by == "escalation_policy":
        decision = "timeout"
    else:
        decision = DECISIONS.get(raw, "error")
    note = str(answer.get("note") or "").strip() or None
    history = [*(state.get("review_history") or []), {
        "revision": int(state.get("revision_count") or 0), "decision": raw,
        "human_decision": decision, "note": note, "decided_by": decided_by}]
    return {"human_decision": decision, "human_feedback": note, "review_history": history,
            "error": None}


DECISIONS = {"approve": "approved", "approved": "approved", "reject": "rejected",
             "rejected": "rejected", "revise": "revise", "timeout": "timeout", "error": "error"}
"""Gate decision → seed ``human_decision``."""


def review_payload(state: ResumeState) -> dict[str, Any]:
    """What the reviewer sees (JSON): draft, score, report, diff, revision count, options.

    ``revision`` and ``max_revisions`` are what
    :func:`activities.resume_tailoring.pipeline.check_decision` reads to refuse a
    ``revise`` once revisions are spent.
    """
    report = state.get("ats_optimization_report") or {}
    review = report.get("review") or {}
    revision = int(state.get("revision_count") or 0)
    max_revisions = int(state.get("max_revisions", DEFAULT_MAX_REVISIONS))
    keywords = report.get("keywords") or {}
    return {
        "kind": "resume_review",
        "revision": revision,
        "max_revisions": max_revisions,
        "revisions_left": max(0, max_revisions - revision),
        "decisions": ["approve", "reject"] + (["revise"] if revision < max_revisions else []),
        "ats_score": state.get("ats_score"),
        "target_ats_objective": state.get("target_ats_objective", DEFAULT_TARGET_ATS),
        "ats_score_before": (state.get("ats_report_before") or {}).get("score"),
        "ats_report": {k: report.get(k) for k in ("score", "components", "coverage_ceiling")},
        "keywords": {"matched": keywords.get("matched", []),
                     "missing": keywords.get("missing", []),
                     "evidenced": keywords.get("evidenced", []),
                     "gaps_not_added": keywords.get("gaps", [])},
        "draft": state.get("current_draft"),
        "markdown": review.get("markdown"),
        "diff": review.get("diff"),
        "change_log": state.get("change_log") or [],
        "declined_requests": [d for d in state.get("strategic_directives") or []
                              if d.get("kind") == "declined"],
        "strategy": state.get("strategy", "rules"),
        "note": state.get("error"),
    }


def _after_quality_gate(state: ResumeState) -> tuple[str, dict[str, Any]]:
    if state.get("human_review_enabled", True):
        return "human_review_agent", {"current_phase": "after_human_review"}
    return "finalization_agent", {"current_phase": "after_finalization"}


def _plateaued(state: ResumeState) -> bool:
    """The last reflexion round did not move the score (so another would not either)."""
    options = state.get("options") or {}
    if not options.get("stop_on_plateau", True):
        return False
    history = state.get("score_history") or []
    return len(history) >= 2 and abs(history[-1] - history[-2]) < 1e-4 and \
        state.get("feedback_source") == "ats"


def _drafting_visits(state: ResumeState) -> int:
    history = state.get("phase_history") or []
    count = 0
    for phase in reversed(history):
        if phase != "after_drafting":
            break
        count += 1
    return count
