"""Field validation for document_intake (seed 000 §1.2 validate_record, can_approve_record).

Four layers, each built on the one below:

* :func:`normalise_value` / :func:`validate_value` — one value against one :class:`FieldSpec`
  (kind rule plus the optional regex from the schema); a failure is a stable reason code
  such as ``invalid_grade`` or ``looks_like_prose``.
* :func:`validate_record` — a whole record: missing required fields, invalid values, the
  review flag and reason codes (``missing_<field>``, ``invalid_<field>``).
* :func:`can_approve_record` — approvable iff every required field is present and valid
  (seed 000 §1.2 and §2.5).
* :func:`validate_updates` — a reviewer's edits (seed 000 §2.5), checked before they touch
  a run.

Workflow-safe: stdlib and pydantic only, pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from activities.document_intake.schema import KIND_VALIDATOR, FieldSchema, FieldSpec

__all__ = [
    "ValidationReport",
    "can_approve_record",
    "clean_value",
    "normalise_value",
    "parse_grade",
    "validate_record",
    "validate_updates",
    "validate_value",
]

# Reason codes returned by validate_value / validate_updates (wire names: add, never rename).
EMPTY = "empty"
TOO_SHORT = "too_short"
TOO_LONG = "too_long"
TOO_MANY_WORDS = "too_many_words"
NO_LETTERS = "no_letters"
INVALID_CHARACTERS = "invalid_characters"
LABEL_WORD = "label_word"
PLACEHOLDER = "placeholder"
LOOKS_LIKE_PROSE = "looks_like_prose"
INVALID_GRADE = "invalid_grade"
INVALID_PHONE = "invalid_phone"
INVALID_EMAIL = "invalid_email"
PATTERN_MISMATCH = "pattern_mismatch"
NOT_A_STRING = "not_a_string"
UNKNOWN_FIELD = "unknown_field"
REQUIRED = "required"


class ValidationReport(BaseModel):
    """Outcome of :func:`validate_record`.

    Attributes:
        values: every schema field → its normalised value, None when absent (invalid values
            are kept, normalised, so a reviewer sees what was read).
        errors: field → reason code, for present values that fail validation.
        missing_required: required fields that are absent or empty, in schema order.
        needs_review: True when anything is missing or invalid.
        reason_codes: ``missing_<field>`` / ``invalid_<field>`` in schema order (the
            ``low_ocr_confidence`` code is added by the scoring step, not here).
    """

    model_config = ConfigDict(frozen=True)

    values: dict[str, str | None]
    errors: dict[str, str]
    missing_required: list[str]
    needs_review: bool
    reason_codes: list[str]


def validate_record(record: Mapping[str, object], schema: FieldSchema) -> ValidationReport:
    """Validates every schema field of a record (seed 000 §1.2 ``validate_record``).

    Args:
        record: field name → value; None, a missing key or a blank string means absent.
            An int is read as its decimal text; any other non-string is ``not_a_string``.
            Keys the schema does not know are ignored.
        schema: the field schema.

    Returns:
        The report; never raises for bad values.
    """
    values: dict[str, str | None] = {}
    errors: dict[str, str] = {}
    missing: list[str] = []
    reasons: list[str] = []
    for spec in schema.fields:
        raw = record.get(spec.name)
        if isinstance(raw, int) and not isinstance(raw, bool):
            raw = str(raw)
        if raw is not None and not isinstance(raw, str):
            values[spec.name] = None
            errors[spec.name] = NOT_A_STRING
            reasons.append(f"invalid_{spec.name}")
            continue
        if raw is None or not clean_value(raw):
            values[spec.name] = None
            if spec.required:
                missing.append(spec.name)
                reasons.append(f"missing_{spec.name}")
            continue
        values[spec.name] = normalise_value(spec, raw)
        error = validate_value(spec, raw)
        if error is not None:
            errors[spec.name] = error
            reasons.append(f"invalid_{spec.name}")
    return ValidationReport(
        values=values,
        errors=errors,
        missing_required=missing,
        needs_review=bool(missing or errors),
        reason_codes=reasons,
    )


def can_approve_record(
    record: Mapping[str, object], schema: FieldSchema
) -> tuple[bool, list[str]]:
    """Whether a record may be approved (seed 000 §1.2 ``can_approve_record``, §2.5).

    Args:
        record: field name → value.
        schema: the field schema.

    Returns:
        ``(approvable, problems)``: approvable iff every required field is present and
        valid; ``problems`` lists the required fields that are missing or invalid, in
        schema order (this is the seed's ``missing_fields``).
    """
    report = validate_record(record, schema)
    problems = [
        spec.name
        for spec in schema.fields
        if spec.required and (spec.name in report.errors or spec.name in report.missing_required)
    ]
    return (not problems, problems)


def validate_updates(updates: Mapping[str, object], schema: FieldSchema) -> dict[str, str]:
    """Checks a reviewer's field edits before they are applied (seed 000 §2.5).

    Args:
        updates: field name → new value. An empty string or None clears an optional field.
        schema: the field schema.

    Returns:
        field → reason code for every refused edit (empty when all are fine):
        ``unknown_field``, ``required`` (clearing a required field), ``not_a_string``, or
        a :func:`validate_value` reason.
    """
    errors: dict[str, str] = {}
    for name, value in updates.items():
        if not schema.has_field(name):
            errors[name] = UNKNOWN_FIELD
            continue
        spec = schema.field(name)
        if value is None or (isinstance(value, str) and not clean_value(value)):
            if spec.required:
                errors[name] = REQUIRED
            continue
        if not isinstance(value, str):
            errors[name] = NOT_A_STRING
            continue
        reason = validate_value(spec, value)
        if reason is not None:
            errors[name] = reason
    return errors


def validate_value(spec: FieldSpec, value: str) -> str | None:
    """Validates one value (normalised first) against its field's kind rule and regex.

    Kind rules: ``person_name`` 2–80 characters of letters, spaces and ``'-.,``, at least
    one letter, at most 6 words, no form-label word, not a placeholder, no prose words;
    ``school`` 2–100 characters (digits and ``&#/()`` allowed), at most 12 words;
    ``city`` 2–60 characters, at most 6 words; ``grade`` 1–12 or K (``"8th"``,
    ``"Grade 8"``, ``"eighth"`` all mean 8); ``phone`` 10 digits (11 with a leading 1);
    ``email`` ``local@domain.tld``; ``text`` 1–200 characters.

    Args:
        spec: the field.
        value: raw or normalised text.

    Returns:
        None when valid, else a reason code (``empty``, ``too_short``, ``too_long``,
        ``too_many_words``, ``no_letters``, ``invalid_characters``, ``label_word``,
        ``placeholder``, ``looks_like_prose``, ``invalid_grade``, ``invalid_phone``,
        ``invalid_email``, ``pattern_mismatch``).
    """
    normalised = normalise_value(spec, value)
    if not normalised:
        return EMPTY
    reason = _KIND_RULES[spec.kind](spec, normalised)
    if reason is None and spec.validator != KIND_VALIDATOR:
        if re.fullmatch(spec.validator, normalised) is None:
            reason = PATTERN_MISMATCH
    return reason


def normalise_value(spec: FieldSpec, value: str) -> str:
    """Puts a raw value in canonical form; never raises, even for invalid values.

    Always: fill underscores and edge punctuation removed, whitespace collapsed. Then by
    ``spec.normaliser``: ``name`` / ``title`` turn ALL-CAPS or all-lowercase text into
    title case (mixed case is kept as written); ``grade`` gives ``"K"`` or ``"1"``–``"12"``
    when the grade parses; ``phone`` gives ``"312-555-0134"`` for 10 digits; ``email``
    drops spaces and lowercases; ``text`` only cleans; ``none`` only strips.

    Args:
        spec: the field.
        value: raw text as read from the document or typed by a reviewer.

    Returns:
        The normalised text ("" when nothing is left).
    """
    if spec.normaliser == "none":
        return value.strip()
    if spec.normaliser == "email":
        return _normalise_email(value)
    text = clean_value(value)
    if not text:
        return ""
    if spec.normaliser == "name":
        return _fix_case(text, minor_words=frozenset())
    if spec.normaliser == "title":
        return _fix_case(text, minor_words=_TITLE_MINOR_WORDS)
    if spec.normaliser == "grade":
        return parse_grade(text) or text
    if spec.normaliser == "phone":
        return _normalise_phone(text)
    return text


def clean_value(value: str) -> str:
    """Strips form furniture from a raw value: fill lines, edge punctuation, extra spaces.

    Args:
        value: raw text, e.g. ``"____Maria  Lopez____"`` or ``": Lincoln Middle School |"``.

    Returns:
        ``"Maria Lopez"`` / ``"Lincoln Middle School"``; "" when nothing is left.
    """
    text = _FILL.sub(" ", value)
    text = " ".join(text.split())
    return text.strip(_EDGE_JUNK)


def parse_grade(value: str) -> str | None:
    """Reads a school grade.

    Args:
        value: e.g. ``"8"``, ``"08"``, ``"8th"``, ``"8th grade"``, ``"Grade 8"``,
            ``"Eighth"``, ``"K"``, ``"Kindergarten"``, ``"Sophomore"``.

    Returns:
        ``"K"`` or ``"1"``..``"12"``; None when it is not exactly one grade in range.
    """
    tokens = [t for t in re.split(r"[^\w]+", value.casefold()) if t and t not in _GRADE_NOISE]
    if len(tokens) != 1:
        return None
    token = tokens[0]
    if token in _GRADE_WORDS:
        return _GRADE_WORDS[token]
    match = re.fullmatch(r"0?(\d{1,2})(?:st|nd|rd|th)?", token)
    if match is None:
        return None
    number = int(match.group(1))
    return str(number) if 1 <= number <= 12 else None


# --- kind rules ---------------------------------------------------------------------------------

_FILL = re.compile(r"_{2,}|\.{4,}|…+")
_EDGE_JUNK = " \t:;,|~*•·=>_-–—\"“”[]{}"

_FORM_WORDS = frozenset(
    """name names student students school grade teacher teachers city town hometown phone
    telephone number email e-mail address father fathers father's figure essay contest entry
    form signature date parent guardian year level title age zip""".split()
)
"""Words of form labels: a person's name made of them is a misread label."""

_PLACEHOLDERS = frozenset(
    "n/a na n.a. none unknown tbd null nil same ? blank".split()
    + ["not applicable", "same as above", "see above", "see below"]
)

_PROSE_WORDS = frozenset(
    """i i'm im my me is was were am are be been because he she we they it it's that this his
    her you your when who""".split()
)
"""Words of essay sentences that never occur in a school or city name ("our" does: "Our Lady")."""

_NAME_PROSE_WORDS = _PROSE_WORDS | frozenset(
    "our the and to of for with has have had or but".split()
)
"""Words of essay sentences that never occur in a person's name."""

_TITLE_MINOR_WORDS = frozenset("of the and at in for on de la del".split())

_GRADE_NOISE = frozenset("grade gr year yr level th st nd rd".split())
_GRADE_WORDS = {
    "k": "K",
    "kg": "K",
    "kindergarten": "K",
    **{
        word: str(number)
        for number, word in enumerate(
            "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth"
            .split(),
            start=1,
        )
    },
    **{
        word: str(number)
        for number, word in enumerate(
            "one two three four five six seven eight nine ten eleven twelve".split(), start=1
        )
    },
    "freshman": "9",
    "sophomore": "10",
    "junior": "11",
    "senior": "12",
}

_EMAIL = re.compile(r"[a-z0-9._%+\-]+@[a-z0-9\-]+(?:\.[a-z0-9\-]+)*\.[a-z]{2,}")
_PHONE_CHARS = re.compile(r"[\d\s().+\-/]+")


def _check_person_name(spec: FieldSpec, value: str) -> str | None:
    return _check_words(
        spec, value, min_len=2, max_len=80, max_words=6, allow_digits=False,
        extra_chars="'’-.,", prose=_NAME_PROSE_WORDS, any_form_word=True,
    )


def _check_school(spec: FieldSpec, value: str) -> str | None:
    return _check_words(
        spec, value, min_len=2, max_len=100, max_words=12, allow_digits=True,
        extra_chars="'’-.,&#/()", prose=_PROSE_WORDS, any_form_word=False,
    )


def _check_city(spec: FieldSpec, value: str) -> str | None:
    return _check_words(
        spec, value, min_len=2, max_len=60, max_words=6, allow_digits=False,
        extra_chars="'’-.,", prose=_PROSE_WORDS, any_form_word=False,
    )


def _check_words(
    spec: FieldSpec,
    value: str,
    *,
    min_len: int,
    max_len: int,
    max_words: int,
    allow_digits: bool,
    extra_chars: str,
    prose: frozenset[str],
    any_form_word: bool,
) -> str | None:
    folded = value.casefold()
    if folded in _PLACEHOLDERS:
        return PLACEHOLDER
    if len(value) < min_len:
        return TOO_SHORT
    if len(value) > max_len:
        return TOO_LONG
    if not any(ch.isalpha() for ch in value):
        return NO_LETTERS
    for ch in value:
        if not (ch.isalpha() or ch == " " or ch in extra_chars or (allow_digits and ch.isdigit())):
            return INVALID_CHARACTERS
    words = [w.strip(".,()") for w in folded.split()]
    words = [w for w in words if w]
    if len(words) > max_words:
        return TOO_MANY_WORDS
    labels = {" ".join(label.casefold().split()) for label in spec.label_variants}
    if " ".join(words) in labels or all(w in _FORM_WORDS or w in ("of", "the") for w in words):
        return LABEL_WORD
    if any_form_word and any(w in _FORM_WORDS for w in words):
        return LABEL_WORD
    if any(w in prose for w in words):
        return LOOKS_LIKE_PROSE
    return None


def _check_grade(spec: FieldSpec, value: str) -> str | None:
    return None if parse_grade(value) is not None else INVALID_GRADE


def _check_phone(spec: FieldSpec, value: str) -> str | None:
    if not _PHONE_CHARS.fullmatch(value):
        return INVALID_PHONE
    digits = re.sub(r"\D", "", value)
    if len(digits) == 10 or (len(digits) == 11 and digits.startswith("1")):
        return None
    return INVALID_PHONE


def _check_email(spec: FieldSpec, value: str) -> str | None:
    if len(value) > 254 or _EMAIL.fullmatch(value) is None or ".." in value:
        return INVALID_EMAIL
    return None


def _check_text(spec: FieldSpec, value: str) -> str | None:
    return TOO_LONG if len(value) > 200 else None


_KIND_RULES = {
    "person_name": _check_person_name,
    "school": _check_school,
    "grade": _check_grade,
    "city": _check_city,
    "phone": _check_phone,
    "email": _check_email,
    "text": _check_text,
}


# --- normalisers --------------------------------------------------------------------------------


def _fix_case(text: str, *, minor_words: frozenset[str]) -> str:
    if not any(ch.isalpha() for ch in text) or not (text.isupper() or text.islower()):
        return text
    out: list[str] = []
    after_comma = False
    for index, word in enumerate(text.split(" ")):
        lower = word.casefold()
        bare = word.strip(".,")
        if after_comma and len(bare) == 2 and bare.isalpha():
            out.append(word.upper())  # A state after a comma: "Chicago, IL".
        elif index > 0 and lower in minor_words:
            out.append(lower)
        else:
            out.append("-".join(_capitalise(part) for part in lower.split("-")))
        after_comma = word.endswith(",")
    return " ".join(out)


def _capitalise(word: str) -> str:
    # "o'brien" → "O'Brien" but "mary's" → "Mary's": only a one-letter prefix is a clan mark.
    for apostrophe in ("'", "’"):
        head, sep, tail = word.partition(apostrophe)
        if sep and len(head) == 1 and tail:
            return head.upper() + sep + tail[:1].upper() + tail[1:]
    return word[:1].upper() + word[1:]


def _normalise_phone(text: str) -> str:
    digits = re.sub(r"\D", "", text)
    if len(digits) == 11 and digits.startswith("1"):
        digits = digits[1:]
    if len(digits) == 10 and _PHONE_CHARS.fullmatch(text):
        return f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"
    return text


def _normalise_email(value: str) -> str:
    text = "".join(_FILL.sub(" ", value).split())
    return text.strip(_EDGE_JUNK + ".").casefold()
