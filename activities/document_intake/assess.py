"""Score a record: validation, completeness and confidence in one pure step.

Pure and stdlib-only (through ``validate``/``confidence``), so the workflow's
escalate node and the approval validator can call it deterministically.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from activities.document_intake.calibration import ALL_KINDS, SCAN_CALIBRATION, ScanCalibration
from activities.document_intake.confidence import (
    CLEAN_WORD_CONFIDENCE,
    calculate_confidence,
    case_ocr_confusion,
    email_ocr_confusions,
    field_completeness,
    name_ocr_confusions,
    possible_lost_tilde,
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
    calibration: ScanCalibration | None = SCAN_CALIBRATION,
    reread_agrees: Collection[str] = (),
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
            letter, …, or an "n" between vowels, ``possible_lost_tilde``), and
            an e-mail value with a digit-like letter next to a digit that the record's
            person names do not explain, or a plus sign that may have been read "t"
            (``email_ocr_confusions``), counts as :data:`CONFUSED_FIELD_CONFIDENCE` and gets
            ``ocr_confusion_<field>`` unless its words were read at
            ``clean_word_confidence`` (:data:`~confidence.CLEAN_WORD_CONFIDENCE`) or
            better, because Tesseract scores such misreadings 0.85–0.92, above the
            per-field floor. A ``person_name``, ``school`` or ``city`` value read by OCR
            whose first letter is lower case while a later word is capitalised
            ("washington Community High School": Tesseract swapped the case of a letter
            that looks the same in both) is treated the same way, at any confidence.
        calibration: each field's calibrated confidence
            (``calibration.ScanCalibration``, by field kind; the shipped
            :data:`~calibration.SCAN_CALIBRATION` by default, None for the raw Tesseract
            numbers). It may always lower a field's part of the confidence, and may raise
            it above the raw number only for a field in ``reread_agrees``: a field counts
            ``min(raw, calibrated)`` unless a second reading confirmed it. The
            ``low_confidence_<field>`` reason (raw word confidence below
            ``min_field_ocr_confidence``) still reads the raw number: it tells a reviewer
            Tesseract was unsure.
        options (cont.): ``thresholds.complete_confidence`` (0.9 by default): a record that
            misses nothing but scores under it gets a reason for each part of its confidence
            that holds it there and no other reason names (``below_complete_<field>``,
            ``below_complete_page``; ``below_complete_confidence`` when no part can be
            named), so a record sent to a person always carries at least one reason code.
        reread_agrees: fields whose value a second reading at a higher dpi read the same
            (``node_run_pipeline.confirm_calibrated_fields``): their calibrated confidence counts, and
            their ``low_confidence_<field>`` reason no longer sets ``needs_review``.

    Returns:
        ``{confidence, missing_fields, invalid_fields, needs_review, review_reason_codes,
        scan_calibration}``; ``scan_calibration`` is None when no field has an OCR
        confidence, else ``{version, raw_confidence, calibrated_confidence, reread_agrees,
        fields}``: the calibration's version (None when ``calibration`` is None), what
        ``confidence`` would be on the raw numbers and on the calibrated ones (every field
        confirmed), the confirmed fields, and per OCR'd field ``{raw, calibrated}`` (0..1).
    """
    report = validate_record(record, schema)
    _, missing = can_approve_record(record, schema)
    present = {k: v for k, v in (field_confidences or {}).items() if record.get(k) is not None}
    confused = sorted({*_confused_names(record, schema, present, options),
                       *_case_confusions(record, schema, present)})
    calibrated = {name: _calibrate(calibration, schema, name, raw) for name, raw in present.items()}
    confirmable = {name: _once_confirmed(calibration, schema, name, value, confused)
                   for name, value in calibrated.items()}
    confirmed = sorted(name for name in reread_agrees if name in present)
    gated = {name: confirmable[name] if name in confirmed else min(value, present[name])
             for name, value in calibrated.items()}
    completeness = field_completeness(record, schema)

    def score(per_field: dict[str, float]) -> float:
        capped = {**per_field,
                  **{name: min(per_field[name], CONFUSED_FIELD_CONFIDENCE) for name in confused}}
        ocr_part = ocr_confidence_avg
        if ocr_part is not None and capped:
            ocr_part = min(ocr_part, min(capped.values()))
        return calculate_confidence(
            ocr_part,
            completeness,
            exact_text=exact_text,
            exact_text_ocr_score=float(options.get("exact_text_ocr_score", 1.0)),
            unknown_ocr_score=float(options.get("unknown_ocr_score", 0.5)),
        )

    confidence = score(gated)
    reasons = set(report.reason_codes)
    low = float(options.get("low_ocr_confidence", LOW_OCR_CONFIDENCE))
    if ocr_confidence_avg is not None and ocr_confidence_avg < low:
        reasons.add("low_ocr_confidence")
    floor = float(options.get("min_field_ocr_confidence", MIN_FIELD_OCR_CONFIDENCE))
    weak = sorted(name for name, value in present.items() if value < floor)
    reasons.update(f"low_confidence_{name}" for name in weak)
    reasons.update(f"ocr_confusion_{name}" for name in confused)
    if not missing and confidence < _complete_confidence(options):
        reasons.update(_held_below(gated, confused, ocr_confidence_avg, exact_text, completeness,
                                   _complete_confidence(options), reasons))
    return {
        "confidence": round(confidence, 4),
        "missing_fields": list(missing),
        "invalid_fields": dict(report.errors),
        # A weak reading a second one confirmed keeps its reason (Tesseract was unsure) but
        # no longer asks for a person by itself.
        "needs_review": bool(report.needs_review or missing or set(weak) - set(confirmed)
                             or confused or "low_ocr_confidence" in reasons),
        "review_reason_codes": sorted(reasons),
        "scan_calibration": None if not present else {
            "version": calibration.version if calibration is not None else None,
            "raw_confidence": round(score(present), 4),
            "calibrated_confidence": round(score(confirmable), 4),
            "reread_agrees": confirmed,
            "fields": {name: {"raw": present[name], "calibrated": calibrated[name]}
                       for name in sorted(present)},
        },
    }


