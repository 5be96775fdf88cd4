"""The graph runtime hosts a user's graph (tests/graphs/user_graph, which never imports Overseer).

One test per construct, on the real dev server and Postgres, through the real worker:
sync/async nodes and routers, lambda and partial nodes, Send fan-out with a reducer,
Command from nodes (also with Send), a compiled subgraph node, LangChain messages,
two interrupts in one node, parallel interrupts resumed by id after replays, a poison
node, a 3 MB state, a transient failure, the LLM budget stop; and replays of the
recorded histories.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from overseer.graph_codec import encode, to_jsonable
from overseer.pipelines import get_registry, load_registry, set_registry
from overseer.store.events import RUN_SUBMITTED, NewEvent, append_events, fetch_events
from services.worker.main import WORKFLOWS, build_worker, workflow_runner
from tests.helpers import assert_eventually
from workflows import graph_run
from workflows.approval import DecisionInput
from workflows.graph_run import GraphRunInput, GraphRunWorkflow

USER_GRAPHS = Path(__file__).parents[1] / "graphs" / "user_graph" / "langgraph.json"


@pytest.fixture(scope="module", autouse=True)
def user_registry() -> Iterator[None]:
    """The project's pipelines plus the user's langgraph.json, as OVERSEER_GRAPHS would give."""
    set_registry(load_registry(str(USER_GRAPHS)))
    graph_run._compiled.clear()
    yield
    set_registry(None)
    graph_run._compiled.clear()


@pytest.fixture
async def graph_worker(dev_server: WorkflowEnvironment, db: object,
                       task_queue: str) -> AsyncIterator[None]:
    async with build_worker(dev_server.client, task_queue=task_queue):
        yield


async def start(client: Client, pool: Any, task_queue: str, pipeline: str,
                graph_input: dict[str, Any], options: dict[str, Any] | None = None,
                search_attributes: bool = True, run: Any = GraphRunWorkflow.run
                ) -> tuple[str, WorkflowHandle[Any, Any]]:
    run_id = str(uuid.uuid4())
    async with pool.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="test",
            data={"pipeline": pipeline, "workflow_id": f"{pipeline}-{run_id}",
                  "submitted_by": "tester", "input": graph_input})])
    handle = await client.start_workflow(
        run, GraphRunInput(run_id=run_id, pipeline=pipeline,
                                            input=encode(graph_input),
                                            options=dict(options or {}),
                                            search_attributes=search_attributes),
        id=f"{pipeline}-{run_id}", task_queue=task_queue)
    return run_id, handle


async def pending_approval(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    async def waiting() -> dict[str, Any]:
        view = await handle.query(GraphRunWorkflow.get_status)
        assert view.status == "awaiting_approval" and view.approval, view.status
        return view.approval
    return await assert_eventually(waiting, timeout=60)


def without_ids(state: dict[str, Any]) -> dict[str, Any]:
    return {**state, "messages": [{**m, "id": None} for m in state.get("messages", [])]}


async def test_every_construct_runs_as_in_langgraph(dev_server, graph_worker, db, task_queue):
    graph_input = {"topic": "alpha beta gamma"}
    run_id, handle = await start(dev_server.client, db, task_queue, "constructs", graph_input)
    result = await handle.result()
    out = result.output
    assert result.status == "completed"
    plain = await get_registry().builder("constructs").compile().ainvoke(graph_input)
    assert without_ids(out) == without_ids(to_jsonable(plain))  # the same as plain LangGraph
    assert sorted(set(out["results"])) == ["ALPHA", "BETA", "GAMMA"]  # Send fan-out + reducer
    assert out["trail"][:4] == ["prepare", "lambda", "partial!", "commander"]
    assert "sub.count" in out["trail"] and "sub.double" in out["trail"]
    assert "echo:3 results" in out["trail"]  # Command(goto=[Send]) from a node
    assert out["summary"] == "messages kept their type"  # AIMessage crossed as an AIMessage
    assert out["greeting"] == "hello"  # langgraph.json "env"
    events = await fetch_events(db, run_id)
    nodes = [e["data"]["node"] for e in events if e["type"] == "node.completed"]
    assert nodes.count("work") == 3
    assert {"prepare", "lambda_node", "partial_node", "commander", "sub/count", "sub/double",
            "spread", "echo", "typed"} <= set(nodes)
    assert events[-1]["type"] == "run.completed"


async def test_two_interrupts_in_one_node(dev_server, graph_worker, db, task_queue):
    run_id, handle = await start(dev_server.client, db, task_queue, "approvals",
                                 {"topic": "launch"})
    first = await pending_approval(handle)
    assert first["payload"]["question"] == "publish?"
    await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
        decision="approve", note="go", decided_by="rev"))
    second = await pending_approval(handle)
    assert second["payload"] == {**second["payload"], "question": "really?", "first": "approve"}
    await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
        decision="reject", decided_by="rev"))
    result = await handle.result()
    assert result.output["summary"] == "approve then reject"
    assert result.output["decisions"][0]["note"] == "go"
    assert result.output["decisions"][0]["decided_by"] == "rev"
    assert result.outcome == "rejected"
    decided = [e for e in await fetch_events(db, run_id) if e["type"] == "approval.decided"]
    assert len(decided) == 2


async def test_unknown_decision_is_refused(dev_server, graph_worker, db, task_queue):
    from temporalio.client import WorkflowUpdateFailedError

    _, handle = await start(dev_server.client, db, task_queue, "approvals", {"topic": "x"})
    await pending_approval(handle)
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
            decision="revise", decided_by="rev"))
    assert err.value.cause.type == "invalid_decision"
    await handle.cancel()


async def test_parallel_interrupts_resume_by_id_after_replays(dev_server, db, task_queue):
    """langgraph#6626: with no workflow cache every task replays; ids must still match."""
    client = dev_server.client
    async with build_worker(client, task_queue=task_queue, max_cached_workflows=0):
        run_id, handle = await start(client, db, task_queue, "parallel_approvals",
                                     {"topic": "red green blue"})
        seen: list[str] = []
        for n in range(3):
            approval = await pending_approval(handle)
            payload = approval["payload"]
            assert len(payload["pending_interrupts"]) == 3 - n
            assert payload["interrupt_id"] not in seen
            seen.append(payload["interrupt_id"])
            await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
                decision="approve" if payload["item"] != "green" else "reject",
                note=payload["item"], decided_by="rev"))
        result = await handle.result()
    assert result.output["summary"] == "blue=approve:blue,green=reject:green,red=approve:red"
    history = await handle.fetch_history()
    await Replayer(workflows=list(WORKFLOWS),
                   workflow_runner=workflow_runner()).replay_workflow(history)


