"""Labelled-field extraction from entry-form text: label variants, layouts, OCR noise, traps."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from activities.document_intake.extract import extract_fields
from activities.document_intake.extract_candidates import Evidence
from activities.document_intake.extract_lines import document_lines, essay_start_index
from activities.document_intake.schema import load_field_schema

SCHEMA = load_field_schema()

ESSAY = """My father is the strongest person I know. He wakes up before the sun every morning
and drives a delivery truck across the city so that my brother and I can have what we need.

When I was in third grade, he taught me how to ride a bike in the parking lot behind our
apartment. He never yelled when I fell, and he always told me that falling is part of learning.

Now that I am older, I understand how tired he must have been on those evenings. He still
came to every school concert and every parent night, and he always sat in the front row.
"""

TRAP_ESSAY = """My school is great because the teachers care about every student who walks in.
School was hard for me at first, but my father sat with me at the kitchen table every night.
School every day was his rule, and he never let me skip it, not even when it snowed.
Father figures come in many forms, and mine is my grandfather, who raised me since I was two.
Grade school taught me to read, but my dad taught me why reading matters for the rest of life.
"""


@dataclass(frozen=True)
class Page:
    page_number: int
    text: str
    ocr_confidence: float | None = None
    source: str = "plain_text"


def extract(text: str, **kwargs):
    return extract_fields([Page(1, text)], SCHEMA, **kwargs)


def form(*lines: str, essay: str = ESSAY,
         header: str = "IFI Essay Contest 2026 — Entry Form") -> str:
    return "\n".join([header, "", *lines, "", essay])


EXPECTED = {
    "student_name": ("Maria Lopez", "Maria Lopez"),
    "school": ("Lincoln Middle School", "Lincoln Middle School"),
    "grade": ("8th", "8"),
    "teacher_name": ("Mrs. Smith", "Mrs. Smith"),
    "city": ("Oak Park", "Oak Park"),
    "father_figure_name": ("Roberto Lopez", "Roberto Lopez"),
    "phone": ("(312) 555-0134", "312-555-0134"),
    "email": ("Maria.Lopez@Example.com", "maria.lopez@example.com"),
}

LABELS = [
    ("student_name", "Student Name"),
    ("student_name", "Name of Student"),
    ("student_name", "Student's Name"),
    ("student_name", "Student"),
    ("student_name", "Name"),
    ("school", "School"),
    ("school", "School Name"),
    ("school", "Name of School"),
    ("grade", "Grade"),
    ("grade", "Grade/Year"),
    ("grade", "Grade Level"),
    ("grade", "Year"),
    ("teacher_name", "Teacher"),
    ("teacher_name", "Teacher Name"),
    ("teacher_name", "Teacher's Name"),
    ("city", "City"),
    ("city", "City/Town"),
    ("city", "Hometown"),
    ("father_figure_name", "Father/Father-Figure Name"),
    ("father_figure_name", "Father's Name"),
    ("father_figure_name", "Father Figure"),
    ("father_figure_name", "Name of Father or Father Figure"),
    ("phone", "Phone"),
    ("phone", "Phone Number"),
    ("phone", "Telephone"),
    ("email", "Email"),
    ("email", "E-mail"),
    ("email", "Email Address"),
]

LAYOUTS = {
    "colon": lambda label, value: [f"{label}: {value}"],
    "no_colon": lambda label, value: [f"{label} {value}"],
    "next_line": lambda label, value: [f"{label}:", value],
    "next_line_no_colon": lambda label, value: [label, value],
    "fill_line": lambda label, value: [f"{label}: ____{value}____"],
    "lowercase": lambda label, value: [f"{label.lower()}: {value}"],
    "extra_spaces": lambda label, value: [f"  {label}   :    {value}  "],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize(("field", "label"), LABELS)
def test_every_label_variant_in_every_layout(field: str, label: str, layout: str) -> None:
    raw, expected = EXPECTED[field]
    result = extract(form(*LAYOUTS[layout](label, raw)))
    assert result.values[field] == expected
    assert {k for k, v in result.values.items() if v is not None} == {field}
    evidence = result.evidence[field]
    assert evidence.page_number == 1
    assert evidence.method == ("label_next_line" if layout.startswith("next_line")
                               else "label_same_line")
    assert 0.8 <= evidence.score <= 1.0


def test_full_form_with_every_field() -> None:
    text = form(
        "Student Name: Maria Lopez",
        "School: Lincoln Middle School",
        "Grade: 8th",
        "Teacher's Name: Mrs. Smith",
        "City/Town: Oak Park",
        "Father/Father-Figure Name: Roberto Lopez",
        "Phone Number: (312) 555-0134",
        "E-mail: Maria.Lopez@Example.com",
    )
    result = extract(text)
    assert result.values == {field: expected for field, (_, expected) in EXPECTED.items()}
    assert result.rejected == {}
    assert all(e.score == 0.95 and e.method == "label_same_line" for e in result.evidence.values())


@pytest.mark.parametrize(
    ("line", "values"),
    [
        ("Grade: 8      School: Lincoln Middle School",
         {"grade": "8", "school": "Lincoln Middle School"}),
        ("Student Name: Maria Lopez\tGrade: 8", {"student_name": "Maria Lopez", "grade": "8"}),
        ("Grade: 8 School: Lincoln Middle School",
         {"grade": "8", "school": "Lincoln Middle School"}),
        ("City: Oak Park | Phone: 312-555-0134", {"city": "Oak Park", "phone": "312-555-0134"}),
        ("Name of Student Maria Lopez      Grade 8",
         {"student_name": "Maria Lopez", "grade": "8"}),
        ("Student Name: ____Maria Lopez____   Grade/Year: __8__",
         {"student_name": "Maria Lopez", "grade": "8"}),
        ("School Name: ___Lincoln Middle School___    Grade/Year: __8__",
         {"school": "Lincoln Middle School", "grade": "8"}),
        ("Name: Maria Lopez      Date: 03/01/2026", {"student_name": "Maria Lopez"}),
    ],
)
def test_several_fields_on_one_line(line: str, values: dict[str, str]) -> None:
    result = extract(form(line))
    assert {k: v for k, v in result.values.items() if v is not None} == values


def test_label_row_over_value_row() -> None:
    text = form(
        "Student Name        Grade       School",
        "Maria Lopez         8           Lincoln Middle School",
    )
    result = extract(text)
    assert result.values["student_name"] == "Maria Lopez"
    assert result.values["grade"] == "8"
    assert result.values["school"] == "Lincoln Middle School"
    assert result.evidence["school"].method == "label_next_line"


def test_blank_fill_lines_give_no_value() -> None:
    text = form("Student Name: ______________", "School ______________", "Grade:", "")
    result = extract(text)
    assert all(v is None for v in result.values.values())


def test_value_below_label_may_skip_one_blank_line_but_not_take_the_next_label() -> None:
    result = extract(form("Student Name:", "", "Maria Lopez", "School:", "Grade:", "8"))
    assert result.values["student_name"] == "Maria Lopez"
    assert result.values["school"] is None  # "Grade:" below it is a label, not a value.
    assert result.values["grade"] == "8"


# --- OCR noise ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        ("Studen1 Narne Maria Lopez", "student_name", "Maria Lopez"),
        ("Studen1 Narne: Maria Lopez", "student_name", "Maria Lopez"),
        ("5chool: Lincoln Middle School", "school", "Lincoln Middle School"),
        ("Schoo1 Name: Lincoln Middle School", "school", "Lincoln Middle School"),
        ("Gradc: 8", "grade", "8"),
        ("Teachcr Narne: Mrs. Smith", "teacher_name", "Mrs. Smith"),
        ("Ernail: maria.lopez@example.com", "email", "maria.lopez@example.com"),
        ("Te1ephone: 312-555-0134", "phone", "312-555-0134"),
    ],
)
def test_ocr_noisy_labels_need_relaxed_mode(line: str, field: str, expected: str) -> None:
    text = form(line)
    assert extract(text).values[field] is None
    relaxed = extract(text, relaxed=True)
    assert relaxed.values[field] == expected
    assert relaxed.evidence[field].method == "relaxed_label"
    assert relaxed.evidence[field].score <= 0.85  # Never as trusted as an exact label.


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        ("student name maria lopez", "student_name", "Maria Lopez"),
        ("STUDENT NAME: MARIA LOPEZ", "student_name", "Maria Lopez"),
        ("~Student Name: Maria Lopez", "student_name", "Maria Lopez"),
        ("* Grade: 8", "grade", "8"),
        ("1. Name of School: Lincoln Middle School", "school", "Lincoln Middle School"),
        ("Grade; 8", "grade", "8"),
        ("Grade - 8", "grade", "8"),
        ("StudentName: Maria Lopez", "student_name", "Maria Lopez"),
        ("Students Name: Maria Lopez", "student_name", "Maria Lopez"),
        ("Student’s Name: Maria Lopez", "student_name", "Maria Lopez"),
        ("Phone #: 312-555-0134", "phone", "312-555-0134"),
        ("Phone No. 312-555-0134", "phone", "312-555-0134"),
        ("E - mail: maria@example.com", "email", "maria@example.com"),
    ],
)
def test_mild_noise_is_read_strictly(line: str, field: str, expected: str) -> None:
    assert extract(form(line)).values[field] == expected


def test_fuzzy_labels_do_not_read_other_peoples_labels() -> None:
    text = form(
        "Parent Name: John Lopez",
        "Parent/Guardian Name: John Lopez",
        "Student ID: 12345",
        "School District: 299",
        "Date: 03/01/2026",
        "Signature: ____________",
    )
    for relaxed in (False, True):
        result = extract(text, relaxed=relaxed)
        assert result.values["student_name"] is None
        assert result.values["school"] is None


def test_ocr_confidence_lowers_the_score() -> None:
    text = form("Student Name: Maria Lopez")
    exact = extract_fields([Page(1, text)], SCHEMA).evidence["student_name"]
    scanned = extract_fields([Page(1, text, 0.8, "ocr")], SCHEMA).evidence["student_name"]
    assert exact.score == 0.95
    assert scanned.score == pytest.approx(0.95 * 0.9)


# --- the essay is not a form --------------------------------------------------------------------


@pytest.mark.parametrize("relaxed", [False, True])
def test_essay_prose_never_fills_a_missing_school(relaxed: bool) -> None:
    text = form("Student Name: Maria Lopez", "Grade: 8", essay=TRAP_ESSAY)
    result = extract(text, relaxed=relaxed)
    assert result.values["school"] is None
    assert result.values["father_figure_name"] is None
    assert result.values["student_name"] == "Maria Lopez"
    assert result.values["grade"] == "8"


@pytest.mark.parametrize("relaxed", [False, True])
def test_essay_right_after_the_fields_without_a_blank_line(relaxed: bool) -> None:
    text = "\n".join([
        "Student Name: Maria Lopez",
        "Grade: 8",
        "My school is great because the teachers care about every student who walks in.",
        "School every day was the rule in our house.",
        "Father Figure is what my teacher calls him.",
    ])
    result = extract(text, relaxed=relaxed)
    assert result.values["school"] is None
    assert result.values["father_figure_name"] is None
    assert result.values["student_name"] == "Maria Lopez"


def test_essay_labels_after_the_essay_heading_are_ignored() -> None:
    text = form("Student Name: Maria Lopez", "Grade: 8", "",
                "Essay: What My Father Means to Me",
                "School: the place my father never got to finish.")
    assert extract(text).values["school"] is None


def test_contact_details_in_the_essay_are_not_taken() -> None:
    essay = ESSAY + "\nYou can write to my dad at roberto.lopez@example.com or call 312-555-0199.\n"
    text = form("Student Name: Maria Lopez", essay=essay)
    result = extract(text, relaxed=True)
    assert result.values["email"] is None
    assert result.values["phone"] is None


def test_header_lines_are_not_read_as_labels() -> None:
    text = form("Grade: 8", header="Student Essay Contest Entry Form")
    result = extract(text)
    assert result.values["student_name"] is None
    assert "student_name" not in result.rejected


@pytest.mark.parametrize(
    ("lines", "start"),
    [
        (["Student Name: Maria Lopez", "", "Essay:", "My father..."], 2),
        (["Student Name: Maria Lopez", "Title: What My Father Means to Me", "He works."], 1),
        (["Student Name: Maria Lopez", "Essay (500 words or less):", "He works."], 1),
        (["Student Name: Maria Lopez", "Title of Essay: My Dad", "School: Lincoln",
          "Grade: 8", "", *ESSAY.splitlines()], 5),
        (["Please print clearly. All entries must be postmarked by March 1 and must include"
          " the entry form with every line completed.", "Student Name: Maria Lopez", "",
          *ESSAY.splitlines()], 3),
        (["Student Name: Maria Lopez", "Grade: 8"], 2),
    ],
)
def test_essay_start(lines: list[str], start: int) -> None:
    assert essay_start_index(document_lines([Page(1, "\n".join(lines))]), SCHEMA) == start


def test_essay_title_field_inside_the_form_does_not_end_it() -> None:
    text = form("Student Name: Maria Lopez", "Title of Essay: My Dad",
                "School: Lincoln Middle School", "Grade: 8")
    result = extract(text)
    assert result.values["school"] == "Lincoln Middle School"
    assert result.values["grade"] == "8"


def test_instructions_before_the_fields_do_not_end_the_form() -> None:
    text = form(
        "Open to students in grades 3 through 12. Please print clearly and attach your essay"
        " to this form before the deadline.",
        "Student Name: Maria Lopez",
        "School: Lincoln Middle School",
    )
    assert extract(text).values["school"] == "Lincoln Middle School"


def test_fields_on_page_one_essay_on_page_two() -> None:
    pages = [
        Page(1, "IFI Essay Contest 2026\nStudent Name: Maria Lopez\nSchool: Lincoln\n\n" + ESSAY),
        Page(2, TRAP_ESSAY + "\nGrade: 8\n"),
    ]
    result = extract_fields(pages, SCHEMA)
    assert result.values["student_name"] == "Maria Lopez"
    assert result.values["grade"] is None  # After the essay: left for the review agent.
    assert result.evidence["school"].page_number == 1


# --- validation, conflicts, options --------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        ("Grade: 13", "grade", "invalid_grade"),
        ("Student Name: N/A", "student_name", "placeholder"),
        ("Email: maria at example dot com", "email", "invalid_email"),
        ("Phone: 555-0134", "phone", "invalid_phone"),
        ("School: is where my father never got to go", "school", "looks_like_prose"),
        ("Name: Maria Lopez Grade 8", "student_name", "invalid_characters"),
    ],
)
def test_invalid_candidates_are_rejected_not_returned(line: str, field: str, reason: str) -> None:
    result = extract(form(line))
    assert result.values[field] is None
    assert field not in result.evidence
    assert result.rejected[field] == reason


def test_two_different_values_for_one_label_leave_the_field_empty() -> None:
    result = extract(form("Student Name: Maria Lopez", "Student Name: Ana Diaz"))
    assert result.values["student_name"] is None
    assert result.rejected["student_name"] == "conflicting_values"


def test_the_more_specific_label_wins_a_conflict() -> None:
    result = extract(form("Name: Maria", "Student Name: Maria Lopez"))
    assert result.values["student_name"] == "Maria Lopez"
    assert result.evidence["student_name"].label == "Student Name"


def test_the_same_value_twice_is_no_conflict() -> None:
    result = extract(form("Student Name: Maria Lopez", "Student: MARIA LOPEZ"))
    assert result.values["student_name"] == "Maria Lopez"


def test_relaxed_finds_unlabelled_email_and_phone_in_the_form_area() -> None:
    text = form("Student Name: Maria Lopez", "maria.lopez@example.com   (312) 555-0134")
    assert extract(text).values["email"] is None
    relaxed = extract(text, relaxed=True)
    assert relaxed.values["email"] == "maria.lopez@example.com"
    assert relaxed.values["phone"] == "312-555-0134"
    assert relaxed.evidence["email"].method == "pattern"
    assert relaxed.evidence["email"].label == "pattern:email"
    assert relaxed.evidence["email"].score == 0.7


def test_two_unlabelled_emails_are_ambiguous() -> None:
    text = form("Student Name: Maria Lopez", "maria@example.com", "roberto@example.com")
    result = extract(text, relaxed=True)
    assert result.values["email"] is None
    assert result.rejected["email"] == "conflicting_values"


def test_only_restricts_the_fields() -> None:
    text = form("Student Name: Maria Lopez", "School: Lincoln Middle School", "Grade: 8")
    result = extract(text, only=["grade", "school"])
    assert result.values == {"school": "Lincoln Middle School", "grade": "8"}
    assert set(result.evidence) == {"school", "grade"}


def test_only_with_an_unknown_field_raises() -> None:
    with pytest.raises(ValueError, match="shoe_size"):
        extract("Student Name: Maria Lopez", only=["shoe_size"])


def test_empty_document_gives_all_none() -> None:
    result = extract_fields([Page(1, "")], SCHEMA)
    assert set(result.values) == set(SCHEMA.field_names)
    assert all(v is None for v in result.values.values())
    assert result.evidence == {} and result.rejected == {}


def test_evidence_snippet_is_the_line_and_at_most_200_characters() -> None:
    result = extract(form("Student Name: Maria Lopez", "Grade: 8      Notes: " + "x" * 300))
    assert result.evidence["student_name"].snippet == "Student Name: Maria Lopez"
    long = result.evidence["grade"]
    assert result.values["grade"] == "8"
    assert len(long.snippet) == 200 and long.snippet.startswith("Grade: 8 Notes: xxx")
    assert long.snippet.endswith("…")
    assert Evidence.model_validate(long.model_dump()) == long


def test_next_line_evidence_shows_both_lines() -> None:
    evidence = extract(form("Name of School", "Lincoln Middle School")).evidence["school"]
    assert evidence.snippet == "Name of School / Lincoln Middle School"
    assert evidence.label == "Name of School"
    assert evidence.score == 0.85
