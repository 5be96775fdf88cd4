"""Thematic analysis (seed 002 §R3 long-term flow) through the real stack.

The run is started by the run service (``overseer.runs.submit_run``: upload stored in
Postgres, ``run.submitted`` recorded), driven as segments by ``SegmentRunWorkflow`` on the
Temporal dev server with the real worker, and checked from the workflow history and the
event log: ``load_dataset`` in the first segment; one coder per identity (``Send``), all in
one superstep that leaves the segment as its own activity with the coder's options, in
flight together; the code aggregator only after every coder, then the reviewer; the
codebook review as an approval whose edits the themes honour; one theme coder per identity,
in parallel, in an activity of their own; the theme aggregator and ``finish`` last.

This module also holds the helpers the other ``test_thematic_*`` workflow tests use.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from activities.thematic_analysis import dataset
from activities.thematic_analysis.coding import code_id
from activities.thematic_analysis.identities import load_identities
from activities.thematic_analysis.llm_steps import CODER_INSTRUCTIONS, THEME_INSTRUCTIONS
from overseer.run_types import DecisionInput
from overseer.runs import Upload, submit_run
from overseer.runtime import llm
from overseer.settings import Settings
from tests.helpers import assert_eventually
from tests.workflows.llm_support import llm_settings
from workflows.segment_run import SegmentRunWorkflow

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "thematic_analysis" / "reviews.csv"
WINDOW = {"account_id": "brewbox", "start_date": "2024-01-01", "end_date": "2024-04-30"}
IDENTITIES = {i.id: i for i in load_identities(None)}
IDENTITY_IDS = sorted(IDENTITIES)
CODER_PROMPT = CODER_INSTRUCTIONS[:40]
THEME_PROMPT = THEME_INSTRUCTIONS[:40]


# --- helpers shared by the thematic workflow tests ------------------------------------------


def example_corpus() -> dataset.Corpus:
    """The example upload's window, split into quotable sentences (pure, as the nodes do)."""
    rows = dataset.window(dataset.parse_dataset(EXAMPLE.read_bytes(), "reviews.csv"),
                          WINDOW["account_id"], WINDOW["start_date"], WINDOW["end_date"])
    return dataset.build_corpus(rows)


def model_reply() -> str:
    """What the fake model answers a coder and a theme coder: three codes citing real quote ids
    of the example window (three each, so the reviewer keeps them) and two themes over them."""
    quotes = example_corpus().quote_ids
    labels = ["Delivery delays", "Fresh beans", "Price increases"]
    codes = [{"label": label, "definition": f"Reviews about {label.lower()}.",
              "quote_ids": quotes[3 * i: 3 * i + 3]} for i, label in enumerate(labels)]
    themes = [{"name": "Getting the coffee", "description": "Delivery and freshness.",
               "code_ids": [code_id(labels[0]), code_id(labels[1])]},
              {"name": "Money", "description": "What it costs.", "code_ids": [code_id(labels[2])]}]
    return json.dumps({"codes": codes, "themes": themes})


def identity_prompt(identity_id: str, stage: str) -> str:
    """A marker found only in the system prompt of ``identity_id``'s coder or theme coder."""
    return f"{IDENTITIES[identity_id].prompt_prefix.strip()}\n\n" + (
        CODER_PROMPT if stage == "coder" else THEME_PROMPT)


