"""SegmentRunWorkflow on a real dev server and real Postgres: stream, sign-off, cancel, restart, replay."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from activities.pricing.catalog import load_catalog_file
from activities.pricing.chat_orchestrator import orchestrator_events
from activities.pricing.options import pricing_options
from activities.pricing.router import decide_route, resolve_scope
from activities.pricing.run import initial_state
from overseer.graph_codec import decode, encode
from overseer.run_types import DecisionInput, GraphRunInput
from overseer.runtime import llm
from overseer.settings import Settings
from overseer.store.artifacts import store_artifact
from overseer.store.events import RUN_SUBMITTED, NewEvent, append_events
from services.worker.main import WORKFLOWS, build_worker, workflow_runner
from tests.helpers import assert_eventually, event_types
from workflows.segment_run import SegmentRunWorkflow

COMPOSITE = "Propose Q1 pricing updates ensuring hierarchy; summarize"
HISTORIES = Path(__file__).parent / "histories"


async def pricing_input(pool, message: str = COMPOSITE, *, model: str = "rules",
                        plan: bool = True) -> GraphRunInput:
    """Snapshot the sample catalog and record ``run.submitted`` as the API does."""
    catalog = load_catalog_file()
    run_id = str(uuid.uuid4())
    route = decide_route(message, plan=plan)
    async with pool.acquire() as conn:
        await store_artifact(conn, catalog.to_csv(), kind="pricing_catalog", page_count=0,
                             filename="catalog.csv", content_type="text/csv")
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="test",
            data={"pipeline": "pricing", "workflow_id": f"pricing-{run_id}",
                  "submitted_by": "tester", "input": {"message": message}})])
    options = pricing_options(Settings(environment="test"))
    state = initial_state(
        run_id=run_id, message=message, plan=route.plan, route=route.to_dict(),
        scope=resolve_scope(message, catalog),
        catalog={"sha256": catalog.sha256, "items": len(catalog), "source": "sample"},
        options=options, messages=[], session_id=None, model=model, model_reason="test",
        model_hint=None)
    return GraphRunInput(run_id=run_id, pipeline="pricing", input=encode(state), options=options,
                         submitted_by="tester")


async def worker_completions(db, run_id: str) -> int:
    """``node.completed`` events of the workers (each worker's execution once)."""
    return await db.fetchval(
        "SELECT count(*) FROM events WHERE run_id = $1 AND type = 'node.completed' "
        "AND data->>'node' LIKE '%\\_worker'", uuid.UUID(run_id))


async def start(client: Client, inp: GraphRunInput, task_queue: str):
    return await client.start_workflow(SegmentRunWorkflow.run, inp, id=f"pricing-{inp.run_id}",
                                       task_queue=task_queue)


async def read_stream(db, client: Client, run_id: str, *, until, after: int = 0
                      ) -> list[tuple[int, dict[str, Any]]]:
    """The run's chat stream as the API reads it, after seq ``after``, until ``until(event)``.

    ``[(seq, event)]``: the workflow's durable events merged with the segments' live rows
    (tool calls, summaries, tokens), as ``orchestrator_events`` gives them.
    """
    out: list[tuple[int, dict[str, Any]]] = []
    async for event in orchestrator_events(db, client, run_id, f"pricing-{run_id}", from_offset=after,
                                           poll_cooldown=timedelta(milliseconds=20)):
        seq = event.pop("seq")
        out.append((seq, event))
        if until(event):
            break
    return out


def paused(event: dict[str, Any]) -> bool:
    return bool(event.get("awaiting_approval"))


async def test_plan_streams_pauses_and_approval_with_edits_completes(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    client = dev_server.client
    inp = await pricing_input(db, "Propose updates for TB006-online")
    handle = await start(client, inp, task_queue)
    first = await read_stream(db, client, inp.run_id, until=paused)
    assert [seq for seq, _ in first] == list(range(1, len(first) + 1))
    kinds = [e.get("tool_call") for _, e in first if "tool_call" in e]
    assert kinds == ["optimize_price", "check_policy", "explain_decision", "sensitivity_analysis",
                     "compose_report", "request_approval"]
    # the reporter's tool_call comes before the tokens it streams (as segments too)
    report_call = next(i for i, (_, e) in enumerate(first) if e.get("tool_call") == "compose_report")
    assert report_call < next(i for i, (_, e) in enumerate(first) if "token" in e)
    approval = first[-1][1]
    assert approval["thread_id"] == inp.run_id and approval["approval"]["change_count"] >= 1

    # The stream announces the sign-off as the gate opens; the status follows once the
    # approval.requested event is written, so poll instead of reading it once.
    async def awaiting():
        view = await handle.query(SegmentRunWorkflow.get_status)
        assert view.status == "awaiting_approval"
        return view
    view = await assert_eventually(awaiting)
    proposed = view.approval["payload"]["proposed_prices"]["TB006-online"]

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", updates={"TB006-online.usm": proposed["new"]}, decided_by="rita"))
    assert refused.value.cause.type == "invalid_field_edits"
    with pytest.raises(WorkflowUpdateFailedError) as not_number:
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", updates={"TB006-online.usm": "cheap"}, decided_by="rita"))
    assert not_number.value.cause.details[0]["errors"] == {"TB006-online.usm": "not_a_number"}

    edited = round(proposed["usm"] - 1, 2)
    done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
        decision="approve", updates={"TB006-online.usm": str(edited)}, decided_by="rita",
        note="one dollar lower on used"))
    assert (done.status, done.outcome) == ("completed", "approved")
    result = await handle.result()
    assert result.result["approved_prices"]["TB006-online"]["usm"] == edited
    assert result.final_event["done"] is True
    assert "with 1 edits" in result.final_event["message"]

    rest = await read_stream(db, client, inp.run_id, until=lambda e: e.get("done"),
                             after=first[-1][0])
    assert rest[0][0] == first[-1][0] + 1 and rest[-1][1] == result.final_event
    tokens = "".join(e.get("token", "") for _, e in first + rest)
    assert tokens == result.final_event["message"]
    # the workers' events and the reporter's tokens came as rows of the live stream: none
    # crossed Temporal (no signal in the history), and the durable items are the rest
    live = await db.fetchval("SELECT count(*) FROM agent_run_tokens WHERE workflow_run_id = $1",
                             uuid.UUID(inp.run_id))
    history = await handle.fetch_history()
    assert not [e for e in history.events
                if e.HasField("workflow_execution_signaled_event_attributes")]
    durable = await handle.query("__temporal_workflow_stream_offset", result_type=int)
    assert live > 0 and live + durable == rest[-1][0]
    types = await event_types(db, inp.run_id)
    assert types[0] == "run.submitted" and types[-1] == "run.completed"
    assert await worker_completions(db, inp.run_id) == 5
    assert types.count("approval.decided") == 1


