"""Runtime v2's first step: a run as segments on LangGraph's Postgres checkpointer (issue 25).

On the real dev server, Postgres and worker, with the user's graphs unchanged
(tests/graphs/segments names some of them again, with graphs of the tests' own):

- every construct ends as plain LangGraph ends, in one activity for the whole run, and
  the thread's checkpoints are LangGraph's own (one per superstep) in its own tables;
- ``node.completed`` stays per node, once each;
- interrupts are approvals on the shared gate: two in one node, a prebuilt agent's tool
  reading its resume;
- a segment that fails mid-run is retried from its last checkpoint: the node before the
  failure does not run again;
- a bug fails the run once, with the node named.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from temporalio.client import WorkflowFailureError

from overseer.registry import builder_of, get_registry, load_registry, set_registry
from overseer.run_types import DecisionInput
from overseer.store.events import fetch_events
from services.worker.main import build_worker
from tests.workflows.test_graph_runtime import USER_GRAPHS, pending_approval
from tests.workflows.test_graph_runtime import start as start_graph_run
from workflows.segment_calls import SEGMENT_ATTEMPTS
from workflows.segment_run import SegmentRunWorkflow

SEGMENT_GRAPHS = Path(__file__).parents[1] / "graphs" / "segments" / "langgraph.json"


@pytest.fixture(scope="module", autouse=True)
def segment_registry() -> Iterator[None]:
    set_registry(load_registry(f"{USER_GRAPHS}:{SEGMENT_GRAPHS}"))
    yield
    set_registry(None)


async def start(client: Any, pool: Any, task_queue: str, pipeline: str,
                graph_input: dict[str, Any], options: dict[str, Any] | None = None) -> Any:
    """Start a run on ``SegmentRunWorkflow``, as ``POST /v1/pipelines/{name}/runs`` does for it."""
    return await start_graph_run(client, pool, task_queue, pipeline, graph_input,
                                 options=options, run=SegmentRunWorkflow.run)


async def native(name: str, graph_input: dict[str, Any]) -> dict[str, Any]:
    app = builder_of(get_registry().get(name).graph).compile(checkpointer=InMemorySaver())
    out: dict[str, Any] = await app.ainvoke(graph_input, {"configurable": {"thread_id": "ref"}})
    return out


async def node_events(pool: Any, run_id: str) -> Counter[str]:
    events = await fetch_events(pool, run_id)
    return Counter(e["data"]["node"] for e in events if e["type"] == "node.completed")


async def test_a_graph_runs_in_one_segment_as_plain_langgraph_runs_it(dev_server, db, task_queue):
    graph_input = {"topic": "alpha beta gamma"}
    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "seg_constructs",
                                     graph_input)
        result = await handle.result()
        history = await handle.fetch_history()
    want = await native("seg_constructs", graph_input)
    got = result.output
    assert sorted(got["results"]) == sorted(want["results"])
    assert sorted(got["trail"]) == sorted(want["trail"])
    assert got["summary"] == want["summary"]
    assert [(m["type"], m["content"]) for m in got["messages"]] == [
        (m.type, m.content) for m in want["messages"]]
    scheduled = [e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]
    types = Counter(e.activity_task_scheduled_event_attributes.activity_type.name
                    for e in scheduled)
    assert types == {"run_segment": 1}
    nodes = await node_events(db, run_id)
    assert nodes and all(n >= 1 for n in nodes.values())
    assert {"prepare", "commander", "typed"} <= set(nodes)
    events = await fetch_events(db, run_id)
    assert [e["type"] for e in events].count("run.completed") == 1
    # one duration sample per node, as node activities give (the worker runs in-process)
    from prometheus_client import REGISTRY

    samples = REGISTRY.get_sample_value("overseer_node_duration_seconds_count", {
        "pipeline": "seg_constructs", "node": "prepare", "outcome": "ok"})
    assert samples is not None and samples >= 1
    # LangGraph's own tables hold the thread: one checkpoint per superstep
    steps = await db.fetchval("SELECT count(*) FROM checkpoints WHERE thread_id = $1", run_id)
    assert steps >= 3


async def test_interrupts_are_approvals_and_the_resume_reaches_interrupt(dev_server, db,
                                                                        task_queue):
    async with build_worker(dev_server.client, task_queue=task_queue):
        _, handle = await start(dev_server.client, db, task_queue, "seg_approvals",
                                {"topic": "launch"})
        first = await pending_approval(handle)
        assert first["payload"]["question"] == "publish?"
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", note="go", decided_by="rev"))
        second = await pending_approval(handle)
        assert second["payload"]["question"] == "really?" and second["payload"]["first"] == \
            "approve"
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", decided_by="rev"))
        result = await handle.result()
        assert result.output["summary"] == "approve then reject"
        assert result.outcome == "rejected"

        _, handle = await start(dev_server.client, db, task_queue, "seg_refund_agent",
                                {"messages": [{"role": "user", "content": "refund order 7"}]})
        asked = await pending_approval(handle)
        assert asked["payload"]["action"] == "refund"
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", resume={"approved": True}, decided_by="rev"))
        result = await handle.result()
    assert result.output["messages"][-1]["content"] == \
        "Done: refund of 40 for order 7 approved"


async def test_a_run_continues_as_new_between_segments_and_ends_as_it_would_have(
        dev_server, db, task_queue):
    """Forced after every segment: two interrupts, three workflow runs, one run's result."""
    from temporalio.api.enums.v1 import EventType

    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, started = await start(dev_server.client, db, task_queue, "seg_approvals",
                                      {"topic": "launch"},
                                      options={"continue_as_new_after_segments": 1})
        handle = dev_server.client.get_workflow_handle(started.id)  # the latest run
        first = await pending_approval(handle)
        assert first["payload"]["question"] == "publish?"
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", note="go", decided_by="rev"))
        second = await pending_approval(handle)
        assert second["payload"]["question"] == "really?"
        assert second["payload"]["first"] == "approve"
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", decided_by="rev"))
        result = await handle.result()
        chain, run = [], started.result_run_id
        while run:  # each continued run's history, from the first
            history = await dev_server.client.get_workflow_handle(
                started.id, run_id=run).fetch_history()
            last = history.events[-1]
            chain.append(last.event_type)
            run = (last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                   if last.event_type
                   == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW else None)
    assert chain == [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW] * 2 + [
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED]
    assert result["output"]["summary"] == "approve then reject"
    assert result["outcome"] == "rejected"
    events = await fetch_events(db, run_id)
    kinds = Counter(e["type"] for e in events)
    assert kinds["approval.requested"] == 2 and kinds["approval.decided"] == 2
    assert kinds["run.completed"] + kinds["run.rejected"] == 1, kinds
    assert len({e["event_id"] for e in events}) == len(events)


