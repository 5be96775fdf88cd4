"""Due diligence with a model that misbehaves (issue 28 item 5).

The model is a langchain-core fake chat model (the only fake): it answers prose where the
clause agent asks for a tool call, as small local models often do. The prompt names only the
clause types, so a reply without a tool call before any tool was called has read nothing of
the agreement: it is malformed, asked for once more with what was wrong, and then the rules
answer for that step, recorded in ``clauses.fallbacks``, the run's result and its final
event. The labels say what produced the findings: ``rules`` when the model gave nothing,
``rules`` + ``llm:<model>`` when some findings are the model's verified quotes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from itertools import cycle, repeat
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatResult

from activities.due_diligence.agent import REASK, _settings, run_clause_agent
from activities.due_diligence.graph import build_clause_extraction_graph
from activities.due_diligence.nodes import ingestion
from activities.due_diligence.options import DueDiligenceOptions
from activities.due_diligence.report import render_report
from activities.due_diligence.text import sentences
from overseer.runtime import llm
from tests.helpers import AGREEMENT, submit_agreement

PROSE = "Sure! Here is my analysis: the contract looks fine."
USAGE = {"input_tokens": 200, "output_tokens": 20, "total_tokens": 220}


class RecordingFake(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts tools and keeps every prompt it was sent."""

    prompts: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> RecordingFake:  # type: ignore[override]
        """Tools are ignored: the replies are scripted."""
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def fake(replies: Iterable[AIMessage]) -> RecordingFake:
    return RecordingFake(messages=iter(replies), prompts=[])


def prose() -> Iterator[AIMessage]:
    return repeat(AIMessage(content=PROSE, usage_metadata=USAGE))


def audit_sentence(text: str) -> str:
    return next(text[s.start:s.end] for s in sentences(text)
                if re.search(r"\bmay\s+audit\b", text[s.start:s.end]))


def propose_audit(text: str) -> AIMessage:
    return AIMessage(content="", usage_metadata=USAGE, tool_calls=[{
        "name": "propose_clause", "id": "call-1",
        "args": {"clause_type": "audit_rights", "quote": " ".join(audit_sentence(text).split())}}])


@pytest.fixture
def factory() -> Iterator[list[RecordingFake]]:
    """Every chat model the LLM layer makes is the fake a test appends (one per test)."""
    fakes: list[RecordingFake] = []
    llm.set_chat_model_factory(lambda settings, model: fakes[0])
    try:
        yield fakes
    finally:
        llm.set_chat_model_factory(None)


def model_name() -> str:
    return llm.select_model("extraction", _settings()).model


class Ledger(list[dict[str, Any]]):
    async def __call__(self, events: list[Any]) -> None:
        self.extend(dict(e.data) for e in events)


# --- the agent of one search step ------------------------------------------------------------


async def test_prose_instead_of_a_tool_call_is_asked_for_once_more_then_the_rules_answer(
        factory: list[RecordingFake]) -> None:
    text = AGREEMENT.read_text()
    model = fake(prose())
    factory.append(model)
    ledger = Ledger()
    outcome = await run_clause_agent(text, ["audit_rights"], 1, {}, run_id="r", node="n",
                                     record=ledger)
    # one re-ask, not six turns of prose: the step's agent ends malformed
    assert outcome.calls == 2 and outcome.reasks == 1 and not outcome.candidates
    assert outcome.error == "llm_malformed_response"
    assert "called no tool" in (outcome.message or "")
    assert outcome.message.endswith("again after one re-ask")
    reask = model.prompts[1][-1]
    assert isinstance(reask, HumanMessage) and "could not be used" in reask.content
    assert "called no tool" in reask.content
    assert [m.content for m in model.prompts[1][-2:-1]] == [PROSE]  # it sees what it said
    # both replies are in the ledger as failed calls whose tokens were billed
    assert [(e["turn"], e["outcome"], e["error_code"], e["input_tokens"]) for e in ledger] == [
        (0, "error", "llm_malformed_response", 200), (1, "error", "llm_malformed_response", 200)]


