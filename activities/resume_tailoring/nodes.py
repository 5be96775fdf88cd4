"""The resume_tailoring agent nodes (seed 001 §2): each does its part and returns to the supervisor.

Nodes are ``async``, module-level and return state updates; none writes ``current_phase``
(the supervisor owns it). They run as activities by default (CPU: TF-IDF over the O*NET
corpus, fuzzy matching; I/O: an optional model call).
"""

from __future__ import annotations

import logging
from typing import Any

from activities.resume_tailoring import llm_drafting
from activities.resume_tailoring.ats import score_resume
from activities.resume_tailoring.drafting import DEFAULT_GUIDELINES, PASSES, draft_pass, start_draft
from activities.resume_tailoring.honesty import find_violations
from activities.resume_tailoring.jobs import parse_job
from activities.resume_tailoring.reflexion import (
    directives_from_ats,
    directives_from_feedback,
    directives_from_violations,
)
from activities.resume_tailoring.resume import (
    diff_markdown,
    evidence_inventory,
    flatten_text,
    normalise_resume,
    render_markdown,
    schema_errors,
)
from activities.resume_tailoring.state import DEFAULT_MAX_REVISIONS, DEFAULT_TARGET_ATS, ResumeState

log = logging.getLogger("overseer.resume_tailoring")

SCHEMA_URL = "https://raw.githubusercontent.com/jsonresume/resume-schema/v1.0.0/schema.json"


async def input_processing_agent(state: ResumeState) -> dict[str, Any]:
    """Node ``input_processing_agent``: normalise the resume, structure the job, score the base.

    Preferences override options; options override the seed defaults (target 0.85,
    human review on, 3 revisions).

    Writes ``base_resume_json``, ``structured_job_data``, ``potential_objective_data``,
    ``target_ats_objective``, ``human_review_enabled``, ``max_revisions``, ``strategy``,
    ``ats_report_before``, ``revision_count``; ``error`` when the base resume is not a valid
    JSON Resume (the supervisor then ends the run ``failed``).
    """
    prefs = dict(state.get("preferences") or {})
    options = dict(state.get("options") or {})

    def pick(key: str, default: Any) -> Any:
        for source in (prefs, options):
            if source.get(key) is not None:
                return source[key]
        return default

    base = normalise_resume(state.get("base_resume") or "")
    errors = schema_errors(base)
    if errors:
        return {"error": "base_resume is not a valid JSON Resume: " + "; ".join(errors[:5]),
                "base_resume_json": base}
    job = parse_job(state.get("job_description") or "")
    inventory = evidence_inventory(base)
    inventory.pop("stems", None)
    before = score_resume(base, job)
    objective = {
        **inventory,
        "job_title": job["title"], "company": job["company"],
        "evidenced_keywords": before["keywords"]["evidenced"],
        "gaps": before["keywords"]["gaps"],
        "coverage_ceiling": before["coverage_ceiling"],
    }
    return {
        "base_resume_json": base,
        "structured_job_data": job,
        "potential_objective_data": objective,
        "target_ats_objective": float(pick("target_ats_objective", DEFAULT_TARGET_ATS)),
        "human_review_enabled": bool(pick("human_review_enabled", True)),
        "max_revisions": int(pick("max_revisions", DEFAULT_MAX_REVISIONS)),
        "strategy": llm_drafting.strategy_name(),
        "ats_report_before": before,
        "revision_count": 0,
        "error": None,
    }


