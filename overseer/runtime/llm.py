"""The LLM layer every pipeline uses: model choice, one factory, durable retries, a cost ledger, budgets.

- **Factory**: any OpenAI-compatible endpoint (OpenAI, Groq, vLLM, Ollama, llama.cpp
  server) through ``langchain-openai``; ``DRY_RUN=1`` gives a fake model end to end;
  tests replace the factory with langchain-core fake chat models.
- **Choice** (seed 003 AC5): admin override > per-request hint (if allowlisted) > task
  default > global default; the choice and its reason are recorded with every call.
- **Retries** (seed 002 R5.6): calls run inside activities, so Temporal retries them. A
  429 (honouring Retry-After), a 5xx, a time-out or a lost connection is transient; any
  other 4xx, a refusal, a reply that is not the JSON asked for or one the client cannot read
  (a ``ValueError`` while parsing it) is permanent (the steps that handle it re-ask once
  with what was wrong, then use their offline strategy). How often a transient failure is
  retried is counted per call from the ledger (:func:`model_call_retryable`), not by the
  activity's attempt number: a step's attempts are shared by every call it makes (parallel
  coders, a re-ask), so a step would otherwise give up on a call that failed once.
- **Ledger** (seed 002 R8): every attempt appends one ``llm.called`` event with model,
  tokens, latency and cost, keyed by run, node, step, call and attempt, so retries show
  but the same attempt never counts twice.
- **Budgets**: a call that would take the run past its token or cost budget (the
  context's, or the run's as its approved budget stops raised it:
  :func:`overseer.budget.run_budget`) raises :class:`BudgetExceededError` before any token
  is spent; a pipeline either fails the step with it or stops the run for a reviewer by
  raising :class:`overseer.budget.BudgetStop` (document intake).

No endpoint configured (and no DRY_RUN) means :func:`llm_enabled` is False and the
pipelines run their deterministic strategies, recording ``strategy: rules``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from temporalio import activity

from overseer.budget import run_budget
from overseer.errors import (
    BudgetExceededError,
    LLMCallError,
    LLMClientError,
    LLMRateLimitedError,
    LLMRefusedError,
    LLMResponseError,
    LLMUnavailableError,
)
from overseer.settings import Settings
from overseer.store.events import LLM_CALLED, NewEvent

LEDGER_TAG = "overseer:ledgered"
"""Tag of every chat model :func:`chat_model` hands out: Overseer's own code writes the
``llm.called`` events of those calls, so the graph runtime's meter
(:class:`overseer.runtime.graph_nodes.UsageMeter`) does not write them again."""

log = logging.getLogger("overseer.llm")

TASKS = ("extraction", "routing", "drafting", "reporting")
DRY_RUN_MODEL = "dry-run"

BUILTIN_PRICES_PER_1M_USD: dict[str, tuple[float, float]] = {
    # (input, output) USD per million tokens; override or extend with OVERSEER_LLM_PRICE_TABLE.
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "llama-3.1-8b-instant": (0.05, 0.08),
    "llama-3.3-70b-versatile": (0.59, 0.79),
    DRY_RUN_MODEL: (0.0, 0.0),
}

ChatModelFactory = Callable[[Settings, str], BaseChatModel]


# --- model choice ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelChoice:
    """Which model a call uses and why (``reason`` is a stable code)."""

    model: str
    reason: str
    hint: str | None = None


def select_model(task: str, settings: Settings, *, hint: str | None = None) -> ModelChoice:
    """Pick the model for ``task`` (seed 003 AC5 / Task 5).

    Order: admin override > per-request ``hint`` when allowlisted > task default > global
    default. An unlisted hint is ignored with reason ``hint_not_allowlisted`` — never an
    error to the caller.

    Args:
        task: one of :data:`TASKS` (unknown tasks use the global default).
        settings: LLM settings.
        hint: the model a request asked for, if any.

    Returns:
        The choice with a reason code: ``admin_override``, ``request_hint``,
        ``task_default``, ``global_default`` (suffixed ``;hint_not_allowlisted`` when a
        hint was refused).
    """
    if settings.llm_admin_override:
        return ModelChoice(settings.llm_admin_override, "admin_override", hint)
    refused = ""
    if hint:
        if hint in allowed_models(settings):
            return ModelChoice(hint, "request_hint", hint)
        refused = ";hint_not_allowlisted"
    if task in settings.llm_task_models:
        return ModelChoice(settings.llm_task_models[task], "task_default" + refused, hint)
    return ModelChoice(settings.llm_model, "global_default" + refused, hint)


def allowed_models(settings: Settings) -> list[str]:
    """The allowlist: configured models, else the global and task defaults."""
    if settings.llm_allowed_models:
        return list(settings.llm_allowed_models)
    return sorted({settings.llm_model, *settings.llm_task_models.values()})


def price_usd(model: str, input_tokens: int, output_tokens: int, settings: Settings) -> float | None:
    """Cost of one call from the price table; None when the model has no known price."""
    custom = settings.llm_price_table.get(model)
    if custom is not None:
        rates = (float(custom.get("input_per_1m_usd", 0.0)), float(custom.get("output_per_1m_usd", 0.0)))
    elif model in BUILTIN_PRICES_PER_1M_USD:
        rates = BUILTIN_PRICES_PER_1M_USD[model]
    else:
        return None
    return round((input_tokens * rates[0] + output_tokens * rates[1]) / 1_000_000, 8)


# --- the factory ----------------------------------------------------------------------------


def llm_enabled(settings: Settings) -> bool:
    """True when calls go to a model (an endpoint is configured, or DRY_RUN)."""
    return bool(settings.llm_base_url or settings.dry_run or _factory is not _default_factory)


def _default_factory(settings: Settings, model: str) -> BaseChatModel:
    if settings.dry_run:
        return dry_run_model()
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key or "not-needed",
        model=model,
        timeout=settings.llm_timeout_seconds,
        max_retries=0,  # Temporal owns retries
        temperature=0,
        max_tokens=settings.llm_max_output_tokens,
    )


def dry_run_model() -> BaseChatModel:
    """DRY_RUN's fake model: answers every call with an empty JSON object (nothing found)."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    return GenericFakeChatModel(messages=repeat(AIMessage(content="{}")))


