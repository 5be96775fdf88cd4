"""Thematic analysis error policy (seed 002 R5) through SegmentRunWorkflow on the dev server.

Only the model is faked (a langchain-core ``GenericFakeChatModel`` set through the LLM
layer's factory); every failure below is the pipeline's own reaction to it:

- one coder whose model times out on every call: Temporal retries the coders' step (an
  activity of its own, with the coder's attempts) with exponential backoff, and each retry
  runs that coder only (LangGraph keeps the other coders' writes); after exactly 3 attempts
  (counted from the ``llm.called`` ledger and the history) it codes with the rules, and the
  run completes with a ``fallbacks`` entry naming it and why (R5.1, R5.6);
- every coder refused for the run's LLM budget: the code aggregator has nothing to merge
  and fails the run, with a failed checkpoint in the event log (R5.2, R4.4);
- every theme coder's model timing out on every attempt: each gets its 3 attempts, then
  proposes with the rules; the run completes with themes (a model that is down costs no
  result; the theme aggregator's own failure, R5.5, is tests/unit/test_thematic_graph.py's).

(A model answering prose instead of JSON no longer fails anything: the step re-asks once,
then uses the rules; issue 28 item 5, tests/unit/test_thematic_model_fallback.py.)
"""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import WorkflowFailureError

from overseer.runtime import llm
from tests.workflows.llm_support import llm_settings
from tests.workflows.test_thematic_stack import (
    IDENTITY_IDS,
    THEME_PROMPT,
    completed_nodes,
    events,
    identity_prompt,
    model_reply,
    prompted_model,
    run_answered,
    segment_timeline,
    submit,
)


async def test_one_coder_uses_the_rules_after_exactly_three_attempts_and_the_run_completes(
        dev_server, worker, db, task_queue):
    reply = model_reply()
    failing = identity_prompt("outcomes", "coder")

    def answer(system: str) -> str:
        if failing in system:
            raise TimeoutError("model timed out")
        return reply

    run_id, result = await run_answered(db, dev_server.client, task_queue, answer)

    assert result["status"] == "completed" and result["outcome"] == "themes"
    out = result["output"]
    assert out["errors"] == []
    assert [(f["node"], f["identity_id"], f["stage"], f["code"], f["strategy"])
            for f in out["fallbacks"]] == [("coder", "outcomes", "coding", "llm_unavailable",
                                            "rules")]
    assert sorted((r["identity_id"], r["strategy"]) for r in out["coder_results"]) == [
        ("experience", "llm"), ("outcomes", "rules"), ("practicalities", "llm")]
    assert out["themes"]  # the run went on, the failing coder's codes from the rules

    # Attempts counted, not assumed: one ledger event per attempt of the failing coder ...
    calls = [e for e in await events(db, run_id, "llm.called")
             if e["data"]["node"] == "coder:outcomes"]
    assert [(c["data"]["attempt"], c["data"]["outcome"], c["data"]["error_code"])
            for c in calls] == [(i, "error", "llm_unavailable") for i in (1, 2, 3)]
    # ... spaced by Temporal's exponential backoff (1 s, then 2 s) ...
    first_gap, second_gap = ((b["occurred_at"] - a["occurred_at"]).total_seconds()
                             for a, b in zip(calls, calls[1:], strict=False))
    assert first_gap >= 0.9 and second_gap >= 1.8 and second_gap > first_gap
    # ... and the history: the coders' step left the segment as one activity with the
    # coder's options (its attempts, time-out, heartbeat); it closed on its 3rd attempt as a
    # completion (the rules coded instead, the run is not failed), and that attempt ran the
    # failing coder only: LangGraph kept the writes of the coders that had finished.
    timeline = await segment_timeline(
        dev_server.client.get_workflow_handle(f"thematic_analysis-{run_id}"))
    (step,) = [a for a in timeline if "coder" in a["nodes"]]
    assert step["one_step"] and step["summary"].startswith("node coders")
    assert step["attempt"] == 3 and step["completed"] and step["nodes"] == ["coder"]
    completed = [e["attempt"] for e in await completed_nodes(db, run_id) if e["node"] == "coder"]
    assert sorted(completed) == [1, 1, 3]
    # the other identities' coders each called the model once and succeeded
    ok = [e["data"] for e in await events(db, run_id, "llm.called")
          if e["data"]["node"].startswith("coder:") and e["data"]["outcome"] == "ok"]
    assert sorted(c["node"] for c in ok) == ["coder:experience", "coder:practicalities"]