async def format_strategy_agent(state: ResumeState) -> dict[str, Any]:
    """Node ``format_strategy_agent``: section order, bullets per entry, what to leave out.

    Rules: summary first; experience next; skills right after it when the job lists skills,
    else after education; projects before education when they speak to the job more than
    the education does; fewer bullets per entry for a long base resume.

    Writes ``section_formatting_guidelines`` (``{section_order, drop_sections,
    bullets_per_entry, max_projects, summary_sentences, length_words, rationale}``).
    """
    base = state.get("base_resume_json") or {}
    job = state.get("structured_job_data") or {}
    before = state.get("ats_report_before") or {}
    rationale = []
    order = ["basics", "work"]
    if job.get("required_skills"):
        order.append("skills")
        rationale.append("the job lists skills: skills right after experience")
    tail = ["projects", "education"]
    if _relevance(base.get("projects"), job) < _relevance(base.get("education"), job):
        tail.reverse()
        rationale.append("education speaks to the job more than projects")
    order += tail
    if "skills" not in order:
        order.append("skills")
    order += ["volunteer", "awards", "certificates", "publications", "languages"]
    words = int(((before.get("components") or {}).get("length") or {}).get("words", 0))
    bullets = 3 if words > DEFAULT_GUIDELINES["length_words"][1] else 4
    if bullets == 3:
        rationale.append(f"base resume is long ({words} words): 3 bullets per entry")
    guidelines = {**DEFAULT_GUIDELINES, "section_order": order, "bullets_per_entry": bullets,
                  "rationale": rationale, "strategy": "rules"}
    return {"section_formatting_guidelines": guidelines}


async def resume_drafting_agent(state: ResumeState) -> dict[str, Any]:
    """Node ``resume_drafting_agent``: one drafting pass (rules), or a whole draft (model).

    A new draft starts when the supervisor reset ``draft_complete`` and no pass is
    pending. With a model configured, the model drafts the whole resume in one call and
    its draft is checked mechanically (schema and :func:`find_violations`); a draft with
    violations is returned with ``honesty_violations`` so the supervisor sends it to
    reflexion — or, once revisions are spent, replaced by the rules draft.

    Writes ``current_draft``, ``draft_sections_pending``, ``draft_complete``,
    ``change_log``, ``honesty_violations``, ``strategy``.
    """
    base = state.get("base_resume_json") or {}
    job = state.get("structured_job_data") or {}
    guidelines = state.get("section_formatting_guidelines") or {}
    directives = state.get("strategic_directives") or []
    revision = int(state.get("revision_count") or 0)
    pending = list(state.get("draft_sections_pending") or [])
    if not pending:
        if llm_drafting.enabled():
            return await _model_draft(state, base, job, directives, revision)
        pending, draft, changes = list(PASSES), start_draft(base), []
    else:
        draft, changes = dict(state.get("current_draft") or {}), list(state.get("change_log") or [])
    name = pending.pop(0)
    draft, entries = draft_pass(name, draft, base, job, guidelines, directives, revision)
    done = not pending
    if done:
        draft = _ordered(draft, guidelines)
    return {"current_draft": draft, "draft_sections_pending": pending, "draft_complete": done,
            "change_log": changes + entries, "honesty_violations": [], "strategy": "rules"}


async def ats_optimization_agent(state: ResumeState) -> dict[str, Any]:
    """Node ``ats_optimization_agent``: score the draft; prepare what the reviewer will see.

    Writes ``ats_score``, ``ats_optimization_report`` (the :func:`score_resume` report
    plus ``review: {markdown, diff}``), ``score_history``.
    """
    base = state.get("base_resume_json") or {}
    draft = state.get("current_draft") or {}
    report = score_resume(draft, state.get("structured_job_data") or {},
                          base_text=flatten_text(base))
    order = (state.get("section_formatting_guidelines") or {}).get("section_order")
    markdown = render_markdown(draft, order)
    report["review"] = {"markdown": markdown,
                        "diff": diff_markdown(render_markdown(base), markdown)}
    return {"ats_score": report["score"], "ats_optimization_report": report,
            "score_history": [*(state.get("score_history") or []), report["score"]]}


