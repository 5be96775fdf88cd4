"""The clause agent with a model (issue 13): the same tools, every quote verified.

A langchain-core fake chat model (the only fake allowed) plays a ReAct agent inside a real
due_diligence run on the Temporal dev server with Postgres: it reads the search tool, then
proposes one quote copied from the agreement and one it made up. The verbatim one becomes
the finding (its ``strategy`` names the model, ``clauses.strategy`` says the findings are
mixed); the invented one is rejected and appears in no finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import cycle
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from activities.due_diligence.agent import _settings, run_clause_agent, verify_quote
from activities.due_diligence.text import sentences
from overseer.runtime import llm
from overseer.settings import Settings
from overseer.store.events import fetch_events
from services.worker.main import build_worker
from tests.helpers import AGREEMENT, assert_eventually, submit_agreement

INVENTED = ("Licensee shall indemnify Crunchbase against every claim of any kind whatsoever "
            "arising anywhere in the universe.")


class ToolCallingFake(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts tools (the scripted replies carry the calls)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:  # type: ignore[override]
        """Tools are ignored: the replies are scripted."""
        return self


def audit_sentence(text: str) -> str:
    """The agreement's own audit sentence (found by reading the text, not typed in)."""
    return next(text[s.start:s.end] for s in sentences(text)
                if re.search(r"\bmay\s+audit\b", text[s.start:s.end]))


def scripted_agent(text: str) -> Iterator[AIMessage]:
    """Turn 1: search, then propose a verbatim and an invented quote; turn 2: done."""
    usage = {"input_tokens": 300, "output_tokens": 60, "total_tokens": 360}
    calls = [
        {"name": "search_clauses", "args": {"clause_type": "audit_rights", "query": "audit"},
         "id": "call-1"},
        {"name": "propose_clause", "args": {"clause_type": "audit_rights",
                                            "quote": " ".join(audit_sentence(text).split())},
         "id": "call-2"},
        {"name": "propose_clause", "args": {"clause_type": "indemnification",
                                            "quote": INVENTED}, "id": "call-3"},
    ]
    return cycle([AIMessage(content="", tool_calls=calls, usage_metadata=usage),
                  AIMessage(content="done", usage_metadata=usage)])


@pytest.fixture
def fake_model() -> Iterator[None]:
    """Every chat model the LLM layer makes is the scripted tool-calling fake."""
    replies = scripted_agent(AGREEMENT.read_text())
    llm.set_chat_model_factory(lambda settings, model: ToolCallingFake(messages=replies))
    try:
        yield
    finally:
        llm.set_chat_model_factory(None)


def test_verify_quote_keeps_a_verbatim_quote_and_drops_an_invented_one() -> None:
    text = AGREEMENT.read_text()
    sentence = audit_sentence(text)
    cand, reason = verify_quote(text, "audit_rights", " ".join(sentence.split()))
    assert reason == "ok" and cand is not None
    assert text[cand["start"]:cand["end"]] == cand["quote"] == sentence
    assert verify_quote(text, "indemnification", INVENTED) == \
        (None, "quote not found verbatim in the agreement")
    # Verbatim but not the clause type proposed: refused like an offline candidate.
    assert verify_quote(text, "governing_law", sentence)[0] is None


async def test_offline_the_agent_does_not_run() -> None:
    text = AGREEMENT.read_text()
    outcome = await run_clause_agent(text, ["audit_rights"], 1, {}, run_id="r", node="n")
    assert outcome.strategy is None and outcome.calls == 0 and not outcome.candidates


