"""The single-agent fast path (seed 003 AC3): simple asks answered without starting a workflow.

A simple ask ("What is the optimal price for ASTR 4?") needs one tool: the agent always
calls ``optimize_price`` for the items the ask names (a forced tool choice: no model round
trip to decide it) and then answers. Offline the answer is a fixed sentence built from the
tool's result (``strategy: rules``); with a model configured the model phrases the answer
from the tool's result, streamed token by token through the chat model's own ``astream``
(seed 003 AC2; it replaced the deprecated ``astream_events(version="v1")``),
and the rules sentence is the fallback when the model says nothing **or fails**.

A model failure (429, 5xx, time-out, refusal, …) never fails the ask: the deterministic
answer, computed before the model is called, is streamed instead and the final event says
why (``fallback: {"code", "retryable", "model"}``, ``code`` = ``rate_limit`` for a 429, else
the LLM layer's code — ``llm_unavailable``, ``llm_client_error``, ``llm_refused``). If the
model had already streamed some tokens, the rules answer follows them and the final
``message`` (the rules answer) is authoritative, as for a retried reporter step.
Every model attempt, successful or not, is one ``llm.called`` ledger event (the LLM layer's
shape, node ``single_agent``) handed to ``record``.

Events are the stream contract's (:mod:`activities.pricing.stream`): ``tool_call``, tokens,
one final event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from activities.pricing.catalog import Catalog
from activities.pricing.stream import RULES, chunks, final, token, tool_call
from activities.pricing.tools import describe_item_answer
from overseer.plugin import LLM_CALLED, NewEvent

log = logging.getLogger("overseer.pricing.agent")

AGENT_PROMPT = (
    "You are a pricing assistant. Answer the question in one or two sentences using only the "
    "tool result (prices in USD, per tier). Never invent numbers."
)

Recorder = Callable[[list[NewEvent]], Awaitable[Any]]
"""Appends ledger events (e.g. ``append_events`` on a pool connection)."""


async def single_agent(message: str, catalog: Catalog, options: dict[str, Any], *,
                       scope: dict[str, Any], model_name: str = RULES, settings: Any = None,
                       run_id: str | None = None, record: Recorder | None = None,
                       model_reason: str | None = None) -> AsyncIterator[dict[str, Any]]:
    """Answer a simple ask; yields ``tool_call``, ``token``… and one final event.

    Args:
        message: the ask.
        catalog: the current catalog.
        options: ``pricing_options`` (policy and optimizer settings).
        scope: ``router.resolve_scope`` of the ask.
        model_name: the chosen model, or ``rules`` offline.
        settings: settings for the chat model factory and prices (LLM mode only).
        run_id: the run the answer is recorded as (ledger events' run); needed with ``record``.
        record: receives one ``llm.called`` event per model attempt; None = no ledger.
        model_reason: why the model was chosen (``choice_reason`` in the ledger).

    Never raises for a model failure (see the module docstring); ``CancelledError`` propagates.
    """
    yield tool_call("optimize_price")
    text, result = describe_item_answer(catalog, scope, options)
    strategy = RULES
    fallback: dict[str, Any] | None = None
    parts: list[str] = []
    if model_name != RULES:
        from overseer.plugin import chat_model

        model = chat_model(settings, model_name)
        if model is not None:
            prompt = [("system", AGENT_PROMPT),
                      ("human", f"Question: {message}\n\nTool optimize_price returned:\n"
                                f"{json.dumps(result)[:6000]}")]
            usage: dict[str, int] = {}
            started = time.monotonic()
            try:
                async for chunk in model.astream(prompt):
                    usage.update(_chunk_usage(chunk))
                    piece = getattr(chunk, "content", "")
                    if isinstance(piece, str) and piece:
                        parts.append(piece)
                        yield token(piece)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # noqa: BLE001 — any model failure falls back to the rules
                fallback = await _model_failed(err, model_name, started, run_id=run_id,
                                               record=record, settings=settings,
                                               model_reason=model_reason)
            else:
                await _record_ok(model_name, usage, started, run_id=run_id, record=record,
                                 settings=settings, model_reason=model_reason)
                if "".join(parts).strip():
                    strategy = f"llm:{model_name}"
    if strategy == RULES:
        if parts:  # the model failed mid-answer: its tokens cannot be withdrawn
            yield token("\n\n")
        parts = []
        for piece in chunks(text):
            parts.append(piece)
            yield token(piece)
    yield final("".join(parts), tools_used=["optimize_price"],
                model=model_name if strategy != RULES else RULES, strategy=strategy,
                fallback=fallback)


def stream_error_code(failure: Any) -> str:
    """The stream contract's code for an LLM failure: ``rate_limit`` for a 429, else its code."""
    from overseer.plugin import LLMRateLimitedError

    return "rate_limit" if isinstance(failure, LLMRateLimitedError) else str(failure.code)


async def _model_failed(err: BaseException, model_name: str, started: float, *,
                        run_id: str | None, record: Recorder | None, settings: Any,
                        model_reason: str | None) -> dict[str, Any]:
    from overseer.plugin import classify_error

    failure = classify_error(err)
    log.warning("fast-path model call failed; answering with the rules",
                extra={"run_id": run_id, "model": model_name, "code": failure.code})
    await _record(run_id, record, {
        **_base(model_name, settings, model_reason), "outcome": "error",
        "error_code": failure.code, "latency_ms": _ms(started), "input_tokens": 0,
        "output_tokens": 0, "cost_usd": 0.0, **({"details": failure.details}
                                                 if failure.details else {})})
    return {"code": stream_error_code(failure), "retryable": bool(failure.retryable),
            "model": model_name, "error": failure.message}


async def _record_ok(model_name: str, usage: dict[str, int], started: float, *,
                     run_id: str | None, record: Recorder | None, settings: Any,
                     model_reason: str | None) -> None:
    from overseer.plugin import price_usd

    tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    cost = price_usd(model_name, tokens_in, tokens_out, settings) if settings else None
    await _record(run_id, record, {
        **_base(model_name, settings, model_reason), "outcome": "ok",
        "latency_ms": _ms(started), "input_tokens": tokens_in, "output_tokens": tokens_out,
        "cost_usd": cost or 0.0, "price_known": cost is not None})


async def _record(run_id: str | None, record: Recorder | None, data: dict[str, Any]) -> None:
    if record is None or run_id is None:
        return
    await record([NewEvent(run_id=run_id, key="llm.called:single_agent:1:1:1", type=LLM_CALLED,
                           actor="api:single_agent", data=data)])


def _base(model_name: str, settings: Any, model_reason: str | None) -> dict[str, Any]:
    return {"task": "reporting", "model": model_name, "choice_reason": model_reason,
            "node": "single_agent", "step": 1, "attempt": 1, "streamed": True,
            "dry_run": bool(getattr(settings, "dry_run", False))}


def _chunk_usage(chunk: Any) -> dict[str, int]:
    usage = getattr(chunk, "usage_metadata", None) or {}
    return {k: int(v) for k, v in usage.items() if k in ("input_tokens", "output_tokens") and v}


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
