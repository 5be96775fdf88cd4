"""Activity-side nodes of the pricing graph: the seed 003 workers.

Each worker runs in the run's segment activity (the reporter in one of its own), calls its tool
(a pure function of the catalog snapshot and the run's options), returns a structured result
plus a one-line ``summary`` under ``outputs[<step>]``, and appends its ``route.decided``
event with a step-derived id, so a retried activity never duplicates it (the runtime
appends ``node.completed``). Workers call the services directly, never another agent (seed 003 Dev Notes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.pricing import tools
from activities.pricing.reporter import stream_llm_report, template_report
from activities.pricing.state import PricingState
from activities.pricing.stream import RULES, chunks, token
from overseer.plugin import ROUTE_DECIDED, NewEvent, temporal_errors

log = logging.getLogger("overseer.pricing")


@temporal_errors
async def optimizer_worker(state: PricingState) -> dict[str, Any]:
    """Node ``optimizer_worker`` (seed 003): ``optimize_price`` over the scope → the proposal.

    Returns:
        ``proposal`` (changes, proposed prices, item segments/regions, uplift) and
        ``outputs.optimizer`` (counts, uplift, the ten largest moves, summary).
    """
    catalog = await tools.load_catalog(state["catalog"])
    result = tools.optimize_price(catalog, state["scope"], state["options"])
    return await _finish(state, "optimizer", "optimize_price", {
        "proposal": result["proposal"], "outputs": {"optimizer": result["output"]}})


@temporal_errors
async def policy_checker_worker(state: PricingState) -> dict[str, Any]:
    """Node ``policy_checker_worker`` (seed 003 AC4): violations in today's prices, fixes, proposal check.

    A proposal that breaks a rule (it should not: the optimizer enforces the hierarchy) is
    repaired with the policy's own fixes before anyone is asked to sign it off.
    """
    catalog = await tools.load_catalog(state["catalog"])
    result = tools.check_policy(catalog, state["scope"], state["options"], state.get("proposal"))
    update: dict[str, Any] = {"violations": result["violations"],
                              "outputs": {"policy": result["output"]}}
    if result.get("proposal") is not None:
        update["proposal"] = result["proposal"]
    return await _finish(state, "policy", "check_policy", update)


@temporal_errors
async def explainer_worker(state: PricingState) -> dict[str, Any]:
    """Node ``explainer_worker`` (seed 003): Shapley contributions per recommended price."""
    catalog = await tools.load_catalog(state["catalog"])
    output = tools.explain_decision(catalog, state["scope"], state["options"], state.get("proposal"))
    return await _finish(state, "explainer", "explain_decision", {"outputs": {"explainer": output}})


@temporal_errors
async def sensitivity_worker(state: PricingState) -> dict[str, Any]:
    """Node ``sensitivity_worker`` (seed 003): confidence band, worst/best, robustness score."""
    catalog = await tools.load_catalog(state["catalog"])
    output = tools.sensitivity(catalog, state["scope"], state["options"], state.get("proposal"))
    return await _finish(state, "sensitivity", "sensitivity_analysis",
                         {"outputs": {"sensitivity": output}})


@temporal_errors
async def reporter_worker(state: PricingState) -> dict[str, Any]:
    """Node ``reporter_worker`` (seed 003): the analyst summary, streamed as tokens.

    Offline the template text is streamed word by word (``strategy: rules``); with a model
    configured the model's rewrite is streamed as it arrives (``strategy: llm:<model>``).
    Tokens of an attempt that fails part-way are not withdrawn: a retried attempt streams
    its text again (the final ``message`` is authoritative).

    A summary the model cannot give usably — empty, unreadable (a
    ``ValueError`` from the client), or stating a number the facts do not — is asked for once
    more with what was wrong; if that one is unusable too, or the model refuses or the
    endpoint rejects the request, the template report is streamed instead (after a blank
    line when model tokens went out) and recorded as ``strategy: rules`` with
    ``outputs.reporter.fallback = {code, message}``.

    Raises:
        ApplicationError: a transient model failure (429 with Retry-After, 5xx, time-out);
            Temporal retries the step.
    """
    from overseer.plugin import get_runtime

    facts = template_report(dict(state))
    model_name = (state.get("request") or {}).get("model") or RULES
    report: str | None = None
    fallback: dict[str, str] | None = None
    sink = TokenSink()
    if model_name != RULES:
        report, fallback = await _model_report(state, model_name, facts, sink,
                                               get_runtime().settings)
    strategy = f"llm:{model_name}" if report is not None else "rules"
    if report is None:
        if sink.published:  # the model's tokens cannot be withdrawn
            sink.publish(token("\n\n"))
        parts = []
        for text in chunks(facts):
            parts.append(text)
            sink.publish(token(text))
        report = "".join(parts)
    output: dict[str, Any] = {"strategy": strategy,
                              "summary": report.splitlines()[0] if report else ""}
    if fallback is not None:
        output["fallback"] = fallback
    return await _finish(state, "reporter", "compose_report", {
        "report": report, "strategy": strategy, "outputs": {"reporter": output}})


async def _model_report(state: PricingState, model_name: str, facts: str, sink: TokenSink,
                        settings: Any) -> tuple[str | None, dict[str, str] | None]:
    """The model's summary, with one re-ask after an unusable one.

    Returns:
        ``(summary, None)`` when usable; ``(None, {code, message})`` when the template must
        be used (``None, None`` when no model is configured after all).

    Raises:
        LLMRateLimitedError, LLMUnavailableError: transient; Temporal retries the step.
    """
    from langchain_core.messages import AIMessage, HumanMessage

    from activities.pricing.reporter import REASK, summary_problem
    from overseer.plugin import LLMClientError, LLMRefusedError, LLMResponseError

    history: list[Any] = []
    problem: dict[str, str] | None = None
    for call in (1, 2):
        parts: list[str] = []
        answer: list[Any] = []  # the unusable answer, shown back to the model with the re-ask
        try:
            answered = await _stream_with_ledger(state, model_name, facts, sink, settings,
                                                 call=call, history=history, parts=parts)
        except (LLMResponseError, LLMRefusedError, LLMClientError) as err:
            problem = {"code": err.code, "message": err.message}
            if not isinstance(err, LLMResponseError):
                break  # a refusal or a rejected request: asking again does not help
        else:
            if not answered:
                return None, None
            text = "".join(parts)
            problem = summary_problem(text, facts)
            if problem is None:
                return text, None
            answer = [AIMessage(text)] if text.strip() else []
        history = [*history, *answer, HumanMessage(REASK.format(error=problem["message"]))]
    log.warning("model summary unusable; template report used",
                extra={"run_id": state.get("run_id"), "code": (problem or {}).get("code")})
    return None, problem


async def _stream_with_ledger(state: PricingState, model_name: str, facts: str, sink: TokenSink,
                              settings: Any, *, call: int = 1, history: list[Any] | None = None,
                              parts: list[str] | None = None) -> bool:
    """Stream the model's report into ``sink`` and ``parts``; append one ``llm.called`` event.

    Args:
        state: the graph state (``run_id``, ``completed_steps``, ``request``).
        model_name: the chosen model.
        facts: the template report the model rewrites.
        sink: where tokens go.
        settings: settings for the chat model factory and prices.
        call: the step's call number (1, or 2 for the re-ask): part of the ledger key.
        history: messages after the facts (the re-ask).
        parts: receives the text chunks as they arrive (also those before a failure).

    Returns:
        False when no model is configured (nothing was called), else True.

    Raises:
        LLMCallError: transient ones are retried by Temporal; permanent ones
            (:class:`LLMResponseError` for a ``ValueError`` while reading the stream,
            :class:`LLMRefusedError`, :class:`LLMClientError`) go to the caller's re-ask and
            template.
    """
    import time

    from overseer.plugin import LLM_CALLED, append_from_activity, chat_model, classify_error, price_usd

    model = chat_model(settings, model_name)
    if model is None:
        return False
    parts = parts if parts is not None else []
    attempt = activity.info().attempt if activity.in_activity() else 1
    step = len(state.get("completed_steps", [])) + 1
    key = f"llm.called:reporter_worker:{step}:{call}:{attempt}"
    base = {"task": "reporting", "model": model_name, "node": "reporter_worker", "step": step,
            "attempt": attempt, "call": call, "streamed": True,
            "choice_reason": (state.get("request") or {}).get("model_reason")}
    usage: dict[str, int] = {}
    started = time.monotonic()
    try:
        async for text, chunk_usage in stream_llm_report(model, facts, history=history or ()):
            if text:
                parts.append(text)
                sink.publish(token(text))
            usage.update(chunk_usage)
    except Exception as err:
        failure = classify_error(err)
        if activity.in_activity():
            await append_from_activity([NewEvent(
                run_id=state["run_id"], key=key, type=LLM_CALLED, actor="activity:reporter_worker",
                data={**base, "outcome": "error", "error_code": failure.code,
                      "latency_ms": int((time.monotonic() - started) * 1000),
                      "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})])
        raise failure from err
    tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    cost = price_usd(model_name, tokens_in, tokens_out, settings)
    if activity.in_activity():
        await append_from_activity([NewEvent(
            run_id=state["run_id"], key=key, type=LLM_CALLED, actor="activity:reporter_worker",
            data={**base, "outcome": "ok", "latency_ms": int((time.monotonic() - started) * 1000),
                  "input_tokens": tokens_in, "output_tokens": tokens_out,
                  "cost_usd": cost or 0.0, "price_known": cost is not None})])
    return True


class TokenSink:
    """Where a node's stream events go: LangGraph's stream writer (``get_stream_writer()``).

    In a segment the run's stream protocol takes them as ``custom`` chunks and writes them
    live (:class:`~activities.pricing.run.PricingStream`); in plain LangGraph they are the
    ``custom`` stream mode's chunks; outside a graph (or when nobody streams ``custom``)
    they go nowhere.
    """

    def __init__(self) -> None:
        self._writer: Callable[[Any], None] | None
        try:
            from langgraph.config import get_stream_writer

            self._writer = get_stream_writer()
        except (RuntimeError, KeyError):
            self._writer = None
        self.published = 0
        """Events published so far."""

    def publish(self, event: dict[str, Any]) -> None:
        """Write one event (the segment writes it within 40 ms)."""
        self.published += 1
        if self._writer is not None:
            self._writer(event)


async def _finish(state: PricingState, step: str, tool: str, update: dict[str, Any]
                  ) -> dict[str, Any]:
    """Merge outputs, mark the step done, and record ``route.decided``."""
    from overseer.plugin import append_from_activity

    outputs = {**(state.get("outputs") or {}), **update.pop("outputs", {})}
    done = [*state.get("completed_steps", []), step]
    tools_used = [*state.get("tools_used", []), tool]
    update.update(outputs=outputs, completed_steps=done, tools_used=tools_used)
    iteration = len(done)
    if activity.in_activity():
        await append_from_activity([
            NewEvent(run_id=state["run_id"], key=f"route.decided:{iteration}", type=ROUTE_DECIDED,
                     actor=f"activity:{step}",
                     data={"after": (state.get("completed_steps") or ["router"])[-1],
                           "route": step, "reason": state.get("route_reason", "plan"),
                           "iteration": iteration}),
        ])
    return update