class PromptedFakeChatModel(GenericFakeChatModel):
    """langchain-core's ``GenericFakeChatModel`` whose reply depends on the prompt.

    ``answer(system_prompt)`` returns the reply text, or raises as a client would (a
    ``TimeoutError`` is a transient failure for the LLM layer). Usage is counted from the
    text: ~4 characters a token in, the reply's length out, so every call's tokens differ.
    """

    answer: Callable[[str], str]

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
                  ) -> ChatResult:
        reply = self.answer(str(messages[0].content))
        prompt_tokens = sum(len(str(m.content)) for m in messages) // 4
        self.messages = iter([AIMessage(content=reply, usage_metadata={
            "input_tokens": prompt_tokens, "output_tokens": len(reply) // 4 + 1,
            "total_tokens": prompt_tokens + len(reply) // 4 + 1})])
        return super()._generate(messages, stop, run_manager, **kwargs)


def prompted_model(answer: Callable[[str], str]) -> Callable[[Settings, str], PromptedFakeChatModel]:
    """A chat-model factory for ``overseer.runtime.llm.set_chat_model_factory`` (one model per call)."""
    def factory(settings: Settings, model: str) -> PromptedFakeChatModel:
        return PromptedFakeChatModel(messages=iter(()), answer=answer)
    return factory


async def submit(pool: asyncpg.Pool, client: Client, task_queue: str, *,
                 data: bytes | None = None, **metadata: Any) -> tuple[str, WorkflowHandle[Any, Any]]:
    """Start a thematic_analysis run as the API does (upload stored, run.submitted, workflow)."""
    settings = Settings(environment="test", task_queue=task_queue)
    submitted = await submit_run(
        pool, client, settings, pipeline_name="thematic_analysis", subject="tester",
        metadata={**WINDOW, **metadata},
        upload=Upload(data if data is not None else EXAMPLE.read_bytes(), "reviews.csv",
                      "text/csv"))
    return submitted.run_id, client.get_workflow_handle(f"thematic_analysis-{submitted.run_id}")


async def run_answered(pool: asyncpg.Pool, client: Client, task_queue: str,
                       answer: Callable[[str], str], **settings: Any) -> tuple[str, Any]:
    """A run of the README example to its result, every model call answered by ``answer``.

    ``answer`` gets the call's system prompt; ``settings`` override the activity runtime's
    for the run (a model configured, so the coders ask it). Returns ``(run_id, result)``.
    """
    with llm_settings(**settings):
        llm.set_chat_model_factory(prompted_model(answer))
        run_id, handle = await submit(pool, client, task_queue)
        return run_id, await handle.result()


async def events(pool: asyncpg.Pool, run_id: str, kind: str | None = None) -> list[dict[str, Any]]:
    """The run's events (``{type, data, occurred_at}``) in append order, optionally one type."""
    rows = await pool.fetch("SELECT type, data, occurred_at FROM events WHERE run_id = $1 "
                            "ORDER BY seq", uuid.UUID(run_id))
    out = [{"type": r["type"], "data": json.loads(r["data"]), "occurred_at": r["occurred_at"]}
           for r in rows]
    return [e for e in out if kind is None or e["type"] == kind]


async def segment_timeline(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    """Every ``run_segment`` activity of the run from its history, in schedule order.

    Each: ``summary`` (the Temporal UI's: ``segment: …``, or ``node <summary>`` for a step
    that left the segment with its node's options), ``one_step``, ``attempt`` (the attempt
    that closed it: the history records the last one), ``scheduled`` / ``closed`` event ids,
    ``completed`` (False: failed) and ``nodes``, the nodes its closing attempt ran (from its
    result; none when it failed).
    """
    history = await handle.fetch_history()
    scheduled: dict[int, dict[str, Any]] = {}
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name != "run_segment":
                continue
            call = json.loads(attrs.input.payloads[0].data)
            summary = event.user_metadata.summary
            scheduled[event.event_id] = {
                "summary": json.loads(summary.data) if summary.data else None,
                "one_step": call["one_step"], "scheduled": event.event_id, "attempt": None,
                "closed": None, "completed": None, "nodes": []}
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs = event.activity_task_started_event_attributes
            if attrs.scheduled_event_id in scheduled:
                scheduled[attrs.scheduled_event_id]["attempt"] = attrs.attempt
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            attrs = event.activity_task_completed_event_attributes
            if attrs.scheduled_event_id in scheduled:
                scheduled[attrs.scheduled_event_id].update(
                    closed=event.event_id, completed=True,
                    nodes=json.loads(attrs.result.payloads[0].data)["nodes"])
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            attrs = event.activity_task_failed_event_attributes
            if attrs.scheduled_event_id in scheduled:
                scheduled[attrs.scheduled_event_id].update(closed=event.event_id,
                                                           completed=False)
    return list(scheduled.values())


async def completed_nodes(pool: asyncpg.Pool, run_id: str) -> list[dict[str, Any]]:
    """The run's ``node.completed`` events' data, in order (node, attempt, task id, placement)."""
    return [e["data"] for e in await events(pool, run_id, "node.completed")]


async def wait_for_approval(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """The open approval of a run once it waits for a decision."""
    async def waiting() -> dict[str, Any]:
        view = await handle.query(SegmentRunWorkflow.get_status)
        assert view.status == "awaiting_approval" and view.approval, view.status
        return dict(view.approval)
    return await assert_eventually(waiting, timeout=60)


# --- §R3 long-term flow -------------------------------------------------------------------


async def test_long_term_flow_runs_every_stage_in_order_with_parallel_coders(
        dev_server, worker, db, task_queue):
    run_id, handle = await submit(db, dev_server.client, task_queue)
    result = await handle.result()
    assert result["status"] == "completed" and result["outcome"] == "themes"
    out = result["output"]

    timeline = await segment_timeline(handle)
    # R3.1 / R3.5: one coder and one theme coder per identity, each fan-out one superstep
    # that leaves the segment as one activity with the node's options (LangGraph runs a
    # superstep's tasks together; test_coders_of_one_step_are_in_flight_together shows it);
    # R3.2-R3.6: every stage runs only after the one before it, each activity scheduled
    # after the one before it closed, each on its first attempt.
    coders, theme_coders = ["coder"] * len(IDENTITY_IDS), ["theme_coder"] * len(IDENTITY_IDS)
    assert [a["nodes"] for a in timeline] == [
        ["load_dataset"], coders, ["code_aggregator", "reviewer"], theme_coders,
        ["theme_aggregator", "finish"]]
    assert [a["one_step"] for a in timeline] == [False, True, False, True, False]
    assert [a["summary"] for a in timeline] == [
        "segment: start", "node coders: code the window, one per identity", "segment: go on",
        "node theme coders: group the codes, one per identity", "segment: go on"]
    assert all(a["completed"] and a["attempt"] == 1 for a in timeline)
    assert all(a["closed"] < b["scheduled"] for a, b in zip(timeline, timeline[1:], strict=False))
    assert [e["node"] for e in await completed_nodes(db, run_id)] == [
        "load_dataset", *coders, "code_aggregator", "reviewer", *theme_coders,
        "theme_aggregator", "finish"]

    # The aggregator got every coder's output; the reviewer's codebook feeds the themes.
    assert sorted(r["identity_id"] for r in out["coder_results"]) == IDENTITY_IDS
    coded = {i for c in out["codebook"] for i in c["identities"]}
    assert coded == set(IDENTITY_IDS)
    assert sorted({p["identity_id"] for p in out["theme_proposals"]}) == IDENTITY_IDS
    code_ids = {c["code_id"] for c in out["codebook"]}
    assert out["themes"] and all(set(t["code_ids"]) <= code_ids for t in out["themes"])
    assert out["errors"] == [] and out["strategy"] == "rules"

    # R4: both checkpoints, in the state and in the event log, in stage order.
    checkpoints = await events(db, run_id, "checkpoint.recorded")
    assert [(c["data"]["stage"], c["data"]["status"]) for c in checkpoints] == [
        ("coding_complete", "in_progress"), ("theme_complete", "completed")]
    assert [c["persisted"] for c in out["checkpoints"]] == [True, True]
    assert checkpoints[1]["data"]["themes"] == len(out["themes"])

    # Every theme quote is a sentence of a review in the window (ids in state, text by id).
    corpus = example_corpus()
    assert all(q in corpus.text for t in out["themes"] for q in t["quote_ids"])


async def test_coders_of_one_step_are_in_flight_together(dev_server, worker, db, task_queue):
    """The coders (and the theme coders) of a step call the model at the same time.

    The fake model answers a coder only once every coder of the step is waiting for it (a
    barrier of one party per identity, 30 s at most): coders run in turn would break it,
    and each would record an error instead of codes.
    """
    reply = model_reply()
    coders, theme_coders = (threading.Barrier(len(IDENTITY_IDS), timeout=30) for _ in "ab")

    def answer(system: str) -> str:
        (coders if CODER_PROMPT in system else theme_coders).wait()
        return reply

    run_id, result = await run_answered(db, dev_server.client, task_queue, answer)
    assert result["status"] == "completed" and result["outcome"] == "themes"
    assert result["output"]["errors"] == []
    ok = sorted(e["data"]["node"] for e in await events(db, run_id, "llm.called")
                if e["data"]["outcome"] == "ok")
    assert ok == sorted(f"{stage}:{i}" for stage in ("coder", "theme_coder") for i in IDENTITY_IDS)


async def test_codebook_review_edits_reach_the_themes(dev_server, worker, db, task_queue):
    run_id, handle = await submit(db, dev_server.client, task_queue, review_codebook=True)
    approval = await wait_for_approval(handle)
    payload = approval["payload"]
    assert payload["kind"] == "codebook_review"
    # themes wait for the reviewer: the segment after the coders ended at the interrupt
    assert [a["nodes"] for a in await segment_timeline(handle)] == [
        ["load_dataset"], ["coder"] * len(IDENTITY_IDS), ["code_aggregator", "reviewer"]]
    assert "theme_coder" not in {e["node"] for e in await completed_nodes(db, run_id)}
    ids = [c["code_id"] for c in payload["codebook"]]
    assert len(ids) >= 3
    keep, absorbed, dropped = ids[0], ids[1], ids[2]
    await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="approve", decided_by="reviewer:ann", note="tidy",
        updates={"merge": [[keep, absorbed]], "rename": {keep: "Renamed by a human"},
                 "delete": [dropped]}))
    result = await handle.result()
    assert result["status"] == "completed" and result["outcome"] == "themes"
    out = result["output"]
    codebook = {c["code_id"]: c for c in out["codebook"]}
    assert codebook[keep]["label"] == "Renamed by a human"
    assert absorbed not in codebook and dropped not in codebook
    # the theme coders worked on the edited codebook: no theme names a removed code
    assert out["themes"]
    for theme in out["themes"]:
        assert absorbed not in theme["code_ids"] and dropped not in theme["code_ids"]
    assert all(set(p["code_ids"]) <= set(codebook) for p in out["theme_proposals"])
    decided = await events(db, run_id, "approval.decided")
    assert len(decided) == 1


# --- routing (seed R7) ---------------------------------------------------------------------


async def test_empty_window_completes_without_a_coding_or_theme_stage(
        dev_server, worker, db, task_queue):
    run_id, handle = await submit(db, dev_server.client, task_queue,
                                  start_date="2030-01-01", end_date="2030-12-31")
    result = await handle.result()
    assert result["status"] == "completed" and result["outcome"] == "no_codes"
    assert result["output"]["codebook"] == [] and result["output"]["themes"] == []
    # no coder and no theme coder: the run is one segment, no node leaves it
    assert [a["nodes"] for a in await segment_timeline(handle)] == [
        ["load_dataset", "code_aggregator", "reviewer", "finish"]]
    assert [(c["data"]["stage"], c["data"]["codes"]) for c in
            await events(db, run_id, "checkpoint.recorded")] == [("coding_complete", 0)]


async def test_theme_coders_proposing_nothing_propose_with_the_rules(
        dev_server, worker, db, task_queue):
    """An empty theme list over a codebook the rules would group is no answer: asked once
    more, then each theme coder proposes with the rules; the run never ends without themes."""
    codes = model_reply()

    def answer(system: str) -> str:
        return codes if CODER_PROMPT in system else json.dumps({"themes": []})

    run_id, result = await run_answered(db, dev_server.client, task_queue, answer)
    assert result["status"] == "completed" and result["outcome"] == "themes"
    out = result["output"]
    assert out["codebook"] and out["themes"] and out["errors"] == []
    assert sorted((f["node"], f["code"]) for f in out["fallbacks"]) == [
        ("theme_coder", "llm_malformed_response")] * len(IDENTITY_IDS)
    assert [(c["data"]["stage"], c["data"]["status"]) for c in
            await events(db, run_id, "checkpoint.recorded")] == [
        ("coding_complete", "in_progress"), ("theme_complete", "completed")]
