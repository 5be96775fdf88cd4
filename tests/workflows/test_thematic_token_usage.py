"""Thematic analysis ``token_usage`` is the run's LLM ledger (seed 002 R8) through the stack.

A langchain-core fake chat model is configured through the project's LLM layer
(``overseer.runtime.llm.set_chat_model_factory``, priced as ``gpt-4o-mini``); its usage depends on
each prompt, so every call's tokens differ. One theme coder's model answers prose, to the
re-ask too: both calls fail (the step proposes with the rules) but their tokens were spent,
and the ledger (``llm.called``) counts them.
The run's ``token_usage`` must equal the sums of the ledger events, overall and per node,
and the API's ``llm_usage`` read model built from the same events.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

import pytest

from services.api.readmodels import llm_usage
from tests.workflows.test_thematic_stack import (
    IDENTITY_IDS,
    events,
    identity_prompt,
    model_reply,
    run_answered,
)


async def test_token_usage_equals_the_sum_of_the_llm_called_events(
        dev_server, worker, db, task_queue):
    reply = model_reply()
    prose = identity_prompt("practicalities", "theme_coder")

    def answer(system: str) -> str:
        return "Two themes: getting the coffee, and money." if prose in system else reply

    run_id, result = await run_answered(db, dev_server.client, task_queue, answer,
                                        llm_model="gpt-4o-mini")

    assert result["status"] == "completed", result
    out = result["output"]
    assert out["strategy"] == "llm"
    assert out["errors"] == []
    assert [(f["node"], f["identity_id"], f["code"]) for f in out["fallbacks"]] == [
        ("theme_coder", "practicalities", "llm_malformed_response")]

    ledger = [e["data"] for e in await events(db, run_id, "llm.called")]
    # a coder and a theme coder per identity, and the prose theme coder's one re-ask
    assert len(ledger) == 2 * len(IDENTITY_IDS) + 1
    assert len({c["input_tokens"] for c in ledger}) > 1  # usage really differs per call
    failed = [c for c in ledger if c["outcome"] == "error"]
    assert [(c["node"], c["error_code"]) for c in failed] == [
        ("theme_coder:practicalities", "llm_malformed_response")] * 2
    assert all(c["input_tokens"] > 0 for c in failed)  # the failed calls were billed

    usage = out["token_usage"]
    assert usage["prompt_tokens"] == sum(c["input_tokens"] for c in ledger)
    assert usage["completion_tokens"] == sum(c["output_tokens"] for c in ledger)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["calls"] == len(ledger) and usage["failed_calls"] == len(failed) == 2
    assert usage["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in ledger), abs=1e-8)
    assert usage["cost_usd"] > 0  # gpt-4o-mini has a price

    per_node: dict[str, dict[str, int]] = defaultdict(lambda: {"prompt_tokens": 0,
                                                               "completion_tokens": 0, "calls": 0})
    for call in ledger:
        per_node[call["node"]]["prompt_tokens"] += call["input_tokens"]
        per_node[call["node"]]["completion_tokens"] += call["output_tokens"]
        per_node[call["node"]]["calls"] += 1
    assert {node: {k: v[k] for k in ("prompt_tokens", "completion_tokens", "calls")}
            for node, v in usage["by_node"].items()} == dict(per_node)

    api = (await llm_usage(db, uuid.UUID(run_id)))["total"]
    assert (api["input_tokens"], api["output_tokens"], api["calls"]) == (
        usage["prompt_tokens"], usage["completion_tokens"], usage["calls"])
    assert api["cost_usd"] == pytest.approx(usage["cost_usd"], abs=1e-8)
