"""Resume tailoring's use of the LLM layer (``overseer/runtime/llm.py``): one prompted draft per round.

A model is used only when the worker's settings configure one (``llm_enabled``); otherwise
the rules drafter runs and every record says ``strategy: rules``. Whatever the model
answers is checked mechanically by the drafting node (schema and the honesty rule) — the
prompt asks for honesty, the check enforces it.

Outside a Temporal activity (plain LangGraph runs, unit tests) there is no event writer, so
the call's ledger events are dropped and the spend counts from zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from temporalio import activity

from overseer.plugin import LLMContext, LLMResponseError, Settings, call_json, llm_enabled

NODE = "resume_drafting_agent"
MODEL_ATTEMPTS = 4
"""Attempts of one drafting call on a transient failure (429, 5xx, time-out): the first
try and three retries (seed 002 R5.6's "retry up to 3 times"), Temporal's backoff (or a
429's Retry-After) in between; then the rules draft, never a failed run."""
DRY_RUN_MODEL = "dry-run"
"""``overseer.runtime.llm.DRY_RUN_MODEL``: DRY_RUN answers ``{}`` end to end, which is not "unusable"."""
RESUME_SECTIONS = frozenset({"basics", "work", "education", "skills", "projects", "volunteer",
                             "awards", "certificates", "publications", "languages",
                             "interests", "references"})
"""The JSON Resume sections: a draft holding none of them is no resume (the wrong shape)."""


REASK = ("Your answer could not be used: {error}. Answer again with exactly one JSON object "
         '{{"resume": {{...}}}} in JSON Resume format, and nothing else.')
"""The one re-ask after a reply that is not a JSON object (the parse error is named)."""


@dataclass(frozen=True)
class ModelDraft:
    """A model's draft: the JSON Resume it answered and ``llm:<model>``."""

    resume: dict[str, Any]
    strategy: str


def settings() -> Settings | None:
    """The worker's settings, or None when no activity runtime is configured."""
    from overseer.plugin import get_runtime

    try:
        return get_runtime().settings
    except RuntimeError:
        return None


def enabled() -> bool:
    """True when a model drafts (an endpoint, DRY_RUN, or a test's fake model factory)."""
    current = settings()
    return current is not None and llm_enabled(current)


def strategy_name() -> str:
    """``rules`` offline, ``llm`` when a model will draft (the exact model comes per call)."""
    return "llm" if enabled() else "rules"


async def draft_with_model(state: Mapping[str, Any], base: dict[str, Any], job: dict[str, Any],
                           directives: list[dict[str, Any]]) -> ModelDraft:
    """Ask the model for a tailored JSON Resume.

    A reply that is not a JSON object, or whose object holds no JSON Resume section
    (:data:`RESUME_SECTIONS`, at the top or under ``resume``), is asked for once more, with
    what was wrong (as structured-output libraries re-ask); both calls are in the
    ``llm.called`` ledger.

    Raises:
        LLMRateLimitedError, LLMUnavailableError: transient; the node decides whether
            Temporal retries it (:func:`overseer.runtime.llm.model_call_retryable`).
        LLMClientError, LLMRefusedError, LLMResponseError: permanent for this step (the
            node then drafts with the rules).
    """
    current = settings()
    assert current is not None
    options = state.get("options") or {}
    revision = int(state.get("revision_count") or 0)
    ctx = LLMContext(run_id=str(state.get("run_id") or "local"), node=NODE, step=revision,
                     budget_usd=options.get("llm_budget_usd"),
                     budget_tokens=options.get("llm_budget_tokens"),
                     hint=options.get("llm_model_hint"))
    in_activity = activity.in_activity()
    messages = drafting_messages(base, job, directives)
    for reask in (False, True):
        try:
            result = await call_json(
                messages, task="drafting", ctx=ctx, settings=current,
                record=None if in_activity else _discard,
                spend=None if in_activity else {"cost_usd": 0.0, "tokens": 0.0})
            resume = result.data.get("resume", result.data)
            if result.model == DRY_RUN_MODEL or (
                    isinstance(resume, dict) and RESUME_SECTIONS & set(resume)):
                break
            raise LLMResponseError(
                "the model's reply is not usable (it holds no JSON Resume: none of "
                f"{', '.join(sorted(RESUME_SECTIONS))})", details={"reason": "schema"})
        except LLMResponseError as err:
            if reask:
                raise
            messages = [*messages, HumanMessage(REASK.format(error=err.message))]
    return ModelDraft(resume=resume if isinstance(resume, dict) else {},
                      strategy=result.strategy)


def drafting_messages(base: dict[str, Any], job: dict[str, Any],
                      directives: list[dict[str, Any]]) -> list[BaseMessage]:
    """The drafting prompt: base resume, job keywords, directives; the honesty rule stated."""
    keywords = [k["phrase"] for k in job.get("keywords", [])]
    return [
        SystemMessage(
            "You tailor a resume to a job. Reply with one JSON object {\"resume\": <JSON "
            "Resume>}. You may reorder, select, rephrase and emphasise. Never add an employer, "
            "institution, job title, date, degree, skill or number that the base resume does "
            "not contain; a job keyword the resume does not support is left out. Follow the "
            "directives; a directive of kind 'avoid' names a claim you must not make."
        ),
        HumanMessage(
            f"Job: {job.get('title', '')} at {job.get('company', '')}\n"
            f"Job keywords: {json.dumps(keywords)}\n"
            f"Directives: {json.dumps(directives)}\n"
            f"Base resume: {json.dumps(base)[:12000]}"
        ),
    ]


async def _discard(events: list[Any]) -> None:
    """Ledger sink outside an activity (no event store to write to)."""
