"""Labelled-field extraction from entry-form text (the deterministic ``rules`` strategy).

An entry form is a contest header, labelled fields, then an essay. :func:`extract_fields`
reads the fields from the *form area* only — the lines before the essay begins — because a
wrong auto-filled value is worse than an empty one: essay prose ("my school is great") must
never become a field value. Every candidate value is checked with
:func:`~activities.document_intake.validate.validate_value`; one that fails is reported in
``ExtractionResult.rejected`` and never returned as a value.

Layouts understood: ``Label: value``; ``Label value`` (no colon); a label on one line and
its value on the next; several fields on one line (``Grade: 8      School: Lincoln``); a row
of labels over a row of values; fill lines (``Student Name: ____Maria Lopez____``).

Passes, from most to least trusted (a field takes its value from the first pass that finds
a valid one; two different valid values in the same pass leave it empty as
``conflicting_values`` unless one label is more specific):

* strict — exact label variants (case-insensitive, tolerant to colon, underscores and
  spaces) in the form area;
* relaxed (``relaxed=True``, the retry step) — also labels with OCR confusions
  (``5chool``, ``Narne``) or fuzzy matches (``Studen1 Narne``), and e-mail / phone numbers
  recognised by their shape anywhere in the form area.

The pieces, one job each: the text as lines and the form area
(:mod:`activities.document_intake.extract_lines`: ``Line``, ``document_lines``,
``essay_start_index``), the labels on a line (:mod:`activities.document_intake.extract_labels`:
``line_labels``), the candidate values of every pass with their evidence
(:mod:`activities.document_intake.extract_candidates`: ``find_candidates``); this module
validates the candidates and picks each field's value (:func:`resolve_candidates`). The
review agent (``review.py``) and the batch splitter (``batch.py``) build on the same pieces,
which is why they are public.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pydantic import BaseModel, ConfigDict

from activities.document_intake.extract_candidates import (
    Candidate,
    CandidateMode,
    Evidence,
    find_candidates,
)
from activities.document_intake.extract_lines import PageLike, document_lines
from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import normalise_value, validate_value

__all__ = [
    "ExtractionResult",
    "extract_fields",
    "resolve_candidates",
]


CONFLICTING_VALUES = "conflicting_values"
"""``ExtractionResult.rejected`` reason: two different valid values, neither preferred."""


class ExtractionResult(BaseModel):
    """Outcome of :func:`extract_fields`.

    Attributes:
        values: every requested field → normalised value, None when not found.
        evidence: field → :class:`~activities.document_intake.extract_candidates.Evidence`,
            for the fields that have a value.
        rejected: field → reason code, for fields left empty although a candidate was
            seen (a :func:`validate_value` reason, or ``conflicting_values``).
    """

    model_config = ConfigDict(frozen=True)

    values: dict[str, str | None]
    evidence: dict[str, Evidence]
    rejected: dict[str, str]


def extract_fields(
    pages: Sequence[PageLike],
    schema: FieldSchema,
    *,
    relaxed: bool = False,
    only: Collection[str] | None = None,
) -> ExtractionResult:
    """Reads the labelled fields of one entry form.

    Args:
        pages: the entry's pages in order (one entry: split batch files first).
        schema: the field schema (label variants, kinds, header and essay patterns).
        relaxed: also try OCR-confused and fuzzy labels and e-mail / phone shapes (the
            retry step after a strict pass missed fields).
        only: extract just these fields (the retry step asks for the missing ones).

    Returns:
        Values, evidence and rejections for the requested fields.

    Raises:
        ValueError: ``only`` names a field the schema does not have.
    """
    names = _requested(schema, only)
    lines = document_lines(pages)
    mode = CandidateMode.RELAXED if relaxed else CandidateMode.STRICT
    candidates = find_candidates(lines, schema, names, mode=mode)
    return resolve_candidates(candidates, schema, names)


def resolve_candidates(
    candidates: Sequence[Candidate], schema: FieldSchema, names: Collection[str]
) -> ExtractionResult:
    """Validates candidates and picks at most one value per field.

    For each field, tiers are tried from the most trusted; the first tier with a valid
    candidate decides. Within it, one distinct normalised value wins outright; several are
    settled by the most specific label, and otherwise the field stays empty with
    ``conflicting_values`` (accuracy over automation).

    Args:
        candidates: from :func:`~activities.document_intake.extract_candidates.find_candidates`
            (and the review agent's extra ones).
        schema: the field schema.
        names: the fields to resolve, in output order.

    Returns:
        The extraction result for ``names``.
    """
    values: dict[str, str | None] = {}
    evidence: dict[str, Evidence] = {}
    rejected: dict[str, str] = {}
    for name in names:
        spec = schema.field(name)
        values[name] = None
        mine = [c for c in candidates if c.field == name]
        for tier in sorted({c.tier for c in mine}):
            valid: list[tuple[Candidate, str]] = []
            for candidate in (c for c in mine if c.tier == tier):
                reason = validate_value(spec, candidate.raw)
                if reason is None:
                    valid.append((candidate, normalise_value(spec, candidate.raw)))
                else:
                    rejected.setdefault(name, reason)
            if not valid:
                continue
            top = max(c.specificity for c, _ in valid)
            if len({v for _, v in valid}) > 1:
                valid = [(c, v) for c, v in valid if c.specificity == top]
            if len({v for _, v in valid}) > 1:
                rejected[name] = CONFLICTING_VALUES
                break
            best, value = max(valid, key=lambda cv: cv[0].evidence.score)
            values[name] = value
            evidence[name] = best.evidence
            rejected.pop(name, None)
            break
    return ExtractionResult(values=values, evidence=evidence, rejected=rejected)


def _requested(schema: FieldSchema, only: Collection[str] | None) -> list[str]:
    if only is None:
        return schema.field_names
    unknown = sorted(set(only) - set(schema.field_names))
    if unknown:
        raise ValueError(f"unknown field(s) requested: {', '.join(unknown)}")
    return [name for name in schema.field_names if name in set(only)]
