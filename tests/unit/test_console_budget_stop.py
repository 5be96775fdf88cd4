"""The console shows the budget form for both LLM budget stops (issue 27): a pipeline's own
(document intake's ``kind: budget``) and the runtime's (``kind: llm_budget``, any graph),
so a reviewer can approve either with a new budget."""

from types import SimpleNamespace

from services.api.routes.console import _payload_kind


def _approval(payload: dict) -> SimpleNamespace:
    return SimpleNamespace(pipeline="spender", payload=payload)


def test_the_runtimes_budget_stop_gets_the_budget_form():
    stop = {"kind": "llm_budget", "node": "publish", "review_reason_codes": ["llm_budget_exceeded"],
            "budget": {"spent_usd": 0.0, "spent_tokens": 1200, "calls": 2,
                       "budget_usd": None, "budget_tokens": 1000}}
    assert _payload_kind(_approval(stop)) == "budget"


def test_a_pipelines_own_budget_stop_and_other_payloads_keep_their_forms():
    assert _payload_kind(_approval({"kind": "budget", "budget": {}, "record": {}})) == "budget"
    assert _payload_kind(_approval({"kind": "review", "record": {"a": 1}})) == "review"
    assert _payload_kind(_approval({"question": "publish?"})) == "generic"
    assert _payload_kind(None) == "none"