async def test_a_retried_segment_resumes_from_its_last_checkpoint(dev_server, db, task_queue):
    count_me = get_registry().builder("seg_retry").nodes["count_me"].runnable.func
    executions = count_me.__globals__["EXECUTIONS"]  # the module the registry loaded
    topic = f"retry-{uuid.uuid4()}"
    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "seg_retry",
                                     {"topic": topic})
        result = await handle.result()
    assert result.output["summary"] == "ok after 2 attempts"
    assert executions[topic] == 1  # the finished superstep did not run again
    assert await node_events(db, run_id) == Counter({"count_me": 1, "sometimes": 1})


async def test_a_bug_fails_the_run_once_with_the_node_named(dev_server, db, task_queue):
    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "seg_poison",
                                     {"topic": "x"})
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        history = await handle.fetch_history()
    attempts = [e for e in history.events if e.HasField("activity_task_started_event_attributes")]
    assert len(attempts) == 1
    events = await fetch_events(db, run_id)
    failed = next(e for e in events if e["type"] == "run.failed")
    assert failed["data"]["error"]["code"] == "node_error"
    assert failed["data"]["error"]["node"] == "buggy"
    assert await node_events(db, run_id) == Counter({"fine": 1})


@pytest.mark.parametrize("durability", ["sync", "exit"])
async def test_durability_is_langgraphs(dev_server, db, task_queue, durability: str):
    """``sync`` writes a checkpoint per superstep as ``async`` does; ``exit`` only at the end."""
    graph_input = {"topic": "alpha beta"}
    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "seg_constructs",
                                     graph_input, options={"durability": durability})
        result = await handle.result()
    assert sorted(result.output["results"]) == sorted(
        (await native("seg_constructs", graph_input))["results"])
    written = await db.fetchval("SELECT count(*) FROM checkpoints WHERE thread_id = $1", run_id)
    assert (written == 1) if durability == "exit" else (written >= 3)


def test_a_run_may_ask_for_a_durability_and_nothing_else():
    from overseer.errors import InvalidRequestError
    from overseer.run_options import request_options

    assert request_options({"durability": "exit"})["durability"] == "exit"
    with pytest.raises(InvalidRequestError):
        request_options({"durability": "fast"})