async def reflexion_agent(state: ResumeState) -> dict[str, Any]:
    """Node ``reflexion_agent``: directives for the next draft from the report and feedback.

    ``feedback_source`` says why it runs: ``ats`` (the score is under target), ``human``
    (a ``revise`` note), ``honesty`` (a model draft invented something). Earlier reviewer
    directives are kept, so a later draft still honours an earlier note.

    Writes ``strategic_directives`` (each with ``source``).
    """
    source = state.get("feedback_source") or "ats"
    report = state.get("ats_optimization_report") or state.get("ats_report_before") or {}
    kept = [d for d in state.get("strategic_directives") or [] if d.get("source") == "human"]
    new: list[dict[str, Any]] = []
    if source == "human" and state.get("human_feedback"):
        new += [{**d, "source": "human"} for d in
                directives_from_feedback(str(state["human_feedback"]),
                                         state.get("base_resume_json") or {})]
    if source == "honesty":
        new += [{**d, "source": "honesty"} for d in
                directives_from_violations(state.get("honesty_violations") or [])]
    new += [{**d, "source": "ats"} for d in directives_from_ats(report)]
    return {"strategic_directives": kept + new}


async def finalization_agent(state: ResumeState) -> dict[str, Any]:
    """Node ``finalization_agent``: the result — schema-valid JSON Resume, Markdown, reports.

    Writes ``finalization_report``: ``{status, human_approved, resume, markdown,
    ats_report_before, ats_report_after, change_log, schema_valid, schema_errors,
    honesty_violations_replaced, gaps, declined_requests, revisions, score_history,
    phase_history, review_history, strategy, error}`` (plus ``pdf_base64`` with the
    ``render_pdf`` option). ``status`` is ``approved``, ``finalized_without_review``
    (review off), ``timeout`` or ``error``.
    """
    base = state.get("base_resume_json") or {}
    job = state.get("structured_job_data") or {}
    draft = dict(state.get("current_draft") or {})
    violations = find_violations(draft, base) if draft else []
    if violations or not draft:
        # Never ship an invented claim: fall back to an honest rules draft.
        draft = _rules_draft(base, job, state)
    resume = {"$schema": SCHEMA_URL, **draft}
    meta = dict(resume.get("meta") or {})
    meta.update({"version": "v1.0.0",
                 "tailoredFor": {"title": job.get("title", ""), "company": job.get("company", "")}})
    resume["meta"] = meta
    errors = schema_errors(resume)
    after = score_resume(resume, job, base_text=flatten_text(base))
    decision = state.get("human_decision")
    if decision == "approved":
        status = "approved"
    elif not state.get("human_review_enabled", True) and decision is None:
        status = "finalized_without_review"
    else:
        status = decision or ("error" if state.get("error") else "finalized_without_review")
    order = (state.get("section_formatting_guidelines") or {}).get("section_order")
    report = {
        "status": status,
        "human_approved": decision == "approved",
        "resume": resume,
        "markdown": render_markdown(resume, order),
        "ats_report_before": state.get("ats_report_before"),
        "ats_report_after": after,
        "change_log": state.get("change_log") or [],
        "schema_valid": not errors,
        "schema_errors": errors,
        "honesty_violations_replaced": violations,
        "gaps": after["keywords"]["gaps"],
        "declined_requests": [d for d in state.get("strategic_directives") or []
                              if d.get("kind") == "declined"],
        "revisions": int(state.get("revision_count") or 0),
        "score_history": state.get("score_history") or [],
        "phase_history": [*(state.get("phase_history") or []), "after_finalization"],
        "review_history": state.get("review_history") or [],
        "strategy": state.get("strategy", "rules"),
        "error": state.get("error"),
    }
    if (state.get("options") or {}).get("render_pdf"):
        report.update(_pdf(report["markdown"], str(resume.get("basics", {}).get("name") or "")))
    return {"finalization_report": report}


# --- helpers ----------------------------------------------------------------------------------


