"""What the runtime takes from LangGraph beyond its public API, checked so an upgrade fails here, loudly.

``pyproject.toml`` pins ``langgraph`` and ``langgraph-checkpoint-postgres`` to the minor
versions the runtime is tested with. Within them, the runtime relies on:

- the callback metadata LangGraph gives every run inside a task (``langgraph_node``,
  ``langgraph_step``, ``langgraph_path``, ``langgraph_checkpoint_ns`` as
  ``"<node>:<task id>"``): the segments' budget guard, node timing and ledger read them
  (:mod:`overseer.runtime.segments`);
- the checkpointer's tables and columns, which the API copies, rewinds and deletes in SQL
  (:mod:`overseer.checkpoints`, :func:`overseer.threads.delete_thread`);
- the config ``metadata`` a run passes becoming its checkpoints' metadata (a rollback finds
  a run's checkpoints by :data:`overseer.run_types.RUN_ID_KEY`).
"""

from __future__ import annotations

import re
import uuid
from importlib.metadata import version
from typing import Any, TypedDict

import asyncpg
from langchain_core.callbacks import AsyncCallbackHandler
from langgraph.graph import END, START, StateGraph

from overseer.run_types import RUN_ID_KEY

LANGGRAPH_MINOR = "1.2"
CHECKPOINT_POSTGRES_MINOR = "3.2"

TABLE_COLUMNS = {
    "checkpoints": {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id", "type",
                    "checkpoint", "metadata"},
    "checkpoint_blobs": {"thread_id", "checkpoint_ns", "channel", "version", "type", "blob"},
    "checkpoint_writes": {"thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "task_path",
                          "idx", "channel", "type", "blob"},
}
"""The columns :func:`overseer.checkpoints.copy_checkpoints` names, table by table."""


def test_the_installed_langgraph_is_the_minor_version_the_runtime_is_tested_with() -> None:
    assert version("langgraph").startswith(LANGGRAPH_MINOR + "."), version("langgraph")
    assert version("langgraph-checkpoint-postgres").startswith(CHECKPOINT_POSTGRES_MINOR + "."), \
        version("langgraph-checkpoint-postgres")


class _State(TypedDict):
    n: int


class _Metadata(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any,
                             metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if metadata and "langgraph_node" in metadata:
            self.seen.append(dict(metadata))


async def test_task_metadata_and_checkpoint_tables_are_what_the_runtime_reads(pool: asyncpg.Pool,
                                                                             pg_url: str) -> None:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    builder = StateGraph(_State)
    builder.add_node("bump", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "bump")
    builder.add_edge("bump", END)
    thread, run = str(uuid.uuid4()), str(uuid.uuid4())
    callbacks = _Metadata()
    async with AsyncPostgresSaver.from_conn_string(pg_url) as saver:
        await saver.setup()
        graph = builder.compile(checkpointer=saver)
        out = await graph.ainvoke({"n": 1}, {"configurable": {"thread_id": thread},
                                             "metadata": {RUN_ID_KEY: run},
                                             "callbacks": [callbacks]})
    assert out == {"n": 2}
    bump = next(m for m in callbacks.seen if m["langgraph_node"] == "bump")
    assert re.fullmatch(r"bump:[0-9a-f-]{36}", bump["langgraph_checkpoint_ns"]), bump
    assert isinstance(bump["langgraph_step"], int) and bump["langgraph_path"][0] == "__pregel_pull"
    for table, columns in TABLE_COLUMNS.items():
        have = {r["column_name"] for r in await pool.fetch(
            "SELECT column_name FROM information_schema.columns WHERE table_name = $1", table)}
        assert columns <= have, f"{table} lost {sorted(columns - have)}"
    written = await pool.fetchval("SELECT count(*) FROM checkpoints WHERE thread_id = $1 "
                                  "AND metadata->>$2 = $3", thread, RUN_ID_KEY, run)
    assert written >= 2  # the input and the step, each marked with the run that wrote it
