"""Labels the schema does not list are read when their words are one field's words."""

from __future__ import annotations

import pytest

from activities.document_intake.extract import extract_fields
from activities.document_intake.schema import load_field_schema
from overseer.documents import PageText

HEAD = "ESSAY CONTEST ENTRY FORM\nStudent Name: Maria Lopez\nSchool: Lincoln Middle School\n" \
       "Grade: 7\nTeacher: Ms. Adams\nCity: Springfield\n"


def _read(extra: str) -> dict[str, str | None]:
    page = PageText(page_number=1, text=HEAD + extra, source="plain_text", ocr_confidence=None,
                    coverage=None)
    return extract_fields([page], load_field_schema()).values


@pytest.mark.parametrize(("line", "field", "value"), [
    ("Father or Father Figure: John Lopez", "father_figure_name", "John Lopez"),
    ("Father / Father Figure's Name: John Lopez", "father_figure_name", "John Lopez"),
    ("Name of Father Figure: John Lopez", "father_figure_name", "John Lopez"),
    ("E-Mail Address: maria.lopez@example.com", "email", "maria.lopez@example.com"),
    ("Telephone No.: 312-555-0134", "phone", "312-555-0134"),
])
def test_unlisted_label_variants_are_read(line: str, field: str, value: str):
    assert _read(line + "\n")[field] == value


@pytest.mark.parametrize("line", [
    "Parent Email: parent@example.com",      # another person's e-mail
    "Mother or Mother Figure: Ana Lopez",    # words of no field
    "Guardian Name: Ana Lopez",
    "Emergency Contact Name: Ana Lopez",     # "name" alone identifies nothing
    "Student ID: 48213",
])
def test_labels_of_other_things_are_not_read_as_ours(line: str):
    values = _read(line + "\n")
    assert values["father_figure_name"] is None and values["email"] is None
    assert values["student_name"] == "Maria Lopez"
