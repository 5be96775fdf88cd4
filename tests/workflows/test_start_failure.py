"""A run Temporal does not take is on record as failed, not lost (non-negotiable 4).

The run service records ``run.submitted`` before it starts the workflow; when the real dev
server refuses the start (here: a namespace it does not have), the request is answered 503
and the run is recorded ``failed`` with ``start_failed`` — once, however often the request
is retried with its Idempotency-Key.
"""

from __future__ import annotations

import json
import uuid

import pytest
from temporalio.client import Client

from overseer.errors import DependencyUnavailableError
from overseer.settings import Settings
from tests.helpers import submit_agreement


async def test_a_run_temporal_refuses_to_start_is_recorded_failed_once(dev_server, db,
                                                                       task_queue):
    refusing = Client(dev_server.client.service_client, namespace="no-such-namespace")
    settings = Settings(environment="test", task_queue=task_queue)
    key = f"start-failure-{uuid.uuid4()}"
    for _ in range(2):  # the client retries with the same key
        with pytest.raises(DependencyUnavailableError):
            await submit_agreement(db, refusing, settings, metadata={}, idempotency_key=key)
    rows = await db.fetch("SELECT run_id, status, error FROM runs WHERE idempotency_key = $1",
                          key)
    assert len(rows) == 1
    assert rows[0]["status"] == "failed"
    assert json.loads(rows[0]["error"])["code"] == "start_failed"
    failed = await db.fetchval("SELECT count(*) FROM events WHERE run_id = $1 "
                               "AND type = 'run.failed'", rows[0]["run_id"])
    assert failed == 1
