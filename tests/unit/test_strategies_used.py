"""Issue 17: a run's result names every strategy that ran, not only the last extraction's."""

from activities.document_intake.assess import public_snapshot


def test_a_model_used_by_the_review_agent_is_named():
    state = {"strategy": "rules", "proposal": {"strategy": "llm:gpt-4o-mini", "updates": {}}}
    assert public_snapshot(state)["strategies"] == ["rules", "llm:gpt-4o-mini"]


def test_rules_only_and_a_model_retry():
    assert public_snapshot({"strategy": "rules"})["strategies"] == ["rules"]
    retried = {"strategy": "llm:m", "proposal": {"strategy": "llm:m"}}
    assert public_snapshot(retried)["strategies"] == ["rules", "llm:m"]
