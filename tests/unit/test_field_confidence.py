"""One misread word must pull the record's confidence down even when the page average is high."""

from __future__ import annotations

from activities.document_intake.assess import assess_record
from activities.document_intake.confidence import field_ocr_confidences
from activities.document_intake.schema import load_field_schema
from overseer.documents import PageText, Word

OPTIONS = {"exact_text_ocr_score": 1.0, "unknown_ocr_score": 0.5}


def ocr_page(words: list[tuple[str, float]]) -> PageText:
    return PageText(page_number=1, text=" ".join(w for w, _ in words), source="ocr",
                    ocr_confidence=0.93, coverage=0.95,
                    words=[Word(text=w, confidence=c) for w, c in words])


def test_field_gets_its_weakest_words_confidence():
    page = ocr_page([("Student", 0.96), ("Name:", 0.95), ("Emily", 0.95), ("Mufioz", 0.44),
                     ("School:", 0.96), ("Lincoln", 0.93), ("High", 0.97), ("School", 0.97)])
    values = {"student_name": "Emily Mufioz", "school": "Lincoln High School", "grade": None}
    evidence = {"student_name": {"page_number": 1}, "school": {"page_number": 1}}
    assert field_ocr_confidences([page], values, evidence) == {"student_name": 0.44,
                                                               "school": 0.93}


def test_exact_text_has_no_field_confidences():
    page = PageText(page_number=1, text="Student Name: Emily Munoz", source="text_layer",
                    ocr_confidence=None, coverage=None, words=[])
    assert field_ocr_confidences([page], {"student_name": "Emily Munoz"},
                                 {"student_name": {"page_number": 1}}) == {}


def test_weak_field_blocks_auto_completion_and_names_the_field():
    schema = load_field_schema()
    record = {"student_name": "Emily Mufioz", "school": "Lincoln High School", "grade": "9"}
    strong = assess_record(record, schema, ocr_confidence_avg=0.95, exact_text=False,
                           options=OPTIONS, field_confidences={"student_name": 0.95})
    weak = assess_record(record, schema, ocr_confidence_avg=0.95, exact_text=False,
                         options=OPTIONS, field_confidences={"student_name": 0.44})
    assert strong["confidence"] >= 0.9
    assert weak["confidence"] < 0.9
    assert "low_confidence_student_name" in weak["review_reason_codes"]
    assert weak["needs_review"] is True