def test_a_runs_durability_is_its_own_or_the_processs(test_settings):
    """``POST /v1/pipelines/{name}/runs`` gives the run the process's ``OVERSEER_DURABILITY``
    unless the run's metadata asks for another (unset: the workflow's choice)."""
    from overseer.runs import StartContext, _request

    pipeline = get_registry().get("seg_constructs")
    ctx = StartContext(pipeline=pipeline, run_id=str(uuid.uuid4()), workflow_id="w",
                       subject="alice", metadata={"durability": "sync"}, settings=test_settings,
                       input={"topic": "a"})
    argument = _request(ctx).workflow_input(ctx.settings)
    assert argument.pipeline == "seg_constructs" and argument.run is not None
    assert argument.run.durability == "sync"
    ctx.metadata = {}
    run = _request(ctx).workflow_input(ctx.settings).run
    assert run is not None and run.durability is test_settings.durability is None
    ctx.settings = test_settings.model_copy(update={"durability": "exit"})
    run = _request(ctx).workflow_input(ctx.settings).run
    assert run is not None and run.durability == "exit"


async def test_a_local_try_that_runs_out_of_time_goes_on_as_an_activity(dev_server, db,
                                                                      task_queue):
    """``segment_local_seconds``: a short segment needs no activity task; a long one is cut
    off and carried on by a heartbeating activity from the local try's checkpoints."""
    count_me = get_registry().builder("seg_retry").nodes["count_me"].runnable.func
    executions = count_me.__globals__["EXECUTIONS"]
    fast, slow = f"fast-{uuid.uuid4()}", f"slow-{uuid.uuid4()}"
    async with build_worker(dev_server.client, task_queue=task_queue):
        _, quick = await start(dev_server.client, db, task_queue, "seg_retry", {"topic": fast},
                               options={"segment_local_seconds": 5})
        _, long = await start(dev_server.client, db, task_queue, "seg_slow", {"topic": slow},
                              options={"segment_local_seconds": 0.5})
        _, short = await start(dev_server.client, db, task_queue, "seg_constructs",
                               {"topic": "short"}, options={"segment_local_seconds": 5})
        assert (await quick.result()).output["summary"] == "ok after 2 attempts"
        assert (await long.result()).output["summary"] == "napped"
        assert (await short.result()).output["summary"] == "messages kept their type"
        quick_history, long_history = await quick.fetch_history(), await long.fetch_history()
        short_history = await short.fetch_history()

    def scheduled(history: Any) -> int:
        return sum(e.HasField("activity_task_scheduled_event_attributes") for e in history.events)

    assert scheduled(short_history) == 0  # done inside the local try
    # the flaky node failed inside the local try: it went on as an activity
    assert scheduled(quick_history) == 1 and executions[fast] == 1
    # the nap outlasted the local try: the activity went on after count_me, not before it
    assert scheduled(long_history) == 1 and executions[slow] == 1


async def test_chat_model_calls_are_in_the_runs_ledger(dev_server, db, task_queue):
    """Every call a node makes to its own chat model is one ``llm.called`` event (issue 28)."""
    from services.api.readmodels import llm_usage

    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "seg_spender",
                                     {"topic": "t"})
        await handle.result()
    usage = await llm_usage(db, uuid.UUID(run_id))
    assert usage["total"]["calls"] == 2
    assert usage["total"]["input_tokens"] + usage["total"]["output_tokens"] == 1200
    assert set(usage["by_node"]) == {"first_draft", "second_draft"}


async def test_a_node_longer_than_the_heartbeat_time_out_is_not_taken_for_a_dead_worker(
        dev_server, db, task_queue):
    """The segment heartbeats while a node runs: a 4.5 s node under a 1.5 s heartbeat
    time-out finishes in the first attempt (before, it timed out and ran again each retry)."""
    topic = f"long-{uuid.uuid4()}"
    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "seg_long",
                                     {"topic": topic}, options={"segment_heartbeat_seconds": 1.5})
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.output["summary"] == "slept long"
    started = [e.activity_task_started_event_attributes for e in history.events
               if e.HasField("activity_task_started_event_attributes")]
    assert [a.attempt for a in started] == [1]
    assert await node_events(db, run_id) == Counter({"count_me": 1, "long_nap": 1})


async def _spender_over_budget(client: Any, db: Any, task_queue: str) -> tuple[str, Any, Any]:
    """``seg_spender`` with a 500-token budget: its first model call (600 tokens) passes it."""
    run_id, handle = await start(client, db, task_queue, "seg_spender", {"topic": "t"},
                                 options={"llm_budget_tokens": 500})
    return run_id, handle, await pending_approval(handle)


