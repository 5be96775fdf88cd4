"""The graph runtime hosts a user's graph (tests/graphs/user_graph, which never imports Overseer).

On the real dev server and Postgres, through the real worker (every graph runs as segments;
tests/workflows/test_segments.py has what is particular to them): a decision the graph does
not take, parallel interrupts answered one by one after replays, a node placed
``run_in: local_activity`` with a bug, a 3 MB state, a transient failure, and replays of
fresh histories.
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

from overseer.graph_codec import encode
from overseer.registry import load_registry, set_registry
from overseer.run_types import DecisionInput, GraphRunInput
from overseer.settings import Settings
from overseer.store.events import RUN_SUBMITTED, NewEvent, append_events, fetch_events
from services.worker.main import WORKFLOWS, build_worker, workflow_runner
from tests.helpers import assert_eventually
from workflows.segment_run import SegmentRunWorkflow

USER_GRAPHS = Path(__file__).parents[1] / "graphs" / "user_graph" / "langgraph.json"


@pytest.fixture(scope="module", autouse=True)
def user_registry() -> Iterator[None]:
    """The project's pipelines plus the user's langgraph.json, as OVERSEER_GRAPHS would give."""
    set_registry(load_registry(str(USER_GRAPHS)))
    yield
    set_registry(None)


@pytest.fixture
async def graph_worker(dev_server: WorkflowEnvironment, db: object,
                       task_queue: str) -> AsyncIterator[None]:
    async with build_worker(dev_server.client, task_queue=task_queue):
        yield


async def start(client: Client, pool: Any, task_queue: str, pipeline: str,
                graph_input: dict[str, Any], options: dict[str, Any] | None = None,
                search_attributes: bool = True, run: Any = SegmentRunWorkflow.run
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
        view = await handle.query(SegmentRunWorkflow.get_status)
        assert view.status == "awaiting_approval" and view.approval, view.status
        return view.approval
    return await assert_eventually(waiting, timeout=60)


async def test_unknown_decision_is_refused(dev_server, graph_worker, db, task_queue):
    from temporalio.client import WorkflowUpdateFailedError

    _, handle = await start(dev_server.client, db, task_queue, "approvals", {"topic": "x"})
    await pending_approval(handle)
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="revise", decided_by="rev"))
    assert err.value.cause.type == "invalid_decision"
    await handle.cancel()


async def test_parallel_interrupts_resume_by_id_after_replays(dev_server, db, task_queue):
    """langgraph#6626: with no workflow cache every task replays; ids must still match.

    Each pending interrupt is its own approval; a decision naming none answers the oldest
    one waiting, the run goes on with it and the others stay open (the same approvals)."""
    client = dev_server.client
    async with build_worker(client, task_queue=task_queue,
                            settings=Settings(worker_max_cached_workflows=0)):
        run_id, handle = await start(client, db, task_queue, "parallel_approvals",
                                     {"topic": "red green blue"})
        seen: list[str] = []
        first = await pending_approval(handle)  # all three open at once, one key each
        opened = [f"1:{i}" for i in sorted(first["payload"]["pending_interrupts"])]
        for n in range(3):
            approval = await pending_approval(handle)
            payload = approval["payload"]
            view = await handle.query(SegmentRunWorkflow.get_status)
            assert [a["approval_key"] for a in view.approvals] == opened[n:]
            assert len(view.approvals) == 3 - n
            assert payload["interrupt_id"] not in seen
            seen.append(payload["interrupt_id"])
            await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
                decision="approve" if payload["item"] != "green" else "reject",
                note=payload["item"], decided_by="rev"))
        result = await handle.result()
    assert result.output["summary"] == "blue=approve:blue,green=reject:green,red=approve:red"
    history = await handle.fetch_history()
    await Replayer(workflows=list(WORKFLOWS),
                   workflow_runner=workflow_runner()).replay_workflow(history)


async def test_poison_local_activity_node_fails_the_run_named(dev_server, graph_worker, db,
                                                              task_queue):
    """A node placed ``run_in: local_activity`` (Temporal's LangGraph plugin's word) runs in
    its segment; its bug fails the run once, named."""
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
