"""Clean scans are not sent to a person for a correctly read e-mail; misreads still are.

Pure tests of ``assess.assess_record`` and ``confidence.email_ocr_confusions`` on readings
Tesseract gave on the wider clean-scan set (``tests/clean_scans.py``, ``clean_scan_set(60,
seed=53)``, rendered with Pillow in six layouts, eight typefaces, PNG/TIFF/JPEG; figures in
docs/accuracy.md). The records, word confidences and page confidences below are those
readings, copied from ``python -m tests.evaluate_clean_scans --json``.

And the rule that a record sent to a person always says why: every assessment that does not
route to ``complete`` carries at least one reason code.
"""

from __future__ import annotations

import itertools

import pytest

from activities.document_intake.assess import BELOW_COMPLETE, assess_record
from activities.document_intake.confidence import email_ocr_confusions, field_ocr_confidences
from activities.document_intake.extract import extract_fields
from activities.document_intake.graph import approval_payload
from activities.document_intake.routing import RoutingThresholds, route_after_pipeline
from activities.document_intake.schema import load_field_schema
from overseer.documents import PageText, Word

SCHEMA = load_field_schema()
OPTIONS = {"exact_text_ocr_score": 1.0, "unknown_ocr_score": 0.5, "thresholds": RoutingThresholds().to_dict()}


def _reading(record: dict[str, str], email: float, page: float, **fields: float) -> dict:
    confidences = {name: 0.96 for name in record} | {"email": email} | fields
    return {"record": record, "field_confidences": confidences, "page": page}


def _route(reading: dict, **kwargs) -> tuple[dict, str]:
    assessment = assess_record(
        reading["record"],
        SCHEMA,
        ocr_confidence_avg=reading["page"],
        exact_text=False,
        options=OPTIONS,
        field_confidences=reading["field_confidences"],
        **kwargs,
    )
    return assessment, route_after_pipeline({**assessment, "tries": 1, "tools_used": ["run_pipeline"]})


# "22_below_dejavu_sans_tiff_tilt": each value under its label, TIFF, tilted; read right.
BELOW_TIFF = _reading(
    {
        "student_name": "Emily Alvarez",
        "school": "Prairie View College Prep Academy",
        "grade": "9",
        "teacher_name": "Dr. Garcia",
        "city": "Des Plaines",
        "father_figure_name": "Michael Alvarez",
        "phone": "312-555-0127",
        "email": "emily.alvarez2009@mail.example.org",
    },
    email=0.88,
    page=0.9448,
    teacher_name=0.95,
    phone=0.95,
)
# "09_two_column_dejavu_sans_condensed_jpeg_tilt": two columns; read right.
TWO_COLUMN = _reading(
    {
        "student_name": "Nadia Kowalski",
        "school": "Roberto Clemente Middle School",
        "grade": "7",
        "teacher_name": "Mrs. Ellis",
        "city": "Carbondale",
        "father_figure_name": "James Kowalski",
        "phone": "708-555-0115",
        "email": "nkowalski8@student.naperville203.org",
    },
    email=0.88,
    page=0.9493,
    school=0.88,
    teacher_name=0.95,
)
# "33_two_column_liberation_sans_tiff_straight": "josiahgarcia+ifi@cps.edu" read
# "josiahgarciatifi@cps.edu" at 0.89 (the plus sign as a "t"); today's code completes it.
PLUS_AS_T = _reading(
    {
        "student_name": "Josiah Garcia",
        "school": "Roberto Clemente College Prep Academy",
        "grade": "10",
        "teacher_name": "Dr. Hill",
        "city": "Rockford",
        "father_figure_name": "Hector Garcia",
        "phone": "815-555-0113",
        "email": "josiahgarciatifi@cps.edu",
    },
    email=0.89,
    page=0.9498,
    school=0.95,
    phone=0.95,
)
# "23_table_dejavu_sans_condensed_tiff_straight": "jgarcia134@…" read "jgarcial34@…" at 0.61.
DIGIT_AS_L = _reading(
    {
        "student_name": "Josiah Garcia",
        "school": "Cedar Park Elementary School",
        "grade": "4",
        "teacher_name": "Dr. Johnson",
        "city": "Urbana",
        "father_figure_name": "Robert Garcia",
        "phone": "224-555-0184",
        "email": "jgarcial34@sbcglobal.net",
    },
    email=0.61,
    page=0.9403,
)