async def test_poison_node_fails_once_with_the_node_named(dev_server, graph_worker, db,
                                                          task_queue):
    run_id, handle = await start(dev_server.client, db, task_queue, "poison", {"topic": "x"})
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    events = await fetch_events(db, run_id)
    failed = [e for e in events if e["type"] == "run.failed"]
    assert failed and failed[0]["data"]["error"]["code"] == "node_error"
    assert failed[0]["data"]["error"]["node"] == "buggy"
    assert "KeyError" in failed[0]["data"]["error"]["message"]
    history = await handle.fetch_history()
    attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                if e.HasField("activity_task_started_event_attributes")]
    assert attempts and max(attempts) == 1  # never retried
    row = await db.fetchrow("SELECT status, error FROM runs WHERE run_id = $1", uuid.UUID(run_id))
    assert row["status"] == "failed"


async def test_poison_local_activity_node_fails_the_run_named(dev_server, graph_worker, db,
                                                              task_queue):
    """A local activity's failure reaches the workflow as the ``ApplicationError`` itself (not
    wrapped in ``ActivityError``); the run still records ``run.failed`` naming the node."""
    run_id, handle = await start(dev_server.client, db, task_queue, "poison_local", {"topic": "x"})
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    failed = [e for e in await fetch_events(db, run_id) if e["type"] == "run.failed"]
    assert failed and failed[0]["data"]["error"]["code"] == "node_error"
    assert failed[0]["data"]["error"]["node"] == "buggy"
    row = await db.fetchrow("SELECT status FROM runs WHERE run_id = $1", uuid.UUID(run_id))
    assert row["status"] == "failed"


async def test_three_megabytes_of_state_pass_by_reference(dev_server, graph_worker, db,
                                                          task_queue):
    _, handle = await start(dev_server.client, db, task_queue, "big_state", {"topic": "x"})
    result = await handle.result()
    assert result.output["summary"] == "3000 items, 3000000 chars"
    history = await handle.fetch_history()
    largest = max(e.ByteSize() for e in history.events)
    assert largest < 512 * 1024


async def test_transient_failure_is_retried(dev_server, graph_worker, db, task_queue):
    _, handle = await start(dev_server.client, db, task_queue, "flaky",
                            {"topic": str(uuid.uuid4())})
    result = await handle.result()
    assert result.output["summary"] == "ok after 2 attempts"


