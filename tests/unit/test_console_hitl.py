"""The console's human-interrupt shapes: what it shows and the answer it builds (issue 26)."""

from __future__ import annotations

import pytest

from overseer.errors import InvalidRequestError
from services.api.console.hitl import human_interrupt, human_resume

INBOX = {"action_request": {"action": "send_reply", "args": {"to": "a@x", "body": "Hi"}},
         "config": {"allow_accept": True, "allow_edit": True, "allow_respond": True,
                    "allow_ignore": False},
         "description": "Reply?"}
BATCHED = {"action_requests": [
    {"name": "send_email", "args": {"to": "a@x"}, "description": "mail"},
    {"name": "delete_file", "args": {"path": "r.txt"}}],
    "review_configs": [{"action_name": "send_email", "allowed_decisions": ["approve", "edit"]},
                       {"action_name": "delete_file",
                        "allowed_decisions": ["approve", "reject"]}]}
RUNTIME = {"interrupt_id": "ab" * 16, "pending_interrupts": ["ab" * 16]}


def test_agent_inbox_in_a_list_is_answered_in_a_list():
    view = human_interrupt({"value": [INBOX], **RUNTIME})
    assert view is not None and view["kind"] == "inbox" and view["listed"]
    assert view["actions"] == [{"name": "send_reply", "args": {"to": "a@x", "body": "Hi"},
                                "description": "Reply?",
                                "allowed": ["accept", "edit", "response"]}]
    assert human_resume(view, {"choice_0": "accept"}) == [{"type": "accept", "args": None}]
    assert human_resume(view, {"choice_0": "edit", "args_0": '{"to": "b@x", "body": "Yo"}'}) == [
        {"type": "edit", "args": {"action": "send_reply", "args": {"to": "b@x", "body": "Yo"}}}]
    assert human_resume(view, {"choice_0": "response", "message_0": " later "}) == [
        {"type": "response", "args": "later"}]
    alone = human_interrupt({**INBOX, **RUNTIME})  # interrupt(request), not in a list
    assert alone is not None and not alone["listed"]
    assert human_resume(alone, {"choice_0": "accept"}) == {"type": "accept", "args": None}


def test_langchains_batched_request_gets_one_decision_per_action_in_order():
    view = human_interrupt({**BATCHED, **RUNTIME})
    assert view is not None and view["kind"] == "langchain"
    assert [a["allowed"] for a in view["actions"]] == [["approve", "edit"], ["approve", "reject"]]
    answer = human_resume(view, {"choice_0": "edit", "args_0": '{"to": "b@x"}',
                                 "choice_1": "reject", "message_1": "keep it"})
    assert answer == {"decisions": [
        {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "b@x"}}},
        {"type": "reject", "message": "keep it"}]}


def test_langchains_per_call_request_gets_one_decision():
    view = human_interrupt({"type": "tool_approval", "tool_call_id": "c1", "name": "send_email",
                            "args": {"to": "a@x"}, "description": "mail", **RUNTIME})
    assert view is not None and view["kind"] == "tool_approval"
    assert human_resume(view, {"choice_0": "approve"}) == {"type": "approve"}


def test_any_other_value_keeps_the_generic_view():
    for payload in ({"question": "publish?", **RUNTIME}, {"value": 3, **RUNTIME},
                    {"value": [1, 2], **RUNTIME}, {}, None):
        assert human_interrupt(payload) is None


@pytest.mark.parametrize(("form", "field"), [
    ({}, "choice_0"),
    ({"choice_0": "ignore"}, "choice_0"),  # not allowed by the request's config
    ({"choice_0": "edit", "args_0": "{not json"}, "args_0"),
    ({"choice_0": "edit", "args_0": "[1]"}, "args_0"),
    ({"choice_0": "response", "message_0": "  "}, "message_0"),
])
def test_a_choice_the_request_does_not_allow_is_refused(form: dict[str, str], field: str):
    view = human_interrupt({"value": [INBOX], **RUNTIME})
    assert view is not None
    with pytest.raises(InvalidRequestError) as refused:
        human_resume(view, form)
    assert field in refused.value.details["errors"]
