"""The resume_tailoring plug-in (seed 001): what Overseer needs to host the graph.

A run is ``POST /v1/pipelines/resume_tailoring/runs`` with ``{"input": {"base_resume",
"job_description", "preferences"}}`` (:class:`ResumeInput`). The run stops at
``human_review_agent`` with the draft, its ATS report and a diff; the reviewer approves,
rejects, or revises with a note (:func:`check_decision` refuses a revise without one, or
once ``max_revisions`` is spent). The result is ``finalization_report``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from activities.resume_tailoring.graph import build_resume_tailoring_graph
from activities.resume_tailoring.state import DEFAULT_MAX_REVISIONS, DEFAULT_TARGET_ATS
from overseer.plugin import DecisionRefusedError, Gate, Intake, NodeHooks, Pipeline

MAX_TEXT_CHARS = 100_000


class ResumePreferences(BaseModel):
    """Per-run preferences (seed 001 ``ResumeState`` fields of the same names)."""

    model_config = ConfigDict(extra="forbid")

    target_ats_objective: float | None = Field(None, ge=0.0, le=1.0)
    human_review_enabled: bool | None = None
    max_revisions: int | None = Field(None, ge=0, le=10)


class ResumeInput(BaseModel):
    """A run's input: the base resume, the job, preferences.

    Attributes:
        base_resume: a JSON Resume object (validated against resume-schema 1.0.0) or plain
            text with headings and ``-`` bullets.
        job_description: advert text, or a JSON Resume ``job`` object.
        preferences: see :class:`ResumePreferences`.
    """

    model_config = ConfigDict(extra="forbid")

    base_resume: dict[str, Any] | str
    job_description: dict[str, Any] | str
    preferences: ResumePreferences = Field(default_factory=ResumePreferences)

    @field_validator("base_resume")
    @classmethod
    def _resume_ok(cls, value: dict[str, Any] | str) -> dict[str, Any] | str:
        if isinstance(value, str):
            if not value.strip() or len(value) > MAX_TEXT_CHARS:
                raise ValueError(f"base_resume text must have 1–{MAX_TEXT_CHARS} characters")
            return value
        from activities.resume_tailoring.resume import normalise_resume, schema_errors

        errors = schema_errors(normalise_resume(value))
        if errors:
            raise ValueError("not a valid JSON Resume: " + "; ".join(errors[:5]))
        return value

    @field_validator("job_description")
    @classmethod
    def _job_ok(cls, value: dict[str, Any] | str) -> dict[str, Any] | str:
        if isinstance(value, str) and (not value.strip() or len(value) > MAX_TEXT_CHARS):
            raise ValueError(f"job_description text must have 1–{MAX_TEXT_CHARS} characters")
        if isinstance(value, dict) and not any(
                value.get(k) for k in ("description", "responsibilities", "qualifications",
                                       "skills", "title")):
            raise ValueError("job_description object has no title, description or skills")
        return value


class ResumeOptions(BaseModel):
    """Deployment options (``OVERSEER_RESUME_TAILORING__<FIELD>``); preferences override them.

    Attributes:
        target_ats_objective: quality gate (seed default 0.85).
        human_review_enabled: stop for a reviewer before finalization.
        max_revisions: drafts after the first (ATS reflexion rounds and reviewer revisions).
        stop_on_plateau: leave the ATS loop early when a round did not move the score.
        llm_model_hint: model asked for when a model is configured.
        llm_budget_usd: the run's LLM cost budget (None = unlimited).
        llm_budget_tokens: the run's LLM token budget (None = unlimited).
        render_pdf: add ``pdf_base64`` to the result (needs ``reportlab``, not a runtime
            dependency; without it the result says ``pdf_unavailable``).
    """

    target_ats_objective: float = Field(DEFAULT_TARGET_ATS, ge=0.0, le=1.0)
    human_review_enabled: bool = True
    max_revisions: int = Field(DEFAULT_MAX_REVISIONS, ge=0, le=10)
    stop_on_plateau: bool = True
    llm_model_hint: str | None = None
    llm_budget_usd: float | None = None
    llm_budget_tokens: int | None = None
    render_pdf: bool = False


def check_decision(payload: Mapping[str, Any], decision: Mapping[str, Any],
                   state: Mapping[str, Any]) -> None:
    """Refuse what the seed's gate refuses (pure; runs in the update validator).

    Args:
        payload: the interrupt payload (:func:`~activities.resume_tailoring.graph.review_payload`).
        decision: ``{"decision", "note", "updates", "resume", "decided_by"}``.
        state: ``{}`` (the pipeline does not read the state at the pause).

    Raises:
        DecisionRefusedError: ``feedback_required`` — ``revise`` with an empty note;
            ``max_revisions_reached`` — ``revise`` once the payload's ``revision`` has
            reached ``max_revisions``.
    """
    if decision.get("decision") != "revise":
        return
    if not str(decision.get("note") or "").strip():
        raise DecisionRefusedError("a revise decision needs feedback in 'note'",
                                   code="feedback_required")
    revision = int(payload.get("revision") or 0)
    max_revisions = int(payload.get("max_revisions", DEFAULT_MAX_REVISIONS))
    if revision >= max_revisions:
        raise DecisionRefusedError(
            f"this resume has had {revision} of {max_revisions} revisions; approve or reject",
            code="max_revisions_reached",
            details={"revision": revision, "max_revisions": max_revisions})


PIPELINE = Pipeline(
    name="resume_tailoring",
    graph=build_resume_tailoring_graph,
    seed="001",
    description="Tailor a JSON Resume to a job: ATS quality gate, reflexion loop, "
                "never invents experience",
    intake=Intake(input_model=ResumeInput, options_model=ResumeOptions),
    gate=Gate(decisions=("approve", "reject", "revise"), check_decision=check_decision,
              human_gate="approve the tailored resume, reject it, or revise with feedback "
                         "(bounded by max_revisions)"),
    nodes=NodeHooks(progress_nodes=("input_processing_agent", "format_strategy_agent",
                                    "resume_drafting_agent", "ats_optimization_agent",
                                    "finalization_agent")),
)
