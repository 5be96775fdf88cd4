"""The fast path's model failing (429, 5xx) falls back to the rules answer, with a ledger."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk

from activities.pricing.agent import single_agent
from activities.pricing.catalog import load_catalog_file
from activities.pricing.options import pricing_options
from activities.pricing.router import resolve_scope
from overseer.runtime import llm
from overseer.settings import Settings
from overseer.store.events import LLM_CALLED

MESSAGE = "What is the optimal new price for TB006-campus?"
RUN_ID = "6b0c1f0e-5c1e-4f0e-9a43-0d1f9d3c2b11"


class ProviderError(Exception):
    """What an OpenAI-compatible client raises: an exception with an HTTP status."""

    def __init__(self, status_code: int) -> None:
        super().__init__(f"provider answered {status_code}")
        self.status_code = status_code
        self.response = None


class FailingChatModel(GenericFakeChatModel):
    """Streams ``before`` chunks, then raises ``ProviderError(status)``."""

    status: int = 429
    before: list[str] = []

    async def _astream(self, messages: Any, stop: Any = None, run_manager: Any = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        for text in self.before:
            yield ChatGenerationChunk(message=AIMessageChunk(content=text))
        raise ProviderError(self.status)


async def _ask(model: Any) -> tuple[list[dict[str, Any]], list[Any]]:
    recorded: list[Any] = []

    async def record(events: list[Any]) -> None:
        recorded.extend(events)

    llm.set_chat_model_factory(lambda s, m: model)
    try:
        catalog = load_catalog_file()
        out = [e async for e in single_agent(MESSAGE, catalog, pricing_options(Settings()),
                                             scope=resolve_scope(MESSAGE, catalog),
                                             model_name="gpt-4o-mini", settings=Settings(),
                                             run_id=RUN_ID, record=record,
                                             model_reason="global_default")]
    finally:
        llm.set_chat_model_factory(None)
    return out, recorded


async def _rules_answer() -> str:
    catalog = load_catalog_file()
    out = [e async for e in single_agent(MESSAGE, catalog, pricing_options(Settings()),
                                         scope=resolve_scope(MESSAGE, catalog))]
    return str(out[-1]["message"])


@pytest.mark.parametrize(("status", "code", "ledger_code"), [
    (429, "rate_limit", "llm_rate_limited"),
    (503, "llm_unavailable", "llm_unavailable"),
    (400, "llm_client_error", "llm_client_error"),
])
async def test_a_provider_error_falls_back_to_the_rules_answer(status: int, code: str,
                                                              ledger_code: str):
    out, recorded = await _ask(FailingChatModel(messages=iter([]), status=status))
    final = out[-1]
    assert final["done"] and "error" not in final
    assert final["message"] == await _rules_answer()
    assert final["message"] == "".join(e["token"] for e in out if "token" in e)
    assert (final["strategy"], final["model"]) == ("rules", "rules")
    assert final["fallback"]["code"] == code and final["fallback"]["model"] == "gpt-4o-mini"
    assert final["fallback"]["retryable"] is (status != 400)
    assert [e.type for e in recorded] == [LLM_CALLED]
    data = recorded[0].data
    assert (data["outcome"], data["error_code"], data["node"]) == ("error", ledger_code,
                                                                   "single_agent")
    assert str(recorded[0].run_id) == RUN_ID and data["choice_reason"] == "global_default"


async def test_a_failure_mid_answer_ends_with_the_rules_answer():
    out, recorded = await _ask(FailingChatModel(messages=iter([]), status=502,
                                                before=["New copies ", "should "]))
    tokens = [e["token"] for e in out if "token" in e]
    assert tokens[:2] == ["New copies ", "should "]
    assert out[-1]["message"] == await _rules_answer()
    assert out[-1]["fallback"]["code"] == "llm_unavailable"
    assert recorded[0].data["outcome"] == "error"


async def test_a_successful_model_answer_is_in_the_ledger():
    model = GenericFakeChatModel(messages=iter([AIMessage(content="Keep ASTR 4 at $119.97.")]))
    out, recorded = await _ask(model)
    assert out[-1]["strategy"] == "llm:gpt-4o-mini" and "fallback" not in out[-1]
    assert [e.data["outcome"] for e in recorded] == ["ok"]
    assert recorded[0].data["model"] == "gpt-4o-mini"


async def test_the_route_records_the_attempt_and_the_fallback_with_the_run(db):
    """The chat route's fast path writes run.submitted, llm.called and run.completed (with the
    fallback) in one go, so /v1/runs/{id} and its ledger show what happened."""
    import time
    import uuid

    from activities.pricing.chat_fast_path import fast_path
    from activities.pricing.pipeline import PIPELINE
    from activities.pricing.router import decide_route
    from activities.pricing.schemas import ChatRequest
    from overseer.access import Principal
    from overseer.store.events import fetch_events

    run_id = str(uuid.uuid4())
    catalog = load_catalog_file()
    llm.set_chat_model_factory(lambda s, m: FailingChatModel(messages=iter([]), status=429))
    try:
        out = [e async for e in fast_path(
            PIPELINE, db, Settings(), ChatRequest(message=MESSAGE),
            Principal(subject="alice", role="submitter"), catalog,
            resolve_scope(MESSAGE, catalog), decide_route(MESSAGE), run_id, "gpt-4o-mini",
            "global_default", time.monotonic())]
    finally:
        llm.set_chat_model_factory(None)
    assert out[-1]["fallback"]["code"] == "rate_limit"
    events = await fetch_events(db, run_id)
    assert [e["type"] for e in events] == ["run.submitted", "llm.called", "run.completed"]
    assert events[-1]["data"]["snapshot"]["fallback"]["code"] == "rate_limit"