@pytest.mark.parametrize("reading", [BELOW_TIFF, TWO_COLUMN], ids=["below_tiff", "two_column"])
def test_an_email_whose_letter_before_its_digits_ends_the_form_names_completes(reading):
    # "alvarez2009" on Emily Alvarez's form, "nkowalski8" on Nadia Kowalski's: the "z" and
    # the "i" before the digits end the student's surname, so they are letters, not digits.
    assessment, route = _route(reading)
    assert route == "complete"
    assert "ocr_confusion_email" not in assessment["review_reason_codes"]
    # Without the form's names the letter beside a digit stays a doubt, as before.
    assert email_ocr_confusions(reading["record"]["email"])


@pytest.mark.parametrize(
    ("reading", "misread"),
    [
        (PLUS_AS_T, "josiahgarcia+ifi -> josiahgarciatifi"),
        (DIGIT_AS_L, "jgarcia134 -> jgarcial34"),
    ],
    ids=["plus_as_t", "digit_as_l"],
)
def test_a_misread_email_on_a_clean_scan_still_goes_to_a_person(reading, misread):
    assessment, route = _route(reading, reread_agrees=["email"])  # even if a re-read agreed
    assert route != "complete", misread
    assert "ocr_confusion_email" in assessment["review_reason_codes"]


@pytest.mark.parametrize(
    ("value", "names", "doubtful"),
    [
        # the letter for a digit: not explained by the form's names
        ("tyroneriveral4@example.com", ["Tyrone Rivera"], True),  # rivera14
        ("samuelschmidts60@example.com", ["Samuel Schmidt"], True),  # schmidt560
        ("kowalskis59@example.org", ["Kevin Kowalski"], True),  # kowalski59
        ("meibaker2l@example.org", ["Mei Baker"], True),  # baker21: after a digit
        ("jamalrobinson1l6@example.org", ["Jamal Robinson"], True),  # between digits
        ("aishareyes77@example.org", [], True),  # no names: strict
        # explained by the form's names
        ("aishareyes77@example.org", ["Aisha Reyes"], False),
        ("eadams2009@icloud.com", ["Ethan Adams", "Dr. O'Brien"], False),
        ("samuelmitchell117@sbcglobal.net", ["Samuel Mitchell"], False),
        ("smith-jones.dad112@cps.edu", ["Ms. Smith-Jones"], False),
        # a plus sign read as "t"
        ("maria.ellistessay@icloud.com", ["Maria Ellis"], True),
        ("lucia.hillt+essay@aol.com", ["Lucia Hill"], True),
        ("xavierbennett+ifi@k12.il.us", ["Xavier Bennett"], False),
        ("scott.smith@example.com", ["Scott Smith"], False),
        # the domain: a digit-like letter among digits, a glyph pair in the top-level domain
        ("dominicthompson@student.naperville2o3.org", ["Dominic Thompson"], True),
        ("kevin.singh@example.corn", ["Kevin Singh"], True),  # rn for m
        ("kevin.singh@cps.eclu", ["Kevin Singh"], True),  # cl for d
        ("kevin.singh@student.naperville203.org", ["Kevin Singh"], False),
        ("ava@students.d211.org", ["Ava Evans"], False),
    ],
)
def test_the_email_confusions(value, names, doubtful):
    assert email_ocr_confusions(value, names) is doubtful


def test_an_email_read_without_its_at_sign_is_never_taken_as_a_value():
    # Validation refuses it, so extraction leaves the field empty: a form may complete
    # without its (optional) e-mail, never with a wrong one.
    text = (
        "Student Name: Emily Alvarez\nSchool: Prairie View College Prep Academy\n"
        "Grade: 9\nEmail: emily.alvarez2009mail.example.org\n"
    )
    page = PageText(page_number=1, text=text, source="ocr", ocr_confidence=0.94, coverage=1.0)
    result = extract_fields([page], SCHEMA)
    assert result.values["email"] is None
    assert result.rejected["email"] == "invalid_email"


def test_rn_read_for_m_in_a_name_on_a_clean_scan_goes_to_a_person():
    reading = {
        **TWO_COLUMN,
        "record": {
            **TWO_COLUMN["record"],
            "teacher_name": "Mrs. Ellis",
            "student_name": "Nadia Kowalski",
            "father_figure_name": "Jarnes Kowalski",
        },
        "field_confidences": {**TWO_COLUMN["field_confidences"], "father_figure_name": 0.91},
    }
    assessment, route = _route(reading)
    assert route != "complete"
    assert "ocr_confusion_father_figure_name" in assessment["review_reason_codes"]


