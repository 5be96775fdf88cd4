"""Document intake's use of the LLM layer: prompted extraction of only the missing fields.

A model's value is taken only when it validates, and its evidence is strong only when
the line the model quotes really is in the document and contains the value — so a
hallucinated value can at most be *proposed* to a human, never auto-applied.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity

from activities.document_intake.documents import PageText
from activities.document_intake.extract import MAX_SNIPPET_CHARS, Evidence
from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import normalise_value, validate_value
from activities.llm import LLMContext, call_json, extraction_messages
from activities.runtime import get_runtime
from overseer.errors import BudgetExceededError, LLMCallError

LLM_MAX_ATTEMPTS = 3
"""Attempts of an LLM-calling node (its Temporal retry policy says the same)."""

VERIFIED_QUOTE_SCORE = 0.9
UNVERIFIED_SCORE = 0.5


@dataclass
class LLMExtraction:
    """What one prompted extraction gave.

    Attributes:
        values: field → validated, normalised value.
        evidence: field → :class:`Evidence` (method ``llm_quote``).
        strategy: ``llm:<model>``, or ``rules`` when the call failed.
        failure: the permanent failure's code (``llm_refused``, …), if the call failed.
        blocked: budget details when the call would have passed the run's budget.
    """

    values: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, Evidence] = field(default_factory=dict)
    strategy: str = "rules"
    failure: str | None = None
    blocked: dict[str, Any] | None = None


def llm_context(state: dict[str, Any], node: str, step: int) -> LLMContext:
    """Ledger keys and budget for a call made by ``node`` at ``step`` of this run."""
    options = state.get("options", {})
    raised = state.get("llm_budget") or {}
    return LLMContext(
        run_id=state["run_id"], node=node, step=step,
        budget_usd=raised.get("usd", options.get("llm_budget_usd")),
        budget_tokens=raised.get("tokens", options.get("llm_budget_tokens")),
        hint=options.get("llm_model_hint"),
    )


async def extract_with_llm(state: dict[str, Any], pages: Sequence[PageText], wanted: Sequence[str],
                           schema: FieldSchema, *, node: str, step: int) -> LLMExtraction:
    """Ask the model for ``wanted`` fields of the entry in ``pages``.

    Returns:
        The extraction; a permanent failure or a budget stop is reported, not raised.

    Raises:
        LLMRateLimitedError, LLMUnavailableError: transient, before the last attempt
            (Temporal retries the node activity with backoff, honouring Retry-After).
    """
    text = "\n\n".join(p.text for p in pages)
    ctx = llm_context(state, node, step)
    try:
        result = await call_json(extraction_messages(text, wanted), task="extraction", ctx=ctx,
                                 settings=get_runtime().settings)
    except BudgetExceededError as err:
        return LLMExtraction(blocked={**err.details, "node": node})
    except LLMCallError as err:
        attempt = activity.info().attempt if activity.in_activity() else LLM_MAX_ATTEMPTS
        if err.retryable and attempt < LLM_MAX_ATTEMPTS:
            raise
        return LLMExtraction(failure=err.code)
    out = LLMExtraction(strategy=result.strategy)
    known = set(schema.field_names)
    for name in wanted:
        answer = result.data.get(name)
        if isinstance(answer, dict):
            value, quote = answer.get("value"), answer.get("quote")
        else:
            value, quote = answer, None
        if name not in known or not isinstance(value, str) or not value.strip():
            continue
        spec = schema.field(name)
        normalised = normalise_value(spec, value)
        if validate_value(spec, normalised) is not None:
            continue
        out.values[name] = normalised
        out.evidence[name] = _evidence(pages, value, quote if isinstance(quote, str) else None)
    return out


def _evidence(pages: Sequence[PageText], value: str, quote: str | None) -> Evidence:
    want_value = _fold(value)
    if quote and want_value and want_value in _fold(quote):
        for page in pages:
            if _fold(quote) in _fold(page.text):
                factor = 1.0 if page.ocr_confidence is None else 0.5 + 0.5 * page.ocr_confidence
                return Evidence(page_number=page.page_number, snippet=quote[:MAX_SNIPPET_CHARS],
                                label="llm", method="llm_quote",
                                score=round(VERIFIED_QUOTE_SCORE * factor, 4))
    first = pages[0].page_number if pages else 1
    return Evidence(page_number=first, snippet=(quote or "")[:MAX_SNIPPET_CHARS], label="llm",
                    method="llm_quote", score=UNVERIFIED_SCORE)


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()
