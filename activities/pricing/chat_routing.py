"""What a pricing chat turn starts from: the model, the route and the session's earlier turns.

The model is the LLM layer's choice for reporting (``rules`` offline); the route comes from
the rules plus, when a model is configured, the LLM intent classifier, whose calls join the
run's ledger as ``llm.called`` events; the session history is read from the caller's earlier
runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from activities.pricing import stream as events
from activities.pricing.chat_runs import PIPELINE, json_column
from activities.pricing.router import RouteDecision, classify_with_llm, decide_route
from overseer.plugin import LLM_CALLED, NewEvent, Principal, Settings

log = logging.getLogger("overseer.api.chat")


def effective_model(settings: Settings, hint: str | None) -> tuple[str, str]:
    """``(model, reason)``: the LLM layer's choice for reporting, or ``rules`` offline."""
    from overseer.plugin import allowed_models, llm_enabled, select_model

    if not llm_enabled(settings):
        refused = ";hint_not_allowlisted" if hint and hint not in allowed_models(settings) else ""
        return events.RULES, "no_llm_endpoint" + refused
    choice = select_model("reporting", settings, hint=hint)
    return choice.model, choice.reason


CLASSIFIER_NODE = "intent_classifier"
"""The ledger's name for the API's intent classifier call (``llm.called`` ``node``)."""


async def route_message(message: str, *, plan: bool, settings: Settings,
                        calls: list[dict[str, Any]] | None = None) -> RouteDecision:
    """Rules, plus the LLM intent classifier when a model is configured (never removes intents).

    Args:
        message: the analyst's ask.
        plan: the caller asked for the orchestrator.
        settings: LLM settings.
        calls: when given, the classifier's call is appended as an ``llm.called`` event's
            data (model, tokens, cost, latency, outcome): the run it belongs to does not
            exist yet, so the caller records it (:func:`classifier_events`).
    """
    from overseer.plugin import chat_model, classify_error, llm_enabled, price_usd, reply_usage, select_model

    if plan or not llm_enabled(settings):
        return decide_route(message, plan=plan)
    choice = select_model("routing", settings)
    model = chat_model(settings, choice.model)
    replies: list[Any] = []
    started = time.monotonic()
    entry: dict[str, Any] = {"task": "routing", "model": choice.model,
                             "choice_reason": choice.reason, "node": CLASSIFIER_NODE,
                             "step": 0, "attempt": 1, "dry_run": settings.dry_run,
                             "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
    try:
        extra = await asyncio.wait_for(classify_with_llm(model, message, replies),
                                       timeout=settings.llm_timeout_seconds)
    except Exception as err:  # noqa: BLE001 — the classifier is optional: rules still route
        log.warning("intent classifier failed; rules only", extra={"error": type(err).__name__})
        code = "llm_timeout" if isinstance(err, TimeoutError) else classify_error(err).code
        entry.update(outcome="error", error_code=code)
        return decide_route(message)
    finally:
        entry["latency_ms"] = int((time.monotonic() - started) * 1000)
        if replies:
            entry["input_tokens"], entry["output_tokens"] = reply_usage(replies[0])
            cost = price_usd(choice.model, entry["input_tokens"], entry["output_tokens"],
                             settings)
            entry.update(cost_usd=cost or 0.0, price_known=cost is not None)
        entry.setdefault("outcome", "ok")
        if calls is not None:
            calls.append(entry)
    return decide_route(message, extra_intents=extra, strategy=f"llm:{choice.model}")


def classifier_events(run_id: str, calls: list[dict[str, Any]], subject: str) -> list[NewEvent]:
    """The API's intent-classifier calls as the run's ``llm.called`` events (the one ledger).

    Written with the run's own events, after its ``run.submitted`` (the fast path's one
    transaction; after the orchestrator's start). Keyed by the run, so a retried request
    with the same ``Idempotency-Key`` (the same run) records its first classification only.
    """
    return [NewEvent(run_id=run_id, key=f"llm.called:{CLASSIFIER_NODE}:0:{i + 1}:1",
                     type=LLM_CALLED, actor=f"api:{subject}", data={**entry, "call": i + 1})
            for i, entry in enumerate(calls)]


async def session_history(pool: Any, principal: Principal, session_id: str | None
                          ) -> tuple[list[dict[str, str]], dict[str, Any] | None]:
    """Earlier turns of the caller's session, oldest first, and the last turn's scope."""
    if not session_id:
        return [], None
    rows = await pool.fetch(
        """SELECT input, result FROM runs WHERE pipeline = $1 AND submitted_by = $2
             AND input->>'session_id' = $3 ORDER BY created_at DESC LIMIT 6""",
        PIPELINE, principal.subject, session_id)
    messages: list[dict[str, str]] = []
    scope = None
    for row in reversed(rows):
        inp = json_column(row["input"]) or {}
        res = json_column(row["result"]) or {}
        messages.append({"role": "user", "content": inp.get("message", "")})
        if res.get("report") or res.get("message"):
            messages.append({"role": "assistant", "content": res.get("report") or res["message"]})
        if inp.get("scope", {}).get("item_ids"):
            scope = inp["scope"]
    return messages, scope
