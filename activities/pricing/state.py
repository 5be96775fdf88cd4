"""Typed state of the pricing orchestrator graph (seed 003 Task 1 ``OrchState``, extended).

The seed's keys — ``messages``, ``route``, ``plan``, ``violations``, ``outputs`` — are kept;
the rest carry what a durable run needs. Everything is JSON-serialisable: the state crosses
activity boundaries as a Temporal payload, so the catalog travels by reference (its SHA-256
in ``artifacts``) and the large per-item tables are trimmed to what the report and the
approval need.
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict


class PricingState(TypedDict, total=False):
    """State of one orchestrator run (thread id = run id)."""

    # -- context (workflow) ------------------------------------------------------------------
    run_id: str
    """The run (UUID string); also the thread id clients resume with."""
    messages: list[dict[str, str]]
    """Seed ``messages``: the session's earlier turns and this ask, ``{role, content}``."""
    request: dict[str, Any]
    """``{message, session_id, model, model_reason}`` as received."""
    options: dict[str, Any]
    """``policy``, ``optimizer``, ``sensitivity`` settings snapshot (``pricing_options``)."""
    catalog: dict[str, Any]
    """``{sha256, items, source}`` — reference to the stored catalog snapshot."""
    scope: dict[str, Any]
    """``{item_ids | None, segment, region, tier, matched}`` (router.resolve_scope)."""
    plan: list[str]
    """Seed ``plan``: ordered steps (optimizer, policy, explainer, sensitivity, reporter, approval)."""
    max_iterations: int
    """Bound on worker visits (cycles are bounded)."""

    # -- router --------------------------------------------------------------------------------
    route: str | None
    """Seed ``route``: the step the router chose last (or ``end``)."""
    route_reason: str
    """Why (``plan``, ``max_iterations``, ``no_changes_to_approve``, ``plan_complete``)."""
    iterations: int
    """Worker visits so far."""
    completed_steps: list[str]
    """Plan steps already done, in order (each worker appends its own)."""

    # -- workers -------------------------------------------------------------------------------
    outputs: dict[str, dict[str, Any]]
    """Seed ``outputs``: per step, its structured result and a one-line ``summary``."""
    proposal: dict[str, Any] | None
    """optimizer (policy_checker may fix it): ``{changes, proposed_prices, items_meta,
    uplift_pct, objective}``."""
    violations: list[dict[str, Any]]
    """Seed ``violations``: policy_checker's findings in today's prices (seed shape)."""
    tools_used: list[str]
    """Tools that ran, in order (``optimize_price``, ``check_policy``, …)."""
    strategy: str
    """``rules`` or ``llm:<model>`` (reporter): ``rules`` also when the model's summary was
    unusable and the template was used (``outputs.reporter.fallback`` says why)."""
    report: str
    """reporter: the analyst summary streamed as tokens."""

    # -- approval_gate ---------------------------------------------------------------------------
    decision: dict[str, Any] | None
    """The sign-off that resumed the gate."""
    approved_prices: dict[str, dict[str, float]]
    """Proposal plus reviewer edits, on approve."""
    status: str
    """``completed`` | ``rejected`` once the graph ends."""
    outcome: str
    """``answered`` (no proposal) | ``approved`` | ``rejected``."""
