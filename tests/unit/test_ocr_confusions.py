"""A person-name reading with a known OCR confusion is not auto-completed unless read cleanly.

The regression case is labelled document ``10_scan_tiff`` (issue 17): Tesseract's ``eng``
model read the teacher "Mrs. Muñoz" as "Mrs. Mufioz" at word confidences 0.92 / 0.89 on a
page averaging 0.948, above the 0.80 per-field floor, and the run auto-completed with the
wrong value. The words and confidences below are that page's.
"""

from __future__ import annotations

import pytest

from activities.document_intake.assess import assess_record
from activities.document_intake.confidence import field_ocr_confidences, name_ocr_confusions
from activities.document_intake.routing import route_after_pipeline
from activities.document_intake.schema import load_field_schema
from overseer.documents import PageText, Word

OPTIONS = {"exact_text_ocr_score": 1.0, "unknown_ocr_score": 0.5}

# (field, words as Tesseract read them with their confidences) on 10_scan_tiff, page 1.
TIFF_READING = {
    "student_name": [("Daniel", 0.96), ("Patel", 0.96)],
    "school": [("Washington", 0.95), ("High", 0.96), ("School", 0.96)],
    "grade": [("11", 0.96)],
    "teacher_name": [("Mrs.", 0.92), ("Mufioz", 0.89)],
    "city": [("Chicago", 0.96)],
    "father_figure_name": [("Raj", 0.94), ("Patel", 0.96)],
    "email": [("daniel.patel@example.net", 0.86)],
}


def _assess(reading: dict[str, list[tuple[str, float]]], page_confidence: float = 0.9484):
    words = [Word(text, conf) for pairs in reading.values() for text, conf in pairs]
    page = PageText(page_number=1, text=" ".join(w.text for w in words), source="ocr",
                    ocr_confidence=page_confidence, coverage=0.97, words=words)
    record = {name: " ".join(t for t, _ in pairs) for name, pairs in reading.items()}
    evidence = {name: {"page_number": 1} for name in record}
    field_conf = field_ocr_confidences([page], record, evidence)
    assessment = assess_record(record, load_field_schema(), ocr_confidence_avg=page_confidence,
                               exact_text=False, options=OPTIONS, field_confidences=field_conf)
    route = route_after_pipeline({**assessment, "tries": 1, "tools_used": ["run_pipeline"]})
    return assessment, route


def test_enye_read_as_fi_in_a_name_is_not_auto_completed():
    assessment, route = _assess(TIFF_READING)
    assert route != "complete"
    assert assessment["confidence"] < 0.9
    assert assessment["needs_review"] is True
    assert "ocr_confusion_teacher_name" in assessment["review_reason_codes"]


def test_the_same_form_without_the_confusion_still_auto_completes():
    reading = {**TIFF_READING, "teacher_name": [("Mrs.", 0.92), ("Coleman", 0.89)]}
    assessment, route = _assess(reading)
    assert route == "complete"
    assert not any(c.startswith("ocr_confusion_") for c in assessment["review_reason_codes"])


def test_a_real_fi_name_read_cleanly_is_trusted():
    # "Sofia" and "Schofield" carry the same letters; Tesseract reads them at 0.95-0.96.
    reading = {**TIFF_READING, "student_name": [("Sofia", 0.96), ("Schofield", 0.96)],
               "teacher_name": [("Mrs.", 0.96), ("Coleman", 0.96)]}
    assessment, route = _assess(reading)
    assert route == "complete"
    assert "ocr_confusion_student_name" not in assessment["review_reason_codes"]


def test_only_person_name_fields_are_checked():
    # A school or city may hold "fi" between vowels or "rn" ("Hawthorne"): not names.
    reading = {**TIFF_READING, "school": [("Hawthorne", 0.93), ("High", 0.96), ("School", 0.96)],
               "teacher_name": [("Mrs.", 0.96), ("Coleman", 0.96)]}
    assessment, route = _assess(reading)
    assert route == "complete"


def test_exact_text_is_not_second_guessed():
    record = {"student_name": "Daniel Patel", "school": "Washington High School", "grade": "11",
              "teacher_name": "Mrs. Mufioz"}
    assessment = assess_record(record, load_field_schema(), ocr_confidence_avg=None,
                               exact_text=True, options=OPTIONS, field_confidences={})
    assert assessment["needs_review"] is False
    assert assessment["confidence"] >= 0.9


@pytest.mark.parametrize(
    ("reading", "codes"),
    [
        # Misreadings of "ñ" measured on office scans (eng model): 0.42-0.92 confidence.
        ("Mufioz", ["fi_for_enye"]),
        ("Pefia", ["fi_for_enye"]),
        ("Trevifio", ["fi_for_enye"]),
        ("Treviifio", ["fi_for_enye", "ii_for_u"]),
        ("Saldafia", ["fi_for_enye"]),
        ("Mu\ufb01oz", ["fi_for_enye", "ligature"]),
        ("Zoé", ["accented_letter"]),
        ("Wiliarns", ["rn_for_m"]),
        ("Wi1liams", ["digit_in_word"]),
        # Real names that carry the same letters still match: only a clean reading clears them.
        ("Sofia", ["fi_for_enye"]),
        ("Hernandez", ["rn_for_m"]),
        # No confusion to suspect.
        ("Daniel Patel", []),
        ("Griffin", []),
        ("Josefina Fields", []),
        ("Wolfie", []),
        ("Mrs. O'Brien", []),
    ],
)
def test_name_ocr_confusions(reading, codes):
    assert name_ocr_confusions(reading) == codes
