"""Node ``retry_extraction`` of the document_intake graph: extract only the missing fields again.

It runs in an activity of its own (for its attempts): with an LLM configured it asks the
model; without one it re-reads at a higher dpi, the doubtful fields' regions or whole pages.
"""

from __future__ import annotations

from typing import Any

from activities.document_intake.assess import MIN_FIELD_OCR_CONFIDENCE, assess_record
from activities.document_intake.confidence import field_ocr_confidences
from activities.document_intake.extract import extract_fields
from activities.document_intake.llm_steps import extract_with_llm
from activities.document_intake.node_common import (
    entry_pages,
    evidence_dict,
    finish_step,
    reread_agrees,
    text_report,
)
from activities.document_intake.pages import limits_from_options, load_region_reread
from activities.document_intake.reread import RegionRead, read_region_fields
from activities.document_intake.schema import FieldSchema
from activities.document_intake.state import DocumentIntakeState
from overseer.plugin import get_runtime, llm_enabled, load_pages, temporal_errors


@temporal_errors
async def retry_extraction(state: DocumentIntakeState) -> dict[str, Any]:
    """Node ``retry_extraction`` (seed 000 §1.2 retry_llm_node): extract only the missing fields.

    With an LLM configured it asks the model for the missing fields (JSON-validated);
    without one it runs a stronger deterministic pass: the OCR'd pages again at a higher
    dpi, then relaxed label matching, and records ``strategy: rules``. A value is only
    taken when it validates; present fields are never overwritten.

    With ``options["retry_ocr_region"]`` (``OVERSEER_RETRY_OCR_REGION``, default on) the higher dpi
    reads only a band of lines around each doubtful field (``reread.reread_regions``):
    missing and invalid fields to read again, and present fields read weakly (below
    ``min_field_ocr_confidence``, or with an ``ocr_confusion_*`` reason) to read again and
    compare. A kept value whose re-read differs gets ``reread_disagrees_<field>`` and the
    record needs review. When a field to read cannot be placed the whole pages are read
    again, as without the option. ``report["retry_ocr"]`` records which (``mode``
    ``region`` or ``page``), the regions and the comparisons. A region read leaves
    ``ocr_confidence_avg`` at the first reading's (a band's average is not the page's);
    the page read takes the higher of the two page averages.

    A permanent model failure (refusal, other 4xx, malformed JSON, or the last attempt
    of a transient one) is recorded as ``llm_failure`` and sends the run to a human; a
    call over the run's budget stops the run there (:class:`overseer.budget.BudgetStop`).

    Raises:
        ApplicationError: non-retryable ``unreadable_document``; transient model errors
            propagate before the last attempt so Temporal retries with backoff.
    """
    schema = FieldSchema.model_validate(state["field_schema"])
    options = state["options"]
    wanted = sorted(set(state.get("missing_fields", [])) | set(state.get("invalid_fields", {})))
    report = dict(state["report"])
    ocr_avg = state.get("ocr_confidence_avg")
    field_conf = dict(state.get("field_ocr_confidence", {}))
    step = len(state.get("tools_used", [])) + 1
    found: dict[str, str | None]
    evidence: dict[str, dict[str, Any]] = {}
    extra: dict[str, Any] = {}
    if llm_enabled(get_runtime().settings):
        pages = await load_pages(state["document"], dpi=int(options["ocr_dpi"]))
        entry = entry_pages(pages, state.get("span"))
        asked = await extract_with_llm(dict(state), entry, wanted, schema,
                                       node="retry_extraction", step=step)
        found = dict(asked.values)
        evidence = {k: evidence_dict(v) for k, v in asked.evidence.items()}
        strategy = asked.strategy
        extra = {"llm_quote_checks": asked.quote_checks}
        if asked.failure:
            extra["llm_failure"] = asked.failure
    else:
        force = report.get("ocr_pages", 0) > 0
        region, weak = None, _weak_fields(state, wanted)
        if force and options["retry_ocr_region"] and not state.get("span"):
            region = await _reread_regions(state, schema, wanted, weak)
        if region is not None:
            found, evidence, checks = _take_region_reading(
                state["record"], schema, region, wanted, weak)
            field_conf.update(field_ocr_confidences(region.pages, found, evidence))
            report = {**report, "retry_ocr": {
                "mode": "region", "dpi": int(options["retry_ocr_dpi"]),
                "regions": [r.to_dict() for r in region.regions], "checks": checks,
            }}
            extra["reread_disagreements"] = sorted(
                name for name, check in checks.items() if check.get("agrees") is False)
        else:
            pages = await load_pages(
                state["document"],
                dpi=int(options["retry_ocr_dpi"] if force else options["ocr_dpi"]),
                force_ocr=force,
                limits=limits_from_options(options),
            )
            entry = entry_pages(pages, state.get("span"))
            result = extract_fields(entry, schema, relaxed=True, only=wanted)
            found = {k: v for k, v in result.values.items() if v is not None}
            evidence = {k: evidence_dict(v) for k, v in result.evidence.items() if k in found}
            field_conf.update(field_ocr_confidences(entry, found, evidence))
            if force:
                new_report = text_report(entry)
                report = {**report, "retry_ocr_confidence_avg": new_report["ocr_confidence_avg"],
                          "retry_ocr": {"mode": "page", "dpi": int(options["retry_ocr_dpi"])}}
                if new_report["ocr_confidence_avg"] is not None:
                    ocr_avg = max(ocr_avg or 0.0, new_report["ocr_confidence_avg"])
        strategy = "rules"
    record = {**state["record"], **found}
    assessment = assess_record(
        record, schema, ocr_confidence_avg=ocr_avg,
        exact_text=report["text_source"] in ("text_layer", "plain_text"), options=options,
        field_confidences=field_conf, reread_agrees=reread_agrees(state),
    )
    if extra.get("llm_failure"):
        assessment["review_reason_codes"] = sorted({*assessment["review_reason_codes"],
                                                   extra["llm_failure"]})
    disagreements = extra.pop("reread_disagreements", [])
    if disagreements:
        # The 400 dpi reading of a kept value differs from the 300 dpi one: which is right is
        # for a person to say, whatever the confidence.
        assessment["review_reason_codes"] = sorted({
            *assessment["review_reason_codes"], *(f"reread_disagrees_{n}" for n in disagreements)})
        assessment["needs_review"] = True
    update = {
        "record": record,
        "evidence": {**state.get("evidence", {}), **evidence},
        "report": report,
        "ocr_confidence_avg": ocr_avg,
        "field_ocr_confidence": field_conf,
        **extra,
        **assessment,
        "tries": state.get("tries", 0) + 1,
        "tools_used": [*state.get("tools_used", []), "retry_extraction"],
        "strategy": strategy,
    }
    return await finish_step(state, "retry_extraction", update)


