"""The document_intake field schema: which fields an entry form has and how to read them.

The schema is configuration (``fields.yaml`` next to this module). :func:`load_field_schema`
reads and validates it fail-fast; a run stores ``FieldSchema.model_dump()`` at submission and
rebuilds it with ``FieldSchema.model_validate(snapshot)``, so the workflow never reads files.

Workflow-safe: this module imports only the stdlib and pydantic, and does no I/O at import
time (PyYAML is imported inside :func:`load_field_schema`, which activities and the API call).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from overseer.plugin import OverseerError

__all__ = [
    "DEFAULT_SCHEMA_FILE",
    "FieldKind",
    "FieldSchema",
    "FieldSchemaError",
    "FieldSpec",
    "Normaliser",
    "load_field_schema",
]

DEFAULT_SCHEMA_FILE = "fields.yaml"
"""File name of the packaged schema, next to this module."""

FieldKind = Literal["person_name", "school", "grade", "city", "phone", "email", "text"]
"""Built-in validation rule families (see ``validate.py``)."""

Normaliser = Literal["name", "title", "grade", "phone", "email", "text", "none"]
"""Built-in normalisers (see ``validate.normalise_value``)."""

KIND_VALIDATOR = "kind"
"""``FieldSpec.validator`` value meaning "the kind rule only, no extra regex"."""

_FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class FieldSchemaError(OverseerError):
    """The field schema file or snapshot is invalid (a deployment error, permanent).

    The message names the offending key, e.g. ``fields[2].kind: Input should be ...``.
    """

    code = "invalid_field_schema"
    http_status = 500


class FieldSpec(BaseModel):
    """One field of an entry form.

    Attributes:
        name: record key, snake_case (a wire name: never renamed once shipped).
        label_variants: labels printed on forms for this field, e.g. ``"Student's Name"``.
        required: whether approval needs it (seed 000 §1.2 ``can_approve_record``).
        kind: validation rule family.
        validator: ``"kind"`` for the kind rule only, or a regex the normalised value must
            also match in full (checked to compile when the schema is loaded).
        normaliser: how a raw value is put in canonical form before validation.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    label_variants: list[str] = Field(min_length=1)
    required: bool = False
    kind: FieldKind
    validator: str = KIND_VALIDATOR
    normaliser: Normaliser = "text"

    @field_validator("name")
    @classmethod
    def _name_is_snake_case(cls, value: str) -> str:
        if not _FIELD_NAME.match(value):
            raise ValueError(f"field name {value!r} must be snake_case ([a-z][a-z0-9_]*)")
        return value

    @field_validator("label_variants")
    @classmethod
    def _labels_are_words(cls, value: list[str]) -> list[str]:
        cleaned = [" ".join(v.split()) for v in value]
        for label in cleaned:
            if not any(ch.isalpha() for ch in label):
                raise ValueError(f"label variant {label!r} has no letters")
        return cleaned

    @field_validator("validator")
    @classmethod
    def _validator_compiles(cls, value: str) -> str:
        if value != KIND_VALIDATOR:
            _check_regex(value)
        return value