BELOW_COMPLETE = "below_complete_confidence"
"""Reason of a record that misses nothing yet scores under the completing threshold, when no
single part of its confidence can be named (``below_complete_<field>``, ``below_complete_page``
name the parts that hold it there)."""


def _complete_confidence(options: Mapping[str, Any]) -> float:
    """The run's threshold to complete (``options.thresholds.complete_confidence``, 0.9)."""
    return float((options.get("thresholds") or {}).get("complete_confidence", 0.9))


def _held_below(per_field: Mapping[str, float], confused: Collection[str],
                page: float | None, exact_text: bool, completeness: float, complete_at: float,
                reasons: Collection[str]) -> list[str]:
    """Reason codes for the parts of the confidence that keep a complete record under ``complete_at``.

    A field whose own part (its gated confidence, a confusion's cap) would keep the record
    under the threshold gets ``below_complete_<field>`` unless a reason names it already
    (``low_confidence_<field>``, ``ocr_confusion_<field>``); the page's mean OCR confidence
    gets ``below_complete_page``. When neither names a part (an unknown OCR confidence, a
    configured exact-text score), :data:`BELOW_COMPLETE`. So a record that waits for a
    person always says why.
    """
    def holds(part: float) -> bool:
        return calculate_confidence(part, completeness, exact_text=False) < complete_at

    out = [f"below_complete_{name}" for name, value in sorted(per_field.items())
           if not exact_text and holds(min(value, CONFUSED_FIELD_CONFIDENCE)
                                       if name in confused else value)
           and f"low_confidence_{name}" not in reasons
           and f"ocr_confusion_{name}" not in reasons]
    if not exact_text and page is not None and holds(page) and "low_ocr_confidence" not in reasons:
        out.append("below_complete_page")
    named = any(code.startswith(("below_complete_", "low_confidence_", "ocr_confusion_"))
                or code == "low_ocr_confidence" for code in [*reasons, *out])
    return out if named else [BELOW_COMPLETE]