async def _reread_regions(
    state: DocumentIntakeState, schema: FieldSchema, wanted: list[str], weak: list[str]
) -> RegionRead | None:
    """The doubtful fields' regions at the retry dpi, or None to re-read whole pages."""
    options = state["options"]
    limits = limits_from_options(options)
    pages = await load_pages(state["document"], dpi=int(options["ocr_dpi"]), limits=limits)
    return await load_region_reread(
        state["document"], pages, schema, extract=wanted,
        check=weak, evidence=dict(state.get("evidence", {})),
        dpi=int(options["retry_ocr_dpi"]), limits=limits,
    )


def _weak_fields(state: DocumentIntakeState, wanted: list[str]) -> list[str]:
    """Present fields read weakly at the first dpi: below the per-field floor or confusable."""
    floor = float(state["options"].get("min_field_ocr_confidence", MIN_FIELD_OCR_CONFIDENCE))
    record = state["record"]
    codes = set(state.get("review_reason_codes", []))
    return sorted(
        name for name, value in record.items()
        if value is not None and name not in wanted
        and (state.get("field_ocr_confidence", {}).get(name, 1.0) < floor
             or f"ocr_confusion_{name}" in codes)
    )


def _take_region_reading(
    record: dict[str, str | None], schema: FieldSchema, region: RegionRead, wanted: list[str],
    weak: list[str],
) -> tuple[dict[str, str | None], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Values for ``wanted`` from the regions, and the comparison of the weak fields.

    Returns:
        ``(found, evidence, checks)``: valid values for wanted fields with their evidence
        (the region's exact line, the page number and the region's rows at the retry dpi);
        per re-read field ``{"first": value at the first dpi or None, "reread": value or
        None, "agrees": bool or None (nothing to compare)}``.
    """
    result, checks = read_region_fields(region, schema, record, extract=wanted, check=weak)
    found: dict[str, str | None] = {}
    evidence: dict[str, dict[str, Any]] = {}
    for name in wanted:
        value = result.values.get(name)
        if name in checks and value is not None:
            found[name] = value
            evidence[name] = {**evidence_dict(result.evidence[name]),
                              "region": _region_of(region, name)}
    return found, evidence, checks


def _region_of(region: RegionRead, name: str) -> dict[str, Any] | None:
    band = next((r for r in region.regions if name in r.fields), None)
    return band.to_dict() if band else None
