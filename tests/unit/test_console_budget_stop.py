"""The console shows the budget form for the run's one LLM budget stop (issue 27).

``kind: llm_budget`` (the runtime's, any graph), whether the spend had passed the budget or
a node's pre-call estimate said the next call would (document intake), so a reviewer
approves it with a new budget; no pipeline has a budget stop of its own any more.
"""

from types import SimpleNamespace

from services.api.routes.console.items import _payload_kind


def _approval(payload: dict) -> SimpleNamespace:
    return SimpleNamespace(pipeline="spender", payload=payload)


def test_the_runtimes_budget_stop_gets_the_budget_form():
    stop = {"kind": "llm_budget", "node": "publish", "review_reason_codes": ["llm_budget_exceeded"],
            "budget": {"spent_usd": 0.0, "spent_tokens": 1200, "calls": 2,
                       "budget_usd": None, "budget_tokens": 1000}}
    assert _payload_kind(_approval(stop)) == "budget"


def test_a_stop_on_a_nodes_estimate_gets_the_same_form():
    stop = {"kind": "llm_budget", "node": "review_agent",
            "review_reason_codes": ["llm_budget_exceeded"],
            "budget": {"spent_usd": 0.0, "spent_tokens": 0, "calls": 0, "estimate_usd": 0.0004,
                       "estimate_tokens": 1312, "model": "gpt-4o-mini", "budget_usd": 0.0,
                       "budget_tokens": None}}
    assert _payload_kind(_approval(stop)) == "budget"


def test_other_payloads_keep_their_forms():
    assert _payload_kind(_approval({"kind": "budget", "budget": {}})) == "generic"
    assert _payload_kind(_approval({"kind": "review", "record": {"a": 1}})) == "review"
    assert _payload_kind(_approval({"question": "publish?"})) == "generic"
    assert _payload_kind(None) == "none"
