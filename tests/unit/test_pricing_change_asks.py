"""Asks that would change a price always wait for a sign-off, however they are phrased (issue 28 item 2).

The asks below were written first, from the catalogue (its subjects, items and segments),
the way different people ask, before the router was changed and without looking at its
keywords; then they were run. Every ask that would change a price routes to the
orchestrator with an ``approval`` step; every question keeps its answer path (the single
agent, or a plan without a sign-off).
"""

from __future__ import annotations

import pytest

from activities.pricing.router import decide_route

CHANGE_ASKS = [
    "set every History price to its optimum, correct whatever breaks the rules and send me a summary",
    "Set all Linguistics prices to the optimal level.",
    "Please apply the optimal prices across the Astronomy titles",
    "Change the price of TB001-online to whatever the optimizer says",
    "Move every budget-segment price to its optimum",
    "Raise the Musicology prices to where they should be and tell me what changed",
    "Lower TB002-campus to the best price",
    "Can you update prices for English Composition to their optimum?",
    "I want you to reprice the premium tier for Life Sciences",
    "Go ahead and adjust the Comparative Literature prices so they comply with policy",
    "Fix the prices that break the hierarchy and push the new ones live",
    "Bump the online prices for English up to the recommended level",
    "Cut every standard-segment price that sits above its optimum",
    "make TB001-campus cost what it should",
]

QUESTIONS = [
    "What is the optimal new price for TB006-campus?",
    "What's the best price for TB002-online and why?",
    "Why is TB001-campus priced where it is?",
    "Are there any hierarchy violations in Astronomy?",
    "How robust is the optimal price for TB003-online?",
    "Should I raise the History prices?",
    "What would happen to revenue if I lowered Linguistics prices by 5%?",
    "Give me a report on current tier inversions",
]


@pytest.mark.parametrize("ask", CHANGE_ASKS)
def test_an_ask_that_changes_prices_waits_for_a_sign_off(ask: str) -> None:
    route = decide_route(ask)
    assert route.path == "orchestrator", (ask, route.to_dict())
    assert route.plan[-1] == "approval" and "optimizer" in route.plan, (ask, route.to_dict())


@pytest.mark.parametrize("ask", QUESTIONS)
def test_a_question_is_answered_without_a_sign_off(ask: str) -> None:
    route = decide_route(ask)
    assert "approval" not in route.plan, (ask, route.to_dict())