async def test_a_re_asked_step_that_then_calls_the_tools_is_used(
        factory: list[RecordingFake]) -> None:
    text = AGREEMENT.read_text()
    done = AIMessage(content="done", usage_metadata=USAGE)
    factory.append(fake([AIMessage(content=PROSE), propose_audit(text), done]))
    ledger = Ledger()
    outcome = await run_clause_agent(text, ["audit_rights"], 1, {}, run_id="r", node="n",
                                     record=ledger)
    assert outcome.error is None and outcome.reasks == 1 and outcome.calls == 3
    [cand] = outcome.candidates["audit_rights"]
    assert text[cand["start"]:cand["end"]] == cand["quote"] == audit_sentence(text)
    assert [e["outcome"] for e in ledger] == ["error", "ok", "ok"]


async def test_after_the_tools_were_used_an_answer_without_a_tool_call_is_done(
        factory: list[RecordingFake]) -> None:
    """Prose after a tool call cannot be told from "done": not re-asked, not an error."""
    text = AGREEMENT.read_text()
    search = AIMessage(content="", usage_metadata=USAGE, tool_calls=[{
        "name": "search_clauses", "id": "call-1", "args": {"clause_type": "audit_rights"}}])
    model = fake([search, AIMessage(content=PROSE, usage_metadata=USAGE)])
    factory.append(model)
    ledger = Ledger()
    outcome = await run_clause_agent(text, ["audit_rights"], 1, {}, run_id="r", node="n",
                                     record=ledger)
    assert outcome.error is None and outcome.reasks == 0 and outcome.calls == 2
    assert all(REASK.split(":")[0] not in str(m.content) for p in model.prompts for m in p)
    assert [e["outcome"] for e in ledger] == ["ok", "ok"]


async def test_tool_arguments_that_are_not_json_are_malformed_and_answered(
        factory: list[RecordingFake]) -> None:
    text = AGREEMENT.read_text()
    broken = AIMessage(content="", usage_metadata=USAGE, invalid_tool_calls=[{
        "name": "propose_clause", "args": '{"clause_type": "audit_rights", "quote": ',
        "id": "call-9", "error": "Unterminated string", "type": "invalid_tool_call"}])
    model = fake(repeat(broken))
    factory.append(model)
    outcome = await run_clause_agent(text, ["audit_rights"], 1, {}, run_id="r", node="n")
    assert outcome.calls == 2 and outcome.reasks == 1
    assert outcome.error == "llm_malformed_response" and "not valid JSON" in outcome.message
    # the endpoint saw a tool call: it gets its answer before the re-ask
    assert [type(m).__name__ for m in model.prompts[1][-3:]] == [
        "AIMessage", "ToolMessage", "HumanMessage"]


async def test_arguments_the_tool_cannot_take_are_answered_with_the_error(
        factory: list[RecordingFake]) -> None:
    text = AGREEMENT.read_text()
    missing = AIMessage(content="", usage_metadata=USAGE, tool_calls=[{
        "name": "propose_clause", "id": "call-1", "args": {"clause_type": "audit_rights"}}])
    model = fake([missing, AIMessage(content="done", usage_metadata=USAGE)])
    factory.append(model)
    outcome = await run_clause_agent(text, ["audit_rights"], 1, {}, run_id="r", node="n")
    assert outcome.error is None and outcome.calls == 2 and not outcome.candidates
    assert str(model.prompts[1][-1].content).startswith("error: ValidationError")


# --- the clause-extraction subgraph and the run's result ---------------------------------------


async def extract(text: str) -> dict[str, Any]:
    state = {"text": text, "options": DueDiligenceOptions().model_dump(mode="json")}
    ingested = (await ingestion(state))["ingestion"]
    graph = build_clause_extraction_graph().compile()
    out = await graph.ainvoke({"ingestion": ingested, "options": state["options"],
                               "run_id": "run-1"})
    return {"ingestion": ingested, "clauses": out["clauses"]}