def fields_to_confirm(assessment: Mapping[str, Any], complete_confidence: float) -> list[str]:
    """Fields a second reading must confirm before calibration may complete a record.

    A record completes on calibrated confidence only where a field's raw Tesseract number
    would have kept it below ``complete_confidence``; such a field is trusted only once a
    higher-dpi reading of its lines reads the same value (the check that stops one-letter
    misreads like "exampie", which no confidence separates).

    Args:
        assessment: :func:`assess_record`'s result.
        complete_confidence: 0..1, the routing threshold to complete (0.9 by default).

    Returns:
        Sorted field names, empty unless nothing is missing, the record is below
        ``complete_confidence`` and would reach it with every field confirmed: then the
        unconfirmed fields whose own part of the confidence keeps it below.
    """
    calibration = assessment.get("scan_calibration")
    if (not calibration or assessment["missing_fields"]
            or assessment["confidence"] >= complete_confidence
            or calibration["calibrated_confidence"] < complete_confidence):
        return []
    confirmed = set(calibration["reread_agrees"])
    return sorted(
        name for name, value in calibration["fields"].items()
        if name not in confirmed and calculate_confidence(
            min(value["raw"], value["calibrated"]), 1.0, exact_text=False) < complete_confidence
    )


def _once_confirmed(calibration: ScanCalibration | None, schema: FieldSchema, name: str,
                    calibrated: float, confused: Collection[str]) -> float:
    """What a field counts once a second reading confirmed it.

    Its calibrated confidence; for an e-mail address that no rule doubts
    (``email_ocr_confusions``), at least the e-mail curve's highest step. Tesseract scores
    some right addresses near 0 (typed in a monospace or narrow face, or split at a dot),
    where the curve claims 0.637; on the clean-scan sets and the corpus's scans
    (docs/accuracy.md) the 400 dpi re-read agreed with all 11 right addresses no rule
    doubts read below 0.52 and disagreed with the one wrong ("ava.jjohnson").
    """
    if (calibration is None or name in confused or not schema.has_field(name)
            or schema.field(name).kind != "email"):
        return calibrated
    curve = calibration.curves.get("email", calibration.curves[ALL_KINDS])
    return max(calibrated, curve.y[-1])


def _calibrate(calibration: ScanCalibration | None, schema: FieldSchema, name: str,
               raw: float) -> float:
    """A field's calibrated confidence (its raw one without a calibration or schema field)."""
    if calibration is None or not schema.has_field(name):
        return raw
    return calibration.calibrate(schema.field(name).kind, raw)


_CASED_KINDS = frozenset({"person_name", "school", "city"})


def _case_confusions(
    record: dict[str, str | None], schema: FieldSchema, field_confidences: dict[str, float]
) -> list[str]:
    """OCR'd name, school and city fields whose reading starts lower case mid-capitalised."""
    return sorted(
        name for name in field_confidences
        if isinstance(value := record.get(name), str) and schema.has_field(name)
        and schema.field(name).kind in _CASED_KINDS and case_ocr_confusion(value)
    )


def _confused_names(
    record: dict[str, str | None],
    schema: FieldSchema,
    field_confidences: dict[str, float],
    options: dict[str, Any],
) -> list[str]:
    """OCR'd fields whose reading holds a known confusion, read below clean.

    Person names: ``name_ocr_confusions`` or ``possible_lost_tilde``; e-mail addresses:
    ``email_ocr_confusions``, given the record's person names as read.
    """
    clean = float(options.get("clean_word_confidence", CLEAN_WORD_CONFIDENCE))
    names = [value for key, value in record.items() if isinstance(value, str)
             and schema.has_field(key) and schema.field(key).kind == "person_name"]
    out = []
    for name, confidence in field_confidences.items():
        value = record.get(name)
        if confidence >= clean or not isinstance(value, str) or not schema.has_field(name):
            continue
        kind = schema.field(name).kind
        if ((kind == "person_name" and (name_ocr_confusions(value) or possible_lost_tilde(value)))
                or (kind == "email" and email_ocr_confusions(value, names))):
            out.append(name)
    return sorted(out)


def public_snapshot(state: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the graph state a run view shows (``runs.result``); no page text."""
    keys = (
        "record", "confidence", "missing_fields", "invalid_fields", "needs_review",
        "review_reason_codes", "tools_used", "tries", "strategy", "ocr_confidence_avg",
        "field_ocr_confidence", "scan_calibration",
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
    when a model answered). ``strategy`` alone names only the last extraction's: it says
    ``rules`` even after the review agent used a model.
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
