"""Seed 004: a failed agent leaves partial results; a retry resumes at it without redoing the rest.

The due_diligence graph with its risk_scoring agent failing (a bug: fails once, never
retried), started through the run service on the real dev server and Postgres.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph._internal._runnable import RunnableCallable
from temporalio.client import WorkflowFailureError

from activities.due_diligence.graph import build_due_diligence_graph
from activities.due_diligence.pipeline import PIPELINE
from overseer import compiled_graphs as segment_graph
from overseer.registry import Registry, set_registry
from overseer.runs import retry_run
from overseer.settings import Settings
from services.worker.main import build_worker
from tests.helpers import submit_agreement

BROKEN = {"on": True}


def graph_with_a_broken_risk_agent() -> Any:
    builder = build_due_diligence_graph()
    spec = builder.nodes["risk_scoring"]
    original = spec.runnable

    async def risk_scoring(state: dict[str, Any]) -> Any:
        if BROKEN["on"]:
            raise KeyError("risk table not loaded")
        return await original.ainvoke(state)

    builder.nodes["risk_scoring"] = dataclasses.replace(
        spec, runnable=RunnableCallable(None, risk_scoring, name="risk_scoring", trace=False))
    return builder


@pytest.fixture
def broken_registry() -> Iterator[None]:
    set_registry(Registry({"due_diligence": dataclasses.replace(
        PIPELINE, graph=graph_with_a_broken_risk_agent)}))
    segment_graph._compiled.clear()  # the graph is compiled once per process: drop the good one
    yield
    set_registry(None)
    segment_graph._compiled.clear()


async def node_names(pool: Any, run_id: str) -> list[str]:
    rows = await pool.fetch("SELECT data->>'node' AS node FROM events WHERE run_id = $1 AND "
                            "type = 'node.completed' ORDER BY seq", uuid.UUID(run_id))
    return [r["node"] for r in rows]


async def test_failed_agent_keeps_partial_results_and_retry_resumes_at_it(
        broken_registry, dev_server, db, task_queue):
    client = dev_server.client
    settings = Settings(environment="test", task_queue=task_queue)
    BROKEN["on"] = True
    async with build_worker(client, task_queue=task_queue):
        first = await submit_agreement(db, client, settings, metadata={})
        with pytest.raises(WorkflowFailureError):
            await client.get_workflow_handle(f"due_diligence-{first.run_id}").result()
        row = await db.fetchrow("SELECT status, result, error FROM runs WHERE run_id = $1",
                                uuid.UUID(first.run_id))
        assert row["status"] == "failed"
        error, partial = json.loads(row["error"]), json.loads(row["result"])
        assert error["node"] == "risk_scoring" and error["code"] == "node_error"
        assert partial["progress"]["label"] == "2 of 5 agents complete"
        assert partial["clauses"]["findings"] and partial["ingestion"]["text"]

        BROKEN["on"] = False
        again = await retry_run(db, client, settings, run_id=first.run_id, subject="alice")
        result = await client.get_workflow_handle(f"due_diligence-{again.run_id}").result()
    assert result["status"] == "completed"
    assert result["output"]["checklist"] and result["output"]["summary"]
    assert result["output"]["clauses"] == partial["clauses"]  # carried over, not recomputed
    redone = await node_names(db, again.run_id)
    assert redone[0] == "risk_scoring"
    assert "ingestion" not in redone and not any(n.startswith("clause_extraction") for n in redone)
    child = await db.fetchrow("SELECT parent_run_id FROM runs WHERE run_id = $1",
                              uuid.UUID(again.run_id))
    assert str(child["parent_run_id"]) == first.run_id
