"""The orchestrator graph in plain LangGraph: each worker's output, tokens, the gate, resume."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from activities.pricing.catalog import SAMPLE_PATH, load_catalog_file
from activities.pricing.graph import approval_payload, build_pricing_graph
from activities.pricing.options import pricing_options
from activities.pricing.router import decide_route, resolve_scope
from overseer.settings import Settings

COMPOSITE = "Propose Q1 pricing updates ensuring hierarchy; summarize"


def initial_state(message: str, *, plan: bool = False) -> dict[str, Any]:
    catalog = load_catalog_file()
    route = decide_route(message, plan=plan)
    return {"run_id": "00000000-0000-4000-8000-000000000001",
            "messages": [{"role": "user", "content": message}],
            "request": {"message": message, "model": "rules"},
            "options": pricing_options(Settings(environment="test")),
            "catalog": {"sha256": catalog.sha256, "path": str(SAMPLE_PATH)},
            "scope": resolve_scope(message, catalog), "plan": route.plan, "max_iterations": 8,
            "iterations": 0, "completed_steps": [], "outputs": {}, "tools_used": []}


async def run(message: str, *, plan: bool = False):
    app = build_pricing_graph(for_temporal=False).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    tokens: list[str] = []
    nodes: list[str] = []
    interrupt = None
    async for mode, chunk in app.astream(initial_state(message, plan=plan), config,
                                         stream_mode=["custom", "updates"]):
        if mode == "custom":
            tokens.append(chunk["token"])
        else:
            for node, update in chunk.items():
                if node == "__interrupt__":
                    interrupt = update[0].value
                else:
                    nodes.append(node)
    return app, config, tokens, nodes, interrupt


async def test_composite_plan_runs_every_worker_then_pauses():
    app, config, tokens, nodes, interrupt = await run(COMPOSITE)
    workers = [n for n in nodes if n != "router"]
    assert workers == ["optimizer_worker", "policy_checker_worker", "explainer_worker",
                       "sensitivity_worker", "reporter_worker"]
    state = (await app.aget_state(config)).values
    outputs = state["outputs"]
    assert outputs["optimizer"]["change_count"] > 100 and outputs["optimizer"]["policy_ok"]
    assert outputs["policy"]["violations_total"] == 47 and outputs["policy"]["proposal_ok"]
    v = state["violations"][0]
    assert set(v) >= {"type", "item", "current", "suggest", "rationale"}
    assert len(outputs["explainer"]["explanations"]) == 3
    assert 0 <= outputs["sensitivity"]["robustness_score"] <= 1
    assert "".join(tokens) == state["report"] and state["strategy"] == "rules"
    assert state["tools_used"] == ["optimize_price", "check_policy", "explain_decision",
                                   "sensitivity_analysis", "compose_report"]
    assert interrupt == approval_payload(state)
    assert interrupt["change_count"] == outputs["optimizer"]["change_count"]

    resumed = await app.ainvoke(Command(resume={"decision": "approve", "decided_by": "rita",
                                                "updates": {"TB006-campus.new": 119.0}}), config)
    assert (resumed["status"], resumed["outcome"]) == ("completed", "approved")
    assert resumed["approved_prices"]["TB006-campus"]["new"] == 119.0


async def test_rejection_ends_rejected():
    app, config, *_ = await run("Propose updates for TB006-online")
    out = await app.ainvoke(Command(resume={"decision": "reject", "decided_by": "rita"}), config)
    assert (out["status"], out["outcome"]) == ("rejected", "rejected")


async def test_single_worker_plans_end_without_the_gate():
    app, config, tokens, nodes, interrupt = await run("Why was the TB006-campus price recommended?")
    assert interrupt is None
    state = (await app.aget_state(config)).values
    assert [n for n in nodes if n != "router"] == ["explainer_worker", "reporter_worker"]
    explanation = state["outputs"]["explainer"]["explanations"][0]
    assert explanation["item_id"] == "TB006-campus" and explanation["top_driver"] == "demand"
    assert "TB006-campus" in state["report"]


async def test_policy_only_plan_reports_fixes_without_a_proposal():
    app, config, _, nodes, interrupt = await run("Check policy violations for TB001-online")
    state = (await app.aget_state(config)).values
    assert interrupt is None and state.get("proposal") is None
    assert state["outputs"]["policy"]["violations_total"] == 3
    assert "suggested fixes are attached" in state["report"]


async def test_reporter_with_a_model_streams_its_tokens(monkeypatch):
    from overseer.resources import ActivityRuntime
    from overseer.runtime import llm

    llm.set_chat_model_factory(lambda s, m: GenericFakeChatModel(
        messages=iter([AIMessage(content="Hold prices; fix TB001-online.")])))
    monkeypatch.setattr("overseer.resources._runtime",
                        ActivityRuntime(pool=None, settings=Settings(environment="test")))  # type: ignore[arg-type]
    try:
        state = initial_state("Check policy violations for TB001-online")
        state["request"]["model"] = "fake-model"
        app = build_pricing_graph(for_temporal=False).compile()
        tokens = [c["token"] async for c in app.astream(state, stream_mode="custom")]
    finally:
        llm.set_chat_model_factory(None)
    assert "".join(tokens) == "Hold prices; fix TB001-online."
    assert len(tokens) > 1  # streamed, not one blob