async def test_a_segment_stops_before_a_model_call_past_the_budget(dev_server, db, task_queue):
    """The stop comes before the call (nothing is spent past it); a raised budget goes on from
    the checkpoint: the finished node does not run again, the stopped one runs from its start."""
    from services.api.readmodels import llm_usage

    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle, approval = await _spender_over_budget(dev_server.client, db, task_queue)
        payload = approval["payload"]
        assert payload["kind"] == "llm_budget" and payload["node"] == "second_draft"
        assert payload["budget"]["spent_tokens"] == 600 and payload["budget"]["calls"] == 1
        assert (await llm_usage(db, uuid.UUID(run_id)))["total"]["calls"] == 1  # not made
        with pytest.raises(Exception) as refused:  # noqa: PT011 - the update's failure
            await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
                decision="approve", budget_tokens=550, decided_by="ops"))
        assert refused.value.cause.type == "invalid_budget"
        done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", budget_tokens=5000, decided_by="ops"))
        assert done.status == "completed"
        result = await handle.result()
    assert result.output["summary"] == "drafted:a draft / drafted:a draft"
    assert await node_events(db, run_id) == Counter(
        {"first_draft": 1, "second_draft": 1, "publish": 1})
    usage = await llm_usage(db, uuid.UUID(run_id))
    assert usage["total"]["calls"] == 2
    assert set(usage["by_node"]) == {"first_draft", "second_draft"}


async def test_a_rejected_budget_stop_on_segments_ends_the_run_with_its_state(dev_server, db,
                                                                             task_queue):
    async with build_worker(dev_server.client, task_queue=task_queue):
        _, handle, _ = await _spender_over_budget(dev_server.client, db, task_queue)
        done = await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="reject", decided_by="ops"))
        result = await handle.result()
    assert (done.status, done.outcome) == ("rejected", "budget_denied")
    assert result.output["trail"] == ["drafted:a draft"]


async def test_a_node_with_options_runs_as_its_own_activity_with_them(dev_server, db,
                                                                       task_queue):
    """The user's ``flaky`` graph as it is (a plain graph in a langgraph.json, so segments):
    its node ``sometimes`` carries ``{"overseer": {"max_attempts": 3}}``, so the segment stops
    before it and one activity runs it with those attempts; the first attempt's connection
    error is retried there."""
    topic = f"flaky-{uuid.uuid4()}"
    async with build_worker(dev_server.client, task_queue=task_queue):
        run_id, handle = await start(dev_server.client, db, task_queue, "flaky", {"topic": topic})
        result = await handle.result()
        history = await handle.fetch_history()
    assert result.output["summary"] == "ok after 2 attempts"
    scheduled = [e.activity_task_scheduled_event_attributes for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert [s.activity_type.name for s in scheduled] == ["run_segment", "run_segment"]
    assert [s.retry_policy.maximum_attempts for s in scheduled] == [SEGMENT_ATTEMPTS, 3]
    summaries = [e.user_metadata.summary.data for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    assert b"node sometimes" in summaries[1]
    started = [e.activity_task_started_event_attributes.attempt for e in history.events
               if e.HasField("activity_task_started_event_attributes")]
    assert started == [1, 2]  # the step's retry, not the segment's
    assert await node_events(db, run_id) == Counter({"sometimes": 1})


async def test_a_failed_run_is_retried_from_its_last_checkpoint(dev_server, db, task_queue):
    """``POST /v1/runs/{id}/retry`` as segments: the retry gets a copy of the failed run's
    LangGraph checkpoints and runs only what failed; the node before it does not run again."""
    from overseer.runs import retry_run, submit_run
    from overseer.settings import Settings

    fragile = get_registry().builder("seg_fixable").nodes["fragile"].runnable.func
    broken, executions = fragile.__globals__["BROKEN"], fragile.__globals__["EXECUTIONS"]
    topic = f"fix-{uuid.uuid4()}"
    settings = Settings(environment="test", task_queue=task_queue)
    broken["on"] = True
    try:
        async with build_worker(dev_server.client, task_queue=task_queue):
            first = await submit_run(db, dev_server.client, settings, pipeline_name="seg_fixable",
                                     subject="alice", metadata={}, graph_input={"topic": topic})
            with pytest.raises(WorkflowFailureError):
                await dev_server.client.get_workflow_handle(
                    f"seg_fixable-{first.run_id}").result()
            assert executions[topic] == 1
            broken["on"] = False  # the bug is fixed; the failed run is retried
            again = await retry_run(db, dev_server.client, settings, run_id=first.run_id,
                                    subject="alice")
            result = await dev_server.client.get_workflow_handle(
                f"seg_fixable-{again.run_id}").result()
    finally:
        broken["on"] = False
    assert result["output"]["summary"] == "fixed; counted 1 time(s)"
    assert executions[topic] == 1  # count_me, finished before the failure, did not run again
    assert await node_events(db, again.run_id) == Counter({"fragile": 1})
    row = await db.fetchrow("SELECT status, parent_run_id FROM runs WHERE run_id = $1",
                            uuid.UUID(again.run_id))
    assert row["status"] == "completed" and str(row["parent_run_id"]) == first.run_id
    submitted = next(e for e in await fetch_events(db, again.run_id)
                     if e["type"] == "run.submitted")
    assert submitted["data"]["retry_of"] == first.run_id
    assert submitted["data"]["resumed_after"] == "count_me"