async def test_an_ask_without_a_proposal_completes_without_the_gate(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    inp = await pricing_input(db, "Why was the price of TB006-campus recommended?", plan=False)
    assert decode(inp.input)["plan"] == ["explainer", "reporter"]
    result = await (await start(dev_server.client, inp, task_queue)).result()
    assert (result.status, result.outcome) == ("completed", "answered")
    assert result.final_event["tools_used"] == ["explain_decision", "compose_report"]
    assert "TB006-campus" in result.final_event["message"]
    assert "approval.requested" not in await event_types(db, inp.run_id)


async def test_cancel_at_the_gate_ends_the_run_cancelled(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    client = dev_server.client
    inp = await pricing_input(db, "Propose updates for budget items")
    handle = await start(client, inp, task_queue)
    await read_stream(db, client, inp.run_id, until=paused)

    async def awaiting():
        assert (await handle.query(SegmentRunWorkflow.get_status)).status == "awaiting_approval"
    await assert_eventually(awaiting)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    final = await handle.query(SegmentRunWorkflow.get_final_event)
    assert final.get("outcome") == "cancelled" and final["done"] is True, final
    row = await db.fetchrow("SELECT status FROM runs WHERE run_id = $1", uuid.UUID(inp.run_id))
    assert row["status"] == "cancelled"
    approval = await db.fetchrow("SELECT status FROM approvals WHERE run_id = $1",
                                 uuid.UUID(inp.run_id))
    assert approval["status"] == "cancelled"


async def test_cancel_while_a_worker_runs_still_ends_cancelled(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    client = dev_server.client
    inp = await pricing_input(db)
    handle = await start(client, inp, task_queue)
    await read_stream(db, client, inp.run_id, until=lambda e: e.get("tool_call") == "check_policy")
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    final = await handle.query(SegmentRunWorkflow.get_final_event)
    assert final.get("outcome") == "cancelled", final
    row = await db.fetchrow("SELECT status FROM runs WHERE run_id = $1", uuid.UUID(inp.run_id))
    assert row["status"] == "cancelled"


async def test_paused_run_resumes_by_thread_id_on_a_new_worker(
        dev_server: WorkflowEnvironment, db, task_queue: str):
    client = dev_server.client
    inp = await pricing_input(db, "Propose updates for TB044-online")
    async with build_worker(client, task_queue=task_queue):
        await start(client, inp, task_queue)
        before = await read_stream(db, client, inp.run_id, until=paused)
    # The first worker is gone; a new one replays the history (the InMemorySaver checkpoint
    # and the stream log are rebuilt from it) and takes the decision.
    async with build_worker(client, task_queue=task_queue):
        thread = client.get_workflow_handle(f"pricing-{inp.run_id}")
        done = await thread.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", decided_by="rita"))
        assert done.status == "completed"
        after = await read_stream(db, client, inp.run_id, until=lambda e: e.get("done"))
    assert [e for _, e in after[:len(before)]] == [e for _, e in before]
    types = await event_types(db, inp.run_id)
    assert await worker_completions(db, inp.run_id) == 5  # no worker ran twice
    assert types.count("approval.requested") == 1


async def test_llm_reporter_streams_model_tokens_and_records_the_call(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    words = ["Leadership ", "summary: ", "hold ", "prices."]
    llm.set_chat_model_factory(lambda settings, model: GenericFakeChatModel(
        messages=iter([AIMessage(content="".join(words))])))
    try:
        inp = await pricing_input(db, "Check policy violations for TB001-online", plan=False,
                                  model="fake-model")
        result = await (await start(dev_server.client, inp, task_queue)).result()
    finally:
        llm.set_chat_model_factory(None)
    assert result.final_event["strategy"] == "llm:fake-model"
    assert result.final_event["message"] == "".join(words)
    stream = await read_stream(db, dev_server.client, inp.run_id,
                               until=lambda e: e.get("done"))
    assert "".join(e.get("token", "") for _, e in stream) == "".join(words)
    ledger = await db.fetch("SELECT data FROM events WHERE run_id = $1 AND type = 'llm.called'",
                            uuid.UUID(inp.run_id))
    assert len(ledger) == 1 and json.loads(ledger[0]["data"])["model"] == "fake-model"


async def test_an_unreadable_model_summary_gives_the_template_without_ten_retries(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    """Issue 28 item 5: the composite ask failed at reporter_worker after 10 attempts
    (``llm_unavailable``, ValueError). Now: one call, one re-ask, the template report."""
    class Unreadable(GenericFakeChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            raise ValueError("{'message': 'the model failed to answer'}")

    llm.set_chat_model_factory(lambda settings, model: Unreadable(messages=iter(())))
    try:
        inp = await pricing_input(db, "Check policy violations for TB001-online", plan=False,
                                  model="fake-model")
        result = await (await start(dev_server.client, inp, task_queue)).result()
    finally:
        llm.set_chat_model_factory(None)
    assert result.status == "completed"
    assert result.final_event["strategy"] == "rules"
    assert result.final_event["fallback"]["code"] == "llm_malformed_response"
    rows = await db.fetch("SELECT data FROM events WHERE run_id = $1 AND type = 'llm.called'"
                          " ORDER BY seq", uuid.UUID(inp.run_id))
    ledger = [(d["call"], d["attempt"], d["error_code"]) for d in
              (json.loads(r["data"]) for r in rows)]
    assert ledger == [(1, 1, "llm_malformed_response"),  # the call, on the first attempt
                      (2, 1, "llm_malformed_response")]  # the one re-ask, no retry


async def test_pricing_histories_replay(dev_server: WorkflowEnvironment, worker: Worker, db,
                                        task_queue: str):
    client = dev_server.client
    inp = await pricing_input(db, "Propose updates for TB006-campus")
    handle = await start(client, inp, task_queue)
    await read_stream(db, client, inp.run_id, until=paused)
    await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(decision="approve",
                                                                      decided_by="rita"))
    await handle.result()
    history = await handle.fetch_history()
    await Replayer(workflows=list(WORKFLOWS),
                   workflow_runner=workflow_runner()).replay_workflow(history)
    if os.environ.get("OVERSEER_RECORD_HISTORIES"):
        (HISTORIES / "segment_run_pricing_approved.json").write_text(history.to_json())


async def test_concurrent_subscribers_see_the_same_stream(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    client = dev_server.client
    inp = await pricing_input(db, "Propose updates for TB006-campus")
    handle = await start(client, inp, task_queue)
    a, b = await asyncio.gather(read_stream(db, client, inp.run_id, until=paused),
                                read_stream(db, client, inp.run_id, until=paused))
    assert a == b

    async def awaiting():
        assert (await handle.query(SegmentRunWorkflow.get_status)).status == "awaiting_approval"
    await assert_eventually(awaiting)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()


async def test_a_permanent_failure_ends_the_stream_with_one_error_event(
        dev_server: WorkflowEnvironment, worker: Worker, db, task_queue: str):
    inp = await pricing_input(db, "Propose updates for TB006-campus")
    state = decode(inp.input)  # a catalog snapshot that was never stored:
    inp.input = encode({**state, "catalog": {**state["catalog"], "sha256": "0" * 64}})
    handle = await start(dev_server.client, inp, task_queue)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    stream = await read_stream(db, dev_server.client, inp.run_id, until=lambda e: e.get("done"))
    final = stream[-1][1]
    assert (final["code"], final["retryable"], final["done"]) == ("not_found", False, True)
    assert sum(1 for _, e in stream if e.get("done")) == 1
    row = await db.fetchrow("SELECT status, error FROM runs WHERE run_id = $1",
                            uuid.UUID(inp.run_id))
    assert row["status"] == "failed" and json.loads(row["error"])["code"] == "not_found"
    history = await handle.fetch_history()
    attempts = [e for e in history.events if e.HasField("activity_task_started_event_attributes")]
    assert all(e.activity_task_started_event_attributes.attempt == 1 for e in attempts)


async def test_sign_off_climbs_the_configured_escalation_ladder(dev_server, worker, db,
                                                                 task_queue):
    """Issue 17: pricing sign-offs ignored the ladder settings; now every rung applies (seconds
    here, days in production)."""
    inp = await pricing_input(db)
    inp.options["approval"] = {**inp.options["approval"], "remind_after_seconds": 1,
                               "reassign_after_seconds": None, "sla_seconds": 2,
                               "final_after_seconds": 3, "final_action": "auto_reject"}
    handle = await start(dev_server.client, inp, task_queue)
    result = await handle.result()
    assert (result.status, result.outcome) == ("rejected", "rejected")
    rows = await db.fetch("SELECT type, data FROM events WHERE run_id = $1 ORDER BY seq",
                          uuid.UUID(inp.run_id))
    types = [r["type"] for r in rows]
    assert "approval.reminded" in types and "approval.sla_breached" in types
    decided = next(json.loads(r["data"]) for r in rows if r["type"] == "approval.decided")
    assert decided["decided_by"] == "escalation_policy"
