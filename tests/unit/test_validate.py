"""Field schema loading and field validation (seed 000 §1.2 validate_record, can_approve_record)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from activities.document_intake.schema import (
    FieldSchema,
    FieldSchemaError,
    load_field_schema,
)
from activities.document_intake.validate import (
    can_approve_record,
    normalise_value,
    parse_grade,
    validate_record,
    validate_updates,
    validate_value,
)

SCHEMA = load_field_schema()
PACKAGED = Path(__file__).resolve().parents[2] / "activities" / "document_intake" / "fields.yaml"

COMPLETE = {
    "student_name": "Maria Lopez",
    "school": "Lincoln Middle School",
    "grade": "8",
    "teacher_name": "Mrs. Smith",
    "city": "Chicago",
    "father_figure_name": "Roberto Lopez",
    "phone": "312-555-0134",
    "email": "maria.lopez@example.com",
}


# --- schema -------------------------------------------------------------------------------------


def test_packaged_schema_has_the_contest_fields() -> None:
    assert SCHEMA.field_names == [
        "student_name", "school", "grade", "teacher_name", "city", "father_figure_name",
        "phone", "email",
    ]
    assert SCHEMA.required_fields == ["student_name", "school", "grade"]
    assert SCHEMA.field("grade").kind == "grade"
    assert SCHEMA.entry_start_patterns and SCHEMA.header_patterns and SCHEMA.essay_start_patterns


def test_schema_round_trips_through_a_plain_dict() -> None:
    dumped = SCHEMA.model_dump()
    assert isinstance(dumped["fields"][0]["label_variants"], list)
    assert yaml.safe_load(yaml.safe_dump(dumped)) == dumped  # Plain data only.
    assert FieldSchema.model_validate(dumped) == SCHEMA


def test_unknown_field_lookup_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="student_name"):
        SCHEMA.field("shoe_size")


def _write(tmp_path: Path, mutate) -> Path:
    raw = yaml.safe_load(PACKAGED.read_text(encoding="utf-8"))
    mutate(raw)
    path = tmp_path / "fields.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("mutate", "named"),
    [
        (lambda raw: raw["fields"][2].update(kind="shoe"), "fields[2].kind"),
        (lambda raw: raw["fields"][0].update(label_variants=[]), "fields[0].label_variants"),
        (lambda raw: raw["fields"][1].update(colour="red"), "fields[1].colour"),
        (lambda raw: raw["fields"][0].update(name="Student Name"), "fields[0].name"),
        (lambda raw: raw["fields"][3].update(validator="(unclosed"), "fields[3].validator"),
        (lambda raw: raw.update(header_patterns=["[bad"]), "header_patterns"),
        (lambda raw: raw["fields"][3].update(label_variants=["School"]), "used by both"),
        (lambda raw: raw.update(entry_label_fields=["nickname"]), "nickname"),
        (lambda raw: raw["fields"].append(dict(raw["fields"][0])), "duplicate field name"),
    ],
)
def test_bad_schema_fails_fast_naming_the_key(tmp_path: Path, mutate, named: str) -> None:
    with pytest.raises(FieldSchemaError) as caught:
        load_field_schema(_write(tmp_path, mutate))
    assert named in str(caught.value)
    assert caught.value.code == "invalid_field_schema"


def test_missing_or_non_yaml_schema_file_is_a_schema_error(tmp_path: Path) -> None:
    with pytest.raises(FieldSchemaError, match="cannot read"):
        load_field_schema(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("fields: [\n", encoding="utf-8")
    with pytest.raises(FieldSchemaError, match="not valid YAML"):
        load_field_schema(broken)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n", encoding="utf-8")
    with pytest.raises(FieldSchemaError, match="mapping"):
        load_field_schema(listed)


def test_parsed_schema_is_cached_until_the_file_changes(tmp_path: Path) -> None:
    packaged = Path(load_field_schema.__code__.co_filename).with_name("fields.yaml")
    path = tmp_path / "fields.yaml"
    path.write_text(packaged.read_text(encoding="utf-8"), encoding="utf-8")
    first = load_field_schema(path)
    assert load_field_schema(path) is first  # not parsed again
    path.write_text(path.read_text(encoding="utf-8").replace("version: 1", "version: 2", 1)
                    + "\n", encoding="utf-8")
    changed = load_field_schema(path)
    assert changed is not first
    assert changed.version == 2


def test_regex_validator_from_the_schema_is_applied(tmp_path: Path) -> None:
    def only_lincoln(raw) -> None:
        raw["fields"][1]["validator"] = r"Lincoln .*"

    schema = load_field_schema(_write(tmp_path, only_lincoln))
    assert validate_value(schema.field("school"), "Lincoln Middle School") is None
    assert validate_value(schema.field("school"), "Douglass High School") == "pattern_mismatch"


# --- single values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "raw", "normalised"),
    [
        ("student_name", "____Maria Lopez____", "Maria Lopez"),
        ("student_name", "MARIA LOPEZ", "Maria Lopez"),
        ("student_name", "maria  lopez", "Maria Lopez"),
        ("student_name", "o'brien-smith", "O'Brien-Smith"),
        ("student_name", "DeShawn McAllister", "DeShawn McAllister"),
        ("school", "ST. MARY'S ACADEMY", "St. Mary's Academy"),
        ("school", "school of the arts", "School of the Arts"),
        ("city", "CHICAGO, IL", "Chicago, IL"),
        ("grade", "8th", "8"),
        ("grade", "Grade 8", "8"),
        ("grade", "8th grade", "8"),
        ("grade", "08", "8"),
        ("grade", "Eighth", "8"),
        ("grade", "k", "K"),
        ("grade", "Kindergarten", "K"),
        ("grade", "sophomore", "10"),
        ("phone", "(312) 555-0134", "312-555-0134"),
        ("phone", "1 312 555 0134", "312-555-0134"),
        ("phone", "312.555.0134", "312-555-0134"),
        ("email", " Maria.Lopez @Example.com ", "maria.lopez@example.com"),
        ("email", "maria_lopez@example.com", "maria_lopez@example.com"),
    ],
)
def test_normalise_value(field: str, raw: str, normalised: str) -> None:
    spec = SCHEMA.field(field)
    assert normalise_value(spec, raw) == normalised
    assert validate_value(spec, raw) is None


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("student_name", "", "empty"),
        ("student_name", "____", "empty"),
        ("student_name", "M", "too_short"),
        ("student_name", "x" * 81, "too_long"),
        ("student_name", "Maria Lopez 8", "invalid_characters"),
        ("student_name", "maria@example.com", "invalid_characters"),
        ("student_name", "Name", "label_word"),
        ("student_name", "Student Name", "label_word"),
        ("student_name", "Maria Lopez School", "label_word"),
        ("father_figure_name", "Father Figure", "label_word"),
        ("student_name", "N/A", "placeholder"),
        ("student_name", "none", "placeholder"),
        ("student_name", "my dad", "looks_like_prose"),
        ("student_name", "he is the best", "looks_like_prose"),
        ("student_name", "one two three four five six seven", "too_many_words"),
        ("school", "is great because the teachers care", "looks_like_prose"),
        ("school", "Name of School", "label_word"),
        ("school", "School", "label_word"),
        ("school", "Lincoln; Middle", "invalid_characters"),
        ("city", "I live in Chicago", "looks_like_prose"),
        ("city", "Chicago 60601", "invalid_characters"),
        ("grade", "13", "invalid_grade"),
        ("grade", "0", "invalid_grade"),
        ("grade", "8/9", "invalid_grade"),
        ("grade", "eighth grade student", "invalid_grade"),
        ("grade", "Lincoln", "invalid_grade"),
        ("phone", "555-0134", "invalid_phone"),
        ("phone", "312-555-01345", "invalid_phone"),
        ("phone", "call me", "invalid_phone"),
        ("email", "maria.lopez@example", "invalid_email"),
        ("email", "maria@example,com", "invalid_email"),
        ("email", "maria..lopez@example.com", "invalid_email"),
        ("email", "maria lopez", "invalid_email"),
    ],
)
def test_validate_value_reason_codes(field: str, value: str, reason: str) -> None:
    assert validate_value(SCHEMA.field(field), value) == reason


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("student_name", "José Núñez"),
        ("student_name", "Maria A. Lopez"),
        ("student_name", "Zoë O'Brien"),
        ("teacher_name", "Mrs. Smith"),
        ("teacher_name", "Dr. Washington"),
        ("school", "Our Lady of Mercy Academy"),
        ("school", "P.S. 123"),
        ("school", "Ida B. Wells Elementary School"),
        ("school", "Lincoln Middle School (East Campus)"),
        ("city", "Oak Park"),
        ("city", "Winston-Salem"),
    ],
)
def test_realistic_values_are_valid(field: str, value: str) -> None:
    assert validate_value(SCHEMA.field(field), value) is None


@pytest.mark.parametrize(
    ("value", "grade"),
    [("7", "7"), ("12th", "12"), ("1st", "1"), ("Gr. 3", "3"), ("Year 9", "9"),
     ("twelfth", "12"), ("K", "K"), ("senior", "12"), ("", None), ("7 8", None),
     ("grade", None), ("100", None)],
)
def test_parse_grade(value: str, grade: str | None) -> None:
    assert parse_grade(value) == grade


# --- records ------------------------------------------------------------------------------------


def test_complete_record_is_clean_and_approvable() -> None:
    report = validate_record(COMPLETE, SCHEMA)
    assert report.errors == {}
    assert report.missing_required == []
    assert report.needs_review is False
    assert report.reason_codes == []
    assert report.values == COMPLETE
    assert can_approve_record(COMPLETE, SCHEMA) == (True, [])


def test_missing_and_invalid_fields_give_reason_codes_in_schema_order() -> None:
    record = {**COMPLETE, "student_name": None, "grade": "13", "email": "maria@", "school": "  "}
    report = validate_record(record, SCHEMA)
    assert report.missing_required == ["student_name", "school"]
    assert report.errors == {"grade": "invalid_grade", "email": "invalid_email"}
    assert report.reason_codes == [
        "missing_student_name", "missing_school", "invalid_grade", "invalid_email",
    ]
    assert report.needs_review is True
    assert can_approve_record(record, SCHEMA) == (False, ["student_name", "school", "grade"])


def test_invalid_optional_field_needs_review_but_does_not_block_approval() -> None:
    record = {**COMPLETE, "phone": "555-0134"}
    report = validate_record(record, SCHEMA)
    assert report.needs_review is True
    assert report.reason_codes == ["invalid_phone"]
    assert can_approve_record(record, SCHEMA) == (True, [])


def test_absent_optional_fields_are_fine_and_extra_keys_ignored() -> None:
    record = {"student_name": "Maria Lopez", "school": "Lincoln", "grade": 8,
              "submission_id": "abc"}
    report = validate_record(record, SCHEMA)
    assert report.needs_review is False
    assert report.values["grade"] == "8"
    assert report.values["email"] is None
    assert can_approve_record(record, SCHEMA) == (True, [])


def test_non_string_values_are_invalid_not_crashes() -> None:
    report = validate_record({**COMPLETE, "school": ["Lincoln"], "grade": True}, SCHEMA)
    assert report.errors == {"school": "not_a_string", "grade": "not_a_string"}


def test_empty_record_misses_every_required_field() -> None:
    ok, problems = can_approve_record({}, SCHEMA)
    assert not ok
    assert problems == ["student_name", "school", "grade"]


# --- reviewer edits -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("updates", "errors"),
    [
        ({"grade": "8th"}, {}),
        ({"email": "", "phone": None}, {}),  # Clearing optional fields is allowed.
        ({"shoe_size": "9"}, {"shoe_size": "unknown_field"}),
        ({"student_name": ""}, {"student_name": "required"}),
        ({"school": None}, {"school": "required"}),
        ({"grade": "   "}, {"grade": "required"}),
        ({"grade": "13"}, {"grade": "invalid_grade"}),
        ({"email": "not-an-email"}, {"email": "invalid_email"}),
        ({"student_name": "Name"}, {"student_name": "label_word"}),
        ({"grade": 8}, {"grade": "not_a_string"}),
        (
            {"grade": "8", "phone": "12", "nickname": "Mia"},
            {"phone": "invalid_phone", "nickname": "unknown_field"},
        ),
    ],
)
def test_validate_updates(updates: dict, errors: dict[str, str]) -> None:
    assert validate_updates(updates, SCHEMA) == errors
