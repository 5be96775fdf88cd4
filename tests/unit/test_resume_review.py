"""resume_tailoring human gate: payload, revise → new draft → approve, refusals, reject, timeout."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from activities.resume_tailoring.graph import build_resume_tailoring_graph
from activities.resume_tailoring.pipeline import PIPELINE, ResumeInput, check_decision
from activities.resume_tailoring.resume import sample_job, sample_resume
from overseer.node_options import placed_nodes
from overseer.pipelines import DecisionRefusedError


def _start() -> tuple[Any, dict[str, Any]]:
    graph = build_resume_tailoring_graph().compile(checkpointer=InMemorySaver())
    return graph, {"configurable": {"thread_id": "review"}}


def _input(**prefs: Any) -> dict[str, Any]:
    return {"base_resume": sample_resume(), "job_description": sample_job(), "preferences": prefs}


def _decision(decision: str, note: str = "") -> dict[str, Any]:
    return {"decision": decision, "note": note, "updates": None, "resume": None,
            "decided_by": "reviewer@example.com"}


async def test_payload_shows_draft_score_report_diff_and_revision_count():
    graph, config = _start()
    out = await graph.ainvoke(_input(), config)
    payload = out["__interrupt__"][0].value
    assert payload["kind"] == "resume_review"
    assert payload["draft"]["work"][0]["name"] == "Pied Piper"
    assert 0.0 <= payload["ats_score"] <= 1.0
    assert set(payload["ats_report"]["components"]) == {"keyword_coverage", "sections",
                                                        "bullet_quality", "length"}
    assert {"HTML", "CSS", "JavaScript"} <= set(payload["keywords"]["matched"])
    assert "React" in payload["keywords"]["gaps_not_added"]
    assert set(payload["keywords"]["evidenced"]) >= set(payload["keywords"]["matched"])
    assert payload["diff"].startswith("--- base\n+++ draft\n")
    assert payload["revision"] == out["revision_count"]
    assert payload["max_revisions"] == 3
    assert "revise" in payload["decisions"]


async def test_revise_makes_a_new_draft_and_a_new_interrupt_then_approve_finalizes():
    graph, config = _start()
    first = (await graph.ainvoke(_input(), config))["__interrupt__"][0].value
    note = "Emphasise Javascript and add React. Remove Techcrunch."
    second_out = await graph.ainvoke(Command(resume=_decision("revise", note)), config)
    second = second_out["__interrupt__"][0].value
    assert second["revision"] == first["revision"] + 1
    assert second_out["phase_history"][-5:] == ["after_human_review", "after_reflexion",
                                                "after_drafting", "after_drafting",
                                                "after_ats_optimization"]
    # The note was acted on where the base supports it, and declined where it does not.
    assert second["draft"] != first["draft"]
    bullets = second["draft"]["work"][0]["highlights"]
    assert not any("Techcrunch" in b for b in bullets)
    assert [d["target"] for d in second["declined_requests"]] == ["React"]
    assert "React" not in str(second["draft"])
    done = await graph.ainvoke(Command(resume=_decision("approve")), config)
    report = done["finalization_report"]
    assert report["status"] == "approved"
    assert report["human_approved"] is True
    assert report["schema_valid"] is True
    assert [r["decision"] for r in report["review_history"]] == ["revise", "approve"]
    assert report["ats_report_before"]["score"] <= 1.0
    assert report["markdown"].startswith("# Richard Hendriks")
    assert report["change_log"]
    assert not (await graph.aget_state(config)).next


async def test_reject_ends_the_run_rejected_without_a_result():
    graph, config = _start()
    await graph.ainvoke(_input(), config)
    out = await graph.ainvoke(Command(resume=_decision("reject", "not for this job")), config)
    assert out["current_phase"] == "rejected"
    assert out["human_decision"] == "rejected"
    assert "finalization_report" not in out


async def test_escalation_timeout_finalizes_unapproved():
    graph, config = _start()
    await graph.ainvoke(_input(), config)
    auto = {**_decision("approve"), "decided_by": "escalation_policy"}
    out = await graph.ainvoke(Command(resume=auto), config)
    assert out["human_decision"] == "timeout"
    assert out["finalization_report"]["human_approved"] is False
    assert out["finalization_report"]["status"] == "timeout"


@pytest.mark.parametrize("note", ["", "   ", None])
def test_revise_without_feedback_is_refused(note):
    with pytest.raises(DecisionRefusedError) as err:
        check_decision({"revision": 0, "max_revisions": 3}, _decision("revise", note or ""), {})
    assert err.value.code == "feedback_required"
    assert err.value.http_status == 422


def test_revise_past_max_revisions_is_refused():
    with pytest.raises(DecisionRefusedError) as err:
        check_decision({"revision": 3, "max_revisions": 3}, _decision("revise", "shorter"), {})
    assert err.value.code == "max_revisions_reached"
    check_decision({"revision": 2, "max_revisions": 3}, _decision("revise", "shorter"), {})
    check_decision({"revision": 3, "max_revisions": 3}, _decision("approve"), {})
    check_decision({"revision": 3, "max_revisions": 3}, _decision("reject"), {})


async def test_gate_refusal_matches_the_payload_the_run_shows():
    graph, config = _start()
    out = await graph.ainvoke(_input(max_revisions=1), config)
    payload = out["__interrupt__"][0].value
    assert payload["revision"] == 1
    assert payload["decisions"] == ["approve", "reject"]
    with pytest.raises(DecisionRefusedError, match="approve or reject"):
        check_decision(payload, _decision("revise", "one more please"), {})


def test_pipeline_declaration():
    assert PIPELINE.name == "resume_tailoring"
    assert PIPELINE.seed == "001"
    assert PIPELINE.gate.decisions == ("approve", "reject", "revise")
    assert PIPELINE.gate.check_decision is check_decision
    assert PIPELINE.intake.options_model is not None
    assert PIPELINE.intake.options_model().model_dump()["target_ats_objective"] == 0.85
    # as segments, with no node leaving them (docs/performance.md, resume_tailoring_review)
    assert placed_nodes(PIPELINE.graph()) == []


def test_input_model_accepts_json_or_text_and_refuses_bad_resumes():
    ResumeInput.model_validate(_input(target_ats_objective=0.8))
    ResumeInput.model_validate({"base_resume": "Jane Doe\nExperience\nEngineer at Acme (2019)",
                                "job_description": "Engineer"})
    with pytest.raises(ValueError, match="iso8601|does not match"):
        ResumeInput.model_validate({"base_resume": {"work": [{"startDate": "yesterday"}]},
                                    "job_description": "x"})
    with pytest.raises(ValueError, match="less than or equal to 1"):
        ResumeInput.model_validate({**_input(), "preferences": {"target_ats_objective": 2}})
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        ResumeInput.model_validate({**_input(), "surprise": 1})