async def test_code_aggregator_failing_fails_the_run_with_a_failed_checkpoint(
        dev_server, worker, db, task_queue):
    reply = model_reply()

    with llm_settings():
        llm.set_chat_model_factory(prompted_model(lambda system: reply))
        # 50 tokens: every coder's call would pass the budget, so none is sent
        run_id, handle = await submit(db, dev_server.client, task_queue, llm_budget_tokens=50)
        with pytest.raises(WorkflowFailureError):
            await handle.result()

    (failed,) = await events(db, run_id, "run.failed")
    assert failed["data"]["error"]["code"] == "coding_failed"
    assert failed["data"]["error"]["node"] == "code_aggregator"
    assert "llm_budget_exceeded" in failed["data"]["error"]["message"]  # one clear error
    (checkpoint,) = await events(db, run_id, "checkpoint.recorded")
    assert checkpoint["data"]["stage"] == "code_aggregator"
    assert checkpoint["data"]["status"] == "failed"
    assert checkpoint["data"]["analysis_id"] == run_id and checkpoint["data"]["created_at"]
    assert checkpoint["data"]["error"]["code"] == "coding_failed"
    row = await db.fetchrow("SELECT status FROM runs WHERE run_id = $1", uuid.UUID(run_id))
    assert row["status"] == "failed"
    timeline = await segment_timeline(handle)
    # each coder's failure was tolerated: the coders' step completed on its first attempt
    assert timeline[1]["nodes"] == ["coder"] * len(IDENTITY_IDS)
    assert timeline[1]["completed"] and timeline[1]["attempt"] == 1
    # the aggregator's error is permanent: its segment failed on its first attempt
    assert len(timeline) == 3 and not timeline[2]["completed"] and timeline[2]["attempt"] == 1
    nodes = [e["node"] for e in await completed_nodes(db, run_id)]
    assert nodes == ["load_dataset", *["coder"] * len(IDENTITY_IDS)]


async def test_every_theme_coder_timing_out_proposes_with_the_rules_after_three_attempts(
        dev_server, worker, db, task_queue):
    reply = model_reply()

    def answer(system: str) -> str:
        if THEME_PROMPT in system:
            raise TimeoutError("model timed out")
        return reply

    with llm_settings():
        llm.set_chat_model_factory(prompted_model(answer))
        run_id, handle = await submit(db, dev_server.client, task_queue)
        result = await handle.result()

    assert result["status"] == "completed" and result["outcome"] == "themes"
    out = result["output"]
    assert out["errors"] == [] and out["themes"]
    assert sorted((f["node"], f["identity_id"], f["code"]) for f in out["fallbacks"]) == [
        ("theme_coder", i, "llm_unavailable") for i in IDENTITY_IDS]
    assert {t["strategy"] for t in out["themes"]} == {"rules"}
    checkpoints = [(c["data"]["stage"], c["data"]["status"])
                   for c in await events(db, run_id, "checkpoint.recorded")]
    assert checkpoints == [("coding_complete", "in_progress"), ("theme_complete", "completed")]
    # every theme coder got its 3 attempts (the step retried with backoff, all three failing
    # each time), then used the rules: the step completed on its 3rd attempt
    for identity in IDENTITY_IDS:
        assert [e["data"]["attempt"] for e in await events(db, run_id, "llm.called")
                if e["data"]["node"] == f"theme_coder:{identity}"] == [1, 2, 3]
    timeline = await segment_timeline(handle)
    (step,) = [a for a in timeline if "theme_coder" in a["nodes"]]
    assert step["nodes"] == ["theme_coder"] * len(IDENTITY_IDS)
    assert step["completed"] and step["attempt"] == 3
    row = await db.fetchrow("SELECT status FROM runs WHERE run_id = $1", uuid.UUID(run_id))
    assert row["status"] == "completed"


async def test_the_attempts_option_is_honoured_and_a_coder_never_fails_the_run(
        dev_server, worker, db, task_queue, monkeypatch):
    """``llm_max_attempts`` (OVERSEER_THEMATIC_ANALYSIS__LLM_MAX_ATTEMPTS) above the default:
    the coder gets that many attempts, then codes with the rules."""
    monkeypatch.setenv("OVERSEER_THEMATIC_ANALYSIS__LLM_MAX_ATTEMPTS", "4")
    reply = model_reply()
    failing = identity_prompt("experience", "coder")

    def answer(system: str) -> str:
        if failing in system:
            raise TimeoutError("model timed out")
        return reply

    run_id, result = await run_answered(db, dev_server.client, task_queue, answer)

    assert result["status"] == "completed", result
    assert result["output"]["errors"] == []
    assert [(f["node"], f["identity_id"], f["code"]) for f in result["output"]["fallbacks"]] == [
        ("coder", "experience", "llm_unavailable")]
    calls = [e["data"]["attempt"] for e in await events(db, run_id, "llm.called")
             if e["data"]["node"] == "coder:experience"]
    assert calls == [1, 2, 3, 4]
