"""A deployment's default thread ttl (``checkpointer.ttl`` in ``langgraph.json``) and its timer.

The registry reads ``checkpointer.ttl`` as the Agent Server does; every thread created
without a ttl of its own gets it, and its ``ThreadTtlWorkflow`` on the real worker (dev
server) deletes it when unused that long. The API's ``ttl`` field: tests/e2e.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from overseer import access, threads
from overseer.errors import InvalidRequestError
from overseer.registry import Registry, RegistryError, get_registry, set_registry, thread_ttl_of
from overseer.settings import get_settings
from overseer.ttl_options import parse_ttl
from services.worker.main import WORKFLOWS, workflow_runner

HISTORIES = Path(__file__).parent / "histories"


def _langgraph_json(tmp_path: Path, checkpointer: object) -> Path:
    path = tmp_path / "langgraph.json"
    path.write_text(json.dumps({"graphs": {"g": "./g.py:graph"}, "checkpointer": checkpointer}))
    return path


def test_checkpointer_ttl_is_read_as_the_agent_server_writes_it(tmp_path: Path):
    ttl = {"strategy": "keep_latest", "sweep_interval_minutes": 60, "default_ttl": 43200}
    assert thread_ttl_of(_langgraph_json(tmp_path, {"ttl": ttl})) == (43200.0, "keep_latest")
    assert thread_ttl_of(_langgraph_json(tmp_path, {"ttl": {"default_ttl": 5}})) == (5.0, "delete")
    assert thread_ttl_of(_langgraph_json(tmp_path, {"ttl": {"sweep_interval_minutes": 5}})) is None
    assert thread_ttl_of(_langgraph_json(tmp_path, {})) is None
    for bad in ({"ttl": 5}, {"ttl": {"default_ttl": -1}}, {"ttl": {"default_ttl": 5, "strategy": "x"}}):
        with pytest.raises(RegistryError, match="checkpointer.ttl"):
            thread_ttl_of(_langgraph_json(tmp_path, bad))


def test_a_request_ttl_is_minutes_or_an_object():
    assert parse_ttl(30) == (30.0, "delete")
    assert parse_ttl({"ttl": 0.5, "strategy": "keep_latest"}) == (0.5, "keep_latest")
    for bad in (0, -2, True, "5", float("inf"), 1e12, {"ttl": 5, "strategy": "archive"}, {}):
        with pytest.raises(InvalidRequestError):
            parse_ttl(bad)


async def test_a_default_ttl_deletes_an_unused_thread(dev_server: WorkflowEnvironment,
                                                      worker: Worker, db, task_queue: str):
    before = get_registry()
    set_registry(Registry({name: before.get(name) for name in before.names()},
                          thread_ttl=(0.04, "delete")))  # 2.4 s
    try:
        settings = get_settings().model_copy(update={"task_queue": task_queue})
        row = await threads.create_thread(db, thread_id=None, metadata={}, if_exists=None,
                                          subject="alice", scope=access.ANY,
                                          temporal=dev_server.client, settings=settings)
        own = await threads.create_thread(db, thread_id=None, metadata={}, if_exists=None,
                                          subject="alice", scope=access.ANY, ttl=(60.0, "delete"),
                                          temporal=dev_server.client, settings=settings)
    finally:
        set_registry(before)
    assert (row["ttl_minutes"], row["ttl_strategy"]) == (0.04, "delete")
    assert own["ttl_minutes"] == 60.0  # its own ttl wins
    timer = dev_server.client.get_workflow_handle(f"thread-ttl-{row['thread_id']}")
    assert await asyncio.wait_for(timer.result(), 30) == "deleted"
    history = await timer.fetch_history()  # a wait on a timer, then the sweep
    assert sum(e.HasField("timer_started_event_attributes") for e in history.events) >= 1
    await Replayer(workflows=list(WORKFLOWS), workflow_runner=workflow_runner()) \
        .replay_workflow(history)
    if os.environ.get("OVERSEER_RECORD_HISTORIES"):  # tests/workflows/test_replay.py replays it
        (HISTORIES / "thread_ttl_deleted.json").write_text(history.to_json())
    assert await db.fetchval("SELECT count(*) FROM agent_threads WHERE thread_id = $1",
                             row["thread_id"]) == 0
    assert await db.fetchval("SELECT count(*) FROM agent_threads WHERE thread_id = $1",
                             own["thread_id"]) == 1
    await dev_server.client.get_workflow_handle(f"thread-ttl-{own['thread_id']}").terminate()
