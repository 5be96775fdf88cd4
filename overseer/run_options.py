"""A run's options from its request and the settings: LLM budget and model, escalation ladder."""

from __future__ import annotations

from typing import Any

from overseer.errors import InvalidRequestError
from overseer.settings import Settings

DURABILITY_MODES = ("sync", "async", "exit")
"""LangGraph's checkpoint durability modes (a run segment passes its own to LangGraph)."""


def request_options(metadata: dict[str, Any]) -> dict[str, Any]:
    """Per-run options a submitter may set in ``metadata``: LLM budget, model hint, durability.

    Keys: ``llm_budget_usd`` (number ≥ 0), ``llm_budget_tokens`` (integer ≥ 0),
    ``llm_model`` (a hint; used only when allowlisted, otherwise ignored with a reason),
    ``durability`` (LangGraph's ``sync`` | ``async`` | ``exit``, for runs as segments).

    Raises:
        InvalidRequestError: a key with the wrong type or a negative value, or an unknown
            durability.
    """
    out: dict[str, Any] = {}
    for key, kind in (("llm_budget_usd", (int, float)), ("llm_budget_tokens", (int,))):
        if key in metadata:
            value = metadata[key]
            if isinstance(value, bool) or not isinstance(value, kind) or value < 0:
                raise InvalidRequestError(f"metadata.{key} must be a non-negative number",
                                          details={"field": key})
            out[key] = value
    if "durability" in metadata:
        if metadata["durability"] not in DURABILITY_MODES:
            raise InvalidRequestError(f"metadata.durability must be one of {DURABILITY_MODES}",
                                      details={"field": "durability"})
        out["durability"] = metadata["durability"]
    if "llm_model" in metadata:
        if not isinstance(metadata["llm_model"], str):
            raise InvalidRequestError("metadata.llm_model must be a string",
                                      details={"field": "llm_model"})
        out["llm_model_hint"] = metadata["llm_model"]
    return out


def approval_ladder_options(settings: Settings) -> dict[str, Any]:
    """The escalation ladder a run's approvals climb (``workflows.approval.EscalationLadder``)."""
    return {
        "remind_after_seconds": settings.approval_remind_after_seconds,
        "reassign_after_seconds": settings.approval_reassign_after_seconds,
        "sla_seconds": settings.approval_sla_seconds,
        "final_after_seconds": settings.approval_final_after_seconds,
        "final_action": settings.approval_final_action,
        "reassign_to_group": settings.approval_escalation_group,
        "webhook_url": settings.approval_webhook_url,
        "final_resume": settings.approval_final_resume,
    }
