"""resume_tailoring supervisor: the seed 001 §6 routing table, bounded loops, review on/off."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END
from langgraph.types import Command

from activities.resume_tailoring.graph import build_resume_tailoring_graph, route, supervisor
from activities.resume_tailoring.resume import sample_job, sample_resume


@pytest.mark.parametrize(
    ("state", "goto", "update"),
    [
        ({}, "input_processing_agent", {"current_phase": "after_input_processing"}),
        ({"current_phase": "initial"}, "input_processing_agent",
         {"current_phase": "after_input_processing"}),
        ({"current_phase": "after_input_processing"}, "format_strategy_agent",
         {"current_phase": "after_format_strategy"}),
        ({"current_phase": "after_input_processing", "error": "bad resume"}, END,
         {"current_phase": "failed"}),
        ({"current_phase": "after_format_strategy"}, "resume_drafting_agent",
         {"current_phase": "after_drafting", "draft_complete": False}),
        ({"current_phase": "after_drafting", "draft_complete": False}, "resume_drafting_agent", {}),
        ({"current_phase": "after_drafting", "draft_complete": True}, "ats_optimization_agent",
         {"current_phase": "after_ats_optimization"}),
        ({"current_phase": "after_drafting", "draft_complete": True,
          "honesty_violations": [{"kind": "skill", "value": "React", "where": "skills"}]},
         "reflexion_agent", {"current_phase": "after_reflexion", "feedback_source": "honesty"}),
        ({"current_phase": "after_ats_optimization", "ats_score": 0.5}, "reflexion_agent",
         {"current_phase": "after_reflexion", "feedback_source": "ats"}),
        ({"current_phase": "after_ats_optimization", "ats_score": 0.9}, "human_review_agent",
         {"current_phase": "after_human_review"}),
        ({"current_phase": "after_ats_optimization", "ats_score": 0.9,
          "human_review_enabled": False}, "finalization_agent",
         {"current_phase": "after_finalization"}),
        ({"current_phase": "after_ats_optimization", "ats_score": 0.5, "revision_count": 3,
          "max_revisions": 3}, "human_review_agent", {"current_phase": "after_human_review"}),
        ({"current_phase": "after_ats_optimization", "ats_score": 0.7,
          "target_ats_objective": 0.6}, "human_review_agent",
         {"current_phase": "after_human_review"}),
        ({"current_phase": "after_reflexion", "revision_count": 1}, "resume_drafting_agent",
         {"current_phase": "after_drafting", "draft_complete": False, "revision_count": 2}),
        ({"current_phase": "after_human_review", "human_decision": "approved"},
         "finalization_agent", {"current_phase": "after_finalization"}),
        ({"current_phase": "after_human_review", "human_decision": "revise"}, "reflexion_agent",
         {"current_phase": "after_reflexion", "feedback_source": "human"}),
        ({"current_phase": "after_human_review", "human_decision": "rejected"}, END,
         {"current_phase": "rejected"}),
        ({"current_phase": "after_human_review", "human_decision": "timeout"},
         "finalization_agent", {"current_phase": "after_finalization"}),
        ({"current_phase": "after_human_review", "human_decision": "error"},
         "finalization_agent", {"current_phase": "after_finalization"}),
        ({"current_phase": "after_finalization"}, END, {}),
        ({"current_phase": "warp_speed"}, END, {"error": "unknown phase: warp_speed"}),
    ],
)
def test_routing_table(state, goto, update):
    assert route(state) == (goto, update)


def test_revise_with_revisions_spent_asks_the_reviewer_again():
    goto, update = route({"current_phase": "after_human_review", "human_decision": "revise",
                          "revision_count": 2, "max_revisions": 2})
    assert goto == "human_review_agent"
    assert "max_revisions" in update["error"]


def test_reviewer_redraft_goes_back_to_the_reviewer_not_round_the_ats_loop():
    goto, _ = route({"current_phase": "after_ats_optimization", "ats_score": 0.1,
                     "feedback_source": "human", "revision_count": 1, "max_revisions": 3})
    assert goto == "human_review_agent"


def test_plateau_leaves_the_ats_loop_unless_disabled():
    state = {"current_phase": "after_ats_optimization", "ats_score": 0.5, "feedback_source": "ats",
             "score_history": [0.5, 0.5], "revision_count": 1}
    assert route(state)[0] == "human_review_agent"
    assert route({**state, "options": {"stop_on_plateau": False}})[0] == "reflexion_agent"


async def test_supervisor_returns_a_command_and_records_the_phase():
    command = await supervisor({"current_phase": "after_format_strategy",
                                "phase_history": ["initial", "after_input_processing"]})
    assert isinstance(command, Command)
    assert command.goto == "resume_drafting_agent"
    assert command.update["phase_history"] == ["initial", "after_input_processing",
                                               "after_format_strategy"]


async def test_unknown_phase_ends_the_graph_with_an_error():
    graph = build_resume_tailoring_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "unknown-phase"}}
    # A phase no node writes (a corrupted or migrated checkpoint), as if an agent had just run.
    await graph.aupdate_state(config, {"current_phase": "nonsense"},
                              as_node="input_processing_agent")
    out = await graph.ainvoke(None, config)
    assert out["error"] == "unknown phase: nonsense"
    assert out["phase_history"] == ["nonsense"]
    assert "finalization_report" not in out
    assert not (await graph.aget_state(config)).next


async def test_ats_loop_stops_at_max_revisions_with_the_phases_recorded():
    graph = build_resume_tailoring_graph().compile()
    out = await graph.ainvoke({
        "base_resume": sample_resume(), "job_description": sample_job(),
        "preferences": {"target_ats_objective": 1.0, "max_revisions": 2,
                        "human_review_enabled": False},
        "options": {"stop_on_plateau": False},
    })
    draft_round = ["after_drafting", "after_drafting", "after_ats_optimization"]
    assert out["phase_history"] == [
        "initial", "after_input_processing", "after_format_strategy",
        *draft_round, "after_reflexion", *draft_round, "after_reflexion", *draft_round,
        "after_finalization",
    ]
    assert out["revision_count"] == 2
    assert len(out["score_history"]) == 3
    report = out["finalization_report"]
    assert report["status"] == "finalized_without_review"
    assert report["human_approved"] is False
    assert report["revisions"] == 2


async def test_review_disabled_never_interrupts():
    graph = build_resume_tailoring_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "no-review"}}
    out = await graph.ainvoke({"base_resume": sample_resume(), "job_description": sample_job(),
                               "preferences": {"human_review_enabled": False}}, config)
    assert "__interrupt__" not in out
    assert "after_human_review" not in out["phase_history"]
    assert out["finalization_report"]["schema_valid"] is True
    assert "pdf_base64" not in out["finalization_report"]
    assert not (await graph.aget_state(config)).next


async def test_pdf_on_request():
    pytest.importorskip("reportlab")
    import base64

    graph = build_resume_tailoring_graph().compile()
    out = await graph.ainvoke({"base_resume": sample_resume(), "job_description": sample_job(),
                               "preferences": {"human_review_enabled": False},
                               "options": {"render_pdf": True}})
    pdf = base64.b64decode(out["finalization_report"]["pdf_base64"])
    assert pdf.startswith(b"%PDF-")


async def test_invalid_base_resume_fails_after_input_processing():
    graph = build_resume_tailoring_graph().compile()
    out = await graph.ainvoke({"base_resume": {"work": [{"startDate": "last year"}]},
                               "job_description": "Web developer\nWe build websites."})
    assert out["current_phase"] == "failed"
    assert "startDate" in out["error"]
