"""Typed state of the resume_tailoring graph (seed 001 §4 ``ResumeState``, extended).

The seed's keys are kept with the seed's meanings; the rest carry what a durable,
reviewable run needs (the normalised base resume, the reports before and after, the
phase history, the diff shown to the reviewer). Every value is JSON: the state crosses
activity boundaries as a Temporal payload.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict

Phase = Literal[
    "initial",
    "after_input_processing",
    "after_format_strategy",
    "after_drafting",
    "after_ats_optimization",
    "after_reflexion",
    "after_human_review",
    "after_finalization",
    "rejected",
    "failed",
]
"""Seed 001 §6 phases (``rejected`` and ``failed`` end the run without finalization)."""

HumanDecision = Literal["approved", "revise", "rejected", "timeout", "error"]
"""Seed 001 ``human_decision`` (plus ``rejected``, which ends the run)."""

DEFAULT_TARGET_ATS = 0.85
"""Seed 001's ``target_ats_objective`` when neither the preferences nor the options set one."""
DEFAULT_MAX_REVISIONS = 3
"""``max_revisions`` when neither the preferences nor the options set it."""


class ResumeInputState(TypedDict, total=False):
    """What a run starts with (the API's ``input`` plus what the runtime adds)."""

    base_resume: dict[str, Any] | str
    """Input: a JSON Resume object or plain resume text."""
    job_description: dict[str, Any] | str
    """Input: job advert text or a JSON Resume ``job`` object."""
    preferences: dict[str, Any]
    """Input: ``{target_ats_objective?, human_review_enabled?, max_revisions?}``."""
    run_id: str
    """Runtime: the run (UUID string)."""
    options: dict[str, Any]
    """Runtime: :class:`~activities.resume_tailoring.pipeline.ResumeOptions` as JSON."""
    metadata: dict[str, Any]
    """Runtime: the request's metadata."""


class ResumeState(ResumeInputState, total=False):
    """State of one resume_tailoring run (seed 001 §4)."""

    # -- supervisor ----------------------------------------------------------------------------
    current_phase: str
    """supervisor: the seed's phase (see :data:`Phase`); agents never write it."""
    phase_history: list[str]
    """supervisor: every phase it routed from, in order (audit of the loop)."""
    feedback_source: str | None
    """supervisor: ``ats`` or ``human`` — why reflexion runs."""
    error: str | None
    """supervisor (unknown phase) or any agent (a failure it recorded)."""

    # -- input_processing_agent ----------------------------------------------------------------
    base_resume_json: dict[str, Any]
    """input_processing_agent: the base resume as a schema-valid JSON Resume."""
    structured_job_data: dict[str, Any]
    """input_processing_agent (seed): ``{title, company, sections, sentences, keywords,
    required_skills, text}`` of the job."""
    potential_objective_data: dict[str, Any]
    """input_processing_agent (seed): the evidence inventory — skills, organisations,
    titles, dates the base resume supports — and the job keywords it covers."""
    target_ats_objective: float
    """input_processing_agent (seed): quality gate, default 0.85."""
    human_review_enabled: bool
    """input_processing_agent (seed): stop for a human before finalization."""
    max_revisions: int
    """input_processing_agent: bound on drafting rounds after the first."""
    strategy: str
    """input_processing_agent, resume_drafting_agent: ``rules`` or ``llm:<model>``."""
    ats_report_before: dict[str, Any]
    """input_processing_agent: the ATS report of the untouched base resume."""

    # -- format_strategy_agent ------------------------------------------------------------------
    section_formatting_guidelines: dict[str, Any]
    """format_strategy_agent (seed): section order, bullets per entry, length bounds."""

    # -- resume_drafting_agent ------------------------------------------------------------------
    current_draft: dict[str, Any]
    """resume_drafting_agent (seed): the tailored JSON Resume being built."""
    draft_sections_pending: list[str]
    """resume_drafting_agent: drafting passes still to do (``experience``, ``profile``)."""
    draft_complete: bool
    """resume_drafting_agent (seed): all passes done; the supervisor resets it for a new draft."""
    revision_count: int
    """resume_drafting_agent (seed): drafts made after the first."""
    change_log: list[dict[str, Any]]
    """resume_drafting_agent: ``{revision, section, action, detail}`` for the current draft."""
    honesty_violations: list[dict[str, Any]]
    """resume_drafting_agent: claims in a model's draft that the base resume does not support."""

    # -- ats_optimization_agent ----------------------------------------------------------------
    ats_score: float
    """ats_optimization_agent (seed): score of the current draft in [0, 1]."""
    ats_optimization_report: dict[str, Any]
    """ats_optimization_agent (seed): every component, matched / missing / evidenced keywords."""
    score_history: list[float]
    """ats_optimization_agent: the score of every draft, in order."""

    # -- reflexion_agent -----------------------------------------------------------------------
    strategic_directives: list[dict[str, Any]]
    """reflexion_agent (seed): ``{kind, target, reason}`` directives for the next draft."""

    # -- human_review_agent --------------------------------------------------------------------
    human_decision: str | None
    """human_review_agent (seed): see :data:`HumanDecision`."""
    human_feedback: str | None
    """human_review_agent (seed): the reviewer's note."""
    review_history: list[dict[str, Any]]
    """human_review_agent: every decision ``{revision, decision, note, decided_by}``."""

    # -- finalization_agent --------------------------------------------------------------------
    finalization_report: dict[str, Any]
    """finalization_agent (seed): ``{resume, markdown, ats_report_before, ats_report_after,
    change_log, human_approved, schema_valid, ...}`` — the run's result."""
