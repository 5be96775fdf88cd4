"""Activity-side nodes of the pricing graph: the seed 003 workers.

Each worker runs as one Temporal activity (the graph runtime's ``run_node``), calls its tool
(a pure function of the catalog snapshot and the run's options), returns a structured result
plus a one-line ``summary`` under ``outputs[<step>]``, and appends its ``route.decided``
event with a step-derived id, so a retried activity never duplicates it (the runtime
appends ``node.completed``). Workers call the services directly, never another agent (seed 003 Dev Notes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.errors import temporal_errors
from activities.pricing import tools
from activities.pricing.reporter import stream_llm_report, template_report
from activities.pricing.state import PricingState
from activities.pricing.stream import RULES, STREAM_TOPIC, chunks, token
from overseer.store.events import ROUTE_DECIDED, NewEvent


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
    """
    from activities.runtime import get_runtime

    facts = template_report(dict(state))
    model_name = (state.get("request") or {}).get("model") or RULES
    parts: list[str] = []
    strategy = "rules"
    async with TokenSink() as sink:
        if model_name != RULES:
            parts = await _stream_with_ledger(state, model_name, facts, sink,
                                              get_runtime().settings)
            strategy = f"llm:{model_name}"
        if not "".join(parts).strip():
            parts = []
            for text in chunks(facts):
                parts.append(text)
                sink.publish(token(text))
            strategy = "rules"
    report = "".join(parts)
    return await _finish(state, "reporter", "compose_report", {
        "report": report, "strategy": strategy,
        "outputs": {"reporter": {"strategy": strategy, "summary": report.splitlines()[0]
                                 if report else ""}}})


async def _stream_with_ledger(state: PricingState, model_name: str, facts: str, sink: TokenSink,
                              settings: Any) -> list[str]:
    """Stream the model's report into ``sink`` and append one ``llm.called`` ledger event.

    Raises:
        LLMCallError: transient ones are retried by Temporal; permanent ones fail the step.
    """
    import time

    from activities.events import append_from_activity
    from activities.llm import chat_model, classify_error, price_usd
    from overseer.store.events import LLM_CALLED

    model = chat_model(settings, model_name)
    if model is None:
        return []
    attempt = activity.info().attempt if activity.in_activity() else 1
    step = len(state.get("completed_steps", [])) + 1
    base = {"task": "reporting", "model": model_name, "node": "reporter_worker", "step": step,
            "attempt": attempt, "streamed": True,
            "choice_reason": (state.get("request") or {}).get("model_reason")}
    parts: list[str] = []
    usage: dict[str, int] = {}
    started = time.monotonic()
    try:
        async for text, chunk_usage in stream_llm_report(model, facts):
            if text:
                parts.append(text)
                sink.publish(token(text))
            usage.update(chunk_usage)
    except Exception as err:
        failure = classify_error(err)
        if activity.in_activity():
            await append_from_activity([NewEvent(
                run_id=state["run_id"], key=f"llm.called:reporter_worker:{step}:1:{attempt}",
                type=LLM_CALLED, actor="activity:reporter_worker",
                data={**base, "outcome": "error", "error_code": failure.code,
                      "latency_ms": int((time.monotonic() - started) * 1000),
                      "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0})])
        raise failure from err
    tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    cost = price_usd(model_name, tokens_in, tokens_out, settings)
    if activity.in_activity():
        await append_from_activity([NewEvent(
            run_id=state["run_id"], key=f"llm.called:reporter_worker:{step}:1:{attempt}",
            type=LLM_CALLED, actor="activity:reporter_worker",
            data={**base, "outcome": "ok", "latency_ms": int((time.monotonic() - started) * 1000),
                  "input_tokens": tokens_in, "output_tokens": tokens_out,
                  "cost_usd": cost or 0.0, "price_known": cost is not None})])
    return parts


class TokenSink:
    """Where a worker's tokens go.

    Inside an activity: the run's workflow stream; in plain LangGraph (unit tests): the
    custom stream writer; nowhere otherwise.
    """

    def __init__(self) -> None:
        self._client: Any = None
        self._topic: Any = None
        self._writer: Callable[[Any], None] | None = None

    async def __aenter__(self) -> TokenSink:
        if activity.in_activity():
            from datetime import timedelta

            from temporalio.contrib.workflow_streams import WorkflowStreamClient

            self._client = WorkflowStreamClient.from_within_activity(
                batch_interval=timedelta(milliseconds=100))
            await self._client.__aenter__()
            self._topic = self._client.topic(STREAM_TOPIC)
        else:
            try:
                from langgraph.config import get_stream_writer

                self._writer = get_stream_writer()
            except (RuntimeError, KeyError):
                self._writer = None
        return self

    def publish(self, event: dict[str, Any]) -> None:
        """Queue one event (flushed every 100 ms and on exit)."""
        if self._topic is not None:
            self._topic.publish(event)
        elif self._writer is not None:
            self._writer(event)

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.__aexit__(*exc)


async def _finish(state: PricingState, step: str, tool: str, update: dict[str, Any]
                  ) -> dict[str, Any]:
    """Merge outputs, mark the step done, and record ``route.decided``."""
    from activities.events import append_from_activity

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
