"""Typed state of the thematic_analysis graph (seed 002 R2.1: ids, codes, themes, metadata, errors).

State holds **ids, never review text**: the dataset travels as a reference (its hash and
window), quotes as ids; nodes read sentences through :func:`dataset.load_corpus`. Lists that
the parallel coders and theme coders write concurrently have an ``operator.add`` reducer.
Everything is JSON-serialisable (it crosses activity boundaries as Temporal payloads).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

from typing_extensions import TypedDict


class ThematicState(TypedDict, total=False):
    """State of one analysis run (analysis_id = run_id)."""

    # -- input (runtime) ---------------------------------------------------------------------
    run_id: str
    """The run (UUID string); the seed's ``analysis_id`` in logs and checkpoints."""
    document: dict[str, Any]
    """The upload: ``{sha256, kind, filename, content_type, size_bytes}`` — never the bytes."""
    metadata: dict[str, Any]
    """``{account_id, start_date, end_date, review_codebook?, tenant_id?}`` from the request."""
    options: dict[str, Any]
    """:class:`~activities.thematic_analysis.options.ThematicOptions` snapshot."""

    # -- load_dataset ------------------------------------------------------------------------
    dataset: dict[str, Any]
    """Reference nodes re-derive sentences from: ``{sha256, filename, content_type,
    account_id, start_date, end_date, rows, interactions, sentences}``."""
    account_id: str
    """The analysed account (seed R2.1)."""
    interaction_ids: list[str]
    """The windowed interactions' ids, upload order (seed R2.1)."""
    identities: list[dict[str, Any]]
    """Snapshot of identities.yaml for this run (``Identity.model_dump()``)."""
    strategy: str
    """``rules`` (offline) or ``llm`` (coders call a model)."""
    cost_estimate: dict[str, Any] | None
    """``{usd, input_tokens, output_tokens, model}`` when a model is used (seed R8.3)."""
    started_at: float
    """Wall-clock start (epoch seconds) for total_duration_ms."""

    # -- coder (one Send per identity) ---------------------------------------------------------
    coder_results: Annotated[list[dict[str, Any]], operator.add]
    """Per coder: ``{identity_id, codes, strategy, dropped_quote_ids, fallback?}``."""

    # -- code_aggregator → reviewer → codebook_review ------------------------------------------
    codebook: list[dict[str, Any]]
    """``[{code_id, label, definition, identities, quote_ids, count, terms, strategy}]``,
    most frequent first (aggregator drafts, reviewer updates, a human may edit)."""
    codebook_decision: dict[str, Any] | None
    """codebook_review: the reviewer's decision ``{decision, note, updates, decided_by}``."""

    # -- theme_coder (one Send per identity) ----------------------------------------------------
    theme_proposals: Annotated[list[dict[str, Any]], operator.add]
    """Per theme coder and theme: ``{name, description, code_ids, identity_id, strategy}``."""

    # -- theme_aggregator -----------------------------------------------------------------------
    themes: list[dict[str, Any]]
    """``[{theme_id, name, description, code_ids, quote_ids, prevalence, sentiment,
    identities, count, interactions, key_terms, strategy}]``, most prevalent first."""

    # -- every node ------------------------------------------------------------------------------
    errors: Annotated[list[dict[str, Any]], operator.add]
    """Tolerated failures: ``{stage, node, identity_id, code, message}`` (seed R5.1, R5.4)."""
    fallbacks: Annotated[list[dict[str, Any]], operator.add]
    """Model steps that ran their rules strategy because the model's reply was unusable
    (prose after the re-ask, a refusal, a rejected request): ``{stage, node, identity_id,
    strategy: "rules", code, message}``."""
    checkpoints: Annotated[list[dict[str, Any]], operator.add]
    """``{analysis_id, stage: coding_complete|theme_complete, status, created_at, persisted,
    ...}`` (seed R4; recording one never blocks the run)."""
    stage_durations: Annotated[list[dict[str, Any]], operator.add]
    """``{stage, node, identity_id?, duration_ms}`` per node run."""
    llm_calls: Annotated[list[dict[str, Any]], operator.add]
    """Per model call: ``{node, identity_id, model, input_tokens, output_tokens, cost_usd}``."""

    # -- finish ----------------------------------------------------------------------------------
    token_usage: dict[str, Any]
    """``{prompt_tokens, completion_tokens, total_tokens, calls, cost_usd, by_node}`` (R8)."""
    durations_ms: dict[str, int]
    """Stage → summed milliseconds, plus ``total``."""
    warnings: list[str]
    """Non-fatal notices (``cost_overrun``, ``state_large``)."""
    status: str
    """``completed`` | ``rejected`` once the graph ends."""
    outcome: str
    """``themes`` | ``no_codes`` | ``no_themes`` (theme coders proposed none) | ``codebook_rejected``."""
    strategies: list[str]
    """What produced the result: ``llm:<model>`` per model that answered usably, ``rules``
    when any step ran the rules (offline or as a fallback)."""


class CoderInput(TypedDict, total=False):
    """What a ``Send`` gives one coder or theme coder (not the whole state)."""

    run_id: str
    identity: dict[str, Any]
    dataset: dict[str, Any]
    options: dict[str, Any]
    metadata: dict[str, Any]
    codebook: list[dict[str, Any]]
