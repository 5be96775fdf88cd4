"""Typed state of the document_intake graph (seed 000 §1.1 AgentState, adapted).

Context keys are set once by the workflow; the rest are written by the node named
in each comment. Everything is JSON-serialisable because it crosses activity
boundaries as a Temporal payload; page text is never kept here (it is cached in
Postgres by document hash and page).
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict


class DocumentIntakeState(TypedDict, total=False):
    """State of one entry's run through the graph."""

    # -- context (workflow) ------------------------------------------------------------------
    run_id: str
    """The run (UUID string); event ids derive from it."""
    document: dict[str, Any]
    """``{sha256, kind, filename, page_count}`` — a reference, never the bytes."""
    span: dict[str, Any] | None
    """The entry inside a batch file (``EntrySpan`` dict), None for the whole document."""
    field_schema: dict[str, Any]
    """Snapshot of the field schema taken at submission (``FieldSchema.model_dump()``)."""
    options: dict[str, Any]
    """Thresholds, scores, dpi and limits snapshot taken when the run was submitted."""
    max_steps: int
    """Seed §1.3: escalate once this many tools ran."""

    # -- run_pipeline / retry_extraction / review_agent ---------------------------------------
    record: dict[str, str | None]
    """Field values by name (normalised); None when absent."""
    evidence: dict[str, dict[str, Any]]
    """Per field: ``{page_number, snippet, label, method, score}``; a value the offline retry
    read from a region at its higher dpi also has ``region`` (``reread.Region.to_dict()``)."""
    report: dict[str, Any]
    """``{text_source, page_count, ocr_pages, coverage_min, ocr_confidence_avg}``; after an
    offline retry of OCR'd pages also ``retry_ocr`` (``{mode: "region" | "page", dpi,
    regions, checks}``, see ``node_retry_extraction.retry_extraction``); after run_pipeline
    re-read the fields only calibration would complete, ``calibration_reread`` (``{dpi,
    regions, checks}``, see ``node_run_pipeline.confirm_calibrated_fields``)."""
    ocr_confidence_avg: float | None
    """Character-weighted OCR confidence 0..1; None when all text was exact."""
    field_ocr_confidence: dict[str, float]
    """Per OCR'd field value, its weakest word's confidence 0..1 (run_pipeline, retry)."""
    scan_calibration: dict[str, Any] | None
    """``{version, raw_confidence, calibrated_confidence, reread_agrees,
    fields: {name: {raw, calibrated}}}`` of the latest assessment (``assess.assess_record``;
    ``reread_agrees`` set by run_pipeline's second reading); None when no value was read by
    OCR."""
    confidence: float
    """Seed §1.1: 0.6 × OCR part + 0.4 × completeness."""
    missing_fields: list[str]
    """Required fields absent or invalid (seed can_approve_record)."""
    invalid_fields: dict[str, str]
    """Field → reason code for values that failed validation."""
    needs_review: bool
    review_reason_codes: list[str]
    tries: int
    """Extraction attempts so far (run_pipeline counts 1, each retry one more)."""
    tools_used: list[str]
    """Nodes that ran, in order (seed ``tools_used``)."""
    strategy: str
    """``rules`` (deterministic, offline) or ``llm:<model>``."""
    last_route: str
    """Route chosen after the latest extraction node (recorded by that node)."""

    # -- review_agent -------------------------------------------------------------------------
    proposal: dict[str, Any] | None
    """``{suggestion_id, updates, evidence, strength, strategy, acceptable, reason}``."""

    # -- LLM layer ----------------------------------------------------------------------------
    llm_failure: str | None
    """Code of a permanent model failure in the latest step (sends the run to a human)."""

    # -- complete / escalate ------------------------------------------------------------------
    decision: dict[str, Any] | None
    """The human decision that resumed the escalate node."""
    outcome: str
    """``completed`` | ``auto_reviewed`` | ``approved`` | ``rejected``."""
    status: str
    """``completed`` | ``rejected`` once the graph ends."""
