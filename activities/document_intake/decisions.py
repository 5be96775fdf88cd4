"""The human gate's refusal rules for document_intake (seed 000 §2.5), pure and deterministic.

``check_decision`` is the pipeline's :attr:`overseer.pipelines.Pipeline.gate.check_decision`: it
runs in the workflow's update validator, so a decision that cannot apply is refused before
it reaches the history, with a stable code the API answers as 422.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import can_approve_record, validate_updates
from overseer.plugin import DecisionRefusedError


def check_decision(payload: Mapping[str, Any], decision: Mapping[str, Any],
                   state: Mapping[str, Any]) -> dict[str, Any]:
    """Seed 000 §2.5: approve applies the proposal plus edits, which must validate and complete the record.

    Args:
        payload: the open approval's payload (the ``escalate`` node's interrupt; the run's
            budget stop is the runtime's own and never comes here).
        decision: ``{decision, updates, note, apply_proposal, …}``.
        state: the graph's state at the pause (its ``field_schema`` snapshot is used).

    Returns:
        ``{"updates": merged}`` — the proposal's updates (when ``apply_proposal``) under the
        reviewer's edits; ``{"updates": {}}`` for a reject.

    Raises:
        DecisionRefusedError: ``invalid_field_edits`` (edits that do not validate, or a
            record that would still miss required fields).
    """
    if decision.get("decision") == "reject":
        return {"updates": {}}
    schema = FieldSchema.model_validate(state["field_schema"])
    edits = dict(decision.get("updates") or {})
    errors = validate_updates(edits, schema)
    if errors:
        raise DecisionRefusedError("field edits do not validate", code="invalid_field_edits",
                                   details={"errors": errors})
    proposal = payload.get("proposal") or {}
    proposed = (proposal.get("updates") or {}) if decision.get("apply_proposal", True) else {}
    updates = {**proposed, **edits}
    ok, missing = can_approve_record({**payload.get("record", {}), **updates}, schema)
    if not ok:
        raise DecisionRefusedError(
            "the record cannot be approved: required fields are missing or invalid",
            code="invalid_field_edits",
            details={"errors": {name: "required" for name in missing}, "missing_fields": missing})
    return {"updates": updates}

