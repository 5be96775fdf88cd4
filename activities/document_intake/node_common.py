"""Shared by the document_intake graph's activity-side nodes: their pages, evidence and route.

Each node's pages are the entry's own (a batch child's part of each page); its evidence is
stored as plain dicts; and each node ends with :func:`finish_step`, which appends its
``route.decided`` event with a step-derived id, so a retried activity never duplicates it
(the runtime appends ``node.completed`` with the run view, the pipeline's ``node_snapshot``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from activities.document_intake.assess import route_after_review
from activities.document_intake.batch import EntrySpan, slice_pages
from activities.document_intake.confidence import aggregate_ocr_confidence
from activities.document_intake.routing import (
    RoutingThresholds,
    explain_route,
    route_after_pipeline,
)
from activities.document_intake.state import DocumentIntakeState
from overseer.documents import PageText
from overseer.plugin import ROUTE_DECIDED, NewEvent, append_from_activity


def text_report(pages: list[PageText]) -> dict[str, Any]:
    """Where the text came from.

    Returns:
        ``{text_source, page_count, ocr_pages, coverage_min, ocr_confidence_avg}``.
    """
    sources = {p.source for p in pages}
    ocr = [p for p in pages if p.source == "ocr"]
    coverages = [p.coverage for p in ocr if p.coverage is not None]
    return {
        "text_source": sources.pop() if len(sources) == 1 else "mixed",
        "page_count": len(pages),
        "ocr_pages": len(ocr),
        "coverage_min": min(coverages) if coverages else None,
        "ocr_confidence_avg": aggregate_ocr_confidence(pages),
    }


async def finish_step(state: DocumentIntakeState, node: str, update: dict[str, Any]) -> dict[str, Any]:
    """End a node's step: decide the route after it and append its ``route.decided`` event.

    Args:
        state: the graph state the node ran on.
        node: the node's name (``run_pipeline``, ``retry_extraction`` or ``review_agent``).
        update: the node's state updates.

    Returns:
        ``update`` with ``last_route`` set (the event's key is ``route.decided:<step>``, the
        step being the number of tools used so far).
    """
    merged: dict[str, Any] = {**state, **update}
    if node == "review_agent":
        route = route_after_review(merged)
        reason = "proposal_applied" if route == "complete" else (
            (merged.get("proposal") or {}).get("reason") or "no_proposal"
        )
    else:
        thresholds = RoutingThresholds.from_dict(merged["options"].get("thresholds", {}))
        route = route_after_pipeline(merged, thresholds)
        reason = explain_route(merged, thresholds)
    update["last_route"] = route
    merged["last_route"] = route
    step = len(merged.get("tools_used", []))
    await append_from_activity([
        NewEvent(
            run_id=state["run_id"], key=f"route.decided:{step}", type=ROUTE_DECIDED,
            actor=f"activity:{node}",
            data={
                "after": node, "route": route, "reason": reason,
                "confidence": merged.get("confidence"), "tries": merged.get("tries"),
                "missing_fields": merged.get("missing_fields", []),
            },
        ),
    ])
    return update


def reread_agrees(state: DocumentIntakeState) -> list[str]:
    """Fields run_pipeline's second reading confirmed (their values are never overwritten)."""
    return list((state.get("scan_calibration") or {}).get("reread_agrees", []))


def entry_pages(pages: list[PageText], span: dict[str, Any] | None) -> list[PageText]:
    """The entry's part of each page (batch children); words and confidences stay the page's."""
    if not span:
        return pages
    by_number = {p.page_number: p for p in pages}
    return [dataclasses.replace(by_number[part.page_number], text=part.text)
            for part in slice_pages(pages, EntrySpan(**span))]


def page_texts(dicts: list[dict[str, Any]]) -> list[PageText]:
    """Pages kept in the state as dicts, as :class:`overseer.documents.PageText` again."""
    return [PageText.from_dict(d) for d in dicts]


def evidence_dict(evidence: Any) -> dict[str, Any]:
    """A field's evidence as kept in the state: page number, snippet, label, method and score."""
    return {
        "page_number": evidence.page_number, "snippet": evidence.snippet,
        "label": evidence.label, "method": evidence.method, "score": float(evidence.score),
    }
