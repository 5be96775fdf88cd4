"""Routing (seed 003 AC3): simple asks → single agent, composite asks → orchestrator; the plan; bounds."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from activities.pricing.catalog import load_catalog_file
from activities.pricing.router import (
    classify_with_llm,
    decide_route,
    next_route,
    resolve_scope,
    rule_intents,
)

FULL = ["optimizer", "policy", "explainer", "sensitivity", "reporter", "approval"]


@pytest.mark.parametrize(("message", "path", "plan"), [
    ("What is the optimal price?", "single_agent", []),
    ("What is the best price for ASTR 4?", "single_agent", []),
    ("hello there", "single_agent", []),
    ("Propose Q1 pricing updates ensuring hierarchy; summarize", "orchestrator", FULL),
    ("Propose Q1 updates ensuring hierarchy, then explain drivers", "orchestrator", FULL),
    ("Why was that price recommended?", "orchestrator", ["explainer", "reporter"]),
    ("How robust is this recommendation?", "orchestrator", ["sensitivity", "reporter"]),
    ("Check policy violations for online items", "orchestrator", ["policy", "reporter"]),
    ("Executive summary for leadership", "orchestrator", FULL),
])
def test_seed_routing_examples(message: str, path: str, plan: list[str]):
    decision = decide_route(message)
    assert (decision.path, decision.plan) == (path, plan)


def test_plan_true_forces_the_orchestrator():
    decision = decide_route("What is the optimal price?", plan=True)
    assert decision.path == "orchestrator" and decision.reason == "plan_param"
    assert decision.plan == ["optimizer", "policy", "reporter", "approval"]
    assert decide_route("hello", plan=True).plan == FULL


def test_keywords_are_whole_words_where_it_matters():
    assert rule_intents("why now") == ["explainer"]
    assert "explainer" not in rule_intents("anywhy")
    assert rule_intents("FAR compliance check") == ["policy"]


async def test_llm_classifier_adds_intents_but_never_removes_rules():
    model = GenericFakeChatModel(messages=iter([AIMessage(content='{"intents": ["sensitivity", "bogus"]}')]))
    extra = await classify_with_llm(model, "What is the optimal price, and am I safe?")
    assert extra == ["sensitivity"]
    decision = decide_route("What is the optimal price, and am I safe?", extra_intents=extra,
                            strategy="llm:fake")
    assert decision.path == "orchestrator" and decision.intents == ["optimizer", "sensitivity"]
    assert decision.strategy == "llm:fake"


async def test_llm_classifier_garbage_means_rules_only():
    model = GenericFakeChatModel(messages=iter([AIMessage(content="I think it's pricing")]))
    assert await classify_with_llm(model, "anything") == []


def test_router_follows_the_plan_and_is_bounded():
    state = {"plan": FULL, "completed_steps": [], "iterations": 0, "max_iterations": 8}
    assert next_route(state) == ("optimizer", "plan")
    state["completed_steps"] = ["optimizer", "policy", "explainer", "sensitivity", "reporter"]
    assert next_route(state) == ("end", "no_changes_to_approve")
    state["proposal"] = {"changes": {"A": {"new": {"from": 1, "to": 2}}}}
    assert next_route(state) == ("approval", "plan")
    assert next_route({**state, "completed_steps": FULL}) == ("end", "plan_complete")
    bounded = {"plan": FULL, "completed_steps": ["optimizer"], "iterations": 2, "max_iterations": 2}
    assert next_route(bounded) == ("reporter", "max_iterations")
    assert next_route({**bounded, "completed_steps": ["optimizer", "reporter"]}) == (
        "end", "max_iterations")


def test_scope_resolution_items_filters_and_follow_ups():
    catalog = load_catalog_file()
    named = resolve_scope("What is the optimal used price for ASTR 4 on campus?", catalog)
    assert named["item_ids"] == ["TB006-campus"] and named["tier"] == "usm"
    both = resolve_scope("optimal price for ASTR 4", catalog)
    assert set(both["item_ids"]) == {"TB006-campus", "TB006-online"}
    filtered = resolve_scope("Propose updates for premium online items", catalog)
    assert filtered == {"item_ids": None, "segment": "premium", "region": "online", "tier": None,
                        "matched": None}
    follow = resolve_scope("Why was that price recommended?", catalog, previous=named)
    assert follow["item_ids"] == ["TB006-campus"]
