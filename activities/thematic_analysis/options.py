"""Options of the thematic_analysis pipeline (all defaulted; env ``OVERSEER_THEMATIC_ANALYSIS__<FIELD>``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

MAX_MODEL_ATTEMPTS = 10
"""Upper bound of ``llm_max_attempts``; the coder and theme-coder activities allow this many
attempts and each model call stops retrying at the run's ``llm_max_attempts``."""


class ThematicOptions(BaseModel):
    """Tuning knobs of one run; the snapshot travels in state as ``options``.

    Attributes:
        identities_path: another identities.yaml (default: the packaged file).
        codes_per_identity: codes each offline coder keeps.
        min_code_count: sentences a code needs to stay in the codebook (reviewer).
        max_codes: codebook size cap after review (most frequent kept).
        max_quotes_per_code: quote ids kept per code in state (``count`` keeps the full number).
        max_themes: upper bound on themes per theme coder.
        max_quotes_per_theme: representative quote ids per theme.
        merge_similarity: cosine similarity of code-label embeddings above which codes merge.
        merge_fuzzy_ratio: rapidfuzz ``ratio`` (0-100) above which labels merge.
        overlap_merge: share of the smaller code's sentences that must be shared to merge two
            codes in review (``side`` into ``side effects``).
        lens_weight: how strongly an identity's lens re-weights key phrases (0 = ignore).
        llm_sentences: sentences shown to a model coder (evenly sampled from the window).
        llm_max_attempts: attempts of one model call on a transient failure (Temporal retries
            the step with backoff; seed 002 R5.6), counted per call from the ledger; after the
            last one that coder or theme coder uses its rules.
        cost_estimate_usd: the run's expected LLM cost; actual > 120 % logs a warning (R8.3).
            None: estimated from the prompt sizes at load time.
        llm_budget_usd: hard LLM cost budget of the run (None = unlimited).
        llm_budget_tokens: hard LLM token budget of the run (None = unlimited).
        llm_model_hint: per-run model hint (honoured when allowlisted).
    """

    model_config = ConfigDict(extra="ignore")

    identities_path: str | None = None
    codes_per_identity: int = Field(default=25, ge=1, le=200)
    min_code_count: int = Field(default=2, ge=1)
    max_codes: int = Field(default=60, ge=1, le=500)
    max_quotes_per_code: int = Field(default=20, ge=1, le=200)
    max_themes: int = Field(default=8, ge=1, le=50)
    max_quotes_per_theme: int = Field(default=6, ge=1, le=50)
    merge_similarity: float = Field(default=0.9, ge=0.0, le=1.0)
    merge_fuzzy_ratio: float = Field(default=92.0, ge=0.0, le=100.0)
    overlap_merge: float = Field(default=0.8, ge=0.0, le=1.0)
    lens_weight: float = Field(default=3.0, ge=0.0)
    llm_sentences: int = Field(default=150, ge=1, le=2000)
    llm_max_attempts: int = Field(default=3, ge=1, le=MAX_MODEL_ATTEMPTS)
    cost_estimate_usd: float | None = None
    llm_budget_usd: float | None = None
    llm_budget_tokens: int | None = None
    llm_model_hint: str | None = None


REQUEST_OPTIONS = {"llm_budget_usd": "llm_budget_usd", "llm_budget_tokens": "llm_budget_tokens",
                   "llm_model": "llm_model_hint"}
"""Per-run keys a submitter may set in ``metadata`` (README: LLM budgets, model hint) → options."""


def run_options(options: dict[str, object] | None, metadata: dict[str, object] | None
                ) -> ThematicOptions:
    """The run's options: the pipeline's snapshot with the request's LLM budget and model hint.

    The runtime puts only the pipeline's environment options into state; a budget or model
    hint the submitter sent in ``metadata`` (already validated by the API) overrides them.

    Args:
        options: the ``options`` snapshot in state (may be None).
        metadata: the request's metadata (may be None).

    Raises:
        pydantic.ValidationError: a value out of range (permanent).
    """
    merged = dict(options or {})
    for key, field_name in REQUEST_OPTIONS.items():
        if (metadata or {}).get(key) is not None:
            merged[field_name] = (metadata or {})[key]
    return ThematicOptions.model_validate(merged)
