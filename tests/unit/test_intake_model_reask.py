"""Document intake asks once more when the model answers prose instead of JSON (issue 28 item 5).

A small local model often answers "Sure! The grade is 7." where a JSON object was asked
for. The extraction step re-asks once, naming what was wrong; a second prose answer is the
step's failure (the run then goes to a person with the reason), and a valid second answer
is used, with the quote check as always. Both calls are in the ledger.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from activities.document_intake.llm_steps import extract_with_llm
from activities.document_intake.schema import load_field_schema
from overseer.runtime import llm
from tests.unit.test_model_quote_not_in_document import RUN_ID, _scan, model_reply  # noqa: F401 - fixture

PROSE = "Sure! Looking at the form, the student is in grade 7 at Lincoln Middle School."


def _answers(monkeypatch_install: Any, *replies: str) -> list[Any]:
    """Install a fake model giving ``replies`` in turn; the prompts it saw are collected."""
    recorded = monkeypatch_install({})
    seen: list[Any] = []

    class Scripted(GenericFakeChatModel):
        async def _agenerate(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(messages)
            return await super()._agenerate(messages, *args, **kwargs)

    queue = iter([AIMessage(content=r) for r in replies])
    llm.set_chat_model_factory(lambda s, m: Scripted(messages=queue))
    return [recorded, seen]


async def test_prose_then_json_is_used_after_one_reask(model_reply):  # noqa: F811
    recorded, seen = _answers(model_reply, PROSE, json.dumps(
        {"grade": {"value": "7", "quote": "Grade : 7"}}))
    got = await extract_with_llm({"run_id": RUN_ID, "options": {}}, _scan(), ["grade"],
                                 load_field_schema(), node="review_agent", step=0)
    assert got.failure is None and got.values == {"grade": "7"}
    assert len(seen) == 2
    assert "could not be used" in seen[1][-1].content and "JSON" in seen[1][-1].content
    assert len([e for e in recorded if e.type == "llm.called"]) == 2


async def test_prose_twice_is_the_steps_failure_and_nothing_is_applied(model_reply):  # noqa: F811
    recorded, seen = _answers(model_reply, PROSE, PROSE, PROSE)
    got = await extract_with_llm({"run_id": RUN_ID, "options": {}}, _scan(), ["grade"],
                                 load_field_schema(), node="review_agent", step=0)
    assert got.failure == "llm_malformed_response"
    assert got.values == {} and got.unverified == {}
    assert len(seen) == 2  # bounded: one re-ask, not a third call
    assert len([e for e in recorded if e.type == "llm.called"]) == 2
