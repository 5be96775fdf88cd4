"""Plain activities of document_intake that are not graph nodes (batch splitting)."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.document_intake.batch import split_entries
from activities.document_intake.pages import limits_from_options
from activities.document_intake.schema import FieldSchema
from overseer.plugin import load_pages, temporal_errors


async def split_document(document: dict[str, Any], field_schema: dict[str, Any],
                         options: dict[str, Any]) -> list[dict[str, Any]]:
    """Find the entries in a possibly multi-entry file (seed 000 batch → one run per chunk).

    Args:
        document: ``{sha256, kind, page_count, …}``.
        field_schema: the run's schema snapshot (entry start patterns live there).
        options: the run's options (dpi, limits).

    Returns:
        ``EntrySpan`` dicts; one span for a single-entry document.

    Raises:
        overseer.errors.UnreadableDocumentError: a poison document.
    """
    pages = await load_pages(document, dpi=int(options["ocr_dpi"]),
                             limits=limits_from_options(options))
    spans = split_entries(pages, FieldSchema.model_validate(field_schema))
    return [
        {"index": s.index, "start_page": s.start_page, "start_offset": s.start_offset,
         "end_page": s.end_page, "end_offset": s.end_offset}
        for s in spans
    ]


@activity.defn(name="document_intake.split")
@temporal_errors
async def split_parts(state: dict[str, Any]) -> list[dict[str, Any]]:
    """The pipeline's split (``Pipeline.run.split``): one part ``{"span": EntrySpan dict}`` per entry.

    Args:
        state: the run's input state (``document``, ``field_schema``, ``options``).

    Returns:
        One part per entry found by :func:`split_document`; a single-entry document gives
        one part, so the run is not split.

    Raises:
        ApplicationError: non-retryable ``unreadable_document`` for poison documents.
    """
    spans = await split_document(state["document"], state["field_schema"], state["options"])
    return [{"span": span} for span in spans]
