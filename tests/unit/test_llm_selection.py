"""Model choice order, the allowlist, the price table and error classification (no network)."""

from __future__ import annotations

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage

from overseer.errors import (
    LLMClientError,
    LLMRateLimitedError,
    LLMRefusedError,
    LLMResponseError,
    LLMUnavailableError,
)
from overseer.runtime.llm import classify_error, parse_reply, price_usd, select_model
from overseer.settings import Settings


def settings(**kw) -> Settings:
    return Settings(environment="test", llm_model="base", **kw)


@pytest.mark.parametrize(
    ("kw", "task", "hint", "expected"),
    [
        ({}, "extraction", None, ("base", "global_default")),
        ({"llm_task_models": {"extraction": "ext"}}, "extraction", None, ("ext", "task_default")),
        ({"llm_task_models": {"extraction": "ext"}}, "reporting", None, ("base", "global_default")),
        ({"llm_allowed_models": ["big", "small"]}, "extraction", "small", ("small", "request_hint")),
        ({"llm_allowed_models": ["big"]}, "extraction", "evil",
         ("base", "global_default;hint_not_allowlisted")),
        ({"llm_task_models": {"drafting": "d"}}, "drafting", "nope",
         ("d", "task_default;hint_not_allowlisted")),
        ({"llm_admin_override": "forced", "llm_allowed_models": ["small"]}, "extraction", "small",
         ("forced", "admin_override")),
    ],
)
def test_admin_override_then_allowlisted_hint_then_task_then_global(kw, task, hint, expected):
    choice = select_model(task, settings(**kw), hint=hint)
    assert (choice.model, choice.reason) == expected


def test_hint_allowlist_defaults_to_configured_models():
    s = settings(llm_task_models={"extraction": "ext"})
    assert select_model("routing", s, hint="ext").reason == "request_hint"


def test_prices_from_builtin_and_custom_table():
    s = settings(llm_price_table={"mine": {"input_per_1m_usd": 1.0, "output_per_1m_usd": 2.0}})
    assert price_usd("mine", 1_000_000, 500_000, s) == pytest.approx(2.0)
    assert price_usd("gpt-4o-mini", 1_000_000, 1_000_000, s) == pytest.approx(0.75)
    assert price_usd("unknown-model", 10, 10, s) is None


def _status_error(cls, status: int, headers: dict[str, str] | None = None):
    request = httpx.Request("POST", "http://llm.test/v1/chat/completions")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return cls("boom", response=response, body=None)


def test_classification_of_client_errors():
    limited = classify_error(_status_error(openai.RateLimitError, 429, {"retry-after": "7"}))
    assert isinstance(limited, LLMRateLimitedError)
    assert limited.retryable
    assert limited.details["retry_after_seconds"] == 7.0
    assert isinstance(classify_error(_status_error(openai.InternalServerError, 503)),
                      LLMUnavailableError)
    bad = classify_error(_status_error(openai.BadRequestError, 400))
    assert isinstance(bad, LLMClientError)
    assert not bad.retryable
    assert isinstance(classify_error(TimeoutError()), LLMUnavailableError)


def test_a_reply_the_client_cannot_read_is_malformed_not_transient():
    """Issue 28 item 5: a ``ValueError`` from the client (langchain-openai raises one when an
    endpoint answers an error body with status 200; output parsers raise subclasses) was
    ``llm_unavailable`` and retried by Temporal; a refusal the same."""
    from langchain_core.exceptions import ModelRefusalError, OutputParserException

    for err in (ValueError("{'message': 'model failed to answer'}"),
                OutputParserException("not a tool call")):
        failure = classify_error(err)
        assert isinstance(failure, LLMResponseError) and not failure.retryable
    assert classify_error(ModelRefusalError("no")).code == "llm_refused"
    assert classify_error(TimeoutError()).retryable
    assert classify_error(RuntimeError("socket closed")).retryable  # unknown: still transient


def test_a_parse_error_names_what_was_wrong():
    with pytest.raises(LLMResponseError, match="no JSON object"):
        parse_reply(AIMessage(content="Sure! Here are the codes: taste, delivery."))
    with pytest.raises(LLMResponseError, match="invalid JSON: Expecting"):
        parse_reply(AIMessage(content='{"codes": [{"label": "taste",}]}'))


def test_reply_parsing():
    assert parse_reply(AIMessage(content='Sure: {"grade": {"value": "8"}}')) == {
        "grade": {"value": "8"}}
    with pytest.raises(LLMResponseError):
        parse_reply(AIMessage(content="I think the grade is eight"))
    with pytest.raises(LLMRefusedError):
        parse_reply(AIMessage(content="", additional_kwargs={"refusal": "I can't help"}))