# --- a field's confidence is read on its own line -------------------------------------------


def test_a_name_repeated_in_a_split_email_keeps_the_confidence_of_its_own_line():
    # "48_colon_dejavu_mono_jpeg_straight": Tesseract split the address into three words at
    # 0.0; the student's name on its own line was read at 0.91 and 0.96.
    words = [
        ("Name", 0.96),
        ("of", 0.96),
        ("Student:", 0.95),
        ("Elijah", 0.91),
        ("Coleman", 0.96),
        ("E-mail", 0.93),
        ("Address:", 0.95),
        ("elijah.", 0.0),
        ("coleman.", 0.0),
        ("2018@icloud.com", 0.0),
    ]
    page = PageText(
        page_number=1,
        text="Name of Student: Elijah Coleman\nE-mail Address: elijah. coleman. 2018@icloud.com",
        source="ocr",
        ocr_confidence=0.91,
        coverage=0.95,
        words=[Word(text=w, confidence=c) for w, c in words],
    )
    values = {"student_name": "Elijah Coleman", "email": "elijah.coleman.2018@icloud.com"}
    evidence = {
        "student_name": {"page_number": 1, "snippet": "Name of Student: Elijah Coleman"},
        "email": {"page_number": 1, "snippet": "E-mail Address: elijah. coleman. 2018@icloud.com"},
    }
    assert field_ocr_confidences([page], values, evidence) == {"student_name": 0.91, "email": 0.0}
    # Without a snippet every run counts, the lowest wins (the conservative side).
    bare = {name: {"page_number": 1} for name in values}
    assert field_ocr_confidences([page], values, bare)["student_name"] == 0.0


# --- a record that waits always says why ------------------------------------------------------


def test_a_clean_record_held_under_the_threshold_by_no_flagged_part_names_what_holds_it():
    # "15_two_column_dejavu_sans_tiff_g4_tilt" before calibration: every field at or over
    # the 0.80 floor, the e-mail at 0.81, so 0.886 and not one reason code.
    reading = {**BELOW_TIFF, "field_confidences": {**BELOW_TIFF["field_confidences"], "email": 0.81}}
    assessment, route = _route(reading, calibration=None)
    assert route == "escalate" and assessment["confidence"] == pytest.approx(0.886)
    assert assessment["review_reason_codes"] == ["below_complete_email"]
    assert not assessment["needs_review"]  # the route is unchanged: straight to a person


def test_an_unknown_ocr_confidence_under_the_threshold_says_so():
    assessment = assess_record(
        BELOW_TIFF["record"],
        SCHEMA,
        ocr_confidence_avg=None,
        exact_text=False,
        options=OPTIONS,
        field_confidences={},
    )
    assert assessment["confidence"] < 0.9
    assert assessment["review_reason_codes"] == [BELOW_COMPLETE]


_GRID = list(
    itertools.product(
        (None, 0.5, 0.76, 0.82, 0.85, 0.95),  # page OCR confidence
        (0.0, 0.45, 0.6, 0.79, 0.81, 0.83, 0.9),  # e-mail word confidence
        (0.8, 0.82, 0.96),  # grade word confidence
        (True, False),  # calibration on
        ((), ("email",), ("email", "grade")),  # confirmed by a re-read
        (None, "grade"),  # a required field left blank
    )
)


def test_every_record_not_completed_carries_a_reason():
    # Every combination of page confidence, weak fields, calibration, re-read agreement and
    # a blank required field: none may leave the run without a reason code.
    waiting = 0
    for page, email, grade, calibrated, agrees, blank in _GRID:
        record = dict(BELOW_TIFF["record"])
        if blank:
            record[blank] = None
        reading = {
            "record": record,
            "page": page,
            "field_confidences": {**BELOW_TIFF["field_confidences"], "email": email, "grade": grade},
        }
        kwargs = {} if calibrated else {"calibration": None}
        assessment, route = _route(reading, reread_agrees=agrees, **kwargs)
        if route == "complete":
            continue
        waiting += 1
        case = (page, email, grade, calibrated, agrees, blank, route)
        assert assessment["review_reason_codes"], case
        payload = approval_payload({**assessment, "record": record, "last_route": route})
        assert payload["review_reason_codes"], case
    assert 0 < waiting < len(_GRID)  # both outcomes were exercised