_factory: ChatModelFactory = _default_factory


def set_chat_model_factory(factory: ChatModelFactory | None) -> None:
    """Replace how chat models are made (tests pass fake models; None restores the default)."""
    global _factory
    _factory = factory or _default_factory


def chat_model(settings: Settings, model: str | None = None) -> BaseChatModel | None:
    """A chat model for ``model`` (default: the global default), or None when offline.

    The model carries :data:`LEDGER_TAG`: whoever calls it here writes the ``llm.called``
    ledger itself, so the graph runtime's meter leaves those calls out of its own entries.
    """
    if not llm_enabled(settings):
        return None
    made = _factory(settings, model or settings.llm_model)
    tags = list(getattr(made, "tags", None) or [])
    if made is not None and LEDGER_TAG not in tags:
        made.tags = [*tags, LEDGER_TAG]
    return made


# --- calls, ledger and budget ---------------------------------------------------------------


@dataclass
class LLMContext:
    """Where a call happens, for its ledger events and the run's budget.

    Attributes:
        run_id: the run (UUID string).
        node: the graph node making the call.
        step: the node's logical step in the run (e.g. ``len(tools_used)``).
        budget_usd: the run's cost budget (None = unlimited).
        budget_tokens: the run's token budget (None = unlimited).
        hint: the per-request model hint, if any.
    """

    run_id: str
    node: str
    step: int
    budget_usd: float | None = None
    budget_tokens: int | None = None
    hint: str | None = None
    calls: int = field(default=0, init=False)


@dataclass
class LLMResult:
    """A successful call: the parsed JSON, the model and its usage."""

    data: dict[str, Any]
    model: str
    choice_reason: str
    input_tokens: int
    output_tokens: int
    cost_usd: float | None

    @property
    def strategy(self) -> str:
        """``llm:<model>`` for records (``llm:dry-run`` under DRY_RUN)."""
        return f"llm:{self.model}"


