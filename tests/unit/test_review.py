"""The review agent's rules strategy (seed 000 §2.1 infer) and proposal acceptance (§2.2, §2.5)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from activities.document_intake.extract import extract_fields
from activities.document_intake.extract_candidates import Evidence
from activities.document_intake.review import (
    Proposal,
    proposal_is_acceptable,
    propose_updates,
)
from activities.document_intake.schema import load_field_schema
from activities.document_intake.validate import can_approve_record

SCHEMA = load_field_schema()

ESSAY = """My father is the strongest person I know. He wakes up before the sun every morning
and drives a delivery truck across the city so that my brother and I can have what we need.

When I was in third grade, he taught me how to ride a bike in the parking lot behind our
apartment. He never yelled when I fell, and he always told me that falling is part of learning.
"""


@dataclass(frozen=True)
class Page:
    page_number: int
    text: str
    ocr_confidence: float | None = None
    source: str = "plain_text"


def first_pass(pages: list[Page]) -> tuple[dict[str, str | None], list[str]]:
    """What run_pipeline would hand to the review agent: the strict record and its gaps."""
    record = dict(extract_fields(pages, SCHEMA).values)
    _, missing = can_approve_record(record, SCHEMA)
    return record, missing


def evidence(score: float) -> Evidence:
    return Evidence(page_number=1, snippet="Grade: 8", label="Grade", method="label_same_line",
                    score=score)


# --- propose_updates ----------------------------------------------------------------------------


def test_fields_printed_after_the_essay_are_found_and_accepted() -> None:
    pages = [Page(1, "IFI Essay Contest 2026\n\n" + ESSAY
                  + "\nStudent Name: Maria Lopez\nSchool: Lincoln Middle School\nGrade: 8\n")]
    record, missing = first_pass(pages)
    assert missing == ["student_name", "school", "grade"]

    proposal = propose_updates(pages, record, missing, SCHEMA)
    assert proposal.updates == {"student_name": "Maria Lopez", "school": "Lincoln Middle School",
                                "grade": "8"}
    assert proposal.strategy == "rules"
    assert proposal.strength == pytest.approx(0.95 * 0.9)  # Outside the form area.
    assert all(e.method == "label_same_line" for e in proposal.evidence.values())
    assert proposal_is_acceptable(proposal, record, SCHEMA) == (True, "accepted")


def test_the_same_document_scanned_is_proposed_but_left_to_a_person() -> None:
    text = "IFI Essay Contest 2026\n\n" + ESSAY + "\nSchool: Lincoln Middle School\n"
    pages = [Page(1, "Student Name: Maria Lopez\nGrade: 8\n\n" + text, 0.8, "ocr")]
    record, missing = first_pass(pages)
    proposal = propose_updates(pages, record, missing, SCHEMA)
    assert proposal.updates == {"school": "Lincoln Middle School"}
    assert proposal.strength < 0.85
    assert proposal_is_acceptable(proposal, record, SCHEMA) == (False, "weak_evidence")
    assert proposal_is_acceptable(proposal, record, SCHEMA, min_evidence_score=0.7) == (
        True, "accepted")


@pytest.mark.parametrize(
    ("line", "field", "value", "method", "acceptable"),
    [
        ("5chool: Lincoln Middle School", "school", "Lincoln Middle School", "relaxed_label", True),
        ("Schoo1: Lincoln Middle School", "school", "Lincoln Middle School", "relaxed_label", True),
        ("Studen1 Narne: Maria Lopez", "student_name", "Maria Lopez", "relaxed_label", False),
        ("Grode: 8", "grade", "8", "relaxed_label", False),
    ],
)
def test_ocr_confused_labels(line: str, field: str, value: str, method: str,
                             acceptable: bool) -> None:
    fields = {"student_name": "Student Name: Maria Lopez", "school": "School: Lincoln",
              "grade": "Grade: 8"}
    fields[field] = line
    pages = [Page(1, "\n".join(fields.values()) + "\n\n" + ESSAY)]
    record, missing = first_pass(pages)
    assert missing == [field]
    proposal = propose_updates(pages, record, missing, SCHEMA)
    assert proposal.updates == {field: value}
    assert proposal.evidence[field].method == method
    assert proposal_is_acceptable(proposal, record, SCHEMA)[0] is acceptable


def test_label_split_across_two_lines_is_proposed_weakly() -> None:
    pages = [Page(1, "Student Name: Maria Lopez\nSchool: Lincoln\nGrade: 8\n"
                     "Name of Father or Father\nFigure: Roberto Lopez\n\n" + ESSAY)]
    record, _ = first_pass(pages)
    assert record["father_figure_name"] is None
    proposal = propose_updates(pages, record, ["father_figure_name"], SCHEMA)
    assert proposal.updates == {"father_figure_name": "Roberto Lopez"}
    assert proposal.evidence["father_figure_name"].method == "continuation_line"
    assert proposal.evidence["father_figure_name"].snippet == (
        "Name of Father or Father / Figure: Roberto Lopez")
    assert proposal_is_acceptable(proposal, record, SCHEMA) == (False, "weak_evidence")


@pytest.mark.parametrize(
    ("field", "printed", "repaired"),
    [
        ("email", "maria.lopez@example,com", "maria.lopez@example.com"),
        ("email", "maria.lopez (at) example.com", "maria.lopez@example.com"),
        ("phone", "312-555-O134", "312-555-0134"),
        ("phone", "(3l2) 555-0134", "312-555-0134"),
        ("phone", "(217) 555-0!18", "217-555-0118"),  # Tesseract, from the labelled corpus.
        ("grade", "l2", "12"),
    ],
)
def test_invalid_present_values_get_an_ocr_repair_proposal(field: str, printed: str,
                                                           repaired: str) -> None:
    label = {"email": "Email", "phone": "Phone", "grade": "Grade"}[field]
    lines = ["Student Name: Maria Lopez", "School: Lincoln Middle School", "Grade: 8"]
    lines = [line for line in lines if not line.startswith(label)] + [f"{label}: {printed}"]
    pages = [Page(1, "\n".join(lines) + "\n\n" + ESSAY)]
    record = {"student_name": "Maria Lopez", "school": "Lincoln Middle School", "grade": "8",
              field: printed}
    proposal = propose_updates(pages, record, [], SCHEMA)
    assert proposal.updates == {field: repaired}
    assert proposal.evidence[field].method == "ocr_repair"
    assert proposal.evidence[field].score == pytest.approx(0.95 * 0.7)
    assert proposal_is_acceptable(proposal, record, SCHEMA) == (False, "weak_evidence")


def test_essay_prose_is_never_proposed() -> None:
    essay = ESSAY + (
        "\nSchool is where I learned that my father was right about hard work and patience.\n"
        "School: the place my father never got to finish, he says.\n"
        "My school is great.\n"
    )
    pages = [Page(1, "Student Name: Maria Lopez\nGrade: 8\n\n" + essay)]
    record, missing = first_pass(pages)
    assert missing == ["school"]
    proposal = propose_updates(pages, record, missing, SCHEMA)
    assert proposal.updates == {}
    assert proposal.strength == 0.0
    assert proposal.unresolved == {"school": "not_found"}  # Prose lines are not even read.
    assert proposal_is_acceptable(proposal, record, SCHEMA) == (False, "no_updates")


def test_nothing_found_is_reported_per_field() -> None:
    pages = [Page(1, "Student Name: Maria Lopez\n\n" + ESSAY)]
    record, missing = first_pass(pages)
    proposal = propose_updates(pages, record, [*missing, "shoe_size"], SCHEMA)
    assert proposal.updates == {}
    assert proposal.unresolved == {"shoe_size": "unknown_field", "school": "not_found",
                                   "grade": "not_found"}


def test_present_valid_values_are_never_second_guessed() -> None:
    pages = [Page(1, "Student Name: Maria Lopez\nSchool: Douglass High School\nGrade: 8\n\n"
                     + ESSAY)]
    record = {"student_name": "Maria Lopez", "school": "Lincoln Middle School", "grade": "8"}
    proposal = propose_updates(pages, record, ["school"], SCHEMA)
    assert proposal.updates == {}
    assert proposal.unresolved == {"school": "already_valid"}


def test_conflicting_values_are_not_proposed() -> None:
    pages = [Page(1, "Student Name: Maria Lopez\nGrade: 8\n\n" + ESSAY
                  + "\nSchool: Lincoln Middle School\nSchool: Douglass High School\n")]
    record, missing = first_pass(pages)
    proposal = propose_updates(pages, record, missing, SCHEMA)
    assert proposal.updates == {}
    assert proposal.unresolved == {"school": "conflicting_values"}


def test_proposal_is_plain_data() -> None:
    pages = [Page(1, "IFI Essay Contest 2026\n\n" + ESSAY + "\nSchool: Lincoln Middle School\n")]
    proposal = propose_updates(pages, {"student_name": "Maria Lopez", "grade": "8"}, ["school"],
                               SCHEMA)
    assert Proposal.model_validate(proposal.model_dump()) == proposal
    assert proposal.model_dump()["evidence"]["school"]["page_number"] == 1


# --- proposal_is_acceptable ---------------------------------------------------------------------

RECORD = {"student_name": "Maria Lopez", "school": "Lincoln Middle School", "grade": None}


@pytest.mark.parametrize(
    ("updates", "scores", "record", "outcome"),
    [
        ({"grade": "8"}, {"grade": 0.95}, RECORD, (True, "accepted")),
        ({"grade": "8"}, {"grade": 0.85}, RECORD, (True, "accepted")),  # Threshold inclusive.
        ({"grade": "8"}, {"grade": 0.8499}, RECORD, (False, "weak_evidence")),
        ({"grade": "8"}, {}, RECORD, (False, "weak_evidence")),  # No evidence at all.
        ({}, {}, RECORD, (False, "no_updates")),
        ({"grade": "13"}, {"grade": 0.95}, RECORD, (False, "invalid_updates")),
        ({"shoe_size": "9"}, {"shoe_size": 0.95}, RECORD, (False, "invalid_updates")),
        ({"email": "maria@example.com"}, {"email": 0.95}, RECORD,
         (False, "still_not_approvable")),
        ({"grade": "8", "school": "Douglass High School"}, {"grade": 0.95, "school": 0.95},
         RECORD, (False, "overwrites_valid_value")),
        ({"grade": "8"}, {"grade": 0.95}, {**RECORD, "grade": "13"}, (True, "accepted")),
        ({"grade": "8", "email": "maria@example.com"}, {"grade": 0.95, "email": 0.6}, RECORD,
         (False, "weak_evidence")),
    ],
)
def test_proposal_is_acceptable(updates: dict[str, str], scores: dict[str, float],
                                record: dict, outcome: tuple[bool, str]) -> None:
    proposal = Proposal(
        updates=updates,
        evidence={k: evidence(s) for k, s in scores.items()},
        strength=min(scores.values(), default=0.0),
    )
    assert proposal_is_acceptable(proposal, record, SCHEMA) == outcome