async def test_model_quotes_are_verified_in_a_real_run(dev_server, db, task_queue,
                                                       fake_model) -> None:
    client = dev_server.client
    settings = Settings(environment="test", task_queue=task_queue)
    text = AGREEMENT.read_text()
    async with build_worker(client, task_queue=task_queue):
        run = await submit_agreement(db, client, settings, metadata={"require_signoff": False})
        handle = client.get_workflow_handle(f"due_diligence-{run.run_id}")
        result = await handle.result()
    assert result["status"] == "completed", result
    model = llm.select_model("extraction", _settings()).model
    clauses = result["output"]["clauses"]
    ingested = result["output"]["ingestion"]["text"]
    # mixed: the model's audit quote, the rules' other findings (issue 28 item 5)
    assert clauses["strategy"] == f"rules+llm:{model}"
    assert clauses["strategies"] == result["result"]["strategies"] == ["rules", f"llm:{model}"]
    assert clauses["fallbacks"] == result["result"]["fallbacks"] == []

    audit = next(f for f in clauses["findings"] if f["clause_type"] == "audit_rights")
    assert audit["status"] == "found" and audit["strategy"] == f"llm:{model}"
    assert audit["quote"] == ingested[audit["start"]:audit["end"]] == audit_sentence(ingested)

    quotes = [q for f in clauses["findings"] if f["status"] == "found"
              for q in [f["quote"], *(s["quote"] for s in f["supporting"])]]
    assert all(INVENTED not in q for q in quotes)
    assert {"clause_type": "indemnification", "quote": INVENTED,
            "reason": "quote not found verbatim in the agreement", "attempt": 1} \
        in clauses["rejected"]
    indemnity = next(f for f in clauses["findings"] if f["clause_type"] == "indemnification")
    assert indemnity["strategy"] == "rules" and indemnity["quote"] in text.replace("\r\n", "\n")

    async with db.acquire() as conn:
        events = await fetch_events(conn, run.run_id)
    calls = [e for e in events if e["type"] == "llm.called"]
    assert calls and all(e["data"]["tool_calling"] and e["data"]["outcome"] == "ok"
                         for e in calls)


async def test_the_agents_model_calls_stop_the_run_at_its_llm_budget(dev_server, db, task_queue,
                                                                      fake_model) -> None:
    """The runtime's generic LLM budget gate covers the clause agent: no budget of its own.

    The agent calls the model through LangChain inside the run's segment, whose
    :class:`overseer.runtime.graph_nodes.UsageMeter` counts its tokens; once the request's
    ``metadata.llm_budget_tokens`` is passed, :class:`overseer.runtime.segment_guards.BudgetGuard`
    refuses the next chat-model call (``initial_search``'s second: the agent catches it and
    goes on with its rules) and stops the run before the next node starts. Each scripted
    reply reports 360 tokens (360 > 100).
    """
    from overseer.run_types import DecisionInput
    from workflows.segment_run import SegmentRunWorkflow

    client = dev_server.client
    settings = Settings(environment="test", task_queue=task_queue)
    async with build_worker(client, task_queue=task_queue):
        run = await submit_agreement(
            db, client, settings, metadata={"require_signoff": False, "llm_budget_tokens": 100})
        handle = client.get_workflow_handle(f"due_diligence-{run.run_id}")

        async def at_the_budget_stop() -> dict[str, Any]:
            view = await handle.query(SegmentRunWorkflow.get_status)
            assert view.status == "awaiting_approval" and view.approval, view.status
            return view.approval

        approval = await assert_eventually(at_the_budget_stop, timeout=120)
        payload = approval["payload"]
        assert payload["kind"] == "llm_budget"
        assert payload["node"] == "clause_extraction/validate_clauses"  # after the agent's step
        assert payload["budget"]["spent_tokens"] == 360 and payload["budget"]["calls"] == 1
        assert payload["budget"]["budget_tokens"] == 100
        done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", decided_by="ops", note="over budget"))
        assert (done.status, done.outcome) == ("rejected", "budget_denied")
        result = await handle.result()
    assert result["status"] == "rejected"
    output = result["output"]
    assert output["ingestion"]["text"] and "clauses" not in output  # stopped inside extraction
    async with db.acquire() as conn:
        events = await fetch_events(conn, run.run_id)
    assert [e["type"] for e in events].count("llm.called") == 2