async def call_json(
    messages: Sequence[BaseMessage], *, task: str, ctx: LLMContext, settings: Settings,
    record: Callable[[list[NewEvent]], Any] | None = None, spend: dict[str, float] | None = None,
) -> LLMResult:
    """Make one model call that must answer a JSON object, with ledger and budget.

    Args:
        messages: the prompt.
        task: ``extraction`` | ``routing`` | ``drafting`` | ``reporting``.
        ctx: run, node and step (event keys) and the run's budget.
        settings: LLM settings.
        record: appends ledger events (default: the activity event writer).
        spend: the run's spend so far ``{"cost_usd", "tokens"}`` (default: read from the log).

    Returns:
        The parsed reply and its usage.

    Raises:
        BudgetExceededError: the call would pass the run's budget (nothing was sent).
        LLMRateLimitedError, LLMUnavailableError: transient; Temporal retries the activity.
        LLMClientError, LLMRefusedError, LLMResponseError: permanent for this step.
    """
    from overseer.runtime.events import append_from_activity

    record = record or append_from_activity
    choice = select_model(task, settings, hint=ctx.hint)
    model = chat_model(settings, choice.model)
    if model is None:
        raise LLMClientError("no LLM endpoint is configured", details={"task": task})
    if spend is None:
        spend = await run_spend(ctx.run_id)
    _check_budget(messages, choice.model, ctx, settings, spend)
    ctx.calls += 1
    attempt = activity.info().attempt if activity.in_activity() else 1
    key = f"llm.called:{ctx.node}:{ctx.step}:{ctx.calls}:{attempt}"
    base = {"task": task, "model": choice.model, "choice_reason": choice.reason,
            "hint": choice.hint, "node": ctx.node, "step": ctx.step, "attempt": attempt,
            "dry_run": settings.dry_run}
    started = time.monotonic()
    try:
        reply = await model.ainvoke(list(messages))
    except Exception as err:
        failure = classify_error(err)
        await record([NewEvent(run_id=ctx.run_id, key=key, type=LLM_CALLED,
                               actor=f"activity:{ctx.node}", data={
                                   **base, "outcome": "error", "error_code": failure.code,
                                   "latency_ms": _ms(started), "input_tokens": 0,
                                   "output_tokens": 0, "cost_usd": 0.0})])
        log.warning("llm call failed", extra={"run_id": ctx.run_id, "node": ctx.node,
                                              "code": failure.code, "attempt": attempt})
        raise failure from err
    input_tokens, output_tokens = reply_usage(reply)
    cost = price_usd(choice.model, input_tokens, output_tokens, settings)
    data: dict[str, Any] = {**base, "latency_ms": _ms(started), "input_tokens": input_tokens,
                            "output_tokens": output_tokens, "cost_usd": cost or 0.0,
                            "price_known": cost is not None}
    try:
        parsed = parse_reply(reply)
    except LLMCallError as failure:
        await record([NewEvent(run_id=ctx.run_id, key=key, type=LLM_CALLED,
                               actor=f"activity:{ctx.node}",
                               data={**data, "outcome": "error", "error_code": failure.code})])
        raise
    await record([NewEvent(run_id=ctx.run_id, key=key, type=LLM_CALLED,
                           actor=f"activity:{ctx.node}", data={**data, "outcome": "ok"})])
    log.info("llm call", extra={"run_id": ctx.run_id, "node": ctx.node, "model": choice.model,
                                "input_tokens": input_tokens, "output_tokens": output_tokens})
    return LLMResult(parsed, choice.model if not settings.dry_run else DRY_RUN_MODEL,
                     choice.reason, input_tokens, output_tokens, cost)


async def run_spend(run_id: str) -> dict[str, float]:
    """The run's LLM spend so far from the ledger: ``{"cost_usd", "tokens", "calls"}``."""
    from overseer.resources import get_runtime

    row = await get_runtime().pool.fetchrow(
        """SELECT count(*) AS calls,
                  coalesce(sum((data->>'cost_usd')::float8), 0) AS cost,
                  coalesce(sum((data->>'input_tokens')::bigint + (data->>'output_tokens')::bigint), 0)
                      AS tokens
           FROM events WHERE run_id = $1 AND type = $2""",
        uuid.UUID(run_id), LLM_CALLED,
    )
    assert row is not None  # an aggregate without GROUP BY yields exactly one row
    return {"cost_usd": float(row["cost"]), "tokens": float(row["tokens"]),
            "calls": float(row["calls"])}


