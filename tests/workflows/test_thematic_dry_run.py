"""``DRY_RUN=1`` end to end (seed 002 R9.3, R9.5): a real worker process, started with the
variable as ``make run`` would be, runs a thematic analysis on the dev server and Postgres.

The worker is also pointed at a model endpoint that does not exist: with DRY_RUN nothing
may be sent there, so any real call would show up as a coder error. Its JSON logs (INFO)
are read back: they carry the run's stages and no review text (R10.5).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.workflows.test_thematic_stack import (
    IDENTITY_IDS,
    ROOT,
    events,
    example_corpus,
    submit,
)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dry_run_worker(dev_server: WorkflowEnvironment, pg_url: str, db: object,
                   tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``python -m services.worker.main`` with ``DRY_RUN=1`` on its own task queue.

    Yields the task queue and the worker's log file (JSON lines at INFO).
    """
    task_queue = f"thematic-dry-run-{uuid.uuid4().hex[:8]}"
    log_path = tmp_path / "worker.log"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OVERSEER_", "OTEL_")) and k != "DRY_RUN"}
    env.update(DRY_RUN="1", OVERSEER_DATABASE_URL=pg_url, OVERSEER_ENVIRONMENT="test",
               OVERSEER_TEMPORAL_ADDRESS=dev_server.client.service_client.config.target_host,
               OVERSEER_TASK_QUEUE=task_queue, OVERSEER_METRICS_PORT_WORKER="0",
               OVERSEER_LOG_LEVEL="INFO", OVERSEER_LOG_FORMAT="json",
               OVERSEER_LLM_BASE_URL=f"http://127.0.0.1:{_closed_port()}/v1")
    with log_path.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "services.worker.main"], env=env,
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "worker polling" not in log_path.read_text(errors="replace"):
            assert proc.poll() is None, log_path.read_text(errors="replace")[-2000:]
            assert time.monotonic() < deadline, "the worker did not start polling"
            time.sleep(0.2)
        yield task_queue, log_path
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def test_dry_run_end_to_end_simulates_every_call(dev_server, db, dry_run_worker):
    task_queue, log_path = dry_run_worker
    run_id, handle = await submit(db, dev_server.client, task_queue)
    result = await handle.result()

    assert result["status"] == "completed" and result["outcome"] == "themes"
    out = result["output"]
    assert out["strategy"] == "llm" and out["errors"] == []  # the bogus endpoint was never called
    assert {c["model"] for c in out["llm_calls"]} == {"dry-run"}
    assert out["codebook"] and all(c["strategy"] == "llm:dry-run" for c in out["codebook"])
    assert out["themes"]
    usage = out["token_usage"]
    assert (usage["calls"], usage["total_tokens"], usage["cost_usd"]) == (2 * len(IDENTITY_IDS), 0, 0)
    ledger = [e["data"] for e in await events(db, run_id, "llm.called")]
    assert sorted(c["node"] for c in ledger) == sorted(
        f"{stage}:{i}" for stage in ("coder", "theme_coder") for i in IDENTITY_IDS)
    assert all(c["dry_run"] and c["outcome"] == "ok" for c in ledger)

    lines = [json.loads(line) for line in log_path.read_text().splitlines()
             if line.startswith("{")]
    ours = [line for line in lines if line.get("analysis_id") == run_id]
    assert {"started", "coder", "reviewer", "theme_aggregator"} <= {x.get("stage") for x in ours}
    assert any(x.get("status") == "completed" and x.get("themes_generated") for x in ours)
    text = log_path.read_text()
    leaked = [s for s in example_corpus().text.values() if len(s.split()) >= 4 and s[:40] in text]
    assert leaked == []