async def test_fresh_histories_replay(dev_server, graph_worker, db, task_queue):
    _, handle = await start(dev_server.client, db, task_queue, "constructs", {"topic": "a b"})
    await handle.result()
    history = await handle.fetch_history()
    await Replayer(workflows=list(WORKFLOWS),
                   workflow_runner=workflow_runner()).replay_workflow(history)


async def test_the_run_streams_values_updates_and_custom_chunks(dev_server, graph_worker, db,
                                                                 task_queue):
    import asyncio

    from temporalio.contrib.workflow_streams import WorkflowStreamClient

    from workflows.graph_run import STREAM_TOPIC

    _, handle = await start(dev_server.client, db, task_queue, "approvals", {"topic": "s"})
    seen: list[dict[str, Any]] = []

    async def read_all() -> None:
        client = WorkflowStreamClient.create(dev_server.client, handle.id)
        async for item in client.subscribe([STREAM_TOPIC], from_offset=0):
            seen.append(item.data)
            if item.data.get("event") == "end":
                return

    reader = asyncio.create_task(read_all())
    for _ in range(2):
        await pending_approval(handle)
        await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
            decision="approve", decided_by="rev"))
    await handle.result()
    await asyncio.wait_for(reader, 30)
    kinds = [s["event"] for s in seen]
    assert kinds[0] == "metadata" and seen[0]["data"]["pipeline"] == "approvals"
    assert kinds.count("interrupt") == 2 and kinds[-1] == "end"
    first = seen[kinds.index("interrupt")]["data"][0]
    assert first["value"]["question"] == "publish?"
    assert [s for s in seen if s["event"] == "updates"][-1]["data"] == {
        "finish": {"summary": "approve then approve"}}
    assert all("__interrupt__" not in s["data"] for s in seen if s["event"] == "values")


async def _start_with_budget(client: Client, pool: Any, task_queue: str,
                             tokens: int) -> tuple[str, WorkflowHandle[Any, Any]]:
    run_id = str(uuid.uuid4())
    async with pool.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="test",
            data={"pipeline": "spender", "workflow_id": f"spender-{run_id}",
                  "submitted_by": "tester", "input": {"topic": "t"}})])
    handle = await client.start_workflow(
        GraphRunWorkflow.run,
        GraphRunInput(run_id=run_id, pipeline="spender", input=encode({"topic": "t"}),
                      options={"llm_budget_tokens": tokens}),
        id=f"spender-{run_id}", task_queue=task_queue)
    return run_id, handle


async def test_llm_spend_over_the_budget_stops_for_an_approval(dev_server, graph_worker, db,
                                                               task_queue):
    # Each draft node's model call reports 600 tokens; the budget is 1000. The first draft
    # leaves 600 spent (under), the second 1200 (over): the run stops before "publish".
    run_id, handle = await _start_with_budget(dev_server.client, db, task_queue, 1000)
    approval = await pending_approval(handle)
    payload = approval["payload"]
    assert payload["kind"] == "llm_budget" and payload["node"] == "publish"
    assert payload["budget"]["spent_tokens"] == 1200 and payload["budget"]["calls"] == 2
    with pytest.raises(Exception) as refused:  # noqa: PT011 - the update's failure
        await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
            decision="approve", budget_tokens=1100, decided_by="ops"))
    assert refused.value.cause.type == "invalid_budget"
    with pytest.raises(Exception) as not_a_kind:  # noqa: PT011
        await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
            decision="revise", decided_by="ops"))
    assert not_a_kind.value.cause.type == "invalid_decision"
    done = await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
        decision="approve", budget_tokens=5000, decided_by="ops"))
    assert done.status == "completed"
    result = await handle.result()
    assert result.output["summary"] == "drafted:a draft / drafted:a draft"
    events = await fetch_events(db, run_id)
    assert [e["type"] for e in events].count("approval.requested") == 1
    # the run view counts the same calls the budget gate counted (issue 28 item 6): one
    # ledger entry per call the user's nodes made to their own chat model
    from services.api.readmodels import llm_usage

    usage = await llm_usage(db, uuid.UUID(run_id))
    assert usage["total"]["calls"] == 2
    assert usage["total"]["input_tokens"] + usage["total"]["output_tokens"] == 1200
    assert set(usage["by_node"]) == {"first_draft", "second_draft"}