class FieldSchema(BaseModel):
    """The whole schema: fields in form order plus document-level patterns.

    Attributes:
        version: schema format version (1).
        fields: the fields, in the order a form usually prints them.
        entry_start_patterns: regexes (searched per line) that recognise the start of an
            entry form, used to split batch files.
        header_patterns: regexes for contest boilerplate lines, which are never read as a
            label or a value.
        essay_start_patterns: regexes for a line that marks the start of the essay (the end
            of the form area).
        entry_label_fields: fields whose label, seen again after an essay, starts a new entry.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = 1
    fields: list[FieldSpec] = Field(min_length=1)
    entry_start_patterns: list[str] = Field(default_factory=list)
    header_patterns: list[str] = Field(default_factory=list)
    essay_start_patterns: list[str] = Field(default_factory=list)
    entry_label_fields: list[str] = Field(default_factory=lambda: ["student_name"])

    @field_validator("entry_start_patterns", "header_patterns", "essay_start_patterns")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            _check_regex(pattern)
        return value

    @model_validator(mode="after")
    def _names_and_labels_are_unique(self, info: ValidationInfo) -> FieldSchema:
        # Label lint runs only when a configuration file is loaded (context "lint"): a
        # snapshot carried in a running workflow's input must keep validating under newer
        # code, or replaying that workflow's history would fail.
        lint = bool((info.context or {}).get("lint"))
        seen_names: set[str] = set()
        owner_of_label: dict[str, str] = {}
        for spec in self.fields:
            if spec.name in seen_names:
                raise ValueError(f"duplicate field name {spec.name!r}")
            seen_names.add(spec.name)
            for label in spec.label_variants if lint else ():
                key = label.casefold()
                if key in owner_of_label:
                    other = owner_of_label[key]
                    raise ValueError(
                        f"label variant {label!r} is listed twice for {spec.name!r}"
                        if other == spec.name
                        else f"label variant {label!r} is used by both {other!r} and {spec.name!r}"
                    )
                owner_of_label[key] = spec.name
        for name in self.entry_label_fields:
            if name not in seen_names:
                raise ValueError(f"entry_label_fields names unknown field {name!r}")
        return self

    @property
    def field_names(self) -> list[str]:
        """All field names, in schema order."""
        return [spec.name for spec in self.fields]

    @property
    def required_fields(self) -> list[str]:
        """Names of the required fields, in schema order."""
        return [spec.name for spec in self.fields if spec.required]

    def field(self, name: str) -> FieldSpec:
        """Returns the spec of field ``name``.

        Raises:
            KeyError: no such field (the message lists the known ones).
        """
        for spec in self.fields:
            if spec.name == name:
                return spec
        raise KeyError(f"unknown field {name!r}; known fields: {', '.join(self.field_names)}")

    def has_field(self, name: str) -> bool:
        """Whether the schema defines field ``name``."""
        return any(spec.name == name for spec in self.fields)


def load_field_schema(path: Path | None = None) -> FieldSchema:
    """Reads and validates a field schema YAML file (activities and API only, never workflows).

    Args:
        path: the YAML file; None for the packaged ``fields.yaml`` next to this module.

    Returns:
        The validated schema.

    The parsed schema is cached per file and reloaded when the file's modification time or
    size changes: parsing YAML was a third of the API's CPU per ``POST`` (docs/performance-history.md).
    The returned model is frozen and shared; do not mutate its lists.

    Raises:
        FieldSchemaError: the file is missing, is not YAML, or fails validation; the message
            names the file and the bad key (e.g. ``fields[2].kind``). Permanent.
    """
    source = path if path is not None else Path(__file__).with_name(DEFAULT_SCHEMA_FILE)
    try:
        stat = source.stat()
    except OSError as err:
        raise FieldSchemaError(
            f"{source}: cannot read field schema: {err}", details={"path": str(source)}
        ) from err
    key = (str(source), stat.st_mtime_ns, stat.st_size)
    cached = _SCHEMA_CACHE.get(key)
    if cached is None:
        cached = _parse_field_schema(source)
        if len(_SCHEMA_CACHE) >= 32:
            _SCHEMA_CACHE.clear()
        _SCHEMA_CACHE[key] = cached
    return cached


_SCHEMA_CACHE: dict[tuple[str, int, int], FieldSchema] = {}


def _parse_field_schema(source: Path) -> FieldSchema:
    import yaml  # Imported here so that workflow code importing this module never loads it.

    try:
        raw = yaml.safe_load(source.read_text(encoding="utf-8"))
    except OSError as err:
        raise FieldSchemaError(
            f"{source}: cannot read field schema: {err}", details={"path": str(source)}
        ) from err
    except yaml.YAMLError as err:
        raise FieldSchemaError(
            f"{source}: not valid YAML: {err}", details={"path": str(source)}
        ) from err
    if not isinstance(raw, dict):
        raise FieldSchemaError(
            f"{source}: top level must be a mapping, got {type(raw).__name__}",
            details={"path": str(source)},
        )
    return _validate(raw, source=str(source))


def _validate(raw: dict[str, Any], *, source: str) -> FieldSchema:
    try:
        return FieldSchema.model_validate(raw, context={"lint": True})
    except ValidationError as err:
        problems = [f"{_loc(e['loc'])}: {e['msg']}" for e in err.errors()]
        raise FieldSchemaError(
            f"{source}: invalid field schema: " + "; ".join(problems),
            details={"path": source, "errors": problems},
        ) from err


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _check_regex(pattern: str) -> None:
    try:
        re.compile(pattern)
    except re.error as err:
        raise ValueError(f"invalid regular expression {pattern!r}: {err}") from err
