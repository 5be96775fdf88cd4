"""Seed 000 §1.1 confidence and §1.3 routing, with their boundary values."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from activities.document_intake.confidence import (
    aggregate_ocr_confidence,
    calculate_confidence,
    field_completeness,
)
from activities.document_intake.routing import (
    ROUTE_REASONS,
    RoutingThresholds,
    explain_route,
    route_after_pipeline,
)
from activities.document_intake.schema import load_field_schema

SCHEMA = load_field_schema()
REQUIRED = {"student_name": "Maria Lopez", "school": "Lincoln Middle School", "grade": "8"}


@dataclass
class Page:
    page_number: int
    text: str
    ocr_confidence: float | None
    source: str = "ocr"


# --- completeness -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "completeness"),
    [
        (REQUIRED, 1.0),
        ({**REQUIRED, "email": None, "phone": "bad"}, 1.0),  # Optional fields do not count.
        ({**REQUIRED, "grade": None}, 2 / 3),
        ({**REQUIRED, "grade": "13"}, 2 / 3),  # Present but invalid counts as missing.
        ({"student_name": "Maria Lopez"}, 1 / 3),
        ({}, 0.0),
    ],
)
def test_field_completeness(record: dict, completeness: float) -> None:
    assert field_completeness(record, SCHEMA) == pytest.approx(completeness)


def test_completeness_is_one_when_nothing_is_required() -> None:
    relaxed = SCHEMA.model_copy(
        update={"fields": [f.model_copy(update={"required": False}) for f in SCHEMA.fields]}
    )
    assert field_completeness({}, relaxed) == 1.0


# --- confidence ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ocr", "completeness", "exact", "expected"),
    [
        # Exact text (text layer / plain text): OCR part 1.0 whatever ocr says.
        (None, 1.0, True, 1.0),
        (None, 2 / 3, True, 0.6 + 0.4 * 2 / 3),
        (0.2, 1.0, True, 1.0),
        # OCR'd: 0.6 × OCR + 0.4 × completeness (seed §1.1).
        (0.9, 1.0, False, 0.94),
        (0.75, 1.0, False, 0.85),
        (0.5, 0.0, False, 0.3),
        (1.0, 0.0, False, 0.6),
        # Genuinely unknown OCR confidence: the seed's 0.5.
        (None, 1.0, False, 0.7),
        (None, 0.0, False, 0.3),
    ],
)
def test_calculate_confidence(ocr, completeness: float, exact: bool, expected: float) -> None:
    result = calculate_confidence(ocr, completeness, exact_text=exact)
    assert result == pytest.approx(expected, abs=1e-6)


def test_confidence_hits_thresholds_exactly_despite_float_arithmetic() -> None:
    # 0.6 × 0.8333333 + 0.4 = 0.89999998 in floats; rounding keeps it honest.
    assert calculate_confidence(5 / 6, 1.0, exact_text=False) == 0.9
    assert calculate_confidence(0.75, 1.0, exact_text=False) == 0.85


def test_exact_and_unknown_scores_are_configurable() -> None:
    assert calculate_confidence(None, 1.0, exact_text=True, exact_text_ocr_score=0.5) == 0.7
    assert calculate_confidence(None, 1.0, exact_text=False, unknown_ocr_score=0.0) == 0.4


@pytest.mark.parametrize(
    ("ocr", "completeness"),
    [(87.0, 1.0), (-0.1, 1.0), (math.nan, 1.0), (0.5, 1.5), (0.5, math.nan)],
)
def test_out_of_range_inputs_raise(ocr: float, completeness: float) -> None:
    with pytest.raises(ValueError, match="within 0..1"):
        calculate_confidence(ocr, completeness, exact_text=False)


def test_aggregate_is_character_weighted_over_ocr_pages() -> None:
    pages = [
        Page(1, "a" * 300, 0.9),
        Page(2, "b" * 100 + "   \n\n", 0.5),  # Whitespace does not weigh.
        Page(3, "exact text layer " * 50, None, "text_layer"),  # Exact pages are left out.
    ]
    assert aggregate_ocr_confidence(pages) == pytest.approx((0.9 * 300 + 0.5 * 100) / 400)


def test_aggregate_is_none_when_every_page_is_exact() -> None:
    assert aggregate_ocr_confidence([Page(1, "typed", None, "text_layer")]) is None
    assert aggregate_ocr_confidence([]) is None


def test_aggregate_of_blank_ocr_pages_is_their_plain_mean() -> None:
    assert aggregate_ocr_confidence([Page(1, "", 0.2), Page(2, " ", 0.4)]) == pytest.approx(0.3)


def test_aggregate_rejects_a_percent_scale_confidence() -> None:
    with pytest.raises(ValueError, match="within 0..1"):
        aggregate_ocr_confidence([Page(1, "text", 87.0)])


# --- routing (seed §1.3) ------------------------------------------------------------------------


def state(**overrides) -> dict:
    base = {
        "tools_used": ["run_pipeline"],
        "missing_fields": [],
        "confidence": 0.95,
        "tries": 1,
        "needs_review": False,
    }
    return {**base, **overrides}


@pytest.mark.parametrize(
    ("overrides", "route", "reason"),
    [
        # 1. max_steps: checked first, whatever else holds.
        ({"tools_used": ["t"] * 5}, "escalate", "max_steps_reached"),
        ({"tools_used": ["t"] * 6, "missing_fields": ["grade"], "confidence": 0.1},
         "escalate", "max_steps_reached"),
        ({"tools_used": ["t"] * 4}, "complete", "confident_and_complete"),
        ({"tools_used": ["t"] * 2, "max_steps": 2}, "escalate", "max_steps_reached"),
        ({"tools_used": ["t"] * 5, "max_steps": 6}, "complete", "confident_and_complete"),
        # 2. complete: nothing missing and confidence >= 0.9 (0.9 exactly completes).
        ({"confidence": 0.9}, "complete", "confident_and_complete"),
        ({"confidence": 1.0, "needs_review": True}, "complete", "confident_and_complete"),
        ({"confidence": 0.8999}, "escalate", "low_confidence_without_review"),
        ({"confidence": 0.95, "missing_fields": ["grade"]},
         "escalate", "incomplete_without_review"),
        # 3. retry: confidence < 0.5 and tries < 2 and fields missing (0.5 exactly does not).
        ({"confidence": 0.49, "missing_fields": ["grade"], "tries": 1},
         "retry", "low_confidence_missing_fields"),
        ({"confidence": 0.0, "missing_fields": ["grade"], "tries": 0},
         "retry", "low_confidence_missing_fields"),
        ({"confidence": 0.5, "missing_fields": ["grade"], "tries": 1, "needs_review": True},
         "review", "needs_review"),
        ({"confidence": 0.49, "missing_fields": ["grade"], "tries": 2, "needs_review": True},
         "review", "needs_review"),
        ({"confidence": 0.49, "missing_fields": ["grade"], "tries": 2},
         "escalate", "incomplete_without_review"),
        ({"confidence": 0.3, "missing_fields": [], "tries": 0, "needs_review": True},
         "review", "needs_review"),
        # 4. review: needs_review and tries < 3.
        ({"confidence": 0.7, "missing_fields": ["school"], "tries": 2, "needs_review": True},
         "review", "needs_review"),
        ({"confidence": 0.7, "missing_fields": ["school"], "tries": 3, "needs_review": True},
         "escalate", "review_exhausted"),
        ({"confidence": 0.85, "tries": 1, "needs_review": True}, "review", "needs_review"),
        ({"confidence": 0.85, "tries": 3, "needs_review": True}, "escalate", "review_exhausted"),
        # 5. otherwise escalate.
        ({"confidence": 0.85, "tries": 1}, "escalate", "low_confidence_without_review"),
    ],
)
def test_route_after_pipeline_every_branch(overrides: dict, route: str, reason: str) -> None:
    s = state(**overrides)
    assert route_after_pipeline(s) == route
    assert explain_route(s) == reason
    assert ROUTE_REASONS[reason] == route


def test_route_defaults_follow_the_seed_for_an_empty_state() -> None:
    # Seed: missing_fields defaults to [] and confidence to 0 → not complete; no review.
    assert route_after_pipeline({}) == "escalate"
    assert explain_route({}) == "low_confidence_without_review"
    assert route_after_pipeline({"confidence": 0.95}) == "complete"


def test_missing_fields_none_is_not_complete() -> None:
    # Seed compares missing_fields == [], so None never completes.
    assert route_after_pipeline(state(missing_fields=None)) == "escalate"


def test_custom_thresholds_move_the_boundaries() -> None:
    thresholds = RoutingThresholds(complete_confidence=0.8, retry_below_confidence=0.6,
                                   max_retry_tries=3, max_review_tries=4, max_steps=7)
    assert route_after_pipeline(state(confidence=0.8), thresholds) == "complete"
    assert route_after_pipeline(
        state(confidence=0.55, missing_fields=["grade"], tries=2), thresholds
    ) == "retry"
    assert route_after_pipeline(
        state(confidence=0.7, missing_fields=["grade"], tries=3, needs_review=True), thresholds
    ) == "review"
    assert route_after_pipeline(state(tools_used=["t"] * 6), thresholds) == "complete"


def test_routing_is_deterministic_and_does_not_mutate_state() -> None:
    s = state(confidence=0.3, missing_fields=["grade"], tries=0)
    snapshot = {k: (list(v) if isinstance(v, list) else v) for k, v in s.items()}
    assert {route_after_pipeline(s) for _ in range(5)} == {"retry"}
    assert s == snapshot


def test_thresholds_round_trip_and_defaults() -> None:
    default = RoutingThresholds()
    assert default.to_dict() == {
        "max_steps": 5, "complete_confidence": 0.9, "retry_below_confidence": 0.5,
        "max_retry_tries": 2, "max_review_tries": 3,
    }
    assert RoutingThresholds.from_dict(default.to_dict()) == default
    assert RoutingThresholds.from_dict({}) == default
    assert RoutingThresholds.from_dict(None) == default
    assert RoutingThresholds.from_dict({"complete_confidence": 0.85}).complete_confidence == 0.85


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"complete_confidance": 0.9}, "complete_confidance"),
        ({"complete_confidence": 1.5}, "complete_confidence"),
        ({"retry_below_confidence": "high"}, "retry_below_confidence"),
        ({"max_steps": -1}, "max_steps"),
        ({"max_retry_tries": 2.5}, "max_retry_tries"),
        ({"max_review_tries": True}, "max_review_tries"),
    ],
)
def test_bad_thresholds_are_refused_naming_the_key(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RoutingThresholds.from_dict(data)