async def _model_draft(state: ResumeState, base: dict[str, Any], job: dict[str, Any],
                       directives: list[dict[str, Any]], revision: int) -> dict[str, Any]:
    from overseer.plugin import (
        LLMCallError,
        LLMClientError,
        LLMRefusedError,
        LLMResponseError,
        model_call_retryable,
    )

    try:
        result = await llm_drafting.draft_with_model(state, base, job, directives)
    except LLMCallError as err:
        # the model could not give a usable draft (prose or the wrong shape after a re-ask,
        # a refusal, a request it rejects, or a 429/5xx/time-out after the call's attempts):
        # the evidence-only rules draft this pipeline has offline
        if not isinstance(err, LLMResponseError | LLMRefusedError | LLMClientError) and (
                not err.retryable or await model_call_retryable(
                    err, run_id=str(state.get("run_id") or ""), node=llm_drafting.NODE,
                    max_attempts=llm_drafting.MODEL_ATTEMPTS)):
            raise  # the budget; or Temporal retries the call
        log.warning("model draft unusable; rules draft used",
                    extra={"run_id": state.get("run_id"), "code": err.code})
        return {"current_draft": _rules_draft(base, job, state), "draft_sections_pending": [],
                "draft_complete": True, "honesty_violations": [], "strategy": "rules",
                "change_log": [{"revision": revision, "section": "resume",
                                "action": "drafted_by_rules",
                                "detail": f"the model gave no usable draft ({err.code}); "
                                          "rules draft used"}]}
    draft = result.resume
    violations = [{"kind": "schema", "value": e, "where": "resume"} for e in schema_errors(draft)]
    violations += find_violations(draft, base)
    changes = [{"revision": revision, "section": "resume", "action": "drafted_by_model",
                "detail": result.strategy}]
    max_revisions = int(state.get("max_revisions", DEFAULT_MAX_REVISIONS))
    if violations and revision >= max_revisions:
        log.warning("model draft broke the honesty rule with no revisions left; rules draft used",
                    extra={"run_id": state.get("run_id"), "violations": len(violations)})
        fallback = _rules_draft(base, job, state)
        changes.append({"revision": revision, "section": "resume", "action": "replaced",
                        "detail": f"model draft had {len(violations)} unsupported claims; "
                                  "rules draft used"})
        return {"current_draft": fallback, "draft_sections_pending": [], "draft_complete": True,
                "change_log": changes, "honesty_violations": [], "strategy": "rules"}
    return {"current_draft": draft, "draft_sections_pending": [], "draft_complete": True,
            "change_log": changes, "honesty_violations": violations, "strategy": result.strategy}


def _pdf(markdown: str, name: str) -> dict[str, Any]:
    """``{"pdf_base64"}`` when reportlab is installed, else ``{"pdf_unavailable": reason}``."""
    from activities.resume_tailoring.pdf import pdf_available, render_pdf_base64

    if not pdf_available():
        return {"pdf_base64": None, "pdf_unavailable": "reportlab is not installed"}
    return {"pdf_base64": render_pdf_base64(markdown, title=name or "Resume")}


def _rules_draft(base: dict[str, Any], job: dict[str, Any], state: ResumeState) -> dict[str, Any]:
    guidelines = state.get("section_formatting_guidelines") or {}
    directives = [d for d in state.get("strategic_directives") or [] if d.get("kind") != "avoid"]
    draft = start_draft(base)
    for name in PASSES:
        draft, _ = draft_pass(name, draft, base, job, guidelines, directives,
                              int(state.get("revision_count") or 0))
    return _ordered(draft, guidelines)


def _ordered(draft: dict[str, Any], guidelines: dict[str, Any]) -> dict[str, Any]:
    """The draft's keys in the guidelines' section order (JSON keeps insertion order)."""
    order = list(guidelines.get("section_order") or DEFAULT_GUIDELINES["section_order"])
    keys = [k for k in order if k in draft] + [k for k in draft if k not in order]
    return {k: draft[k] for k in keys}


def _relevance(entries: Any, job: dict[str, Any]) -> float:
    if not entries:
        return 0.0
    from activities.resume_tailoring.text import norm, phrase_in, stems

    text = flatten_text({"x": entries})
    s, n = set(stems(text)), norm(text)
    return sum(float(k.get("weight", 1.0)) for k in job.get("keywords", [])
               if phrase_in(k["phrase"], s, n))
