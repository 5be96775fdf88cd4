"""The review agent's deterministic infer step (seed 000 §2.1 ``infer_with_llm_node``, rules).

When the pipeline could not fill or trust a record, the review agent looks again, harder
than extraction does, and proposes field updates with evidence:

* every page, not only the form area (labels with a colon on non-prose lines);
* labels with OCR confusions (0/O, 1/l/I, 5/S, rn/m) and fuzzy labels;
* labels and values split across two lines;
* e-mail and phone numbers by their shape;
* OCR repairs of a value that almost validates (``maria@gmail,com``, ``312-555-O134``).

It proposes values for the missing fields and corrections for present-but-invalid ones;
it never touches a present valid value. :func:`proposal_is_acceptable` decides whether a
proposal may be applied without a person (seed 000 §2.2: success → the record is updated
and ``needs_review`` cleared; otherwise a human decides, seed 000 §2.5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from activities.document_intake.extract import resolve_candidates
from activities.document_intake.extract_candidates import (
    Candidate,
    CandidateMode,
    Evidence,
    find_candidates,
)
from activities.document_intake.extract_lines import PageLike, document_lines
from activities.document_intake.llm_steps import QUOTE_NOT_FOUND, LLMExtraction
from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import (
    can_approve_record,
    clean_value,
    validate_record,
    validate_updates,
    validate_value,
)

__all__ = [
    "DEFAULT_MIN_EVIDENCE_SCORE",
    "Proposal",
    "proposal_from_llm",
    "proposal_is_acceptable",
    "propose_updates",
    "quote_check_payload",
]

DEFAULT_MIN_EVIDENCE_SCORE = 0.85
"""Every proposed field needs evidence at least this strong to be applied unreviewed."""

REPAIR_SCORE_FACTOR = 0.7
"""An OCR-repaired value is trusted this much relative to the reading it repairs."""


class Proposal(BaseModel):
    """Field updates proposed by the review agent.

    Attributes:
        updates: field → proposed normalised value (only fields that were missing or
            invalid).
        evidence: field → where the proposed value was read.
        strength: 0..1, the weakest evidence score among the proposed fields; 0 when
            nothing is proposed.
        strategy: ``"rules"`` (the deterministic strategy) or ``"llm:<model>"``.
        unresolved: field → reason, for requested fields with no proposal
            (``not_found``, ``unknown_field``, ``already_valid``, ``conflicting_values`` or
            a validation reason of the best candidate seen).
        suggestions: field → value a model proposed whose quote is **not** in the document:
            shown to a reviewer, never part of ``updates`` (so never pre-filled, never
            applied on approval, never auto-applied).
        suggestion_evidence: field → the model's (unverified) quote as evidence.
        quote_verified: every proposed field (``updates`` and ``suggestions``) → whether the
            text it was read from is in the document. Rules proposals read lines of the
            document itself, so theirs are always True.
        notes: field → note for the reviewer (``"quote not found in the document"``).
    """

    model_config = ConfigDict(frozen=True)

    updates: dict[str, str]
    evidence: dict[str, Evidence]
    strength: float = Field(ge=0.0, le=1.0)
    strategy: str = "rules"
    unresolved: dict[str, str] = Field(default_factory=dict)
    suggestions: dict[str, str] = Field(default_factory=dict)
    suggestion_evidence: dict[str, Evidence] = Field(default_factory=dict)
    quote_verified: dict[str, bool] = Field(default_factory=dict)
    notes: dict[str, str] = Field(default_factory=dict)


def proposal_from_llm(extraction: LLMExtraction) -> Proposal:
    """The review proposal of a model's answer: verified values as updates, the rest as suggestions.

    Args:
        extraction: :func:`activities.document_intake.llm_steps.extract_with_llm`'s result.

    Returns:
        A proposal whose ``updates`` hold only quote-verified values (``strength`` is their
        weakest evidence, 0 when none); unverified values are ``suggestions`` with the note
        :data:`~activities.document_intake.llm_steps.QUOTE_NOT_FOUND`.
    """
    scores = [e.score for e in extraction.evidence.values()]
    return Proposal(
        updates=dict(extraction.values), evidence=dict(extraction.evidence),
        strength=min(scores) if scores else 0.0, strategy=extraction.strategy,
        suggestions=dict(extraction.unverified),
        suggestion_evidence=dict(extraction.unverified_evidence),
        quote_verified={**{k: True for k in extraction.values},
                        **{k: False for k in extraction.unverified}},
        notes={k: QUOTE_NOT_FOUND for k in extraction.unverified},
    )


def quote_check_payload(proposal: Proposal) -> dict[str, Any]:
    """The quote check of ``proposal`` as plain data.

    For the ``review.suggested`` event and the approval payload's ``proposal`` (merge it
    into both).

    Returns:
        ``{"quote_verified": {field: bool}, "suggestions": {field: value},
        "suggestion_evidence": {field: evidence dict}, "notes": {field: note},
        "unverified_fields": [field, …]}``.
    """
    return {
        "quote_verified": dict(proposal.quote_verified),
        "suggestions": dict(proposal.suggestions),
        "suggestion_evidence": {k: v.model_dump() for k, v in proposal.suggestion_evidence.items()},
        "notes": dict(proposal.notes),
        "unverified_fields": sorted(k for k, ok in proposal.quote_verified.items() if not ok),
    }


def propose_updates(
    pages: Sequence[PageLike],
    record: Mapping[str, object],
    missing_fields: Sequence[str],
    schema: FieldSchema,
) -> Proposal:
    """Looks for values of missing and invalid fields (seed 000 §2.1 infer step, rules).

    Args:
        pages: the entry's pages (the whole entry, essay included).
        record: the current record, field → value.
        missing_fields: fields to look for (the seed's ``missing_fields``; invalid fields
            may be included). Fields of ``record`` with an invalid value are added; fields
            with a present valid value are skipped (``already_valid``).
        schema: the field schema.

    Returns:
        The proposal; empty when nothing trustworthy was found.
    """
    report = validate_record(record, schema)
    unresolved: dict[str, str] = {}
    wanted: list[str] = []
    for name in [*missing_fields, *report.errors]:
        if not schema.has_field(name):
            unresolved[name] = "unknown_field"
        elif report.values.get(name) is not None and name not in report.errors:
            unresolved[name] = "already_valid"  # Never second-guess a present valid value.
        elif name not in wanted:
            wanted.append(name)
    targets = [name for name in schema.field_names if name in wanted]
    if not targets:
        return Proposal(updates={}, evidence={}, strength=0.0, unresolved=unresolved)

    lines = document_lines(pages)
    candidates = find_candidates(lines, schema, targets, mode=CandidateMode.REVIEW)
    candidates += _repaired(candidates, schema)
    result = resolve_candidates(candidates, schema, targets)

    updates: dict[str, str] = {}
    evidence: dict[str, Evidence] = {}
    for name in targets:
        value = result.values.get(name)
        if value is None:
            unresolved[name] = result.rejected.get(name, "not_found")
            continue
        updates[name] = value
        evidence[name] = result.evidence[name]
    strength = min((e.score for e in evidence.values()), default=0.0)
    # Rules read lines of the document itself: their snippets are in it by construction.
    return Proposal(updates=updates, evidence=evidence, strength=strength, unresolved=unresolved,
                    quote_verified={k: True for k in updates})


def proposal_is_acceptable(
    proposal: Proposal,
    record: Mapping[str, object],
    schema: FieldSchema,
    *,
    min_evidence_score: float = DEFAULT_MIN_EVIDENCE_SCORE,
) -> tuple[bool, str]:
    """Whether a proposal may be applied without a person (seed 000 §2.2, §2.5).

    Acceptable only when the updates validate, change no present valid value, make the
    merged record approvable (``can_approve_record``) and every proposed field has
    evidence scoring at least ``min_evidence_score``.

    Args:
        proposal: from :func:`propose_updates` (or another strategy).
        record: the current record.
        schema: the field schema.
        min_evidence_score: 0..1 evidence threshold per proposed field.

    Returns:
        ``(acceptable, reason)`` with reason ``accepted``, ``no_updates``,
        ``unverified_quote`` (an update whose quote is not in the document),
        ``invalid_updates``, ``overwrites_valid_value``, ``still_not_approvable`` or
        ``weak_evidence``.
    """
    if not proposal.updates:
        return False, "no_updates"
    if any(not proposal.quote_verified.get(name, True) for name in proposal.updates):
        return False, "unverified_quote"
    if validate_updates(proposal.updates, schema):
        return False, "invalid_updates"
    current = validate_record(record, schema)
    for name in proposal.updates:
        if current.values.get(name) is not None and name not in current.errors:
            return False, "overwrites_valid_value"
    approvable, _ = can_approve_record({**record, **proposal.updates}, schema)
    if not approvable:
        return False, "still_not_approvable"
    for name in proposal.updates:
        found = proposal.evidence.get(name)
        if found is None or found.score < min_evidence_score:
            return False, "weak_evidence"
    return True, "accepted"


def _repaired(candidates: Sequence[Candidate], schema: FieldSchema) -> list[Candidate]:
    """OCR-repaired copies of candidates that fail validation only because of OCR slips."""
    out: list[Candidate] = []
    for candidate in candidates:
        spec = schema.field(candidate.field)
        repair = _REPAIRS.get(spec.kind)
        if repair is None or validate_value(spec, candidate.raw) is None:
            continue
        fixed = repair(clean_value(candidate.raw))
        if fixed == clean_value(candidate.raw) or validate_value(spec, fixed) is not None:
            continue
        evidence = candidate.evidence.model_copy(
            update={
                "method": "ocr_repair",
                "score": round(candidate.evidence.score * REPAIR_SCORE_FACTOR, 4),
            }
        )
        out.append(Candidate(candidate.field, fixed, evidence, 4, candidate.specificity))
    return out


def _repair_email(value: str) -> str:
    text = re.sub(r"\s*[(\[{]\s*at\s*[)\]}]\s*|\s+at\s+", "@", value, flags=re.IGNORECASE)
    text = "".join(text.split())
    local, at, domain = text.partition("@")
    if not at:
        return text
    return local + "@" + domain.replace(",", ".")


def _repair_digits(value: str) -> str:
    # Only inside runs that are mostly digits, so "Grade 8" or a word keeps its letters.
    def fix(match: re.Match[str]) -> str:
        token = match.group(0)
        if sum(ch.isdigit() for ch in token) * 2 < len(token):
            return token
        return token.translate(_DIGIT_CONFUSIONS)

    return re.sub(r"[0-9OoIl|!SsB]+", fix, value)


_DIGIT_CONFUSIONS = str.maketrans({"O": "0", "o": "0", "I": "1", "l": "1", "|": "1", "!": "1",
                                   "S": "5", "s": "5", "B": "8"})
_REPAIRS = {"email": _repair_email, "phone": _repair_digits, "grade": _repair_digits}
