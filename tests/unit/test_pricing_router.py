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


# --- issue 17: a labelled set of real-sounding asks and the route each should take ---------------
# (message, kind, expected plan); an empty plan means the single agent. Kinds: simple, composite,
# ambiguous (a keyword inside another word, or a word that means something else), off-topic.
# Labelled by what an analyst asking it wants, before the router was changed.
EXPLAIN = ["explainer", "reporter"]
SENSE = ["sensitivity", "reporter"]
POLICY = ["policy", "reporter"]
ROUTER_CASES: list[tuple[str, str, list[str]]] = [
    ("What is the optimal price for ASTR 4?", "simple", []),
    ("What is a reasonable price for ASTR 4?", "ambiguous", []),
    ("Best price for the calculus textbook at the campus store?", "simple", []),
    ("What price should we charge for new copies of Organic Chemistry?", "simple", []),
    ("How much should a used copy of PHYSICS 1A cost?", "simple", []),
    ("Optimize prices for premium items", "simple", []),
    ("Can you recommend a price for ECON 11?", "simple", []),
    ("What's the right price for the exchange tier of MATH 31A?", "simple", []),
    ("Give me pricing for online budget books", "simple", []),
    ("How far can I push the price of ASTR 4?", "ambiguous", []),
    ("How far off is the ASTR 4 price from optimal?", "ambiguous", []),
    ("Reasonably priced alternatives to ASTR 4?", "ambiguous", []),
    ("Any updates on the catalog import?", "ambiguous", []),
    ("What's the reason for the current ASTR 4 price?", "simple", EXPLAIN),
    ("Is the reasoning behind the budget prices written down anywhere?", "simple", EXPLAIN),
    ("Explain the drivers behind the ASTR 4 recommendation", "simple", EXPLAIN),
    ("Why is the used price so close to new for MATH 31A?", "simple", EXPLAIN),
    ("What factors drive prices in the premium segment?", "simple", EXPLAIN),
    ("Why was that price recommended?", "simple", EXPLAIN),
    ("How robust is the recommendation for ECON 11?", "simple", SENSE),
    ("What if elasticity is 20% higher than we assume?", "simple", SENSE),
    ("What's the worst case for margin if demand drops?", "simple", SENSE),
    ("How confident are you in these numbers?", "simple", SENSE),
    ("Check policy violations for online items", "simple", POLICY),
    ("Are there any hierarchy inversions in the budget segment?", "simple", POLICY),
    ("Show me listings that are far from compliant", "ambiguous", POLICY),
    ("Are our online listings FAR compliant?", "simple", POLICY),
    ("What's our policy on used book prices?", "simple", POLICY),
    ("Give me a report on current tier inversions", "composite", POLICY),
    ("Propose Q1 pricing updates ensuring hierarchy; summarize", "composite", FULL),
    ("Propose Q2 adjustments for the campus store and explain the drivers", "composite", FULL),
    ("Draft a pricing proposal for leadership", "composite", FULL),
    ("Prepare an executive summary of next quarter's price changes", "composite", FULL),
    ("Plan price updates for all online items", "composite", FULL),
    ("Executive summary for leadership", "composite", FULL),
    ("What's the best price for ASTR 4 and why?", "composite",
     ["optimizer", "policy", "explainer", "reporter"]),
    ("Give me the optimal price for ECON 11 and how sensitive it is to elasticity", "composite",
     ["optimizer", "policy", "sensitivity", "reporter"]),
    ("Optimize premium prices without breaking the hierarchy", "composite",
     ["optimizer", "policy", "reporter"]),
    ("Why was that price recommended, and how robust is it?", "composite",
     ["explainer", "sensitivity", "reporter"]),
    ("What is a reasonable price for ASTR 4, and what's the risk if demand is weaker?",
     "composite", ["optimizer", "policy", "sensitivity", "reporter"]),
    ("hello there", "off-topic", []),
    ("What's the weather like in Los Angeles?", "off-topic", []),
    ("Who wrote the calculus textbook?", "off-topic", []),
    ("Thanks, that's all for today", "off-topic", []),
    ("Can you help me reset my password?", "off-topic", []),
    ("Tell me a joke about economists", "off-topic", []),
]


def router_accuracy() -> tuple[int, int, list[str]]:
    """(correct, total, misses) of ``decide_route`` on :data:`ROUTER_CASES` (path and plan)."""
    misses = []
    for message, _kind, plan in ROUTER_CASES:
        decision = decide_route(message)
        path = "orchestrator" if plan else "single_agent"
        if (decision.path, decision.plan) != (path, plan):
            misses.append(f"{message!r}: {decision.path} {decision.plan}")
    return len(ROUTER_CASES) - len(misses), len(ROUTER_CASES), misses


def test_the_labelled_set_has_every_kind_of_ask():
    kinds = [kind for _, kind, _ in ROUTER_CASES]
    assert len(ROUTER_CASES) >= 40
    assert {kinds.count(k) >= 5 for k in ("simple", "composite", "ambiguous", "off-topic")} == {True}


@pytest.mark.parametrize(("message", "kind", "plan"), ROUTER_CASES, ids=lambda v: str(v)[:40])
def test_labelled_asks_take_their_route(message: str, kind: str, plan: list[str]):
    decision = decide_route(message)
    assert (decision.path, decision.plan) == ("orchestrator" if plan else "single_agent", plan)


def test_a_question_that_proposes_no_change_has_no_sign_off_step():
    assert "approval" not in decide_route("What's the best price for ASTR 4 and why?").plan
    assert "approval" not in decide_route("How robust is the price, and why?").plan
    assert decide_route("Propose new prices for ASTR 4 and explain why").plan[-1] == "approval"
    assert decide_route("What is the optimal price?", plan=True).plan[-1] == "approval"