def _check_budget(messages: Sequence[BaseMessage], model: str, ctx: LLMContext,
                  settings: Settings, spend: dict[str, float]) -> None:
    prompt_chars = sum(len(str(m.content)) for m in messages)
    est_in, est_out = prompt_chars // 4 + 1, settings.llm_max_output_tokens
    est_cost = price_usd(model, est_in, est_out, settings) or 0.0
    raised = run_budget() or {}  # the run's, as its approved budget stops raised it
    budget_usd = raised.get("usd") if raised.get("usd") is not None else ctx.budget_usd
    budget_tokens = raised.get("tokens") if raised.get("tokens") is not None else ctx.budget_tokens
    over_tokens = budget_tokens is not None and spend["tokens"] + est_in + est_out > budget_tokens
    over_cost = budget_usd is not None and spend["cost_usd"] + est_cost > budget_usd
    if over_tokens or over_cost:
        raise BudgetExceededError(
            "this call would take the run past its LLM budget",
            details={"spent_usd": round(spend["cost_usd"], 6), "spent_tokens": int(spend["tokens"]),
                     "budget_usd": budget_usd, "budget_tokens": budget_tokens,
                     "estimate_usd": est_cost, "estimate_tokens": est_in + est_out,
                     "node": ctx.node, "model": model},
        )


TRANSIENT_CODES = frozenset({LLMRateLimitedError.code, LLMUnavailableError.code})
"""Error codes of the model failures another attempt can cure (429; 5xx, time-out, lost
connection)."""


async def transient_failures_in_a_row(run_id: str, node: str) -> int:
    """How many of ``node``'s latest model calls in the run's ledger failed transiently, in a row.

    Counts back from the newest ``llm.called`` event of ``node`` to the first that is not a
    transient failure (:data:`TRANSIENT_CODES`): a reply, even an unusable one, ends the
    count (a re-ask is a new prompt, a new call). The ledger outlives the activity's
    attempts, so this is how many attempts the current call has had, whichever attempt of
    the step is running.

    Raises:
        asyncpg.PostgresError, OSError: the event log could not be read.
    """
    from overseer.resources import get_runtime

    rows = await get_runtime().pool.fetch(
        """SELECT data->>'error_code' AS code FROM events
           WHERE run_id = $1 AND type = $2 AND data->>'node' = $3
           ORDER BY seq DESC LIMIT 50""", uuid.UUID(run_id), LLM_CALLED, node)
    count = 0
    for row in rows:
        if row["code"] not in TRANSIENT_CODES:
            break
        count += 1
    return count


async def model_call_retryable(err: BaseException, *, run_id: str, node: str,
                               max_attempts: int = 3) -> bool:
    """Whether a step should let Temporal retry its failed model call (True) or give up (False).

    True only for a transient :class:`LLMCallError` (429, 5xx, time-out, lost connection)
    inside an activity, when the call has failed fewer than ``max_attempts`` times in a row
    (:func:`transient_failures_in_a_row`, ``node`` as its ``llm.called`` events name it) and
    the activity has an attempt left (raising on the retry policy's last attempt would fail
    the step for good; a local activity's single try hands over to a scheduled activity,
    so it always has). When the ledger cannot be read the step is retried (Temporal's
    attempts still bound it). False means: use the offline strategy, the error's code as
    the reason.

    Args:
        err: what the call raised.
        run_id: the run (UUID string).
        node: the node name in the call's ``llm.called`` events.
        max_attempts: attempts per call (seed 002 R5.6: 3).
    """
    if not (isinstance(err, LLMCallError) and err.retryable and activity.in_activity()):
        return False
    info = activity.info()
    limit = int(getattr(info.retry_policy, "maximum_attempts", 0) or 0)
    if not info.is_local and limit and info.attempt >= limit:
        return False
    try:
        return await transient_failures_in_a_row(run_id, node) < max_attempts
    except Exception:  # noqa: BLE001 - no ledger to count from: Temporal's attempts bound it
        log.warning("llm ledger unreadable; retrying the step", extra={"run_id": run_id,
                                                                        "node": node})
        return True