async def test_a_model_that_gave_nothing_leaves_the_label_rules(
        factory: list[RecordingFake]) -> None:
    factory.append(fake(prose()))
    state = await extract(AGREEMENT.read_text())
    clauses, text = state["clauses"], state["ingestion"]["text"]
    found = [f for f in clauses["findings"] if f["status"] == "found"]
    assert len(found) >= 5 and {f["strategy"] for f in found} == {"rules"}
    assert all(text[f["start"]:f["end"]] == f["quote"] for f in found)
    assert clauses["strategy"] == "rules" and clauses["strategies"] == ["rules"]
    # one fallback per search step, with why; at most one re-ask each (2 calls per step)
    steps = [(f["step"], f["code"]) for f in clauses["fallbacks"]]
    assert steps == [(n, "llm_malformed_response") for n in range(1, clauses["attempts"] + 1)]
    assert clauses["fallbacks"][0]["node"] == "clause_extraction/initial_search"
    assert all("called no tool" in f["message"] for f in clauses["fallbacks"])
    assert len(factory[0].prompts) == 2 * clauses["attempts"]

    from activities.due_diligence.pipeline import PIPELINE

    result = PIPELINE.run.result(state)
    assert result["output"] == state and result["strategies"] == ["rules"]
    assert result["fallbacks"] == clauses["fallbacks"]
    report = render_report(state)
    assert "Findings by: rules." in report and "llm_malformed_response" in report


async def test_a_verified_model_quote_makes_the_label_mixed(
        factory: list[RecordingFake]) -> None:
    text = AGREEMENT.read_text()
    factory.append(fake(cycle([propose_audit(text), AIMessage(content="done")])))
    state = await extract(text)
    clauses, model = state["clauses"], f"llm:{model_name()}"
    by_type = {f["clause_type"]: f for f in clauses["findings"] if f["status"] == "found"}
    assert by_type["audit_rights"]["strategy"] == model
    assert {f["strategy"] for t, f in by_type.items() if t != "audit_rights"} == {"rules"}
    assert clauses["strategies"] == ["rules", model]
    assert clauses["strategy"] == f"rules+{model}"
    assert clauses["fallbacks"] == []

    from activities.due_diligence.pipeline import PIPELINE

    result = PIPELINE.run.result(state)
    assert result["strategies"] == ["rules", model] and result["fallbacks"] == []


async def test_offline_the_label_is_rules_and_nothing_fell_back() -> None:
    state = await extract(AGREEMENT.read_text())
    clauses = state["clauses"]
    assert clauses["strategy"] == "rules" and clauses["strategies"] == ["rules"]
    assert clauses["fallbacks"] == [] and "rejected" not in clauses


async def test_a_real_run_records_the_fallbacks_in_its_result_and_final_event(
        dev_server: Any, db: Any, task_queue: str, factory: list[RecordingFake]) -> None:
    from overseer.settings import Settings
    from overseer.store.events import fetch_events
    from services.worker.main import build_worker

    factory.append(fake(prose()))
    client = dev_server.client
    settings = Settings(environment="test", task_queue=task_queue)
    async with build_worker(client, task_queue=task_queue):
        run = await submit_agreement(db, client, settings, metadata={"require_signoff": False})
        done = await client.get_workflow_handle(f"due_diligence-{run.run_id}").result()
    assert done["status"] == "completed", done
    result, clauses = done["result"], done["output"]["clauses"]
    assert result["strategies"] == ["rules"] and clauses["strategy"] == "rules"
    assert [f["code"] for f in result["fallbacks"]] == \
        ["llm_malformed_response"] * clauses["attempts"]
    async with db.acquire() as conn:
        events = await fetch_events(conn, run.run_id)
    final = next(e for e in events if e["type"] == "run.completed")
    assert final["data"]["snapshot"]["fallbacks"] == result["fallbacks"]
    assert final["data"]["snapshot"]["strategies"] == ["rules"]
    # each search step: the prose and its one re-ask, both failed calls in the ledger
    calls = [e["data"] for e in events if e["type"] == "llm.called"]
    assert len(calls) == 2 * clauses["attempts"]
    assert {(c["outcome"], c["error_code"]) for c in calls} == \
        {("error", "llm_malformed_response")}
