"""Score a record: validation, completeness and confidence in one pure step.

Pure and stdlib-only (through ``validate``/``confidence``), so the workflow's
escalate node and the approval validator can call it deterministically.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.document_intake.confidence import (
    CLEAN_WORD_CONFIDENCE,
    calculate_confidence,
    field_completeness,
    name_ocr_confusions,
)
from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import can_approve_record, validate_record

LOW_OCR_CONFIDENCE = 0.75
"""Below this OCR confidence a record gets the ``low_ocr_confidence`` reason code."""

MIN_FIELD_OCR_CONFIDENCE = 0.80
"""Below this, an OCR'd field value gets ``low_confidence_<field>`` and the record needs review."""

CONFUSED_FIELD_CONFIDENCE = 0.5
"""What a person-name reading with an unresolved OCR confusion counts for: a coin flip
between the reading ("Mufioz") and what it may stand for ("Muñoz")."""


def assess_record(
    record: dict[str, str | None],
    schema: FieldSchema,
    *,
    ocr_confidence_avg: float | None,
    exact_text: bool,
    options: dict[str, Any],
    field_confidences: dict[str, float] | None = None,
) -> dict[str, Any]:
    """Validate and score a record (seed 000 §1.1 confidence, §1.2 can_approve_record).

    Args:
        record: field name → value (None when absent).
        schema: the run's field schema snapshot.
        ocr_confidence_avg: 0..1, None when no page was OCR'd.
        exact_text: every page came from a text layer or a plain-text upload.
        options: the run's options (``exact_text_ocr_score``, ``unknown_ocr_score``,
            ``low_ocr_confidence``, ``min_field_ocr_confidence``).
        field_confidences: per OCR'd field value, the lowest word confidence (0..1). A
            deliberate change to seed §1.1: the OCR part of the confidence is the lower
            of the page average and the weakest field value, because one misread word
            makes a record wrong while the page average stays high.
            A ``person_name`` value read by OCR that holds a known OCR confusion
            (``confidence.name_ocr_confusions``: "ñ" read as "fi", rn/m, an accented
            letter, …) counts as :data:`CONFUSED_FIELD_CONFIDENCE` and gets
            ``ocr_confusion_<field>`` unless its words were read at
            ``clean_word_confidence`` (:data:`~confidence.CLEAN_WORD_CONFIDENCE`) or
            better, because Tesseract scores such misreadings 0.85–0.92, above the
            per-field floor.

    Returns:
        ``{confidence, missing_fields, invalid_fields, needs_review, review_reason_codes}``.
    """
    report = validate_record(record, schema)
    _, missing = can_approve_record(record, schema)
    present = {k: v for k, v in (field_confidences or {}).items() if record.get(k) is not None}
    confused = _confused_names(record, schema, present, options)
    scored = {**present, **{name: min(present[name], CONFUSED_FIELD_CONFIDENCE) for name in confused}}
    ocr_part = ocr_confidence_avg
    if ocr_part is not None and scored:
        ocr_part = min(ocr_part, min(scored.values()))
    confidence = calculate_confidence(
        ocr_part,
        field_completeness(record, schema),
        exact_text=exact_text,
        exact_text_ocr_score=float(options.get("exact_text_ocr_score", 1.0)),
        unknown_ocr_score=float(options.get("unknown_ocr_score", 0.5)),
    )
    reasons = set(report.reason_codes)
    low = float(options.get("low_ocr_confidence", LOW_OCR_CONFIDENCE))
    if ocr_confidence_avg is not None and ocr_confidence_avg < low:
        reasons.add("low_ocr_confidence")
    floor = float(options.get("min_field_ocr_confidence", MIN_FIELD_OCR_CONFIDENCE))
    weak = sorted(name for name, value in present.items() if value < floor)
    reasons.update(f"low_confidence_{name}" for name in weak)
    reasons.update(f"ocr_confusion_{name}" for name in confused)
    return {
        "confidence": round(confidence, 4),
        "missing_fields": list(missing),
        "invalid_fields": dict(report.errors),
        "needs_review": bool(report.needs_review or missing or weak or confused
                             or "low_ocr_confidence" in reasons),
        "review_reason_codes": sorted(reasons),
    }


def _confused_names(
    record: dict[str, str | None],
    schema: FieldSchema,
    field_confidences: dict[str, float],
    options: dict[str, Any],
) -> list[str]:
    """OCR'd person-name fields whose reading holds a known confusion, read below clean."""
    clean = float(options.get("clean_word_confidence", CLEAN_WORD_CONFIDENCE))
    out = []
    for name, confidence in field_confidences.items():
        value = record.get(name)
        if (confidence < clean and isinstance(value, str) and schema.has_field(name)
                and schema.field(name).kind == "person_name" and name_ocr_confusions(value)):
            out.append(name)
    return sorted(out)


def public_snapshot(state: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the graph state a run view shows (``runs.result``); no page text."""
    keys = (
        "record", "confidence", "missing_fields", "invalid_fields", "needs_review",
        "review_reason_codes", "tools_used", "tries", "strategy", "ocr_confidence_avg",
        "field_ocr_confidence",
        "outcome", "evidence",
    )
    snap = {k: state[k] for k in keys if k in state}
    if "report" in state:
        snap["text_source"] = state["report"].get("text_source")
    snap["strategies"] = strategies_used(state)
    return snap


def strategies_used(state: Mapping[str, Any]) -> list[str]:
    """Every strategy that ran, in order.

    run_pipeline's ``rules``, then retry_extraction's and the review agent's (``llm:<model>``
    when a model answered). ``strategy`` alone names only the last extraction's (issue 17:
    it said ``rules`` after the review agent used a model).
    """
    ran = ["rules", state.get("strategy"), (state.get("proposal") or {}).get("strategy")]
    out: list[str] = []
    for name in ran:
        if isinstance(name, str) and name and name not in out:
            out.append(name)
    return out


def route_after_review(state: dict[str, Any]) -> str:
    """After review_agent: ``complete`` when its proposal was applied, else ``escalate``.

    Deliberate change to seed 000 §1.4 (whose review_agent always went to save_complete):
    a record that still needs review must reach a human.
    """
    proposal = state.get("proposal") or {}
    return "complete" if proposal.get("acceptable") else "escalate"
