"""A model's value whose quote is not in the document is never pre-filled or applied."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from activities.document_intake import llm_steps
from activities.document_intake.llm_steps import QUOTE_NOT_FOUND, check_quote, extract_with_llm
from activities.document_intake.review import (
    proposal_from_llm,
    proposal_is_acceptable,
    quote_check_payload,
)
from activities.document_intake.schema import load_field_schema
from overseer.documents import PageText
from overseer.resources import configure
from overseer.runtime import llm
from overseer.settings import Settings

FORM = """ESSAY CONTEST ENTRY FORM
Student Name: Maria   Lopez
School: Lincoln Middle School
Grade : 7
Email: maria.lopez@example.com
City: Springfield
"""
RUN_ID = "3f1d2c4b-5a69-4788-9a0b-1c2d3e4f5a6b"


def _scan(text: str = FORM) -> list[PageText]:
    return [PageText(page_number=1, text=text, source="ocr", ocr_confidence=0.9, coverage=1.0)]


@pytest.fixture
def model_reply(monkeypatch: pytest.MonkeyPatch):
    """Install a fake chat model answering ``reply``; ledger events go to a list (no database)."""
    recorded: list[Any] = []
    real_call_json = llm_steps.call_json

    async def call_json(*args: Any, **kwargs: Any) -> Any:
        return await real_call_json(*args, **kwargs, record=_collect(recorded), spend={
            "cost_usd": 0.0, "tokens": 0.0, "calls": 0.0})

    monkeypatch.setattr(llm_steps, "call_json", call_json)
    from overseer import resources as activity_runtime

    # The activity runtime is process-wide: put back whatever was there, so later tests do
    # not inherit an LLM endpoint.
    monkeypatch.setattr(activity_runtime, "_runtime", activity_runtime._runtime)
    configure(pool=None, settings=Settings(llm_base_url="http://127.0.0.1:9/v1"))  # type: ignore[arg-type]

    def install(reply: dict[str, Any]) -> list[Any]:
        llm.set_chat_model_factory(lambda s, m: GenericFakeChatModel(
            messages=iter([AIMessage(content=json.dumps(reply))])))
        return recorded

    yield install
    llm.set_chat_model_factory(None)


def _collect(sink: list[Any]) -> Any:
    async def record(events: list[Any]) -> None:
        sink.extend(events)
    return record


HALLUCINATED = {
    "grade": {"value": "9", "quote": "Grade: 9"},
    "email": {"value": "maria.lopez@example.com", "quote": "Email:  MARIA.LOPEZ@example.com"},
    "student_name": {"value": "Maria Lopez", "quote": "student name: maria lopez"},
}


async def test_a_quote_not_in_the_document_is_a_suggestion_never_an_update(model_reply):
    model_reply(HALLUCINATED)
    schema = load_field_schema()
    asked = await extract_with_llm({"run_id": RUN_ID, "options": {}}, _scan(),
                                   ["grade", "email", "student_name"], schema,
                                   node="review_agent", step=1)
    assert "grade" not in asked.values and asked.unverified == {"grade": "9"}
    assert asked.quote_checks["grade"] == {"value": "9", "quote": "Grade: 9",
                                           "quote_verified": False,
                                           "reason": "quote_not_in_document"}
    # Case, runs of spaces and the space before a colon are normalised; the value is in the form.
    assert asked.values == {"email": "maria.lopez@example.com", "student_name": "Maria Lopez"}
    assert asked.quote_checks["email"]["quote_verified"] is True

    proposal = proposal_from_llm(asked)
    assert "grade" not in proposal.updates  # what approve applies and the console pre-fills
    assert proposal.suggestions == {"grade": "9"}
    assert proposal.notes == {"grade": QUOTE_NOT_FOUND}
    assert proposal.quote_verified == {"email": True, "student_name": True, "grade": False}
    payload = quote_check_payload(proposal)
    assert payload["unverified_fields"] == ["grade"]
    assert payload["suggestion_evidence"]["grade"]["snippet"] == "Grade: 9"
    json.dumps(payload)  # event data is plain JSON


async def test_the_retry_extraction_step_gets_only_verified_values(model_reply):
    # retry_extraction merges ``asked.values`` into the record: the unverified grade stays out.
    model_reply({"grade": {"value": "9", "quote": "Grade: 9"},
                 "city": {"value": "Springfield", "quote": "City: Springfield"}})
    asked = await extract_with_llm({"run_id": RUN_ID, "options": {}}, _scan(), ["grade", "city"],
                                   load_field_schema(), node="retry_extraction", step=2)
    record = {"grade": None, "city": None, **asked.values}
    assert record == {"grade": None, "city": "Springfield"}
    assert asked.evidence["city"].score > 0.85 and "grade" not in asked.evidence


def test_an_unverified_update_is_never_acceptable():
    schema = load_field_schema()
    from activities.document_intake.extract_candidates import Evidence
    from activities.document_intake.review import Proposal

    ev = Evidence(page_number=1, snippet="Grade: 9", label="llm", method="llm_quote", score=0.95)
    proposal = Proposal(updates={"grade": "9"}, evidence={"grade": ev}, strength=0.95,
                        quote_verified={"grade": False})
    assert proposal_is_acceptable(proposal, {}, schema) == (False, "unverified_quote")


@pytest.mark.parametrize(("value", "quote", "reason"), [
    ("7", "Grade : 7", "verified"),
    ("7", "GRADE:   7", "verified"),
    ("9", "Grade: 9", "quote_not_in_document"),
    ("7", "7", "quote_is_only_the_value"),
    ("7", None, "no_quote"),
    ("8", "Grade : 7", "value_not_in_quote"),
    ("maria.lopez@example.com", "maria.lopez@example.com", "verified"),
])
def test_check_quote(value: str, quote: str | None, reason: str):
    evidence, got = check_quote(_scan(), value, quote)
    assert got == reason
    assert (evidence.score > 0.5) is (reason == "verified")
