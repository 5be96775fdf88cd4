"""One answer, whoever gives it: a decision's ``resume`` reaches ``interrupt()`` unchanged (issue 26 item 0).

Graphs written the usual LangGraph way read keys of the resume value: LangGraph's prebuilt
ReAct agent whose ``refund`` tool reads ``response["approved"]``, and a review node that
reads ``answer["publish"]``. Decided through the gate's ``decide`` update (what the admin
API and the console send) and by the escalation ladder's final rung, they end exactly as
plain LangGraph ends with ``Command(resume=value)``. A decision without a ``resume`` still
gives the ``{"decision", …}`` wrapper (tests/workflows/test_graph_runtime.py).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from overseer.registry import builder_of, get_registry
from overseer.run_types import DecisionInput
from services.worker.main import build_worker
from tests.workflows.test_graph_runtime import (  # noqa: F401 - user_registry: autouse fixture
    pending_approval,
    start,
    user_registry,
)
from workflows.segment_run import SegmentRunWorkflow

REFUND_INPUT = {"messages": [{"role": "user", "content": "please refund order 7"}]}


async def native(graph: str, graph_input: dict[str, Any], resume: Any) -> dict[str, Any]:
    """Plain LangGraph's final state for the same input and ``Command(resume=resume)``."""
    app = builder_of(get_registry().get(graph).graph).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "reference"}}
    await app.ainvoke(graph_input, config)
    result: dict[str, Any] = await app.ainvoke(Command(resume=resume), config)
    return result


def contents(state: dict[str, Any]) -> list[str]:
    return [m["content"] if isinstance(m, dict) else m.content for m in state["messages"]]


@pytest.mark.parametrize("approved", [True, False])
async def test_a_prebuilt_agents_tool_gets_the_resume_decided_through_the_gate(
        dev_server, db, task_queue, approved: bool):
    async with build_worker(dev_server.client, task_queue=task_queue):
        _, handle = await start(dev_server.client, db, task_queue, "refund_agent", REFUND_INPUT)
        asked = await pending_approval(handle)
        assert asked["payload"]["action"] == "refund" and asked["payload"]["amount"] == 40
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", resume={"approved": approved}, decided_by="rev"))
        result = await handle.result()
    want = "approved" if approved else "refused"
    got = contents(result.output)
    assert got[-1] == f"Done: refund of 40 for order 7 {want}"
    assert got == contents(await native("refund_agent", REFUND_INPUT, {"approved": approved}))


async def test_a_node_reading_keys_of_the_resume_gets_them(dev_server, db, task_queue):
    async with build_worker(dev_server.client, task_queue=task_queue):
        _, handle = await start(dev_server.client, db, task_queue, "publish_review",
                                {"topic": "q3"})
        await pending_approval(handle)
        await handle.execute_update(SegmentRunWorkflow.decide, DecisionInput(
            decision="approve", resume={"publish": True, "note": "ship"}, decided_by="rev"))
        result = await handle.result()
    assert result.output == await native("publish_review", {"topic": "q3"},
                                         {"publish": True, "note": "ship"})
    assert result.output["published"] is True and result.output["reviewer_note"] == "ship"


async def test_the_ladders_auto_decision_hands_over_its_resume(time_skipping, db, task_queue):
    hour = 3600.0
    options = {"approval": {"remind_after_seconds": None, "reassign_after_seconds": None,
                            "sla_seconds": 1 * hour, "final_after_seconds": 2 * hour,
                            "final_action": "auto_reject",
                            "final_resume": {"publish": False, "note": "no one answered"}}}
    async with build_worker(time_skipping.client, task_queue=task_queue):
        _, handle = await start(time_skipping.client, db, task_queue, "publish_review",
                                {"topic": "q4"}, options=options, search_attributes=False)
        await pending_approval(handle)
        await time_skipping.sleep(timedelta(hours=2.1))
        result = await handle.result()
    assert result.output["published"] is False
    assert result.output["reviewer_note"] == "no one answered"
    assert result.outcome == "rejected"