async def test_a_rejected_budget_stop_ends_the_run_with_its_state(dev_server, graph_worker, db,
                                                                  task_queue):
    _, handle = await _start_with_budget(dev_server.client, db, task_queue, 100)
    approval = await pending_approval(handle)
    assert approval["payload"]["node"] == "second_draft"  # 600 spent after the first draft
    done = await handle.execute_update(GraphRunWorkflow.decide, DecisionInput(
        decision="reject", decided_by="ops", note="too expensive"))
    assert (done.status, done.outcome) == ("rejected", "budget_denied")
    result = await handle.result()
    assert result.output["trail"] == ["drafted:a draft"] and "summary" not in result.output


async def test_a_long_run_continues_as_new_and_finishes_as_plain_langgraph(
        dev_server, graph_worker, db, task_queue):
    run_id = str(uuid.uuid4())
    async with db.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="test",
            data={"pipeline": "counter", "workflow_id": f"counter-{run_id}",
                  "submitted_by": "tester", "input": {"count": 0}})])
    handle = await dev_server.client.start_workflow(
        GraphRunWorkflow.run,
        GraphRunInput(run_id=run_id, pipeline="counter", input=encode({"count": 0}),
                      options={"continue_as_new_after_nodes": 5}),
        id=f"counter-{run_id}", task_queue=task_queue)
    first_run = handle.result_run_id
    result = await handle.result()
    plain = await get_registry().builder("counter").compile().ainvoke({"count": 0})
    assert result.output == to_jsonable(plain) and result.output["count"] == 12
    # twelve ticks over three runs of the workflow (5 + 5 + 2), each node executed once
    histories, run = [], first_run
    while run:  # follow the chain of runs; count the node activities each one scheduled
        history = await dev_server.client.get_workflow_handle(handle.id, run_id=run).fetch_history()
        histories.append(history)
        last = history.events[-1]
        run = (last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
               if last.HasField("workflow_execution_continued_as_new_event_attributes") else "")
    scheduled = [sum(1 for e in h.events if e.HasField("activity_task_scheduled_event_attributes")
                     and e.activity_task_scheduled_event_attributes.activity_type.name == "run_node")
                 for h in histories]
    assert scheduled == [5, 5, 2]  # no node ran twice across the hand-overs
    history = histories[0]
    events = await fetch_events(db, run_id)
    ticks = [e for e in events if e["type"] == "node.completed"]
    assert len(ticks) == 12 and len({e["event_id"] for e in ticks}) == 12
    assert [e["type"] for e in events].count("run.completed") == 1
    await Replayer(workflows=list(WORKFLOWS),
                   workflow_runner=workflow_runner()).replay_workflow(history)


async def test_fan_out_and_subgraphs_survive_continue_as_new(dev_server, graph_worker, db,
                                                              task_queue):
    """Hand-overs after every second node: in the middle of a Send fan-out and a subgraph."""
    graph_input = {"topic": "alpha beta gamma"}
    run_id = str(uuid.uuid4())
    async with db.acquire() as conn:
        await append_events(conn, [NewEvent(
            run_id=run_id, key="run.submitted", type=RUN_SUBMITTED, actor="test",
            data={"pipeline": "constructs", "workflow_id": f"constructs-{run_id}",
                  "submitted_by": "tester", "input": graph_input})])
    handle = await dev_server.client.start_workflow(
        GraphRunWorkflow.run,
        GraphRunInput(run_id=run_id, pipeline="constructs", input=encode(graph_input),
                      options={"continue_as_new_after_nodes": 2}),
        id=f"constructs-{run_id}", task_queue=task_queue)
    first_run = handle.result_run_id
    result = await handle.result()
    plain = await get_registry().builder("constructs").compile().ainvoke(graph_input)
    assert without_ids(result.output) == without_ids(to_jsonable(plain))
    assert (await handle.describe()).run_id != first_run
    events = await fetch_events(db, run_id)
    nodes = [e["data"]["node"] for e in events if e["type"] == "node.completed"]
    assert nodes.count("work") == 3 and nodes.count("prepare") == 1


async def test_message_ids_the_reducer_gives_are_the_same_on_every_replay(dev_server, db,
                                                                          task_queue):
    """``add_messages`` ids a message that has none; a replay must give it the same id."""
    client = dev_server.client
    async with build_worker(client, task_queue=task_queue, max_cached_workflows=0):
        _, handle = await start(client, db, task_queue, "constructs", {"topic": "a b"})
        result = await handle.result()
        replayed = await handle.query(GraphRunWorkflow.get_thread_state)  # a full replay
    ids = [m["id"] for m in result.output["messages"]]
    assert ids and all(ids)
    assert [m["id"] for m in replayed["values"]["messages"]] == ids
