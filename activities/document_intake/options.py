"""document_intake's options snapshot: thresholds, scores, dpi and limits from the settings."""

from __future__ import annotations

from typing import Any

from overseer.plugin import Settings, approval_ladder_options


def document_intake_options(settings: Settings) -> dict[str, Any]:
    """The options snapshot a document_intake run starts with (thresholds, scores, dpi, limits)."""
    return {
        "thresholds": {"max_steps": 5, "complete_confidence": 0.9,
                       "retry_below_confidence": 0.5, "max_retry_tries": 2,
                       "max_review_tries": 3},
        "exact_text_ocr_score": settings.exact_text_ocr_score,
        "unknown_ocr_score": 0.5,
        "review_min_evidence_score": settings.review_min_evidence_score,
        "ocr_dpi": settings.ocr_dpi,
        "retry_ocr_dpi": settings.retry_ocr_dpi,
        "retry_ocr_region": settings.retry_ocr_region,
        "max_pages": settings.max_document_pages,
        "max_pixels_per_page": settings.max_pixels_per_page,
        "ocr_timeout_seconds": settings.ocr_timeout_seconds,
        "approval_sla_seconds": settings.approval_sla_seconds,
        "approval": approval_ladder_options(settings),
        "llm_budget_usd": settings.llm_run_budget_usd,
        "llm_budget_tokens": settings.llm_run_budget_tokens,
    }
