"""Document intake's use of the LLM layer: prompted extraction of only the missing fields.

A model's value is taken only when it validates **and its quote is verified**: the line the
model quotes must be in the document text (OCR text for scans; compared with whitespace,
case and spacing around punctuation normalised), must contain the value, and must say more
than the bare value. A value whose quote fails the check is kept apart
(:attr:`LLMExtraction.unverified`): it is never written into the record, never pre-filled
and never applied on approval — a reviewer sees it as a suggestion with
:data:`QUOTE_NOT_FOUND`. Every answered field's check is in :attr:`LLMExtraction.quote_checks`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage

from activities.document_intake.extract_candidates import MAX_SNIPPET_CHARS, Evidence
from activities.document_intake.schema import FieldSchema
from activities.document_intake.validate import normalise_value, validate_value
from overseer.documents import PageText
from overseer.plugin import (
    BudgetExceededError,
    BudgetStop,
    LLMCallError,
    LLMContext,
    LLMResponseError,
    call_json,
    extraction_messages,
    get_runtime,
    model_call_retryable,
)

LLM_MAX_ATTEMPTS = 3
"""Attempts of one model call on a transient failure, counted from the ledger (the node's
activity allows more, for database outages)."""

VERIFIED_QUOTE_SCORE = 0.9
UNVERIFIED_SCORE = 0.5
REASK = ("Your answer could not be used: {error}. Answer again with exactly one JSON object "
         "with the requested field names as keys, and nothing else.")
"""The one re-ask after a reply that is not a JSON object (the parse error is named)."""
QUOTE_NOT_FOUND = "quote not found in the document"
"""The note a reviewer sees beside a value whose quote failed the check."""


@dataclass
class LLMExtraction:
    """What one prompted extraction gave.

    Attributes:
        values: field → validated, normalised value whose quote is verified (the only
            values a caller may write into the record or propose as updates).
        evidence: field → :class:`Evidence` (method ``llm_quote``) of ``values``.
        unverified: field → validated, normalised value whose quote is *not* in the
            document (or does not contain the value): a suggestion for a human only.
        unverified_evidence: field → :class:`Evidence` of ``unverified`` (score
            :data:`UNVERIFIED_SCORE`, the quote as the model gave it).
        quote_checks: field → ``{"value", "quote", "quote_verified", "reason"}`` for every
            field the model answered with a valid value (``reason``: ``verified``,
            ``no_quote``, ``quote_not_in_document``, ``value_not_in_quote``,
            ``quote_is_only_the_value``).
        strategy: ``llm:<model>``, or ``rules`` when the call failed.
        failure: the permanent failure's code (``llm_refused``, …), if the call failed.
    """

    values: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, Evidence] = field(default_factory=dict)
    unverified: dict[str, str] = field(default_factory=dict)
    unverified_evidence: dict[str, Evidence] = field(default_factory=dict)
    quote_checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    strategy: str = "rules"
    failure: str | None = None


def llm_context(state: dict[str, Any], node: str, step: int) -> LLMContext:
    """Ledger keys and budget for a call made by ``node`` at ``step`` of this run.

    The budget is the run's options'; once a reviewer has raised it at a budget stop the
    LLM layer uses the raised one (:func:`overseer.budget.run_budget`).
    """
    options = state.get("options", {})
    return LLMContext(
        run_id=state["run_id"], node=node, step=step,
        budget_usd=options.get("llm_budget_usd"),
        budget_tokens=options.get("llm_budget_tokens"),
        hint=options.get("llm_model_hint"),
    )


async def extract_with_llm(state: dict[str, Any], pages: Sequence[PageText], wanted: Sequence[str],
                           schema: FieldSchema, *, node: str, step: int) -> LLMExtraction:
    """Ask the model for ``wanted`` fields of the entry in ``pages``.

    A reply that is not the JSON object asked for is asked for once more, with what was
    wrong; both calls are in the ``llm.called`` ledger. A second unusable
    reply is the step's failure (``llm_malformed_response``): the run goes to a person with
    the reason, as for any other permanent failure.

    Returns:
        The extraction; a permanent failure is reported, not raised.

    Raises:
        BudgetStop: the call would pass the run's LLM budget (nothing was sent); the run
            stops for a reviewer, and this node runs again under the raised budget.
        LLMRateLimitedError, LLMUnavailableError: transient, while the call has had fewer
            than :data:`LLM_MAX_ATTEMPTS` attempts (Temporal retries the node activity with
            backoff, honouring Retry-After; :func:`overseer.runtime.llm.model_call_retryable`).
    """
    text = "\n\n".join(p.text for p in pages)
    ctx = llm_context(state, node, step)
    messages = extraction_messages(text, wanted)
    for reask in (False, True):
        try:
            result = await call_json(messages, task="extraction", ctx=ctx,
                                     settings=get_runtime().settings)
            break
        except BudgetExceededError as err:  # the run's one budget stop: a reviewer decides
            raise BudgetStop(node, blocked=err.details) from err
        except LLMResponseError as err:  # not the JSON asked for: once more, saying why
            if reask:
                return LLMExtraction(failure=err.code)
            messages = [*messages, HumanMessage(REASK.format(error=err.message))]
        except LLMCallError as err:
            # a 429/5xx/time-out: Temporal retries the node while this call has failed fewer
            # than LLM_MAX_ATTEMPTS times in a row (from the ledger: a re-ask's 429 or a
            # database outage does not spend the first call's attempts)
            if await model_call_retryable(err, run_id=ctx.run_id, node=ctx.node,
                                          max_attempts=LLM_MAX_ATTEMPTS):
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
        quote_text = quote if isinstance(quote, str) else None
        evidence, reason = check_quote(pages, value, quote_text)
        verified = reason == "verified"
        out.quote_checks[name] = {"value": normalised, "quote": (quote_text or "")[:MAX_SNIPPET_CHARS],
                                  "quote_verified": verified, "reason": reason}
        if verified:
            out.values[name] = normalised
            out.evidence[name] = evidence
        else:
            out.unverified[name] = normalised
            out.unverified_evidence[name] = evidence
    return out


def check_quote(pages: Sequence[PageText], value: str, quote: str | None
                ) -> tuple[Evidence, str]:
    """Check a model's quote against the document; the evidence and the check's reason.

    Args:
        pages: the pages the model read (their ``text``: text layer or OCR text).
        value: the value as the model wrote it.
        quote: the line the model says states it.

    Returns:
        ``(evidence, reason)``; reason ``verified`` (evidence scored
        :data:`VERIFIED_QUOTE_SCORE` × the page's OCR factor, on the page holding the quote)
        or why not (evidence scored :data:`UNVERIFIED_SCORE`).
    """
    first = pages[0].page_number if pages else 1
    unverified = Evidence(page_number=first, snippet=(quote or "")[:MAX_SNIPPET_CHARS],
                          label="llm", method="llm_quote", score=UNVERIFIED_SCORE)
    if not quote or not quote.strip():
        return unverified, "no_quote"
    folded_quote, folded_value = _fold(quote), _fold(value)
    if not folded_value or folded_value not in folded_quote:
        return unverified, "value_not_in_quote"
    # A quote that is only the value ("9") proves nothing: any 9 on the page would match.
    context = _alnum(folded_quote.replace(folded_value, " ", 1))
    if len(context) < 3 and len(_alnum(folded_value)) < 6:
        return unverified, "quote_is_only_the_value"
    for page in pages:
        if folded_quote in _fold(page.text):
            factor = 1.0 if page.ocr_confidence is None else 0.5 + 0.5 * page.ocr_confidence
            return Evidence(page_number=page.page_number, snippet=quote[:MAX_SNIPPET_CHARS],
                            label="llm", method="llm_quote",
                            score=round(VERIFIED_QUOTE_SCORE * factor, 4)), "verified"
    return unverified, "quote_not_in_document"


def _fold(text: str) -> str:
    """Case-folded, whitespace collapsed, no spaces around punctuation (``Grade : 9`` = ``grade:9``)."""
    text = re.sub(r"\s+", " ", text).strip().casefold()
    return re.sub(r" ?([^\w\s]) ?", r"\1", text)


def _alnum(text: str) -> str:
    return "".join(ch for ch in text if ch.isalnum())