def classify_error(err: BaseException) -> LLMCallError:
    """Map a client exception to a transient or permanent :class:`LLMCallError`.

    Transient (Temporal retries): a 429 (:class:`LLMRateLimitedError`, with Retry-After),
    a 5xx, a time-out, a lost connection and anything unrecognised
    (:class:`LLMUnavailableError`). Permanent for the step: a content filter or a refusal
    (:class:`LLMRefusedError`), another 4xx (:class:`LLMClientError`) and a ``ValueError``
    raised while reading the reply (:class:`LLMResponseError`: the endpoint answered, but
    not in a form the client can read; retrying the same request ten times does not help).
    """
    import openai

    status = getattr(err, "status_code", None)
    if isinstance(err, openai.RateLimitError) or status == 429:
        retry_after = _retry_after(err)
        details = {"status": 429, **({"retry_after_seconds": retry_after} if retry_after else {})}
        return LLMRateLimitedError("the model endpoint is rate limiting", details=details)
    if isinstance(err, openai.APITimeoutError | openai.APIConnectionError | TimeoutError):
        return LLMUnavailableError(f"the model endpoint did not answer ({type(err).__name__})")
    if isinstance(status, int) and status >= 500:
        return LLMUnavailableError(f"the model endpoint failed ({status})", details={"status": status})
    if isinstance(err, openai.ContentFilterFinishReasonError) or "content_filter" in str(err):
        return LLMRefusedError("the model refused the request (content policy)")
    from langchain_core import exceptions as lc_errors

    if isinstance(err, getattr(lc_errors, "ModelRefusalError", ())):
        return LLMRefusedError("the model refused the request")
    if isinstance(status, int) and 400 <= status < 500:
        return LLMClientError(f"the model endpoint refused the request ({status})",
                              details={"status": status})
    if isinstance(err, ValueError):
        # the client could not read what the endpoint answered (langchain's output parsers,
        # pydantic and json all raise ValueError subclasses): another attempt of the same
        # request is no cure, the caller's re-ask and offline strategy are
        return LLMResponseError(f"the model's reply could not be read ({type(err).__name__})",
                                details={"exception": type(err).__name__})
    return LLMUnavailableError(f"model call failed ({type(err).__name__})")


def parse_reply(reply: BaseMessage) -> dict[str, Any]:
    """The JSON object in a reply.

    Raises:
        LLMRefusedError: the model refused (refusal field or content-filter finish).
        LLMResponseError: the reply holds no JSON object.
    """
    meta = getattr(reply, "response_metadata", {}) or {}
    if meta.get("finish_reason") == "content_filter" or reply.additional_kwargs.get("refusal"):
        raise LLMRefusedError("the model refused the request")
    content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
    start, end = content.find("{"), content.rfind("}")
    reason = "no JSON object in it"
    try:
        parsed = json.loads(content[start : end + 1]) if 0 <= start < end else None
    except json.JSONDecodeError as err:
        parsed, reason = None, f"invalid JSON: {err.msg} at character {err.pos}"
    if not isinstance(parsed, dict):
        raise LLMResponseError(f"the model's reply is not a JSON object ({reason})",
                               details={"reply_chars": len(content)})
    return parsed


# --- prompts used by document intake --------------------------------------------------------


def extraction_messages(text: str, fields: Sequence[str]) -> list[BaseMessage]:
    """Prompt for only ``fields`` of an entry form, each with the exact quote it came from."""
    return [
        SystemMessage(
            "You read essay-contest entry forms. Reply with one JSON object only. For each "
            "requested field name give {\"value\": <the value exactly as written, or null>, "
            "\"quote\": <the exact line of the form that states it, or null>}. Never guess; "
            "ignore the essay."
        ),
        HumanMessage(f"Fields: {json.dumps(sorted(fields))}\n\nForm text:\n{text[:8000]}"),
    ]


def reply_usage(reply: Any) -> tuple[int, int]:
    """``(input tokens, output tokens)`` a chat model's reply reports (0 when it reports none)."""
    usage = getattr(reply, "usage_metadata", None) or {}
    return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))


def _retry_after(err: BaseException) -> float | None:
    response = getattr(err, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(value), 300.0) if value is not None else None
    except ValueError:
        return None


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
