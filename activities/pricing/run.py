"""How a pricing run is hosted as segments (seed 003): input, stream, sign-off, result.

- :func:`initial_state` — the graph's input for one composite ask (the chat route builds it).
- :class:`PricingStream` — the chat stream (seed 003 AC2) as a
  :class:`~overseer.pipelines.RunStream`: a ``tool_call`` when a worker starts, a meta
  event when it ends (the policy checker's carries the violations), the pending approval
  with its card, the decision, the reporter's tokens (written by the reporter node with
  LangGraph's stream writer), and one final event — for a finish, a failure or a cancellation.
- :func:`check_decision` — price edits ``{"<item_id>.<tier>": price}`` must keep the policy.
- :func:`result` — the run's result (``runs.result``) from its final state.

Everything here is pure and deterministic: it runs inside the workflow, except
:meth:`PricingStream.chunk`, which the segment activity calls for each LangGraph chunk as
the graph runs (it keeps no state between chunks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from activities.pricing import stream as events
from activities.pricing.graph import NODE_TOOLS, STEP_NODES
from activities.pricing.policy import PolicyConfig, check_all_policies
from overseer.plugin import DecisionRefusedError, RunStream

WORKER_STEPS = {node: step for step, node in STEP_NODES.items()}
"""Node name → plan step."""
CANCELLED_MESSAGE = "Cancelled: the plan was stopped and no prices changed."


def initial_state(*, run_id: str, message: str, plan: list[str], scope: dict[str, Any],
                  catalog: dict[str, Any], options: dict[str, Any],
                  messages: list[dict[str, str]], route: dict[str, Any],
                  session_id: str | None, model: str, model_reason: str,
                  model_hint: str | None) -> dict[str, Any]:
    """The graph's input for one composite ask (thread id = run id).

    Args:
        run_id: the run (UUID string).
        message: the ask.
        plan: orchestrator steps (``router.build_plan``).
        scope: ``router.resolve_scope``'s answer.
        catalog: ``{sha256, items, source}`` of the stored catalog snapshot.
        options: the ``pricing_options`` snapshot.
        messages: the session's earlier turns plus this ask.
        route: the router's decision (``RouteDecision.to_dict()``).
        session_id: the request's chat session, if any.
        model: the chosen model.
        model_reason: why that model was chosen.
        model_hint: the model the request asked for, if any.

    Returns:
        :class:`~activities.pricing.state.PricingState` input, plus ``route`` (read by
        :class:`PricingStream`; not a state key, so the graph drops it).
    """
    return {
        "run_id": run_id, "messages": messages or [{"role": "user", "content": message}],
        "request": {"message": message, "session_id": session_id, "model": model,
                    "model_reason": model_reason, "model_hint": model_hint},
        "options": options, "catalog": catalog, "scope": scope, "plan": plan,
        "max_iterations": int(options.get("max_iterations", 8)), "iterations": 0,
        "completed_steps": [], "outputs": {}, "tools_used": [], "strategy": "rules",
        "plan_route": route,
    }


class PricingStream(RunStream):
    """The chat stream of one orchestrated run (topic :data:`activities.pricing.stream.STREAM_TOPIC`)."""

    topic = events.STREAM_TOPIC
    stream_modes = ("tasks",)

    def __init__(self, graph_input: Mapping[str, Any]) -> None:
        self._run_id = str(graph_input.get("run_id"))
        self._plan = list(graph_input.get("plan") or [])
        self._route = dict(graph_input.get("plan_route") or {})
        self._model = str((graph_input.get("request") or {}).get("model") or events.RULES)

    def start(self) -> list[dict[str, Any]]:
        """The router's plan."""
        return [events.meta("router", thread_id=self._run_id, plan=self._plan,
                            intents=self._route.get("intents"))]

    def chunk(self, mode: str, chunk: Any) -> list[dict[str, Any]]:
        """``tool_call`` when a worker starts; its meta event (or the router's) when it ends.

        Stateless (called in the segment activity, a new instance per segment); the sign-off's
        ``tool_call`` comes with :meth:`interrupt`. A ``custom`` chunk is an event a node
        wrote itself (the reporter's tokens, :class:`~activities.pricing.nodes.TokenSink`).
        """
        out: list[dict[str, Any]] = []
        if mode == "custom" and isinstance(chunk, dict):
            out.append(dict(chunk))
        elif mode == "tasks" and isinstance(chunk, dict) and "input" in chunk:
            name = chunk["name"]
            if name in WORKER_STEPS and name != "approval_gate":
                out.append(events.tool_call(NODE_TOOLS[name], node=name))
        elif mode == "updates" and isinstance(chunk, dict):
            for node, update in chunk.items():
                if node == "router" and update:
                    out.append(events.meta("router", route=update.get("route"),
                                           reason=update.get("route_reason")))
                elif node in WORKER_STEPS and node != "approval_gate" and update:
                    out.append(worker_event(node, update))
        return out

    def interrupt(self, payload: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The sign-off's ``tool_call``, then the pending sign-off and how to answer it."""
        return [events.tool_call(NODE_TOOLS["approval_gate"], node="approval_gate"),
                events.meta("approval_gate", thread_id=self._run_id, awaiting_approval=True,
                            approval=approval_card(self._run_id, payload))]

    def decision(self, decision: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Who decided what."""
        return [events.meta("approval_gate", decision=decision["decision"],
                            decided_by=decision.get("decided_by"))]

    def end(self, status: str, outcome: str | None, state: Mapping[str, Any]
            ) -> list[dict[str, Any]]:
        """The sign-off's tail as tokens, then the final event (message = report + tail)."""
        tail = decision_tail(state)
        view = result(state)
        return [*(events.token(text) for text in events.chunks(tail)),
                events.final(view["report"], tools_used=view["tools_used"], model=self._model,
                             thread_id=self._run_id, strategy=view["strategy"],
                             outcome=view["outcome"], fallback=view.get("fallback"))]

    def failed(self, error: Mapping[str, Any]) -> list[dict[str, Any]]:
        """One final error event (not retryable: the run has failed)."""
        return [events.error(str(error.get("message")), str(error.get("code")), retryable=False,
                             thread_id=self._run_id)]

    def cancelled(self) -> list[dict[str, Any]]:
        """The final event of a cancelled plan."""
        return [events.final(CANCELLED_MESSAGE, tools_used=[], model=self._model,
                             thread_id=self._run_id, strategy=events.RULES, outcome="cancelled")]



def approval_card(run_id: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The pending sign-off's card: size of the change, and the calls that answer it."""
    return {
        "thread_id": run_id,
        "change_count": payload.get("change_count"),
        "uplift_pct": payload.get("uplift_pct"),
        "approve": {"method": "POST", "path": "/api/v1/chat/approve",
                    "body": {"thread_id": run_id}},
        "cancel": {"method": "POST", "path": "/api/v1/chat/cancel",
                   "body": {"thread_id": run_id}},
        "admin": {"method": "POST", "path": f"/v1/admin/approvals/{run_id}/decision"},
    }


def worker_event(node: str, update: Mapping[str, Any]) -> dict[str, Any]:
    """A worker's meta event.

    Its summary, plus the policy's violations, the sensitivity band or the optimizer's
    change count and uplift.
    """
    step = WORKER_STEPS[node]
    output = (update.get("outputs") or {}).get(step, {})
    extra: dict[str, Any] = {"summary": output.get("summary")}
    if step == "policy":
        extra["violations"] = output.get("violations", [])
        extra["violations_total"] = output.get("violations_total", 0)
    if step == "sensitivity":
        extra["robustness_score"] = output.get("robustness_score")
        extra["confidence_band_pct"] = output.get("confidence_band_pct")
    if step == "optimizer":
        extra["change_count"] = output.get("change_count")
        extra["uplift_pct"] = output.get("uplift_pct")
    return events.meta(node, **extra)


def decision_tail(state: Mapping[str, Any]) -> str:
    """What the sign-off adds to the report: who approved (how many changes, edits) or rejected."""
    outcome = state.get("outcome") or "answered"
    decision = state.get("decision") or {}
    if outcome == "approved":
        edits = len(decision.get("updates") or {})
        changes = sum(len(v) for v in ((state.get("proposal") or {}).get("changes") or {})
                      .values())
        return (f"Approved by {decision.get('decided_by')}: {changes} price changes"
                + (f" with {edits} edits" if edits else "") + " are final.")
    if outcome == "rejected":
        note = f" ({decision['note']})" if decision.get("note") else ""
        return f"Rejected by {decision.get('decided_by')}{note}: no prices changed."
    return ""


def result(state: Mapping[str, Any]) -> dict[str, Any]:
    """The run's result (``Pipeline.run.result``).

    Report with the sign-off's tail, plan, scope, tools, strategy, model, change count,
    uplift, violations, approved prices, catalog hash; ``strategies`` (``rules`` for the
    workers' tools, ``llm:<model>`` when the model's summary was used) and the reporter's
    ``fallback`` ``{code, message}`` when the model's summary was unusable.
    """
    outcome = state.get("outcome") or "answered"
    message = (str(state.get("report") or "") + decision_tail(state)) or "Nothing to report."
    proposal = state.get("proposal") or {}
    outputs = state.get("outputs") or {}
    gate_ran = "approval" in (state.get("completed_steps") or []) or state.get("decision")
    return {
        "thread_id": state.get("run_id"), "plan": state.get("plan"), "scope": state.get("scope"),
        "tools_used": [*(state.get("tools_used") or []),
                       *(["request_approval"] if gate_ran else [])],
        "strategy": state.get("strategy", "rules"),
        "strategies": list(dict.fromkeys(["rules", state.get("strategy") or "rules"])),
        "fallback": (outputs.get("reporter") or {}).get("fallback"),
        "model": (state.get("request") or {}).get("model") or events.RULES,
        "report": message, "outcome": outcome,
        "change_count": sum(len(v) for v in (proposal.get("changes") or {}).values()),
        "uplift_pct": proposal.get("uplift_pct"),
        "violations_total": (outputs.get("policy") or {}).get("violations_total"),
        "approved_prices": state.get("approved_prices"),
        "catalog_sha256": (state.get("catalog") or {}).get("sha256"),
    }


def node_snapshot(state: Mapping[str, Any]) -> dict[str, Any]:
    """What each worker's ``node.completed`` merges into the run view while it runs."""
    return {"tools_used": state.get("tools_used", []), "plan": state.get("plan", []),
            "strategy": state.get("strategy", "rules")}


def check_decision(payload: Mapping[str, Any], decision: Mapping[str, Any],
                   state: Mapping[str, Any]) -> dict[str, Any]:
    """A sign-off's price edits ``{"<item_id>.<tier>": price}`` must keep the policy.

    Args:
        payload: the approval payload (``proposed_prices``, ``items_meta``).
        decision: the decision (``updates`` are the edits).
        state: the graph's state at the pause (its ``options.policy``).

    Returns:
        ``{"updates": edits}`` rounded to cents (``{}`` for a reject).

    Raises:
        DecisionRefusedError: ``invalid_field_edits`` with per-key errors (unknown item or
            tier, not a positive number) or the policy violations the edits would cause.
    """
    if decision.get("decision") != "approve":
        return {"updates": {}}
    proposed: dict[str, dict[str, float]] = dict(payload.get("proposed_prices") or {})
    meta: dict[str, dict[str, str]] = dict(payload.get("items_meta") or {})
    errors: dict[str, str] = {}
    edits: dict[str, float] = {}
    for key, raw in (decision.get("updates") or {}).items():
        item, _, tier = str(key).rpartition(".")
        if item not in proposed:
            errors[key] = "not_in_proposal"
            continue
        if tier not in proposed[item]:
            errors[key] = "unknown_tier"
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            errors[key] = "not_a_number"
            continue
        if not math.isfinite(value) or value <= 0:
            errors[key] = "must_be_positive"
            continue
        edits[key] = round(value, 2)
    if errors:
        raise DecisionRefusedError("price edits do not validate", code="invalid_field_edits",
                                   details={"errors": errors})
    config = PolicyConfig.model_validate((state.get("options") or {}).get("policy", {}))
    violations: list[dict[str, Any]] = []
    for item in sorted({k.rpartition(".")[0] for k in edits}):
        prices = {**proposed[item], **{k.rpartition(".")[2]: v for k, v in edits.items()
                                        if k.rpartition(".")[0] == item}}
        report = check_all_policies(item, prices, segment=meta.get(item, {}).get("segment"),
                                    region=meta.get(item, {}).get("region"), config=config)
        violations += [v.model_dump() for v in report.violations]
    if violations:
        raise DecisionRefusedError(
            "the edited prices break the pricing policy", code="invalid_field_edits",
            details={"errors": {f"{v['item']}.{next(iter(v['suggest']))}": v["type"]
                                for v in violations}, "violations": violations})
    return {"updates": edits}
