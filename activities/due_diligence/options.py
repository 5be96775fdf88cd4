"""Options of the due_diligence pipeline (``OVERSEER_DUE_DILIGENCE__<FIELD>``)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DueDiligenceOptions(BaseModel):
    """Every field has a default; the runtime snapshots them into ``state["options"]``.

    Attributes:
        require_signoff: end with a human sign-off (``interrupt``) before completing;
            ``metadata.require_signoff`` turns it on per run.
        max_search_attempts: clause searches before a type is ``not_found`` (seed 004: 3).
        top_k: chunks per BM25 query on the first search.
        chunk_chars: maximum characters per retrieval chunk.
        ocr_dpi: resolution for OCR of scanned pages and images, dots per inch.
        max_pages: longer documents are refused as unreadable.
        ocr_timeout_seconds: Tesseract time limit per page.
        use_classifier: let the sentence classifier (:mod:`.classifier`) check the
            patterns' candidates and propose clauses they miss; off = patterns alone.
    """

    require_signoff: bool = False
    max_search_attempts: int = Field(default=3, ge=1, le=5)
    top_k: int = Field(default=8, ge=1, le=100)
    chunk_chars: int = Field(default=1200, ge=200, le=10_000)
    ocr_dpi: int = Field(default=300, ge=100, le=600)
    max_pages: int = Field(default=200, ge=1)
    ocr_timeout_seconds: float = Field(default=120.0, gt=0)
    use_classifier: bool = True
