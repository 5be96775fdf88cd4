"""Typed state of the due_diligence graph (seed 004), JSON values only.

Context keys come from the runtime when a run starts; every agent writes exactly one
result key, so a failed later agent leaves the earlier results in place (partial
results) and a retry resumes from the failed agent.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict


class DueDiligenceState(TypedDict, total=False):
    """State of one agreement's run through the five agents."""

    # -- context (runtime) --------------------------------------------------------------------
    run_id: str
    """The run (UUID string)."""
    document: dict[str, Any]
    """Upload reference ``{sha256, kind, filename, content_type, size_bytes, page_count}``."""
    text: str
    """Plain-text input instead of ``document`` (tests, JSON runs)."""
    metadata: dict[str, Any]
    """The request's metadata: ``{playbook?, require_signoff?}``."""
    options: dict[str, Any]
    """``DueDiligenceOptions.model_dump(mode="json")``."""

    # -- ingestion ----------------------------------------------------------------------------
    ingestion: dict[str, Any]
    """``{text, pages: [{page, text, start_offset, source}], page_count, char_count,
    text_sources, ocr_confidence_avg, is_agreement, agreement_score, title}``."""

    # -- clause_extraction (subgraph) ---------------------------------------------------------
    clauses: dict[str, Any]
    """``{findings: [finding], attempts, searches, is_agreement, strategy, strategies,
    fallbacks, rejected?}``; a finding is ``{id, clause_type, status, quote, page, start, end,
    confidence, attributes, strategy}``. ``strategies`` names what produced the found
    findings (``["rules"]``, ``["rules", "llm:<model>"]``, …) and ``strategy`` joins it with
    ``+``; ``fallbacks`` lists the search steps whose model agent ended early
    ``{step, node, clause_types, code, message}``; ``rejected`` the model's refused quotes."""

    # -- risk_scoring -------------------------------------------------------------------------
    risks: dict[str, Any]
    """``{items: [{id, clause_type, level, rule, reason, source_refs}], overall, counts}``."""

    # -- summary ------------------------------------------------------------------------------
    summary: dict[str, Any]
    """``{text, sentences: [{text, source_refs}], strategy}``."""

    # -- checklist ----------------------------------------------------------------------------
    checklist: dict[str, Any]
    """``{items: [{action, priority, owner_role, due, source_refs}]}``."""

    # -- signoff ------------------------------------------------------------------------------
    signoff: dict[str, Any]
    """The human decision ``{decision, note, decided_by, updates}`` when sign-off ran."""
    status: str
    """``completed`` | ``rejected`` once the graph ends."""
